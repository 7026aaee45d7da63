"""Turn a set's retrievals into the metric table, its intervals and its slices."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain, repeat
from itertools import count as numbering
from typing import TYPE_CHECKING

import attrs
import numpy as np
import numpy.typing as npt

from retrievalkit.metrics.definitions import (
    Metric,
    chunk_metrics,
    compute_metrics,
    judge_codes,
    metric_names,
)
from retrievalkit.model.retrievals import Retrievals
from retrievalkit.model.values import (
    GoldenQuestion,
    MetricValue,
    QuestionOutcome,
    Retrieval,
)
from retrievalkit.stats.intervals import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    Estimate,
    bootstrap_means,
    slice_masks,
)

if TYPE_CHECKING:
    from retrievalkit.model.outcomes import Outcomes

#: Slices every run reports, whatever ``--slice`` adds.
STANDARD_SLICES = ("form", "hard_class")

#: Answers scored at a time by `score_run`: a bound on the columns held at once.
SCORED_BATCH = 4096


def short_warning(short: int, fewest: int, depth: int, overfetch: int) -> str:
    """The text of `short_of_documents_warning`: ``short`` questions, as few as ``fewest``."""
    limit = depth * overfetch
    return (
        f"{short} question(s) got {limit} ids (max(k) {depth} × overfetch {overfetch}) but "
        f"fewer than {depth} distinct documents after duplicates collapsed (as few as "
        f"{fewest}); metrics at k = {depth} undercount them: raise --overfetch"
    )


@attrs.frozen
class ScoringOptions:
    ks: tuple[int, ...]
    resamples: int = DEFAULT_RESAMPLES
    confidence: float = DEFAULT_CONFIDENCE
    seed: int = DEFAULT_SEED
    slices: tuple[str, ...] = ()
    cluster_by: str | None = None
    """With a field (`retrievalkit.stats.clusters.CLUSTER_FIELDS` or ``meta.NAME``), every
    interval is a cluster bootstrap over the questions grouped by it."""
    metrics: tuple[str, ...] = ()
    """Metrics computed only on request (``ndcg_exp@10``, canonical names,
    `retrievalkit.metrics.definitions.requested_metrics`); their cut-offs are in ``ks``."""


@attrs.frozen
class Scores:
    metrics: dict[str, MetricValue]
    slices: dict[str, dict[str, dict[str, MetricValue]]]
    outcomes: Outcomes


def split_slice(name: str) -> tuple[str, str]:
    """``hard_class=near-duplicate`` -> (``hard_class``, ``near-duplicate``)."""
    field, equals, label = name.partition("=")
    if not equals or not field.strip() or not label.strip():
        raise ValueError(f"slice {name!r} is not FIELD=VALUE, e.g. hard_class=near-duplicate")
    return field.strip(), label.strip()


def slice_label(question: GoldenQuestion, field: str) -> str | None:
    """The value a question has for a slicing field: form, hard_class, or a meta key."""
    if field == "form":
        return question.form.value if question.form else None
    if field == "hard_class":
        return question.hard_class
    return question.meta.get(field)


class RunScorer:
    """Scores a run batch by batch, as the answers come, into preallocated columns.

    `add` takes the retrievals of the next questions of the set, in order; each batch
    is judged and scored at once (`retrievalkit.metrics.definitions.judge_codes` and
    `retrievalkit.metrics.definitions.compute_metrics`) and only its columns are kept: the metric
    values, the latency, the errors, and the rankings and labels as codes into one
    vocabulary of document ids. `finish` computes the intervals over the whole run and
    returns the `Scores`, whose outcomes are `Outcomes.from_arrays` of those columns.
    The values are those `score_run` gives for the same retrievals, to the last bit:
    every metric is computed question by question, whatever the batches.
    """

    def __init__(
        self,
        questions: Sequence[GoldenQuestion],
        options: ScoringOptions,
        *,
        chunks: bool | None = None,
    ) -> None:
        """``chunks``: whether to score the chunk metrics (default: when a question has
        ``expected_chunks``)."""
        self.questions = questions
        self.options = options
        self.depth = max(options.ks)
        self.with_judged = any(question.grades for question in questions)
        #: A set with judged non-relevant labels gets bpref, infap and condensed metrics.
        self.with_incomplete = any(0 in question.grades.values() for question in questions)
        self.with_chunks = (
            any(question.expected_chunks for question in questions) if chunks is None else chunks
        )
        self.names = metric_names(
            options.ks,
            judged=self.with_judged,
            chunks=self.with_chunks,
            extra=options.metrics,
            incomplete=self.with_incomplete,
        )
        count = len(questions)
        # One row a question, C order: the intervals sum each column in question order.
        self.values = np.empty((count, len(self.names)))
        self.latency = np.empty(count)
        self.returned = np.zeros(count, dtype=np.int64)
        self.errored = np.zeros(count, dtype=bool)
        self.ranking_lengths = np.zeros(count, dtype=np.int64)
        self.label_lengths = np.zeros(count, dtype=np.int64)
        self.errors: dict[int, str] = {}
        #: Model -> each question's (input, output) tokens, for the models some question used.
        self.tokens: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = {}
        # Document id -> code, in the order first seen; a missing id gets the next code.
        self.documents: dict[str, int] = defaultdict(numbering().__next__)
        self._ranking_codes: list[npt.NDArray[np.int64]] = []
        self._label_codes: list[npt.NDArray[np.int64]] = []
        self._label_grades: list[npt.NDArray[np.int64]] = []
        self.done = 0
        #: Per-question columns kept with the outcomes beside the metrics, without
        #: intervals of their own (a staged run's ``stage.NAME:METRIC`` values).
        self.extra_columns: dict[str, npt.NDArray[np.float64]] = {}

    def _codes(self, documents: Iterable[str], size: int) -> npt.NDArray[np.int64]:
        """The codes of ``size`` document ids, in one pass: an id met for the first time
        gets the next code (the vocabulary assigns it on the failed lookup)."""
        return np.fromiter(map(self.documents.__getitem__, documents), np.int64, size)

    def add(
        self,
        retrievals: Sequence[Retrieval],
        chunk_rankings: Sequence[Sequence[str]] | None = None,
    ) -> None:
        """Score the retrievals of the next ``len(retrievals)`` questions of the set.

        `pipeline.engine.evaluator.Retrievals` (what `ask_in_batches` yields) are read by
        column; any other sequence of `Retrieval` is put in columns first.
        ``chunk_rankings``: each question's raw ranking of chunk ids, for a set with
        ``expected_chunks`` (default: the rankings themselves, for a retriever that
        returns chunk ids without collapsing them).
        """
        low, high = self.done, self.done + len(retrievals)
        if high > len(self.questions):
            raise ValueError(f"{high} retrievals for {len(self.questions)} questions")
        answers = Retrievals.of(retrievals)
        labels = [question.judgments() for question in self.questions[low:high]]
        label_lengths = np.fromiter(map(len, labels), np.int64, len(labels))
        labelled = int(label_lengths.sum())
        label_codes = self._codes(chain.from_iterable(labels), labelled)
        label_grades = np.fromiter(
            chain.from_iterable(label.values() for label in labels), np.int64, labelled
        )
        rankings = answers.rankings
        ranking_lengths = np.fromiter(map(len, rankings), np.int64, len(rankings))
        ranking_codes = self._codes(chain.from_iterable(rankings), int(ranking_lengths.sum()))
        errored = np.zeros(len(rankings), dtype=bool)
        errors = answers.errors
        for offset in sorted(errors):
            errored[offset] = True
            self.errors[low + offset] = errors[offset]
        judged = judge_codes(
            _offsets(ranking_lengths),
            ranking_codes,
            _offsets(label_lengths),
            label_codes,
            label_grades,
            self.depth,
            errored,
        )
        table = compute_metrics(
            judged,
            self.options.ks,
            with_judged=self.with_judged,
            extra=self.options.metrics,
            incomplete=self.with_incomplete,
        )
        if self.with_chunks:
            table.update(
                chunk_metrics(
                    rankings if chunk_rankings is None else chunk_rankings,
                    [question.expected_chunks for question in self.questions[low:high]],
                    self.options.ks,
                    errored.tolist(),
                )
            )
        for column, name in enumerate(self.names):
            self.values[low:high, column] = table[name]
        # Python's round, as each outcome's latency always was (numpy's may differ by an ulp).
        self.latency[low:high] = list(map(round, answers.latency_ms, repeat(3)))
        self.returned[low:high] = answers.returned
        if answers.usage is not None:
            self._add_tokens(low, answers.usage)
        self.errored[low:high] = errored
        self.ranking_lengths[low:high] = ranking_lengths
        self.label_lengths[low:high] = label_lengths
        self._ranking_codes.append(ranking_codes)
        self._label_codes.append(label_codes)
        self._label_grades.append(label_grades)
        self.done = high

    def _add_tokens(self, low: int, usage: Sequence[Mapping[str, tuple[int, int]] | None]) -> None:
        count = len(self.questions)
        for offset, spent in enumerate(usage):
            for model, (inputs, outputs) in (spent or {}).items():
                columns = self.tokens.get(model)
                if columns is None:
                    columns = self.tokens[model] = (
                        np.zeros(count, dtype=np.int64),
                        np.zeros(count, dtype=np.int64),
                    )
                columns[0][low + offset] += inputs
                columns[1][low + offset] += outputs

    def short_of_documents(self, overfetch: int) -> str | None:
        """`pipeline.engine.diagnostics.short_of_documents_warning` of these retrievals."""
        limit = self.depth * overfetch
        short = (self.returned >= limit) & (self.ranking_lengths < self.depth) & ~self.errored
        if not short.any():
            return None
        return short_warning(
            int(short.sum()), int(self.ranking_lengths[short].min()), self.depth, overfetch
        )

    def finish(self) -> Scores:
        """The metric table, its intervals and slices, and the outcomes by column."""
        questions, options = self.questions, self.options
        if self.done != len(questions):
            raise ValueError(f"{self.done} of {len(questions)} questions were scored")
        group_names: list[tuple[str, str] | None] = [None]
        masks = [np.ones(len(questions), dtype=bool)]
        for field in dict.fromkeys((*STANDARD_SLICES, *options.slices)):
            labels = [slice_label(question, field) for question in questions]
            if field not in STANDARD_SLICES and all(label is None for label in labels):
                continue
            for label, mask in slice_masks(labels).items():
                group_names.append((field, label))
                masks.append(mask)
        if options.cluster_by is None:
            estimates: Sequence[Sequence[Estimate]] = bootstrap_means(
                self.values,
                np.array(masks),
                resamples=options.resamples,
                confidence=options.confidence,
                seed=options.seed,
            )
        else:
            from retrievalkit.stats.clusters import cluster_bootstrap_means, questions_clusters

            estimates = cluster_bootstrap_means(
                self.values,
                np.array(masks),
                questions_clusters(questions, options.cluster_by),
                resamples=options.resamples,
                confidence=options.confidence,
                seed=options.seed,
            )
        overall = _metric_map(self.names, estimates[0])
        slices: dict[str, dict[str, dict[str, MetricValue]]] = {
            field: {} for field in dict.fromkeys((*STANDARD_SLICES, *options.slices))
        }
        for group, row in zip(group_names[1:], estimates[1:], strict=True):
            assert group is not None
            field, label = group
            slices[field][label] = _metric_map(self.names, row)
        return Scores(overall, slices, self.outcomes())

    def outcomes(self) -> Outcomes:
        """The outcomes of the questions scored, by column."""
        from retrievalkit.model.outcomes import Outcomes

        def joined(parts: list[npt.NDArray[np.int64]]) -> npt.NDArray[np.int64]:
            return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

        questions = self.questions
        return Outcomes.from_arrays(
            [question.id for question in questions],
            {
                **{name: self.values[:, column] for column, name in enumerate(self.names)},
                **self.extra_columns,
            },
            latency_ms=self.latency,
            errors=self.errors,
            forms=[question.form for question in questions],
            hard_classes=[question.hard_class for question in questions],
            question_texts=[question.question for question in questions],
            documents=tuple(self.documents),
            rankings=(_offsets(self.ranking_lengths), joined(self._ranking_codes)),
            judgments=(
                _offsets(self.label_lengths),
                joined(self._label_codes),
                joined(self._label_grades),
            ),
            tokens=self.tokens,
        )


def _offsets(lengths: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def score_run(
    questions: Sequence[GoldenQuestion],
    retrievals: Sequence[Retrieval],
    options: ScoringOptions,
) -> Scores:
    """Per-question values, overall means and slice means, each with its interval."""
    if len(retrievals) != len(questions):
        raise ValueError(f"{len(retrievals)} retrievals for {len(questions)} questions")
    scorer = RunScorer(questions, options)
    for low in range(0, len(questions), SCORED_BATCH):
        scorer.add(retrievals[low : low + SCORED_BATCH])
    return scorer.finish()


def _metric_map(names: list[str], row: Sequence[Estimate]) -> dict[str, MetricValue]:
    return {
        name: MetricValue(
            estimate.mean,
            None
            if estimate.low is None or estimate.high is None
            else (estimate.low, estimate.high),
            estimate.n,
            estimate.method,
            # A cluster bootstrap's estimate carries its clusters and effective size.
            getattr(estimate, "clusters", None),
            getattr(estimate, "effective_n", None),
        )
        for name, estimate in zip(names, row, strict=True)
    }


def outcome_values(outcomes: Sequence[QuestionOutcome], metric: str) -> dict[str, float]:
    """question id -> value of ``metric`` (NaN when undefined), for paired comparisons."""
    columns = as_columns(outcomes)
    return dict(zip(columns.question_ids, metric_column(columns, metric).tolist(), strict=True))


def as_columns(outcomes: Sequence[QuestionOutcome]) -> Outcomes:
    """``outcomes`` by column: an `Outcomes` as it is, any other sequence converted."""
    from retrievalkit.model.outcomes import Outcomes

    return Outcomes.from_outcomes(outcomes)


def metric_column(outcomes: Outcomes, metric: str) -> npt.NDArray[np.float64]:
    """``metric``'s value for each question (NaN where undefined, or for every question
    when the run has no such metric, as a deeper k than it computed)."""
    if metric not in outcomes.metric_names:
        return np.full(len(outcomes), np.nan)
    return outcomes.values(metric)


@attrs.frozen
class Pairing:
    """Two runs' questions matched by id: the candidate's questions the baseline also has,
    in the candidate's order, as positions in each run's columns.

    A question id held twice by one run is matched to its last occurrence there, as a
    lookup by id always matched it.
    """

    question_ids: tuple[str, ...]
    baseline: npt.NDArray[np.intp]
    candidate: npt.NDArray[np.intp]

    def values(
        self, baseline: Outcomes, candidate: Outcomes, metric: str
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """The two runs' values of ``metric`` over the paired questions (NaN: undefined)."""
        return (
            metric_column(baseline, metric)[self.baseline],
            metric_column(candidate, metric)[self.candidate],
        )


def pair_questions(baseline: Outcomes, candidate: Outcomes) -> Pairing:
    """Match the candidate's questions with the baseline's by id (see `Pairing`)."""
    before, after = baseline.question_ids, candidate.question_ids
    if before == after:
        shared = after
    else:
        known = set(before)
        shared = tuple(question_id for question_id in after if question_id in known)
    return Pairing(shared, positions_of(baseline, shared), positions_of(candidate, shared))


def positions_of(outcomes: Outcomes, question_ids: Sequence[str]) -> npt.NDArray[np.intp]:
    """Where each of ``question_ids`` is in ``outcomes`` (its last occurrence, for an id
    held twice); every id must be there."""
    held = outcomes.question_ids
    if tuple(question_ids) == held and len(set(held)) == len(held):
        return np.arange(len(held), dtype=np.intp)
    where = {question_id: index for index, question_id in enumerate(held)}
    return np.fromiter(map(where.__getitem__, question_ids), np.intp, len(question_ids))


def condensed_column(outcomes: Outcomes, metric: str) -> npt.NDArray[np.float64]:
    """``metric``'s condensed variant (``ndcg@10:condensed``) for each question: the stored
    column when the run has it, else computed from the run's stored rankings and labels
    at the run's scored depth (its deepest k); NaN for every question of a metric with
    no condensed variant."""
    from retrievalkit.metrics.definitions import CONDENSED, parse_metric

    try:
        parsed = parse_metric(metric)
    except ValueError:
        return np.full(len(outcomes), np.nan)
    if not parsed.family.condensable or parsed.condensed:
        return np.full(len(outcomes), np.nan)
    name = parsed.name + CONDENSED
    if name in outcomes.metric_names:
        return outcomes.values(name)
    ks = [
        found.k
        for found in map(_parsed_or_none, outcomes.metric_names)
        if found is not None and found.k is not None and not found.family.chunk
    ]
    depth = max([*ks, parsed.k or 0])
    if not depth:
        return np.full(len(outcomes), np.nan)
    ranked, labels = outcomes.rankings, outcomes.judgments
    errored = np.zeros(len(outcomes), dtype=bool)
    errored[list(outcomes.errors)] = True
    judged = judge_codes(
        np.asarray(ranked.offsets, dtype=np.int64),
        np.asarray(ranked.codes, dtype=np.int64),
        np.asarray(labels.offsets, dtype=np.int64),
        np.asarray(labels.codes, dtype=np.int64),
        np.asarray(labels.grades, dtype=np.int64),
        depth,
        errored,
    )
    return compute_metrics(judged, (parsed.k or depth,), extra=(name,))[name]


def _parsed_or_none(name: str) -> Metric | None:
    from retrievalkit.metrics.definitions import parse_metric

    try:
        return parse_metric(name)
    except ValueError:
        return None
