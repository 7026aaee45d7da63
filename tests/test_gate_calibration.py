"""The gate's false-alarm rate, by seeded simulation of A/A runs through compare_runs.

Per-question values are bm25-demo's on the demo set (hit@1, hit@3, rr, ndcg@10 of each
question together). Two runs of "the same system" each re-draw a question's values from
another question with chance 0.3, independently, so the runs are exchangeable. The long
version over set sizes and drops is benchmarks/bench_gate.py.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from retrievalkit.metrics.scoring import ScoringOptions, score_run
from retrievalkit.model.records import GRADER, ResultRecord
from retrievalkit.model.values import Manifest, QuestionOutcome
from retrievalkit.pipeline.engine.evaluator import evaluate_questions
from retrievalkit.pipeline.gating.gate import DEFAULT_THRESHOLDS, compare_runs
from retrievalkit.retrievers.bm25 import create_bm25_demo

METRICS = ("hit@1", "hit@3", "rr", "ndcg@10")


@pytest.fixture(scope="module")
def demo_values() -> npt.NDArray[np.float64]:
    from retrievalkit.demo import DemoSetProvider

    golden = DemoSetProvider().load("demo")
    answerable = [q for q in golden.questions if q.answerable]
    retrievals = evaluate_questions(create_bm25_demo(), answerable, depth=10)
    scores = score_run(answerable, retrievals, ScoringOptions(ks=(1, 3, 10), resamples=0))
    return np.array([[o.scores[m] for m in METRICS] for o in scores.outcomes], dtype=float)


def outcomes(values: npt.NDArray[np.float64]) -> tuple[QuestionOutcome, ...]:
    return tuple(
        QuestionOutcome(f"q{i}", (), dict(zip(METRICS, row, strict=True)), 0.0)
        for i, row in enumerate(values.tolist())
    )


def record(values: npt.NDArray[np.float64]) -> ResultRecord:
    manifest = Manifest("t", "sim", "sim", "r", "r", {}, "", "2026-01-01T00:00:00Z", (1, 3, 10),
                        3, 0.95, 200, 1)  # fmt: skip
    return ResultRecord("base", "sim", "r", GRADER, 0.0, 0.0, {}, {}, outcomes(values), manifest)


def flagged(
    values: npt.NDArray[np.float64], drop: float, replicates: int, *, require_significant: bool
) -> float:
    rng = np.random.default_rng(20240611)
    n = len(values)
    hit_rate = float(values[:, 0].mean())
    found = 0
    for replicate in range(replicates):

        def noisy() -> npt.NDArray[np.float64]:
            redraw = rng.random(n) < 0.3
            return np.where(redraw[:, None], values[rng.integers(0, n, n)], values)

        baseline, candidate = noisy(), noisy()
        if drop:
            candidate = np.where((rng.random(n) < drop / hit_rate)[:, None], 0.0, candidate)
        verdict = compare_runs(
            outcomes(candidate),
            "sim",
            record(baseline),
            DEFAULT_THRESHOLDS,
            resamples=100,
            confidence=0.95,
            seed=replicate,
            require_significant=require_significant,
        )
        found += verdict.regressed
    return found / replicates


def test_a_a_runs_rarely_fail_the_gate_with_require_significant(
    demo_values: npt.NDArray[np.float64],
) -> None:
    replicates = 300
    rate = flagged(demo_values, 0.0, replicates, require_significant=True)
    assert rate <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / replicates), rate
    # The same simulation can see false alarms: the threshold-only gate raises many.
    assert flagged(demo_values, 0.0, 100, require_significant=False) > 0.3


def test_a_large_drop_is_caught_with_require_significant(
    demo_values: npt.NDArray[np.float64],
) -> None:
    assert flagged(demo_values, 0.25, 100, require_significant=True) > 0.6
