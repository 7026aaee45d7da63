"""Framework overhead: 100,000 questions through ``retrievalkit eval`` with an instant retriever.

The whole command runs as a fresh process, as in CI: load the golden set (JSON Lines),
ask the retriever every question, score, bootstrap the intervals (overall, by form
and by hard class), save the run to SQLite and print the JSON report. The retriever
(benchmarks/instant_retriever.py, installed as a plugin through a dist-info folder)
answers from precomputed rankings and reports its own time, which is subtracted; what
remains per question is the framework's overhead. Peak memory is the process's
maximum resident set. The report's means must equal the metrics computed directly
from the same rankings before any time is reported.

    python benchmarks/bench_overhead.py [--questions 100000] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from harness import BENCHMARKS, goal, table, worker_env
from synthetic import synthetic_indices

DEPTH = 30  # what eval asks for by default: max(k) = 10 times overfetch 3
FORMS = ("MATCH", "GAP", None)
HARD_CLASSES = ("normal", "near-duplicate", "specific-vs-general", "boilerplate")
GOAL_MICROSECONDS = 30.0
GOAL_MEGABYTES = 1024.0


def prepare(folder: Path, questions: int) -> dict[str, float]:
    """Write the set, the rankings, the plugin's dist-info and the config; return the means
    that the report must show."""
    from retrievalkit.metrics.definitions import DEFAULT_KS, compute_metrics, judge_rankings

    docs, relevant, counts, grades = synthetic_indices(questions, DEPTH, seed=17)
    np.save(folder / "rankings.npy", docs.astype(np.int32))
    lines = []
    judgments = []
    for index, (row, count, grade_row) in enumerate(
        zip(relevant.tolist(), counts.tolist(), grades.tolist(), strict=True)
    ):
        labels = {
            f"doc-{doc}": grade for doc, grade in zip(row[:count], grade_row[:count], strict=True)
        }
        judgments.append(labels)
        question: dict[str, Any] = {
            "id": f"q{index}",
            "question": f"synthetic question {index}",
            "expected": list(labels),
            "hard_class": HARD_CLASSES[(index // 3) % len(HARD_CLASSES)],
        }
        if FORMS[index % 3] is not None:
            question["form"] = FORMS[index % 3]
        graded = {doc: grade for doc, grade in labels.items() if grade != 1}
        if graded:
            question["grades"] = graded
        lines.append(json.dumps(question))
    (folder / "golden.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")

    site = folder / "site"
    dist_info = site / "rk_bench_instant-0.1.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: rk-bench-instant\nVersion: 0.1\n", encoding="utf-8"
    )
    (dist_info / "entry_points.txt").write_text(
        "[retrievalkit.retrievers]\nbench-instant = instant_retriever:create_instant\n",
        encoding="utf-8",
    )
    (folder / "retrievalkit.toml").write_text(
        f'[retrievers.instant]\nplugin = "bench-instant"\nrankings = "{folder / "rankings.npy"}"\n',
        encoding="utf-8",
    )

    rankings = [[f"doc-{doc}" for doc in row] for row in docs.tolist()]
    depth = max(DEFAULT_KS)
    table = compute_metrics(
        judge_rankings([ranking[:depth] for ranking in rankings], judgments, depth),
        DEFAULT_KS,
        with_judged=True,
    )
    return {name: float(np.nanmean(values)) for name, values in table.items()}


def run_eval(folder: Path, store: Path, extra: Sequence[str] = ()) -> dict[str, Any]:
    """One ``retrievalkit eval [EXTRA]`` in a fresh process: wall time, peak memory, retriever
    time."""
    report = folder / "retriever.json"
    output = folder / "report.json"
    env = worker_env()
    env["PYTHONPATH"] = os.pathsep.join([str(folder / "site"), str(BENCHMARKS)])
    env["RK_BENCH_RETRIEVER_REPORT"] = str(report)
    env["NO_COLOR"] = "1"
    command = [
        sys.executable,
        "-m",
        "retrievalkit",
        "eval",
        "--set",
        str(folder / "golden.jsonl"),
        "--retriever",
        "instant",
        "--store",
        f"sqlite:///{store}",
        "--format",
        "json",
        "--quiet",
        *extra,
    ]
    with open(output, "wb") as stdout:
        began = time.perf_counter()
        process = subprocess.Popen(
            command, cwd=folder, env=env, stdout=stdout, stderr=subprocess.PIPE
        )
        # wait4 gives this child's own peak resident set, not the largest of all children.
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - began
        process.returncode = os.waitstatus_to_exitcode(status)
    errors = process.stderr.read().decode() if process.stderr else ""
    if process.returncode != 0:
        raise RuntimeError(f"eval failed ({process.returncode}):\n{errors[-3000:]}")
    return {
        "wall": wall,
        "retriever": json.loads(report.read_text())["seconds"],
        "peak_mb": usage.ru_maxrss / 1024.0,  # Linux reports kilobytes
        "cpu": usage.ru_utime + usage.ru_stime,
        "summary": json.loads(output.read_text()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    questions = args.questions
    with tempfile.TemporaryDirectory(dir=None) as scratch:
        folder = Path(scratch)
        expected = prepare(folder, questions)
        store = folder / "results.sqlite3"
        fresh: dict[str, Any] | None = None
        for _ in range(args.repeats):
            store.unlink(missing_ok=True)
            for extra in ("-wal", "-shm"):
                Path(f"{store}{extra}").unlink(missing_ok=True)
            result = run_eval(folder, store)
            if fresh is None or result["wall"] - result["retriever"] < (
                fresh["wall"] - fresh["retriever"]
            ):
                fresh = result
        assert fresh is not None
        # The store now holds a run of the same set and retriever: this one is compared
        # with it (paired intervals and permutation tests of hit@1 and hit@3).
        compared = run_eval(folder, store)

    problems = []
    for name, result in (("fresh store", fresh), ("with a baseline", compared)):
        summary = result["summary"]
        if summary["questions"] != questions or summary["errored"]:
            problems.append(
                f"{name}: {summary['questions']} questions, {summary['errored']} errored"
            )
        for metric, mean in expected.items():
            shown = summary["metrics"][metric]["mean"]
            if shown is None or abs(shown - mean) > 1e-12:
                problems.append(f"{name}: {metric} is {shown}, computed directly {mean}")
    if problems:
        print("report DISAGREES with the directly computed metrics:")
        print("\n".join(f"  {line}" for line in problems[:10]))
        return 1

    print(
        f"## Framework overhead: {questions:,} questions through `retrievalkit eval`, "
        f"SQLite store, JSON report"
    )
    print(f"fresh process each; fresh store: best of {args.repeats}\n")
    rows = []
    for name, result in (("fresh store (the goal)", fresh), ("store with a baseline", compared)):
        framework = result["wall"] - result["retriever"]
        rows.append(
            (
                name,
                f"{result['wall']:.2f} s",
                f"{result['retriever']:.2f} s",
                f"{framework:.2f} s",
                f"{framework / questions * 1e6:.1f} us",
                f"{result['cpu']:.2f} s",
                f"{result['peak_mb']:.0f} MB",
            )
        )
    # The process's CPU time (all threads, retriever included) shows, on a shared
    # machine, how much of the wall time was spent waiting for a core.
    header = ("run", "wall", "retriever", "framework", "per question", "CPU", "peak memory")
    print(table(header, rows))
    print()
    print(f"values: the report's {len(expected)} means equal the metrics computed directly")
    framework = (fresh["wall"] - fresh["retriever"]) / questions * 1e6
    print(
        goal(
            framework < GOAL_MICROSECONDS,
            f"overhead under {GOAL_MICROSECONDS:g} us per question: {framework:.1f} us",
        )
    )
    print(
        goal(
            fresh["peak_mb"] < GOAL_MEGABYTES,
            f"peak memory under 1 GB for {questions:,} questions: {fresh['peak_mb']:.0f} MB",
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
