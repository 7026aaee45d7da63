"""A 27-configuration sweep on SciFact against one evaluation of one configuration.

The swept retriever is reciprocal rank fusion of two built-in BM25 retrievers (stemmed,
and unstemmed) over SciFact's 5,183 documents; the grid varies only the fusion (the RRF
constant k, the depth asked of each part, the weights), so all 27 configurations share
their two first stages: each is built once and asked each question once. The sweep is
timed with that sharing and, unless ``--quick``, without it (every configuration built
and asked afresh); both must give the same numbers, or the benchmark fails. The
winner's tuning score is printed beside its held-out score.

    python benchmarks/bench_sweep.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import EXIT_SKIPPED, REPO, goal, load_now, seconds, table, target

#: ../shared/data/scifact beside the repository (or beside the folder holding it).
DATA = next(
    (
        base / "shared" / "data" / "scifact"
        for base in (REPO.parent, REPO, REPO.parent.parent)
        if (base / "shared" / "data" / "scifact" / "corpus.jsonl").is_file()
    ),
    REPO.parent / "shared" / "data" / "scifact",
)

CONFIG = """
[retrievers.stemmed]
plugin = "bm25"
corpus = "{corpus}"

[retrievers.plain]
plugin = "bm25"
corpus = "{corpus}"
stemmer = ""

[retrievers.fused]
plugin = "fusion"
retrievers = ["stemmed", "plain"]

[sweeps.rrf]
retriever = "fused"
grid = {{ k = [10, 30, 60], depth = [20, 50, 100], weights = [[1, 1], [2, 1], [1, 2]] }}
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the sweep without sharing")
    arguments = parser.parse_args()
    if not (DATA / "corpus.jsonl").is_file():
        print(f"SciFact is missing ({DATA})")
        return EXIT_SKIPPED
    import retrievalkit as rk

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "retrievalkit.toml"
        path.write_text(CONFIG.format(corpus=DATA / "corpus.jsonl"), encoding="utf-8")
        config = rk.load_config(path)
        golden = rk.load_set(DATA)
        began = time.perf_counter()
        rk.evaluate(golden, "fused", config=config, git_commit=None)
        one = time.perf_counter() - began
        began = time.perf_counter()
        shared = rk.sweep(golden, "rrf", config=config)
        swept = time.perf_counter() - began
        rows = [
            ["one configuration (eval of the whole set)", seconds(one), "1.000x"],
            ["27 configurations, shared first stages", seconds(swept), f"{swept / one:.3f}x"],
        ]
        agree = True
        if not arguments.quick:
            began = time.perf_counter()
            fresh = rk.sweep(golden, "rrf", config=config, share_stages=False)
            unshared = time.perf_counter() - began
            label = "27 configurations, each built and asked afresh"
            rows.append([label, seconds(unshared), f"{unshared / one:.3f}x"])
            agree = [c.metrics for c in fresh.configurations] == [
                c.metrics for c in shared.configurations
            ] and fresh.winner.confirmation == shared.winner.confirmation
    print("## sweep: 27 RRF configurations over two BM25 first stages, SciFact (300 questions)\n")
    print(table(["run", "time", "vs one"], rows))
    winner = shared.winner
    confirmation = winner.confirmation
    print(
        f"\nwinner {dict(winner.options)}: rr tuning {winner.tuning.mean:.4f} "
        f"(n={winner.tuning.n}) · held out {winner.held_out.mean:.4f} (n={winner.held_out.n}); "
        f"against the configured fusion {confirmation.difference:+.4f} "
        f"[{confirmation.low:+.4f}, {confirmation.high:+.4f}], p = {confirmation.p_value:.3g}, "
        f"{confirmation.verdict}; {shared.reused_answers} answers of the first stages reused"
    )
    print(goal(swept < 27 * one / 3, "a 27-configuration sweep costs under 9 evaluations"))
    print(
        target(
            "sweep",
            swept <= 1.5 * one,
            f"{swept / one:.3f}x ({seconds(swept)} against {seconds(one)}; {load_now()})",
        )
    )
    if not agree:
        print("the sweeps with and without shared first stages disagree")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
