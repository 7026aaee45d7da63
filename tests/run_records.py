"""A result record around given outcomes, for tests of what renders a run."""

from __future__ import annotations

from collections.abc import Sequence

from retrievalkit.model.values import Manifest, MetricValue, QuestionOutcome, ResultRecord


def run_record(
    outcomes: Sequence[QuestionOutcome],
    metric_names: Sequence[str],
    *,
    run_id: str = "20260101T000000Z-00000000",
    created_at: str = "2026-01-01T00:00:00Z",
) -> ResultRecord:
    """A run of set "big" by retriever "r": every metric 0.5 [0.4, 0.6], no slices."""
    metrics = {name: MetricValue(mean=0.5, ci=(0.4, 0.6), n=len(outcomes)) for name in metric_names}
    manifest = Manifest(
        retrievalkit_version="0",
        set_name="big",
        set_hash="0" * 64,
        retriever="r",
        plugin="r",
        retriever_options={},
        retriever_options_hash="0" * 16,
        created_at=created_at,
        ks=(1, 3, 10),
        overfetch=3,
        confidence=0.95,
        resamples=100,
        seed=1,
    )
    return ResultRecord(
        run_id=run_id,
        set="big",
        model="r",
        grader="retrieval_hit_rate",
        pass_rate=0.5,
        mean_score=0.5,
        metrics=metrics,
        slices={},
        outcomes=outcomes,
        manifest=manifest,
    )
