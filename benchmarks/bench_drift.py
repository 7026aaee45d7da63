"""Drift on a query log: reading the log, the measures, end to end; RBO against the rbo package.

A seeded synthetic query log (default 100,000 JSON Lines with ``query`` and ``count``)
is written to a temporary folder: each line's query is drawn from ``--distinct``
texts with Zipf weights (1 / rank^1.1), so popular queries come back many times, and
its count is Zipf-distributed too (exponent 2, at most 1,000). Two retrievers answer
at once from rankings built before the clock starts (50 documents a query; the
candidate keeps half of the baseline's rankings, perturbs the others by swaps and
replaced documents, cuts a fifth of them short and answers 1 % with nothing), and keep
the time spent in their own ``retrieve`` calls, which is subtracted: what remains is
retrievalkit's. Measured in a fresh process each, best of ``--repeats``:

- ``rk.drift(log, candidate, against=baseline, save=False)`` end to end (the first
  call of its process, as a user's), then apart, on the same inputs: ``read_log``
  (read and merge the duplicates), asking the two retrievers (``ask_all``), the
  measures (``measure``: RBO with its bounds, overlap@10, Jaccard@10, zero-result
  rates, latency, every mean with its bootstrap interval) and inside them RBO alone,
  overlap and Jaccard alone, and the weighted bootstrap intervals alone;
- the peer: the PyPI ``rbo`` package's ``RankingSimilarity(S, T).rbo_ext(p=0.9)`` over
  the same ranking pairs (those where both sides answered) against
  ``retrievalkit.metrics.rank_similarity.rbo`` on the same pairs, each in its own
  process. Values are compared before times: on lists of equal lengths they must agree
  to 1e-9; on lists of different lengths the largest difference is reported (see
  rank_similarity's module documentation for how the two treat uneven lengths).

rbo 0.1.3 declares ``numpy<2``, so it is not in benchmarks/requirements.txt (a resolver
would take numpy back below 2 for every package); the peer runs when ``rbo`` can be
imported, e.g. after ``pip install --no-deps rbo==0.1.3``, and is reported as not
measured otherwise.

    python benchmarks/bench_drift.py [--lines 100000] [--distinct 20000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from harness import emit, load_now, ratio, run_worker, seconds, table, target

DEPTH = 50
K = 10
P = 0.9
CORPUS = 1_000_000
#: The targets.py row: the end-to-end drift of 10^5 lines, over the retrievers' time.
GOAL_SECONDS = 20.0
TOLERANCE = 1e-9


class TableRetriever:
    """Answers each query with its precomputed ranking and keeps its own time."""

    def __init__(self, identifier: str, rankings: dict[str, list[str]]) -> None:
        self.identifier = identifier
        self.rankings = rankings
        self.spent = 0.0

    def retrieve(self, question: str, limit: int) -> Sequence[str]:
        began = time.perf_counter()
        ranking = self.rankings[question][:limit]
        self.spent += time.perf_counter() - began
        return ranking


def write_log(path: Path, lines: int, distinct: int, seed: int = 11) -> list[str]:
    """The log's file at ``path``; returns the texts a line may hold, most popular first."""
    rng = np.random.default_rng(seed)
    texts = [
        f"how do I configure feature {index} of product {index % 97}" for index in range(distinct)
    ]
    weights = 1.0 / np.arange(1, distinct + 1) ** 1.1
    picked = rng.choice(distinct, size=lines, p=weights / weights.sum())
    counts = np.minimum(rng.zipf(2.0, lines), 1000)
    with path.open("w", encoding="utf-8") as handle:
        for index, count in zip(picked.tolist(), counts.tolist(), strict=True):
            handle.write(json.dumps({"query": texts[index], "count": count}) + "\n")
    return texts


def rankings_for(
    texts: list[str], seed: int = 12
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(baseline, candidate) rankings of every text, DEPTH distinct documents each."""
    rng = np.random.default_rng(seed)
    count = len(texts)
    start = rng.integers(0, CORPUS, count)
    stride = rng.integers(1, CORPUS, count)
    # One extra column of fresh documents for the candidate's replacements.
    docs = (start[:, None] + np.arange(DEPTH + 5)[None, :] * stride[:, None]) % CORPUS
    candidate = docs[:, :DEPTH].copy()
    changed = rng.random(count) < 0.5
    for row in np.flatnonzero(changed).tolist():
        for _ in range(int(rng.integers(1, 6))):  # swap neighbours
            at = int(rng.integers(0, DEPTH - 1))
            candidate[row, at], candidate[row, at + 1] = candidate[row, at + 1], candidate[row, at]
        replaced = rng.choice(DEPTH, size=int(rng.integers(1, 6)), replace=False)
        candidate[row, replaced] = docs[row, DEPTH : DEPTH + len(replaced)]
    lengths = np.where(rng.random(count) < 0.2, rng.integers(5, DEPTH, count), DEPTH)
    lengths[rng.random(count) < 0.01] = 0
    baseline_rankings, candidate_rankings = {}, {}
    for index, text in enumerate(texts):
        baseline_rankings[text] = [f"doc-{doc}" for doc in docs[index, :DEPTH].tolist()]
        candidate_rankings[text] = [
            f"doc-{doc}" for doc in candidate[index, : lengths[index]].tolist()
        ]
    return baseline_rankings, candidate_rankings


def prepared(
    folder: Path, lines: int, distinct: int
) -> tuple[Path, TableRetriever, TableRetriever]:
    log = folder / "queries.jsonl"
    baseline, candidate = rankings_for(write_log(log, lines, distinct))
    return log, TableRetriever("baseline", baseline), TableRetriever("candidate", candidate)


def worker_drift(lines: int, distinct: int) -> None:
    """Every retrievalkit figure of one process."""
    with tempfile.TemporaryDirectory() as scratch:
        log, baseline, candidate = prepared(Path(scratch), lines, distinct)
        import retrievalkit as rk
        from retrievalkit.formats.config import Config

        defaults = Config()  # the defaults, whatever retrievalkit.toml the folder holds
        began = time.perf_counter()
        result = rk.drift(log, candidate, against=baseline, save=False, config=defaults)
        end_to_end = time.perf_counter() - began
        retrievers = baseline.spent + candidate.spent

        from retrievalkit.formats.query_log import read_log
        from retrievalkit.metrics.rank_similarity import jaccard_at, overlap_at, rbo
        from retrievalkit.pipeline.drift.engine import ask_all, measure
        from retrievalkit.pipeline.engine.settings import DriftSettings
        from retrievalkit.stats.weighted import mean_intervals

        settings = DriftSettings.resolve(defaults)
        began = time.perf_counter()
        queries = read_log(log)
        reading = time.perf_counter() - began
        baseline.spent = candidate.spent = 0.0
        began = time.perf_counter()
        answers = [
            ask_all(side, queries.queries, depth=settings.depth) for side in (baseline, candidate)
        ]
        asking = time.perf_counter() - began
        asked_retrievers = baseline.spent + candidate.spent
        began = time.perf_counter()
        measures, _ = measure(
            queries,
            *answers,
            k=settings.k,
            rbo_p=settings.rbo_p,
            resamples=settings.resamples,
            seed=settings.seed,
            confidence=settings.confidence,
        )
        measuring = time.perf_counter() - began
        pairs = list(zip(answers[0].rankings, answers[1].rankings, strict=True))
        began = time.perf_counter()
        found = [rbo(left, right, settings.rbo_p) for left, right in pairs]
        rbo_only = time.perf_counter() - began
        began = time.perf_counter()
        overlaps = [overlap_at(left, right, settings.k) for left, right in pairs]
        jaccards = [jaccard_at(left, right, settings.k) for left, right in pairs]
        sets_only = time.perf_counter() - began

        def column(values: list[float | None]) -> Any:
            return np.array([np.nan if v is None else v for v in values], dtype=np.float64)

        columns = {
            "rbo": column([None if each is None else each.value for each in found]),
            "rbo_lower": column([None if each is None else each.lower for each in found]),
            "rbo_upper": column([None if each is None else each.upper for each in found]),
            "overlap": column(overlaps),
            "jaccard": column(jaccards),
        }
        began = time.perf_counter()
        mean_intervals(
            columns,
            queries.weights,
            resamples=settings.resamples,
            seed=settings.seed,
            confidence=settings.confidence,
        )
        intervals = time.perf_counter() - began
    if result.measures["rbo"]["value"] != measures["rbo"]["value"]:
        raise SystemExit("rk.drift and measure() disagree on the RBO of the same answers")
    emit(
        {
            "end_to_end": end_to_end,
            "retrievers": retrievers,
            "read": reading,
            "ask": asking,
            "ask_retrievers": asked_retrievers,
            "measure": measuring,
            "rbo": rbo_only,
            "overlap_jaccard": sets_only,
            "intervals": intervals,
            "distinct": len(queries),
            "logged": queries.lines,
            "resamples": settings.resamples,
            "drift_rbo": result.measures["rbo"]["value"],
        }
    )


def worker_pairs(tool: str, lines: int, distinct: int, out: Path) -> None:
    """One RBO implementation over the ranking pairs where both sides answered."""
    with tempfile.TemporaryDirectory() as scratch:
        log, baseline, candidate = prepared(Path(scratch), lines, distinct)
        from retrievalkit.formats.query_log import read_log

        queries = read_log(log).queries
    pairs = [
        (baseline.rankings[text][:DEPTH], candidate.rankings[text][:DEPTH])
        for text in queries
        if candidate.rankings[text]
    ]
    began = time.perf_counter()
    if tool == "retrievalkit":
        from retrievalkit.metrics.rank_similarity import rbo

        imported = time.perf_counter() - began
        began = time.perf_counter()
        values = [rbo(left, right, P).value for left, right in pairs]
    else:
        from rbo import RankingSimilarity

        imported = time.perf_counter() - began
        began = time.perf_counter()
        values = [RankingSimilarity(left, right).rbo_ext(p=P) for left, right in pairs]
    spent = time.perf_counter() - began
    uneven = np.array([len(left) != len(right) for left, right in pairs])
    extra = {}
    if tool == "rbo":  # not timed: its rbo(p, ext=True), which cuts both lists to the shorter
        extra["cut"] = np.array(
            [RankingSimilarity(left, right).rbo(p=P, ext=True) for left, right in pairs]
        )
    np.savez(out, values=np.array(values, dtype=np.float64), uneven=uneven, **extra)
    emit({"import": imported, "seconds": spent, "pairs": len(pairs)})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--distinct", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tool", choices=("drift", "retrievalkit", "rbo"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.worker:
        if args.tool == "drift":
            worker_drift(args.lines, args.distinct)
        else:
            worker_pairs(args.tool, args.lines, args.distinct, args.out)
        return 0
    sizes = ["--lines", str(args.lines), "--distinct", str(args.distinct)]
    peer = importlib.util.find_spec("rbo") is not None
    tools = ("drift", "retrievalkit", "rbo") if peer else ("drift",)
    best: dict[str, dict[str, Any]] = {}
    values: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for repeat in range(args.repeats):
            for tool in tools:  # tools take turns within each repeat
                out = Path(scratch) / f"{tool}-{repeat}.npz"
                answer = run_worker(__file__, ["--tool", tool, "--out", str(out), *sizes])
                if tool != "drift":
                    values[tool] = np.load(out)
                kept = best.setdefault(tool, dict(answer))
                for key, value in answer.items():
                    if isinstance(value, float) and key not in ("drift_rbo",):
                        kept[key] = min(kept[key], value)
    ours = best["drift"]
    print(
        f"## Drift: a log of {args.lines:,} lines ({ours['distinct']:,} distinct queries, "
        f"{ours['logged']:,} asked in all), two instant retrievers, depth {DEPTH}, "
        f"k {K}, {ours['resamples']} resamples"
    )
    print(f"best of {args.repeats} fresh processes; {load_now()}\n")
    over = ours["end_to_end"] - ours["retrievers"]
    rows = [
        ("rk.drift end to end, save=False", seconds(ours["end_to_end"])),
        ("  of which the retrievers' own time", seconds(ours["retrievers"])),
        ("  retrievalkit's", seconds(over)),
        ("read_log: read and merge", seconds(ours["read"])),
        (
            "ask_all, both sides (retrievers' time out)",
            seconds(ours["ask"] - ours["ask_retrievers"]),
        ),
        ("measure: every measure and interval", seconds(ours["measure"])),
        ("  RBO with bounds alone", seconds(ours["rbo"])),
        ("  overlap@10 and Jaccard@10 alone", seconds(ours["overlap_jaccard"])),
        ("  weighted bootstrap intervals alone", seconds(ours["intervals"])),
        (
            "  the rest (zero-result rates, latency with intervals)",
            seconds(ours["measure"] - ours["rbo"] - ours["overlap_jaccard"] - ours["intervals"]),
        ),
    ]
    print(table(("step", "time"), rows))
    print(
        f"\nper distinct query: {over / ours['distinct'] * 1e6:.0f} us end to end over the "
        f"retrievers; RBO {ours['rbo'] / ours['distinct'] * 1e6:.0f} us"
    )
    goals = [
        target(
            "drift-100k",
            args.lines == 100_000 and over <= GOAL_SECONDS,
            f"{seconds(over)} over the retrievers ({seconds(ours['end_to_end'])} in all) at "
            f"{args.lines:,} lines, {ours['distinct']:,} distinct; {load_now()}",
        )
    ]
    print()
    if not peer:
        print(
            "peer not measured: the rbo package (0.1.3) declares numpy<2; install it with "
            "`pip install --no-deps rbo==0.1.3` to measure it"
        )
    else:
        ours_values, theirs = values["retrievalkit"], values["rbo"]
        uneven = ours_values["uneven"]
        gap = np.abs(ours_values["values"] - theirs["values"])
        even_gap = float(gap[~uneven].max()) if (~uneven).any() else 0.0
        uneven_gap = float(gap[uneven].max()) if uneven.any() else 0.0
        if not even_gap <= TOLERANCE:
            print(
                f"values DISAGREE on lists of equal lengths (by {even_gap:.3g}): "
                "times not comparable"
            )
            return 1
        mine, peer_entry = best["retrievalkit"], best["rbo"]
        print(
            table(
                ("RBO over the same pairs", "pairs", "import", "time", "rk/tool"),
                [
                    (
                        name,
                        f"{entry['pairs']:,}",
                        seconds(entry["import"]),
                        seconds(entry["seconds"]),
                        ratio(mine["seconds"] / entry["seconds"]),
                    )
                    for name, entry in (
                        ("retrievalkit rbo (value, lower, upper)", mine),
                        ("rbo RankingSimilarity.rbo_ext", peer_entry),
                    )
                ],
            )
        )
        print(
            f"\nvalues: {int((~uneven).sum()):,} pairs of equal lengths agree within "
            f"{TOLERANCE:g} (largest difference {even_gap:.2g}); {int(uneven.sum()):,} pairs "
            f"of different lengths differ by at most {uneven_gap:.2g}"
        )
        if uneven.any():
            cut_gap = float(np.abs(ours_values["values"] - theirs["cut"])[uneven].max())
            print(
                f"(its rbo(p, ext=True), which cuts both lists to the shorter one's length, "
                f"differs from retrievalkit's RBO by up to {cut_gap:.2g} on those)"
            )
    print("\n".join(goals))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
