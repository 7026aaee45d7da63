"""Questions saved by ``eval --sequential`` on the demo set and on SciFact.

For each set, a retriever named ``kb`` is evaluated once in full (the baseline). Then
``eval --sequential`` runs twice against that baseline: with ``kb`` unchanged (the gate
should pass) and with ``kb`` degraded (it should fail): on the demo, BM25 over titles
only; on SciFact, BM25 over the first 20 words of each document. Thresholds: hit@1 and
hit@3 may drop by 0.1 (the demo) or 0.05 (SciFact). Reported: the decision, the
questions asked, and the share of retrieval calls saved; the decision is checked
against the full-set verdict of the same two runs.

Then the gate calibrated: A/A pairs of SciFact BM25 per-question values (each run
re-draws a question's values from another question with chance 0.3), gates hit@1 and
hit@3, allowed drops 0 and 0.05, n = 30 / 100 / 300: the share of pairs not passed
(false fails), of identical reruns passed, and the share of questions saved.

    python benchmarks/bench_sequential.py [--replicates 100]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import argparse

import numpy as np
from harness import REPO, goal, table
from populations import data_dir, population

from retrievalkit.stats.sequential import PASS, run_sequentially


def _cli(directory: Path, *args: str) -> dict[str, object]:
    env = {**os.environ, "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "retrievalkit", *args, "--format", "json", "-q"],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"retrievalkit {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    result: dict[str, object] = json.loads(done.stdout)
    return result


def _config(directory: Path, retriever: str, threshold: float) -> None:
    (directory / "retrievalkit.toml").write_text(
        f"{retriever}\n\n[regression]\nmax_top1_drop = {threshold}\nmax_top3_drop = {threshold}\n",
        encoding="utf-8",
    )


def scenario(
    name: str, set_arg: str, full: str, degraded: str, threshold: float
) -> list[tuple[str, ...]]:
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder)
        _config(directory, full, threshold)
        _cli(directory, "eval", "--set", set_arg, "--retriever", "kb")
        for label, retriever, expected in (
            ("unchanged", full, "pass"),
            ("degraded", degraded, "fail"),
        ):
            _config(directory, retriever, threshold)
            report = _cli(directory, "eval", "--set", set_arg, "--retriever", "kb", "--sequential")
            verdict = report["regression"]
            assert isinstance(verdict, dict)
            sequence = verdict["sequential"]
            full_run = _cli(directory, "eval", "--set", set_arg, "--retriever", "kb", "--no-save")
            full_verdict = full_run["regression"]
            assert isinstance(full_verdict, dict)
            agrees = (sequence["decision"] == "fail") == bool(full_verdict["regressed"])
            saved = sequence["total"] - sequence["asked"]
            rows.append(
                (
                    name,
                    label,
                    f"{threshold:g}",
                    sequence["decision"],
                    f"{sequence['asked']} of {sequence['total']}",
                    f"{saved} ({saved / sequence['total']:.0%})",
                    "yes" if agrees else "NO",
                    expected,
                )
            )
    return rows


def _aa_run(
    values: np.ndarray, n: int, threshold: float, rng: np.random.Generator, identical: bool
) -> tuple[bool, float]:
    chosen = rng.integers(0, len(values), n)
    runs = []
    for _ in range(2):
        redraw = rng.random(n) < 0.3
        others = values[rng.integers(0, len(values), n)]
        runs.append(np.where(redraw[:, None], others, values[chosen]))
    baseline, candidate = runs[0], runs[0].copy() if identical else runs[1]
    ids = [f"q{i}" for i in range(n)]
    names = ("hit@1", "hit@3")
    before = {m: dict(zip(ids, baseline[:, j].tolist(), strict=True)) for j, m in enumerate(names)}

    def ask(indices: list[int]) -> list[dict[str, float | None]]:
        return [{m: float(candidate[i, j]) for j, m in enumerate(names)} for i in indices]

    gates = [(None, name, threshold, ids) for name in names]
    _, result = run_sequentially(
        ids, ask, gates, before, alpha=0.05, seed=int(rng.integers(1 << 30)), points=801
    )
    return result.decision == PASS, result.saved_share


def calibration(replicates: int) -> tuple[list[tuple[str, ...]], float, bool]:
    values = population("scifact")
    table_values = np.column_stack([values["hit@1"], values["hit@3"]])
    rows: list[tuple[str, ...]] = []
    worst = 0.0
    identical_pass = True
    for threshold in (0.0, 0.05):
        for n in (30, 100, 300):
            rng = np.random.default_rng(n)
            aa = [_aa_run(table_values, n, threshold, rng, False) for _ in range(replicates)]
            same = [_aa_run(table_values, n, threshold, rng, True) for _ in range(10)]
            false_fails = 1.0 - float(np.mean([passed for passed, _ in aa]))
            worst = max(worst, false_fails)
            identical_pass &= all(passed for passed, _ in same)
            rows.append(
                (
                    f"{threshold:g}",
                    str(n),
                    f"{false_fails:.1%}",
                    f"{np.mean([saved for _, saved in aa]):.0%}",
                    f"{np.mean([passed for passed, _ in same]):.0%}",
                    f"{np.mean([saved for _, saved in same]):.0%}",
                )
            )
    return rows, worst, identical_pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=100)
    args = parser.parse_args()
    scifact = data_dir() / "scifact"
    demo_corpus = REPO / "retrievalkit" / "demo" / "corpus.jsonl"
    with tempfile.TemporaryDirectory() as folder:
        titles = Path(folder) / "titles.jsonl"
        with titles.open("w", encoding="utf-8") as handle:
            for line in demo_corpus.read_text(encoding="utf-8").splitlines():
                document = json.loads(line)
                document["text"] = ""
                handle.write(json.dumps(document) + "\n")
        rows = scenario(
            "demo (75)",
            "demo",
            '[retrievers.kb]\nplugin = "bm25-demo"',
            f'[retrievers.kb]\nplugin = "bm25"\ncorpus = "{titles}"\ndoc_id_separator = "#"',
            0.1,
        )
    corpus = scifact / "corpus.jsonl"
    rows += scenario(
        "SciFact (300)",
        str(scifact),
        f'[retrievers.kb]\nplugin = "bm25"\ncorpus = "{corpus}"',
        f'[retrievers.kb]\nplugin = "bm25"\ncorpus = "{corpus}"\nmax_doc_words = 20',
        0.05,
    )
    print("## eval --sequential: questions asked before the gate settled\n")
    header = ("set", "candidate", "allowed drop", "decision", "asked", "saved",
              "agrees with full run", "expected")  # fmt: skip
    print(table(header, [row for row in rows]))
    right = all(row[3] == row[7] and row[6] == "yes" for row in rows)
    print(goal(right, "every sequential decision is the expected one and agrees with the full run"))
    calibrated, worst, identical = calibration(args.replicates)
    print(f"\n## eval --sequential calibrated ({args.replicates} A/A pairs a cell, SciFact BM25)\n")
    columns = ("allowed drop", "questions", "A/A not passed", "A/A saved",
               "identical reruns passed", "identical saved")  # fmt: skip
    print(table(columns, calibrated))
    print(goal(worst <= 0.05, f"A/A false fails at most 5 % (worst {worst:.1%})"))
    print(goal(identical, "every identical rerun passes"))
    return 0 if right else 1


if __name__ == "__main__":
    raise SystemExit(main())
