"""Two runs' stages side by side: each stage's metrics, their paired differences, each miss's stage.

For every stage of either run (the candidate's order, then any stage only the baseline
has) and each metric asked for (by default every metric of the last stage but the
judged shares):
both runs' means with their intervals, each run's paired difference from the stage
before it (what the run recorded), and the candidate's paired difference from the
baseline on that stage, computed from the stage's outcome columns (``stage.NAME:METRIC``)
over the questions both runs share, with the same paired test as
`retrievalkit.pipeline.gating.comparison` (raw p-values: no correction across stages).

Per question, the attribution each run recorded at its cut-off (``not retrieved``,
``lost in fusion``, ``demoted by reranker``, ``ranked below k``, or a rescue; see
`retrievalkit.pipeline.engine.stages`), questions whose label changed first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import attrs

from retrievalkit.metrics.names import stage_metric
from retrievalkit.model.records import ResultRecord, StageDelta, StageReport
from retrievalkit.model.values import MetricValue
from retrievalkit.pipeline.gating.comparison import MetricDelta


@attrs.frozen
class StageMetricRow:
    """One metric of one stage in both runs."""

    stage: str
    metric: str
    baseline: MetricValue | None
    """None when the baseline has no such stage (or metric)."""
    candidate: MetricValue | None
    baseline_step: StageDelta | None
    """The baseline's paired difference from its stage before (None for a first stage)."""
    candidate_step: StageDelta | None
    between: MetricDelta | None
    """candidate - baseline on this stage over the shared questions; None unless both
    runs have the stage."""


@attrs.frozen
class QuestionStages:
    """One question's attribution label in each run (None: nothing to put down to a stage)."""

    question_id: str
    question: str | None
    baseline: str | None
    candidate: str | None

    @property
    def changed(self) -> bool:
        return self.baseline != self.candidate


@attrs.frozen
class StageComparison:
    """What the stage view of a comparison shows; see the module documentation."""

    baseline_order: tuple[str, ...]
    """The baseline's stages (empty when it has none)."""
    candidate_order: tuple[str, ...]
    stages: tuple[str, ...]
    metrics: tuple[str, ...]
    rows: tuple[StageMetricRow, ...]
    baseline_k: int | None
    """The cut-off of the baseline's attribution (None without stages)."""
    candidate_k: int | None
    attribution: tuple[tuple[str, int, int], ...]
    """Each label with its count in the baseline and in the candidate, most frequent first."""
    questions: tuple[QuestionStages, ...]
    """Every shared question that has a label in either run, those whose label changed first."""
    shared_questions: int


def compare_stages(
    baseline: ResultRecord,
    candidate: ResultRecord,
    *,
    resamples: int,
    confidence: float,
    seed: int,
    question_texts: Mapping[str, str] | None = None,
    metrics: Sequence[str] | None = None,
) -> StageComparison | None:
    """The stage view of ``candidate`` against ``baseline``; None when neither has stages."""
    from retrievalkit.metrics.scoring import metric_column, positions_of
    from retrievalkit.pipeline.gating.comparison import metric_delta
    from retrievalkit.stats.paired import verdict

    before, after = baseline.stages, candidate.stages
    if before is None and after is None:
        return None
    shown = after if after is not None else before
    assert shown is not None
    if metrics is None:
        metrics = [
            name for name in shown.metrics[shown.order[-1]] if not name.startswith("judged@")
        ]
    metrics = tuple(metrics)
    before_order = () if before is None else before.order
    after_order = () if after is None else after.order
    stages = tuple(dict.fromkeys((*after_order, *before_order)))

    base_ids = baseline.outcomes.question_ids
    common = set(base_ids).intersection(candidate.outcomes.question_ids)
    shared = [
        question_id for question_id in candidate.outcomes.question_ids if question_id in common
    ]
    base_at = positions_of(baseline.outcomes, shared)
    cand_at = positions_of(candidate.outcomes, shared)
    alpha = 1.0 - confidence

    def between(stage: str, metric: str) -> MetricDelta | None:
        if stage not in before_order or stage not in after_order or not shared:
            return None
        name = stage_metric(stage, metric)
        delta = metric_delta(
            metric_column(baseline.outcomes, name)[base_at],
            metric_column(candidate.outcomes, name)[cand_at],
            name,
            resamples,
            confidence,
            seed,
        )
        said = verdict(delta.p_value, delta.p_floor, alpha)
        return attrs.evolve(
            delta, verdict=said, significant=None if said is None else said == "significant"
        )

    rows = tuple(
        StageMetricRow(
            stage=stage,
            metric=metric,
            baseline=_value(before, stage, metric),
            candidate=_value(after, stage, metric),
            baseline_step=_step(before, stage, metric),
            candidate_step=_step(after, stage, metric),
            between=between(stage, metric),
        )
        for stage in stages
        for metric in metrics
    )
    before_labels = {} if before is None else before.questions
    after_labels = {} if after is None else after.questions
    texts = {**baseline.outcomes.known_texts(), **candidate.outcomes.known_texts()}
    texts.update(question_texts or {})
    questions = [
        QuestionStages(
            question_id,
            texts.get(question_id),
            before_labels.get(question_id),
            after_labels.get(question_id),
        )
        for question_id in shared
        if question_id in before_labels or question_id in after_labels
    ]
    questions.sort(key=lambda each: not each.changed)  # stable: the run's order within
    base_counts = Counter(before_labels[q] for q in shared if q in before_labels)
    cand_counts = Counter(after_labels[q] for q in shared if q in after_labels)
    labels = sorted(
        set(base_counts) | set(cand_counts),
        key=lambda label: (-max(base_counts[label], cand_counts[label]), label),
    )
    return StageComparison(
        baseline_order=tuple(before_order),
        candidate_order=tuple(after_order),
        stages=stages,
        metrics=metrics,
        rows=rows,
        baseline_k=None if before is None else before.attribution_k,
        candidate_k=None if after is None else after.attribution_k,
        attribution=tuple((label, base_counts[label], cand_counts[label]) for label in labels),
        questions=tuple(questions),
        shared_questions=len(shared),
    )


def _value(report: StageReport | None, stage: str, metric: str) -> MetricValue | None:
    if report is None:
        return None
    return report.metrics.get(stage, {}).get(metric)


def _step(report: StageReport | None, stage: str, metric: str) -> StageDelta | None:
    if report is None:
        return None
    return report.deltas.get(stage, {}).get(metric)
