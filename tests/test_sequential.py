"""eval --sequential: betting confidence sequences that hold at every step, and the gate on them."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from conftest import RunCli

from retrievalkit.stats.sequential import (
    FAIL,
    PASS,
    UNDECIDED,
    BettingSequence,
    run_sequentially,
)


def test_the_sequence_covers_the_population_mean_at_every_step_at_once() -> None:
    # Anytime validity: the share of populations whose mean leaves the sequence at ANY
    # step is at most alpha. Populations are skewed, as per-question metric values are.
    rng = np.random.default_rng(20240611)
    population_size, trials, alpha = 150, 300, 0.1
    escaped = 0
    for _ in range(trials):
        values = rng.beta(0.4, 0.7, population_size)
        truth = float(values.mean())
        sequence = BettingSequence(population_size, alpha, points=801)
        left_out = False
        for value in rng.permutation(values):
            sequence.update(float(value))
            bounds = sequence.bounds()
            if bounds is None or not bounds[0] <= truth <= bounds[1]:
                left_out = True
                break
        escaped += left_out
        # Without replacement, the last value pins the mean to within 1/N (one value's
        # range over N) plus a grid step.
        if not left_out:
            assert bounds is not None
            assert bounds[1] - bounds[0] <= 1 / population_size + 2 / 800 + 1e-9
    assert escaped / trials <= alpha


def _run(
    baseline: np.ndarray, candidate: np.ndarray, threshold: float, alpha: float = 0.05
) -> tuple[list[int], Any]:
    ids = [f"q{i}" for i in range(len(baseline))]
    before = {"hit@1": {qid: float(value) for qid, value in zip(ids, baseline, strict=True)}}

    def ask(indices: list[int]) -> list[dict[str, float | None]]:
        return [{"hit@1": float(candidate[index])} for index in indices]

    return run_sequentially(ids, ask, [(None, "hit@1", threshold, ids)], before, alpha=alpha)


def test_a_clear_regression_fails_early_and_no_change_passes_early() -> None:
    rng = np.random.default_rng(1)
    baseline = (rng.random(400) < 0.7).astype(float)
    worse = baseline.copy()
    worse[np.flatnonzero(baseline == 1)[:80]] = 0.0  # a drop of 0.2
    asked, result = _run(baseline, worse, threshold=0.05)
    assert result.decision == FAIL and result.asked < 200 and len(asked) == result.asked
    (gate,) = result.gates
    assert gate.high is not None and gate.high < -0.05
    asked, same = _run(baseline, baseline.copy(), threshold=0.1)
    assert same.decision == PASS and same.asked < 200
    assert same.gates[0].low is not None and same.gates[0].low >= -0.1


def test_a_drop_at_the_threshold_is_undecided_when_the_set_runs_out() -> None:
    baseline = np.ones(40)
    candidate = baseline.copy()
    candidate[:2] = 0.0  # a drop of exactly 0.05: the edge of the threshold
    _, result = _run(baseline, candidate, threshold=0.05)
    # No sample can show the drop is at most 0.05 when it is exactly 0.05.
    assert result.decision == UNDECIDED and result.asked == 40


def test_the_sequential_gate_errs_at_most_alpha_of_the_time_under_its_threshold() -> None:
    # True drop 0.02 with an allowed drop of 0.05: a FAIL would be a false alarm.
    rng = np.random.default_rng(9)
    alarms = 0
    for _ in range(150):
        baseline = (rng.random(120) < 0.6).astype(float)
        candidate = baseline.copy()
        flip = rng.choice(np.flatnonzero(baseline == 1), 3, replace=False)
        candidate[flip] = 0.0
        _, result = _run(baseline, candidate, threshold=0.05, alpha=0.1)
        alarms += result.decision == FAIL
    assert alarms / 150 <= 0.1


def eval_json(cli: RunCli, *args: str) -> tuple[int, dict[str, Any], str]:
    done = cli("eval", "--set", "demo", *args, "--format", "json")
    return done.returncode, json.loads(done.stdout) if done.stdout else {}, done.stderr


def test_eval_sequential_stops_early_and_does_not_save(cli: RunCli) -> None:
    code, _, stderr = eval_json(cli, "--retriever", "bm25-demo", "--sequential")
    assert code == 2 and "--sequential decides against a baseline" in stderr
    assert eval_json(cli, "--retriever", "bm25-demo")[0] == 0
    code, report, stderr = eval_json(
        cli, "--retriever", "bm25-demo", "--sequential", "--max-top1-drop", "0.1",
        "--max-top3-drop", "0.1", "--fail-on-regression",
    )  # fmt: skip
    assert code == 0, stderr
    sequence = report["regression"]["sequential"]
    assert sequence["decision"] == PASS and sequence["asked"] < sequence["total"] == 75
    assert report["regression"]["regressed"] is False
    assert "sequential" in report["manifest"]["extra"]
    history = cli("history", "--set", "demo", "--retriever", "bm25-demo", "--format", "json")
    assert len(json.loads(history.stdout)) == 1  # the partial run did not become a baseline


def test_eval_sequential_undecided_fails_the_gate(cli: RunCli) -> None:
    assert eval_json(cli, "--retriever", "bm25-demo")[0] == 0
    # With no drop allowed, no sample can show the drop is at most 0: undecided.
    code, report, _ = eval_json(
        cli, "--retriever", "bm25-demo", "--sequential", "--fail-on-regression"
    )
    assert code == 1
    sequence = report["regression"]["sequential"]
    assert sequence["decision"] == UNDECIDED and sequence["asked"] == 75
    assert report["regression"]["regressed"] is True


@pytest.mark.parametrize("points", [801, 4001])
def test_bounds_never_leave_zero_one(points: int) -> None:
    sequence = BettingSequence(10, 0.05, points=points)
    for value in (1.0, 1.0, 0.0):
        sequence.update(value)
        bounds = sequence.bounds()
        assert bounds is not None and 0.0 <= bounds[0] <= bounds[1] <= 1.0
