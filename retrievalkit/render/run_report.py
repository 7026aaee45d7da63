"""What ``retrievalkit report`` shows, computed from stored runs before any HTML is written.

A `RunReport` holds one run (and, with ``--compare``, the baseline it is set
against, with the paired `retrievalkit.pipeline.gating.comparison.Comparison` of the two), its
questions row by row, and the history of its (set, retriever) key. The HTML renderer
(`retrievalkit.render.html_report`) only lays this out; every number in the page
is computed here or by the modules this one calls, the same ones ``eval``, ``compare``
and ``history`` use, so the report can never disagree with them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from retrievalkit.metrics.definitions import TREND
from retrievalkit.metrics.judged_share import judged_shares, judged_warning
from retrievalkit.model.records import ResultRecord
from retrievalkit.model.values import MetricValue, QuestionOutcome
from retrievalkit.pipeline.gating.comparison import (
    DEFAULT_CHANGED_BY,
    Comparison,
    Side,
    compare_records,
    first_relevant_rank,
)
from retrievalkit.pipeline.gating.gate import Verdict
from retrievalkit.pipeline.gating.history import manifest_changes

#: Manifest changes marked on the trend line: the ones that change what is measured.
#: (The retrievalkit version and the git commit change on almost every run.)
MARKED_CHANGES = {"retriever_options_hash": "options", "set_hash": "set"}
#: At most this many runs of the key are drawn on the trend line (the newest ones).
HISTORY_LIMIT = 50


@attrs.frozen
class QuestionResult:
    """One run's answer to one question."""

    ranking: tuple[str, ...]
    scores: Mapping[str, float | None]
    first_relevant: int | None
    """1-based rank of the first document graded 1 or more; None when none came back."""
    latency_ms: float
    error: str | None


@attrs.frozen
class QuestionRow:
    """A row of the question table: the question, its labels and what the run(s) returned."""

    question_id: str
    text: str | None
    """The question's text when the set could be read; stored runs keep only ids."""
    form: str | None
    hard_class: str | None
    judgments: Mapping[str, int]
    result: QuestionResult
    baseline: QuestionResult | None
    """The compared run's answer; None without ``--compare`` or when it lacks the question."""

    @property
    def expected(self) -> list[str]:
        return [doc for doc, grade in self.judgments.items() if grade >= 1]


@attrs.frozen
class HistoryPoint:
    """One run of the key on the trend line, oldest first."""

    run_id: str
    created_at: str
    metrics: Mapping[str, MetricValue]
    marks: tuple[str, ...]
    """What changed since the run before it (``options``, ``set``); empty when nothing did."""


@attrs.frozen
class RunReport:
    """Everything the HTML report shows, computed once."""

    record: ResultRecord
    label: str
    """The name the run goes by in charts and tables."""
    store: str
    questions: tuple[QuestionRow, ...]
    history: tuple[HistoryPoint, ...]
    """Runs of the record's key, oldest first (at most `HISTORY_LIMIT`)."""
    baseline: ResultRecord | None = None
    baseline_label: str | None = None
    comparison: Comparison | None = None
    """baseline (first system) against this run (second), paired per question."""
    difference_metric: str = DEFAULT_CHANGED_BY
    texts_note: str | None = None
    """Where the question texts came from, or why there are none."""
    warnings: tuple[str, ...] = ()
    verdict: Verdict | None = None
    """The regression gate's verdict on this run against its baseline."""
    verdict_note: str | None = None
    """Why there is no verdict (no earlier run to compare with), when there is none."""

    @property
    def depth(self) -> int:
        """How many documents per question were scored (the largest k)."""
        return max(self.record.manifest.ks)

    def differences(self) -> list[tuple[str, float]]:
        """(question id, this run - baseline) of ``difference_metric``, where both are defined."""
        moves = []
        for row in self.questions:
            if row.baseline is None:
                continue
            after = row.result.scores.get(self.difference_metric)
            before = row.baseline.scores.get(self.difference_metric)
            if after is not None and before is not None:
                moves.append((row.question_id, after - before))
        return moves


def _result(outcome: QuestionOutcome) -> QuestionResult:
    return QuestionResult(
        ranking=outcome.ranking,
        scores=outcome.scores,
        first_relevant=first_relevant_rank(outcome),
        latency_ms=outcome.latency_ms,
        error=outcome.error,
    )


def _history(runs: Sequence[ResultRecord]) -> tuple[HistoryPoint, ...]:
    """Oldest first, from the store's newest-first list."""
    ordered = list(reversed(runs[:HISTORY_LIMIT]))
    points = []
    for index, record in enumerate(ordered):
        marks: tuple[str, ...] = ()
        if index > 0:
            changes = manifest_changes(ordered[index - 1], record)
            marks = tuple(
                MARKED_CHANGES[change.field] for change in changes if change.field in MARKED_CHANGES
            )
        points.append(
            HistoryPoint(
                run_id=record.run_id,
                created_at=record.manifest.created_at,
                metrics={name: record.metrics[name] for name in TREND if name in record.metrics},
                marks=marks,
            )
        )
    return tuple(points)


def build_run_report(
    record: ResultRecord,
    *,
    store: str,
    history: Sequence[ResultRecord],
    baseline: ResultRecord | None = None,
    allow_different_sets: bool = False,
    question_texts: Mapping[str, str] | None = None,
    texts_note: str | None = None,
    verdict: Verdict | None = None,
    verdict_note: str | None = None,
) -> RunReport:
    """The report of ``record``; with ``baseline``, also its paired comparison with it.

    ``history`` is the store's list of runs of the record's key, newest first. The
    comparison uses the record's own confidence level, resample count and seed, so its
    intervals are those ``retrievalkit compare --run BASELINE --run RUN`` prints.
    """
    texts = record.outcomes.known_texts()  # what the run stored; the set's texts over them
    texts.update(question_texts or {})
    label = record.model
    warnings: list[str] = []
    comparison = None
    baseline_label = None
    if baseline is not None:
        baseline_label = baseline.model
        if label == baseline_label:
            label = f"{record.model}@{record.run_id}"
        comparison = compare_records(
            [Side(baseline_label, baseline), Side(label, record)],
            allow_different_sets=allow_different_sets,
            resamples=record.manifest.resamples,
            confidence=record.manifest.confidence,
            seed=record.manifest.seed,
            question_texts=texts,
        )
        warnings.extend(comparison.warnings)
    else:
        pooling = judged_warning(label, judged_shares(record.metrics))
        if pooling is not None:
            warnings.append(pooling)
    before = {} if baseline is None else {o.question_id: o for o in baseline.outcomes}
    rows = []
    for outcome in record.outcomes:
        other = before.get(outcome.question_id)
        rows.append(
            QuestionRow(
                question_id=outcome.question_id,
                text=texts.get(outcome.question_id),
                form=None if outcome.form is None else outcome.form.value,
                hard_class=outcome.hard_class,
                judgments=outcome.judgments,
                result=_result(outcome),
                baseline=None if other is None else _result(other),
            )
        )
    return RunReport(
        record=record,
        label=label,
        store=store,
        questions=tuple(rows),
        history=_history(history),
        baseline=baseline,
        baseline_label=baseline_label,
        comparison=comparison,
        texts_note=texts_note,
        warnings=tuple(warnings),
        verdict=verdict,
        verdict_note=verdict_note,
    )
