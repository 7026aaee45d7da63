"""Run every ``benchmarks/bench_*.py`` as a fresh process and print their ratio tables.

This is what ``nox -s bench`` runs. A benchmark that lacks something it needs (say an
Elasticsearch node for the throughput benchmark) exits with code 77 and is reported
as skipped, not failed. Goals are collected from the ``goal:`` lines the benchmarks
print and summed up at the end; a missed goal is reported, not fatal, because
timings vary with the machine. The release's goal table (targets.py) comes last: every
row with the figure a benchmark reported for it and MET or MISSED, and "not measured"
(MISSED) for a row no benchmark reported. The exit code is 1 when a benchmark crashed or found
values that disagree, since then its times mean nothing.

    python benchmarks/run_all.py [--only scoring,intervals] [--quick]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import BENCHMARKS, EXIT_SKIPPED, REPO, blas_kernel, table, worker_env
from targets import TARGETS

#: Fewer repeats and smaller sizes, for checking that the benchmarks run at all.
QUICK = {
    "scoring": ["--sizes", "10000", "--repeats", "1"],
    "intervals": ["--repeats", "1"],
    "overhead": ["--questions", "20000", "--repeats", "1"],
    "scale": ["--quick"],
    "startup": ["--repeats", "3"],
    "es": ["--repeats", "1"],
    "cluster": ["--repeats", "1", "--concurrency", "1,4"],
    "http": ["--rounds", "1", "--repeats", "1"],
    "postgres": ["--repeats", "1", "--questions", "2000"],
    "coverage": ["--samples", "300"],
    "power": ["--replicates", "100"],
    "gate": ["--replicates", "60"],
    "sequential": ["--replicates", "20"],
    "clustered": ["--replicates", "60"],
    "outcomes": ["--questions", "20000", "--repeats", "1"],
    "sweep": ["--quick"],
    "sweep_ray": [],
    "serve": ["--quick"],
    "models": ["--throughput-docs", "100"],
    "drift": ["--lines", "10000", "--distinct", "2000", "--repeats", "1"],
    "latency_gate": ["--sizes", "10000", "--repeats", "1"],
}


def reported_rows(goals: list[str]) -> dict[str, tuple[bool, str]]:
    """KEY -> (met, figure) from the ``goal: ... [KEY]`` lines of targets.py's rows."""
    rows: dict[str, tuple[bool, str]] = {}
    for line in goals:
        body = line.removeprefix("goal:").strip()
        if not body.endswith("]") or "[" not in body:
            continue
        body, key = body[:-1].rsplit("[", 1)
        if key not in TARGETS:
            continue
        met = body.startswith("MET")
        # What harness.target wrote after the row's name and goal (which hold colons).
        what, wanted, _ = TARGETS[key]
        text = body.removeprefix("MET").removeprefix("MISSED").strip()
        figure = text.removeprefix(f"{what} ({wanted}):").strip()
        # A row reported twice (two sizes, two pages) is met only when every report is.
        if key in rows:
            was_met, was = rows[key]
            rows[key] = (was_met and met, f"{was}; {figure}")
        else:
            rows[key] = (met, figure)
    return rows


def goal_table(goals: list[str], skipped: list[str], ran: set[str]) -> str:
    """The release's goals, every row with its figure and a MET / MISSED line."""
    reported = reported_rows(goals)
    why_skipped = dict(line.split(": ", 1) for line in skipped)
    rows, lines = [], []
    for key, (what, wanted, benchmark) in TARGETS.items():
        if key in reported:
            met, figure = reported[key]
        elif benchmark in why_skipped:
            met, figure = (
                False,
                f"not measured: bench_{benchmark}.py skipped ({why_skipped[benchmark]})",
            )
        elif benchmark not in ran:
            met, figure = False, f"not measured: bench_{benchmark}.py was not run"
        else:
            met, figure = False, f"not measured: bench_{benchmark}.py reported no figure"
        status = "MET" if met else "MISSED"
        rows.append((what if len(what) <= 60 else what[:57] + "...", wanted, status))
        lines.append(f"{status:<6} {what} ({wanted}): {figure}")
    met_count = sum(1 for line in lines if line.startswith("MET"))
    return "\n".join(
        [
            "## The release's goals (benchmarks/targets.py)",
            table(("what", "goal", ""), rows),
            "",
            *lines,
            "",
            f"{met_count} of {len(lines)} goals MET",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated names, e.g. scoring,startup")
    parser.add_argument("--quick", action="store_true", help="small sizes, one repeat")
    args = parser.parse_args()
    scripts = sorted(BENCHMARKS.glob("bench_*.py"))
    if args.only:
        wanted = {name.strip() for name in args.only.split(",")}
        scripts = [script for script in scripts if script.stem.removeprefix("bench_") in wanted]

    print(f"python {sys.version.split()[0]}; numpy BLAS: {blas_kernel()}")
    print("(benchmark processes run without OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE overrides)\n")
    goals: list[str] = []
    skipped: list[str] = []
    failed: list[str] = []
    for script in scripts:
        name = script.stem.removeprefix("bench_")
        extra = QUICK.get(name, []) if args.quick else []
        began = time.perf_counter()
        completed = subprocess.run(
            [sys.executable, str(script), *extra],
            cwd=REPO,
            env=worker_env(),
            capture_output=True,
            text=True,
            check=False,
        )
        elapsed = time.perf_counter() - began
        output = completed.stdout.rstrip()
        if completed.returncode == EXIT_SKIPPED:
            reason = (completed.stdout + completed.stderr).strip().splitlines()
            skipped.append(f"{name}: {reason[-1] if reason else 'skipped'}")
            print(f"## {name}: skipped ({skipped[-1].split(': ', 1)[1]})\n")
            continue
        print(output)
        print(f"({name}: {elapsed:.0f} s)\n")
        goals.extend(line for line in output.splitlines() if line.startswith("goal:"))
        if completed.returncode != 0:
            failed.append(name)
            print(f"!! {name} failed with exit code {completed.returncode}")
            print(completed.stderr[-3000:])
    print("## Goals")
    print("\n".join(goals) if goals else "(none reported)")
    for line in skipped:
        print(f"skipped: {line}")
    print()
    print(
        goal_table(goals, skipped, ran={script.stem.removeprefix("bench_") for script in scripts})
    )
    if failed:
        print(f"FAILED: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
