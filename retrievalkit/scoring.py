"""Turn a set's retrievals into the metric table, its intervals and its slices."""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import numpy as np
import numpy.typing as npt

from retrievalkit.intervals import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    Estimate,
    bootstrap_means,
    slice_masks,
)
from retrievalkit.metrics import compute_metrics, judge_rankings
from retrievalkit.model import (
    GoldenQuestion,
    MetricValue,
    QuestionOutcome,
    Retrieval,
)

#: Slices every run reports, whatever ``--slice`` adds.
STANDARD_SLICES = ("form", "hard_class")


@attrs.frozen
class ScoringOptions:
    ks: tuple[int, ...]
    resamples: int = DEFAULT_RESAMPLES
    confidence: float = DEFAULT_CONFIDENCE
    seed: int = DEFAULT_SEED
    slices: tuple[str, ...] = ()


@attrs.frozen
class Scores:
    metrics: dict[str, MetricValue]
    slices: dict[str, dict[str, dict[str, MetricValue]]]
    outcomes: tuple[QuestionOutcome, ...]


def slice_label(question: GoldenQuestion, field: str) -> str | None:
    """The value a question has for a slicing field: form, hard_class, or a meta key."""
    if field == "form":
        return question.form.value if question.form else None
    if field == "hard_class":
        return question.hard_class
    return question.meta.get(field)


def score_run(
    questions: Sequence[GoldenQuestion],
    retrievals: Sequence[Retrieval],
    options: ScoringOptions,
) -> Scores:
    """Per-question values, overall means and slice means, each with its interval."""
    with_judged = any(question.grades for question in questions)
    judgments = [question.judgments() for question in questions]
    judged = judge_rankings(
        [retrieval.ranking for retrieval in retrievals],
        judgments,
        depth=max(options.ks),
        errored=[retrieval.error is not None for retrieval in retrievals],
    )
    per_metric = compute_metrics(judged, options.ks, with_judged=with_judged)
    names = list(per_metric)
    values = np.column_stack([per_metric[name] for name in names])

    group_names: list[tuple[str, str] | None] = [None]
    masks = [np.ones(len(questions), dtype=bool)]
    for field in dict.fromkeys((*STANDARD_SLICES, *options.slices)):
        labels = [slice_label(question, field) for question in questions]
        if field not in STANDARD_SLICES and all(label is None for label in labels):
            continue
        for label, mask in slice_masks(labels).items():
            group_names.append((field, label))
            masks.append(mask)
    estimates = bootstrap_means(
        values,
        np.array(masks),
        resamples=options.resamples,
        confidence=options.confidence,
        seed=options.seed,
    )
    outcomes = _outcomes(questions, retrievals, judgments, names, values)

    overall = _metric_map(names, estimates[0])
    slices: dict[str, dict[str, dict[str, MetricValue]]] = {
        field: {} for field in dict.fromkeys((*STANDARD_SLICES, *options.slices))
    }
    for group, row in zip(group_names[1:], estimates[1:], strict=True):
        assert group is not None
        field, label = group
        slices[field][label] = _metric_map(names, row)

    return Scores(overall, slices, tuple(outcomes))


def _outcomes(
    questions: Sequence[GoldenQuestion],
    retrievals: Sequence[Retrieval],
    judgments: list[dict[str, int]],
    names: list[str],
    values: npt.NDArray[np.float64],
) -> list[QuestionOutcome]:
    """One outcome per question: its ranking, its scores (None where undefined), its labels."""
    outcomes = []
    # One conversion of the whole table to Python floats: reading a numpy array one
    # element at a time costs more than all the rest of this loop.
    rows = values.tolist()
    for question, retrieval, values_row, question_labels in zip(
        questions, retrievals, rows, judgments, strict=True
    ):
        # value != value only for NaN: undefined is None in every output.
        scores = {
            name: None if value != value else value
            for name, value in zip(names, values_row, strict=True)
        }
        outcomes.append(
            QuestionOutcome(
                question_id=question.id,
                ranking=retrieval.ranking,
                scores=scores,
                latency_ms=round(retrieval.latency_ms, 3),
                error=retrieval.error,
                form=question.form,
                hard_class=question.hard_class,
                judgments=question_labels,
            )
        )
    return outcomes


def _metric_map(names: list[str], row: list[Estimate]) -> dict[str, MetricValue]:
    return {
        name: MetricValue(
            estimate.mean,
            None
            if estimate.low is None or estimate.high is None
            else (estimate.low, estimate.high),
            estimate.n,
            estimate.method,
        )
        for name, estimate in zip(names, row, strict=True)
    }


def outcome_values(outcomes: Sequence[QuestionOutcome], metric: str) -> dict[str, float]:
    """question id -> value of ``metric`` (NaN when undefined), for paired comparisons."""
    return {
        outcome.question_id: (
            np.nan if outcome.scores.get(metric) is None else float(outcome.scores[metric])  # type: ignore[arg-type]
        )
        for outcome in outcomes
    }
