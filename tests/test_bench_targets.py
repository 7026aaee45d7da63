"""The release's goal table of ``nox -s bench``: every row printed, MET only when reported met."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture(scope="module")
def run_all():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import run_all as module

        yield module
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_unreported_rows_are_missed_and_reported_rows_carry_their_figure(run_all) -> None:  # type: ignore[no-untyped-def]
    from harness import target
    from targets import TARGETS

    goals = [
        target("sweep", True, "1.17x (load 1.00)"),
        target("compare-100k", False, "7.20 s"),
        "goal: MET  something that is no row of the table",
    ]
    text = run_all.goal_table(goals, ["serve: no server"], ran={"sweep", "scale", "serve"})
    lines = {line.split(" (", 1)[0].split(None, 1)[1]: line for line in text.splitlines()
             if line.startswith(("MET ", "MISSED "))}  # fmt: skip
    assert len(lines) == len(TARGETS)
    assert lines[TARGETS["sweep"][0]].startswith("MET ")
    assert lines[TARGETS["sweep"][0]].endswith("1.17x (load 1.00)")
    assert lines[TARGETS["compare-100k"][0]].startswith("MISSED")
    assert "skipped (no server)" in lines[TARGETS["serve"][0]]
    assert lines[TARGETS["scoring"][0]].endswith("bench_scoring.py was not run")
    assert lines[TARGETS["eval-1m"][0]].endswith("bench_scale.py reported no figure")
    assert text.rstrip().endswith(f"1 of {len(TARGETS)} goals MET")


def test_a_row_reported_twice_is_met_only_when_both_reports_are(run_all) -> None:  # type: ignore[no-untyped-def]
    from harness import target

    rows = run_all.reported_rows([target("serve", True, "a 10 ms"), target("serve", False, "b")])
    assert rows["serve"] == (False, "a 10 ms; b")


def test_a_figure_is_what_follows_its_rows_name_and_goal_even_with_colons(run_all) -> None:  # type: ignore[no-untyped-def]
    from harness import target
    from targets import TARGETS

    assert ":" in TARGETS["embedders"][0]  # the row whose name holds a colon
    rows = run_all.reported_rows([target("embedders", False, "0.98x: 1.82x")])
    assert rows["embedders"] == (False, "0.98x: 1.82x")


def test_the_stored_outcomes_benchmark_runs_on_the_codec_it_measures() -> None:
    """bench_outcomes.py at a small size: it writes, reads and checks a stored run through
    the column codec of `retrievalkit.stores.columns` (a moved function breaks it)."""
    import subprocess

    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_outcomes.py"), "--questions", "2000",
         "--repeats", "1"],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "stored bytes" in done.stdout


def test_the_drift_benchmark_runs_on_the_drift_api_it_measures() -> None:
    """bench_drift.py at a small size: it writes a query log, runs rk.drift and the drift
    engine's steps on it and checks that both found the same RBO (a moved function or a
    changed signature breaks it)."""
    import subprocess

    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_drift.py"), "--lines", "2000",
         "--distinct", "400", "--repeats", "1"],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "read_log: read and merge" in done.stdout
    assert "[drift-100k]" in done.stdout
    # The peer is measured when the rbo package can be imported, else said to be missing.
    assert "pairs of equal lengths agree" in done.stdout or "peer not measured" in done.stdout


def test_the_latency_gate_benchmark_runs_on_the_gate_it_measures() -> None:
    """bench_latency_gate.py at a small size: the gate with a latency threshold must check
    latency.p95 at the candidate's known slowdown, and without one must not."""
    import subprocess

    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_latency_gate.py"), "--sizes", "2000",
         "--repeats", "1"],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "gate with latency.p95" in done.stdout
    assert "[latency-gate]" in done.stdout
