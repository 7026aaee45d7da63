"""Compare a candidate run with a baseline of the same key, question by question.

Each thresholded metric (an absolute drop, e.g. ``hit@1`` may fall by at most 0.05)
is compared on the questions both runs share, with a paired bootstrap interval of the
difference. A drop past its threshold is a regression; the verdict lists each one
with both values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs
import numpy as np

from retrievalkit.intervals import paired_difference
from retrievalkit.model import QuestionOutcome, ResultRecord
from retrievalkit.scoring import outcome_values

#: Without any threshold configured, any drop of the two record rates is a regression.
DEFAULT_THRESHOLDS: dict[str, float] = {"hit@1": 0.0, "hit@3": 0.0}
_TOLERANCE = 1e-9


@attrs.frozen
class MetricComparison:
    metric: str
    baseline: float | None
    candidate: float | None
    difference: float | None
    ci: tuple[float, float] | None
    p_value: float | None
    threshold: float
    regressed: bool
    slice: str | None = None


@attrs.frozen
class Verdict:
    baseline_run_id: str
    regressed: bool
    failures: tuple[MetricComparison, ...]
    checked: tuple[MetricComparison, ...]
    shared_questions: int
    same_set: bool


def compare_runs(
    candidate: Sequence[QuestionOutcome],
    candidate_set_hash: str,
    baseline: ResultRecord,
    thresholds: Mapping[str, float],
    *,
    resamples: int,
    confidence: float,
    seed: int,
) -> Verdict:
    """The verdict of a candidate's outcomes against a stored baseline run."""
    checked = []
    shared = 0
    for metric, threshold in sorted(thresholds.items()):
        before = outcome_values(baseline.outcomes, metric)
        after = outcome_values(candidate, metric)
        ids = [question_id for question_id in after if question_id in before]
        shared = len(ids)
        if not ids:
            continue
        paired = paired_difference(
            np.array([before[i] for i in ids]),
            np.array([after[i] for i in ids]),
            resamples=resamples,
            confidence=confidence,
            seed=seed,
        )
        if paired.difference is None:
            continue
        regressed = -paired.difference > threshold + _TOLERANCE
        interval = None if paired.low is None or paired.high is None else (paired.low, paired.high)
        checked.append(
            MetricComparison(
                metric=metric,
                baseline=paired.baseline,
                candidate=paired.candidate,
                difference=paired.difference,
                ci=interval,
                p_value=paired.p_value,
                threshold=threshold,
                regressed=regressed,
            )
        )
    failures = tuple(item for item in checked if item.regressed)
    return Verdict(
        baseline_run_id=baseline.run_id,
        regressed=bool(failures),
        failures=failures,
        checked=tuple(checked),
        shared_questions=shared,
        same_set=baseline.manifest.set_hash == candidate_set_hash,
    )
