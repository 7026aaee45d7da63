"""Compare two or more runs question by question: differences, intervals, p-values, Holm.

The first system is the baseline; every other system is compared with it, paired on
the questions all systems share. Latency is compared too: the ratio candidate / baseline
of p50, p95 and p99 over the questions both answered, with a paired bootstrap interval
(`retrievalkit.pipeline.gating.latency`). For each metric: both means, the difference, and the
paired test of `retrievalkit.stats.paired` (the paired interval, the sign-flip p-value,
the discordant questions and the smallest attainable p), plus how many questions each
side won, tied and lost, and its verdict: significant, not significant, or unresolvable.
With more than one candidate, each metric's p-values (and their floors) are
Holm-corrected over the candidates (the family is "every candidate against the
baseline on this metric"); metrics are not corrected against each other, because they
are views of the same rankings rather than separate experiments: choose the metric you
decide on before looking.

``correction`` ``tukey`` adjusts instead with the randomised Tukey HSD of
`retrievalkit.stats.tukey` (Carterette 2012): each metric's pairs over the systems at once,
from one set of seeded permutations of the systems' scores within each question. With
``all-pairs`` and ``control`` those p-values are then multiplied by the number of metrics
tested (Bonferroni over the metrics), so the guarantee is the same as Holm's over pairs
and metrics; with the baseline pairing, metrics are not corrected against each other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import numpy.typing as npt

from retrievalkit.errors import InputError
from retrievalkit.metrics.definitions import metric_order
from retrievalkit.metrics.judged_share import judged_warning
from retrievalkit.metrics.scoring import Pairing, as_columns, metric_column, positions_of
from retrievalkit.model.comparisons import ComparedRuns as ComparedRuns
from retrievalkit.model.comparisons import CostChange
from retrievalkit.model.comparisons import MetricDelta as MetricDelta
from retrievalkit.model.comparisons import PairComparison as PairComparison
from retrievalkit.model.comparisons import QuestionChange as QuestionChange
from retrievalkit.model.comparisons import System as System
from retrievalkit.model.records import ResultRecord
from retrievalkit.model.values import GoldenQuestion, QuestionOutcome
from retrievalkit.pipeline.engine.arguments import check_correction
from retrievalkit.pipeline.gating.cost import pair_cost_change
from retrievalkit.pipeline.gating.differences import paired_fields
from retrievalkit.pipeline.gating.latency import answered_latencies, latency_changes
from retrievalkit.pipeline.gating.unjudged import disagreement_warning, judged_context
from retrievalkit.stats.clusters import paired_test_by
from retrievalkit.stats.effect_size import paired_effect_size
from retrievalkit.stats.paired import DEFAULT_PERMUTATIONS, TIE, verdict
from retrievalkit.stats.paired import holm as holm

if TYPE_CHECKING:
    from retrievalkit.model.outcomes import Outcomes

#: The metric that orders "the questions that changed most" unless told otherwise.
DEFAULT_CHANGED_BY = "rr"
_TIE = TIE


@attrs.frozen
class Comparison(ComparedRuns):
    """Everything ``retrievalkit compare`` shows, computed once, with its displays:
    Markdown, rich tables and plain text."""

    def to_markdown(self) -> str:
        """The comparison as Markdown, as ``compare --format markdown`` prints it."""
        from retrievalkit.render.comparison import render_comparison_markdown

        return render_comparison_markdown(self)

    def _repr_markdown_(self) -> str:
        """Jupyter shows the Markdown tables."""
        return self.to_markdown()

    def __rich__(self) -> Any:
        """``rich.print(comparison)`` shows the tables the terminal shows."""
        from retrievalkit.render.comparison import comparison_renderable

        return comparison_renderable(self)

    def __str__(self) -> str:
        """The terminal tables as plain text (100 columns), e.g. for ``print``."""
        import io

        from rich.console import Console

        text = io.StringIO()
        Console(width=100, no_color=True, file=text).print(self.__rich__())
        return text.getvalue().rstrip() + "\n"


@attrs.frozen
class Side:
    """A run to compare, with the label it is shown under and where it was saved."""

    label: str
    record: ResultRecord
    saved_to: str | None = None


def _cost(change: CostChange | str) -> CostChange | None:
    """A pair's cost change; None when the runs have no cost to compare (the reason is
    the gate's to give, where a cost threshold is checked)."""
    return None if isinstance(change, str) else change


def compare_records(
    sides: Sequence[Side],
    *,
    allow_different_sets: bool = False,
    resamples: int,
    confidence: float,
    seed: int,
    changed_by: str = DEFAULT_CHANGED_BY,
    changed_limit: int = 10,
    question_texts: Mapping[str, str] | None = None,
    cluster_by: str | None = None,
    questions: Sequence[GoldenQuestion] = (),
    pairing: str = "baseline",
    control: str | None = None,
    correction: str | None = None,
) -> Comparison:
    """Compare every side after the first with the first, paired question by question.

    ``pairing`` ``all-pairs`` compares every pair of sides, ``control`` every side with
    the one labelled ``control``; both need the same questions in every run and Holm-adjust
    the p-values over the whole family of pairs and metrics (``p_adjusted``).

    With ``cluster_by`` the paired tests treat clusters of questions as the unit; the
    labels come from ``questions`` (the set), else from the records
    (`retrievalkit.pipeline.engine.clustering.paired_clusters`).

    ``correction`` is ``holm`` (the default, where there is more than one pair) or
    ``tukey`` (`tukey_adjusted`, from permutations seeded by ``seed``).
    """
    if len(sides) < 2:
        raise InputError(
            "compare needs at least two systems",
            field="--retriever/--run",
            hint="give two or more --retriever NAME (with --set) or --run RUN_ID",
        )
    if pairing not in PAIRINGS:
        raise InputError(
            f"unknown pairing {pairing!r}", field="pairing", hint=f"one of {', '.join(PAIRINGS)}"
        )
    check_correction(correction, cluster_by=cluster_by)
    order = _pair_order(sides, pairing, control)
    same_set = len({side.record.manifest.set_hash for side in sides}) == 1
    columns = [as_columns(side.record.outcomes) for side in sides]
    id_lists = [column.question_ids for column in columns]
    shared, warnings = _shared_questions(
        sides, id_lists, same_set=same_set, allow_different_sets=allow_different_sets
    )
    if pairing != "baseline":
        _check_same_questions(sides, id_lists)
    metrics = _shared_metrics(sides, changed_by)
    systems = tuple(_system(side, shared) for side in sides)
    positions = [positions_of(column, shared) for column in columns]
    for system in systems:
        pooling = judged_warning(system.label, system.judged)
        if pooling is not None:
            warnings.append(pooling)
    codes = None
    if cluster_by is not None:
        codes, partial = _cluster_codes(cluster_by, shared, columns, positions, sides, questions)
        if partial is not None:
            warnings.append(partial)
    aligned = _Aligned(sides, columns, positions, shared, codes, resamples, confidence, seed)
    raw_pairs = [
        ((left, right), [aligned.metric_delta(left, right, metric) for metric in metrics])
        for left, right in order
    ]
    family = pairing != "baseline"
    if correction is None:
        correction = "holm" if family or len(raw_pairs) > 1 else None
    if correction == "tukey":
        adjusted, floors = tukey_adjusted(
            aligned.score_matrices(metrics), raw_pairs, seed=seed, across_metrics=family
        )
    else:
        adjusted, floors = holm_adjusted(
            raw_pairs, metrics, family=family, correct=bool(correction)
        )
    # What the runs stored, then what the caller gives (the set as it is now) over it.
    texts = {
        question_id: text
        for side in sides
        for question_id, text in side.record.outcomes.known_texts().items()
    }
    texts.update(question_texts or {})
    pairs = []
    for pair_index, ((left, right), deltas) in enumerate(raw_pairs):
        decided = [
            _decided(
                aligned,
                (left, right),
                delta,
                adjusted.get((pair_index, delta.metric)),
                floors.get((pair_index, delta.metric)),
                correction,
            )
            for delta in deltas
        ]
        warnings += [line for _, line in decided if line is not None]
        finished = tuple(delta for delta, _ in decided)
        pairs.append(
            aligned.pair_comparison(left, right, finished, changed_by, changed_limit, texts)
        )
    return Comparison(
        set_name=sides[0].record.set,
        systems=systems,
        pairs=tuple(pairs),
        shared_questions=len(shared),
        same_set=same_set,
        confidence=confidence,
        resamples=resamples,
        correction=correction,
        warnings=tuple(warnings),
        cluster_by=cluster_by,
        pairing=pairing,
        family=_family(correction, family),
    )


def _shared_questions(
    sides: Sequence[Side],
    id_lists: Sequence[Sequence[str]],
    *,
    same_set: bool,
    allow_different_sets: bool,
) -> tuple[list[str], list[str]]:
    """The question ids every side holds, in the first side's order, and the warning that
    runs of different versions of the set were compared on them (refused without
    ``allow_different_sets``); refused too when they share none."""
    common = set(id_lists[0]).intersection(*id_lists[1:])
    shared = [question_id for question_id in id_lists[0] if question_id in common]
    warnings: list[str] = []
    if not same_set:
        sizes = ", ".join(
            f"{side.label} {len(ids)}" for side, ids in zip(sides, id_lists, strict=True)
        )
        if not allow_different_sets:
            versions = ", ".join(
                f"{side.label}: {side.record.manifest.set_hash[:12]}" for side in sides
            )
            raise InputError(
                f"the runs were made on different versions of the set (content hashes "
                f"{versions}); they share {len(shared)} question ids ({sizes} questions)",
                field="--allow-different-sets",
                hint="pass --allow-different-sets to compare the shared questions only, or "
                "compare runs of the same set",
            )
        warnings.append(
            f"the systems ran on different versions of the set: compared on the "
            f"{len(shared)} question ids they share ({sizes} questions)"
        )
    if not shared:
        raise InputError(
            "the runs share no question id, so there is nothing to compare",
            field="--run",
            hint="compare runs of the same set",
        )
    return shared, warnings


def _shared_metrics(sides: Sequence[Side], changed_by: str) -> list[str]:
    """The metrics every run computed, in report order; ``changed_by`` must be one."""
    metrics = sorted(
        (
            name
            for name in sides[0].record.metrics
            if all(name in side.record.metrics for side in sides[1:])
        ),
        key=metric_order,
    )
    if changed_by not in metrics:
        raise InputError(
            f"metric {changed_by!r} is not in every run (shared: {', '.join(metrics)})",
            field="--changed-by",
            hint="use one of the shared metrics, e.g. rr or hit@3",
        )
    return metrics


def _cluster_codes(
    cluster_by: str,
    shared: Sequence[str],
    columns: Sequence[Outcomes],
    positions: Sequence[npt.NDArray[np.intp]],
    sides: Sequence[Side],
    questions: Sequence[GoldenQuestion],
) -> tuple[npt.NDArray[np.intp], str | None]:
    """Each shared question's ``cluster_by`` cluster, and the warning when some have no
    label for it; refused when none has (but ``expected``, which every question has)."""
    from retrievalkit.pipeline.engine.clustering import (
        labelled_clusters,
        missing_field_warning,
        no_clusters_error,
    )

    codes, without = labelled_clusters(
        cluster_by,
        shared,
        columns[0],
        positions[0],
        [side.record for side in sides],
        {question.id: question for question in questions},
    )
    if without == len(shared) and cluster_by != "expected":
        raise no_clusters_error(cluster_by)
    return codes, missing_field_warning(cluster_by, without, len(shared))


@attrs.frozen(eq=False)
class _Aligned:
    """The sides' columns with the positions of the shared questions in each, and the
    settings of every paired statistic computed over them."""

    sides: Sequence[Side]
    columns: Sequence[Outcomes]
    positions: Sequence[npt.NDArray[np.intp]]
    shared: Sequence[str]
    codes: npt.NDArray[np.intp] | None
    resamples: int
    confidence: float
    seed: int

    def side(self, index: int) -> tuple[Outcomes, npt.NDArray[np.intp]]:
        """Side ``index``'s columns and where the shared questions are in them."""
        return self.columns[index], self.positions[index]

    def values(self, index: int, metric: str) -> npt.NDArray[np.float64]:
        """Side ``index``'s ``metric`` on the shared questions, in their order."""
        return metric_column(self.columns[index], metric)[self.positions[index]]

    def metric_delta(self, left: int, right: int, metric: str) -> MetricDelta:
        """``metric`` of side ``right`` against side ``left``, unadjusted."""
        return metric_delta(
            self.values(left, metric),
            self.values(right, metric),
            metric,
            self.resamples,
            self.confidence,
            self.seed,
            self.codes,
        )

    def score_matrices(self, metrics: Sequence[str]) -> dict[str, npt.NDArray[np.float64]]:
        """Each metric's scores, shared questions x sides (`tukey_adjusted`)."""
        return {
            metric: np.column_stack(
                [self.values(index, metric) for index in range(len(self.sides))]
            )
            for metric in metrics
        }

    def pair_comparison(
        self,
        left: int,
        right: int,
        finished: tuple[MetricDelta, ...],
        changed_by: str,
        changed_limit: int,
        texts: Mapping[str, str],
    ) -> PairComparison:
        """Side ``right`` against side ``left``: its decided metric deltas, the questions
        that changed most by ``changed_by``, and the latency and cost changes."""
        paired = Pairing(tuple(self.shared), self.positions[left], self.positions[right])
        before, after = self.sides[left], self.sides[right]
        return PairComparison(
            baseline=before.label,
            candidate=after.label,
            metrics=finished,
            changed_by=changed_by,
            changed=_changed(
                self.side(left), self.side(right), self.shared, changed_by, changed_limit, texts
            ),
            latency=latency_changes(
                *answered_latencies(self.columns[left], self.columns[right], paired),
                resamples=self.resamples,
                confidence=self.confidence,
                seed=self.seed,
            ),
            cost=_cost(
                pair_cost_change(
                    self.columns[left],
                    before.record.manifest.costs,
                    self.columns[right],
                    after.record.manifest.costs,
                    paired,
                    resamples=self.resamples,
                    confidence=self.confidence,
                    seed=self.seed,
                )
            ),
        )


def _decided(
    aligned: _Aligned,
    pair: tuple[int, int],
    delta: MetricDelta,
    p_adjusted: float | None,
    adjusted_floor: float | None,
    correction: str | None,
) -> tuple[MetricDelta, str | None]:
    """``delta`` with its verdict, from the adjusted p-value under a ``correction``, else
    its own, and its unjudged-aware context; with the warning when the unjudged documents
    could reverse it."""
    left, right = pair
    decisive = p_adjusted if correction else delta.p_value
    floor = adjusted_floor if correction else delta.p_floor
    said = verdict(decisive, floor, 1.0 - aligned.confidence)
    significant = None if said is None else said == "significant"
    context = judged_context(
        aligned.side(left),
        aligned.side(right),
        delta.metric,
        difference=delta.difference,
        significant=significant,
        resamples=aligned.resamples,
        confidence=aligned.confidence,
        seed=aligned.seed,
        clusters=aligned.codes,
    )
    line = None
    if context is not None:
        named = aligned.sides[right].label
        if left != 0:
            named = f"{named} against {aligned.sides[left].label}"
        line = disagreement_warning(named, delta.metric, context)
    decided = attrs.evolve(
        delta,
        p_holm=p_adjusted if correction == "holm" else None,
        p_adjusted=p_adjusted,
        p_floor=floor,
        verdict=said,
        significant=significant,
        judged=context,
    )
    return decided, line


def _family(correction: str | None, family: bool) -> str | None:
    """What ``correction`` adjusts over (`ComparedRuns.family`)."""
    if correction is None:
        return None
    if family:
        return "pairs and metrics"
    return "systems" if correction == "tukey" else "candidates"


Adjusted = dict[tuple[int, str], float | None]
"""Adjusted p-values (or floors) keyed (pair index, metric)."""


def holm_adjusted(
    raw_pairs: Sequence[tuple[tuple[int, int], Sequence[MetricDelta]]],
    metrics: Sequence[str],
    *,
    family: bool,
    correct: bool,
) -> tuple[Adjusted, Adjusted]:
    """Holm's p-values and floors: over every pair and metric at once with ``family``,
    else (when ``correct``) each metric over the pairs; empty when nothing is corrected."""
    adjusted: Adjusted = {}
    floors: Adjusted = {}
    if family:
        keys = [
            (index, delta.metric) for index, (_, deltas) in enumerate(raw_pairs) for delta in deltas
        ]
        raw = [delta.p_value for _, deltas in raw_pairs for delta in deltas]
        lowest = [delta.p_floor for _, deltas in raw_pairs for delta in deltas]
        adjusted = dict(zip(keys, holm(raw), strict=True))
        floors = dict(zip(keys, holm(lowest), strict=True))
    elif correct:
        for metric_index, metric in enumerate(metrics):
            group = [deltas[metric_index].p_value for _, deltas in raw_pairs]
            for pair_index, value in enumerate(holm(group)):
                adjusted[(pair_index, metric)] = value
            lowest = [deltas[metric_index].p_floor for _, deltas in raw_pairs]
            for pair_index, value in enumerate(holm(lowest)):
                floors[(pair_index, metric)] = value
    return adjusted, floors


def tukey_adjusted(
    matrices: Mapping[str, npt.NDArray[np.float64]],
    raw_pairs: Sequence[tuple[tuple[int, int], Sequence[MetricDelta]]],
    *,
    seed: int,
    across_metrics: bool,
) -> tuple[Adjusted, Adjusted]:
    """Each pair's randomised Tukey HSD p-value and floor, keyed (pair index, metric).

    ``matrices`` holds each metric's scores, questions x systems. A difference without a
    test (no question where both sides are defined) stays without one. With
    ``across_metrics`` each value is multiplied by the number of metrics tested
    (Bonferroni): Tukey controls the error over the pairs of one metric, the product over
    every pair and metric.
    """
    from retrievalkit.stats.tukey import TukeyTest, tukey_hsd

    # Metrics that score every question alike (hit@1, recall@1 and precision@1 with one
    # relevant document) share one test: same scores and seed, same p-values.
    by_scores: dict[bytes, TukeyTest] = {}
    tests = {}
    for metric, matrix in matrices.items():
        key = np.ascontiguousarray(matrix).tobytes()
        if key not in by_scores:
            by_scores[key] = tukey_hsd(matrix, permutations=DEFAULT_PERMUTATIONS, seed=seed)
        tests[metric] = by_scores[key]
    tested = {
        delta.metric
        for _, deltas in raw_pairs
        for delta in deltas
        if delta.p_value is not None and tests[delta.metric].questions
    }
    factor = len(tested) if across_metrics else 1
    adjusted: Adjusted = {}
    floors: Adjusted = {}
    for index, ((left, right), deltas) in enumerate(raw_pairs):
        for delta in deltas:
            if delta.metric not in tested or delta.p_value is None:
                adjusted[(index, delta.metric)] = floors[(index, delta.metric)] = None
                continue
            test = tests[delta.metric]
            adjusted[(index, delta.metric)] = min(1.0, factor * float(test.p_values[left, right]))
            floors[(index, delta.metric)] = min(1.0, factor * test.floor)
    return adjusted, floors


#: How the sides are paired: each with the first, every pair, each with a control.
PAIRINGS = ("baseline", "all-pairs", "control")


def _pair_order(sides: Sequence[Side], pairing: str, control: str | None) -> list[tuple[int, int]]:
    """The (baseline, candidate) indices of the sides compared, in display order."""
    count = len(sides)
    if pairing == "all-pairs":
        return [(left, right) for left in range(count) for right in range(left + 1, count)]
    if pairing == "control":
        labels = [side.label for side in sides]
        matches = [
            index
            for index, side in enumerate(sides)
            if control in (side.label, side.record.run_id, side.record.model)
        ]
        if control is None or not matches:
            raise InputError(
                f"no system {control!r} to compare the others with (systems: {', '.join(labels)})",
                field="--control",
                hint="name one of the compared runs by its label, run id or retriever",
            )
        if len(matches) > 1:
            raise InputError(
                f"{control!r} names {len(matches)} of the systems "
                f"({', '.join(labels[index] for index in matches)})",
                field="--control",
                hint="name the control by its run id",
            )
        chosen = matches[0]
        return [(chosen, index) for index in range(count) if index != chosen]
    return [(0, index) for index in range(1, count)]


def _check_same_questions(sides: Sequence[Side], id_lists: Sequence[Sequence[str]]) -> None:
    """Many systems are compared as one family only on the very same questions."""
    first = set(id_lists[0])
    for side, ids in zip(sides[1:], id_lists[1:], strict=True):
        mine = set(ids)
        if mine != first:
            missing, extra = len(first - mine), len(mine - first)
            raise InputError(
                f"run {side.record.run_id} ({side.label}) was not scored on the same "
                f"questions as run {sides[0].record.run_id} ({sides[0].label}): "
                f"{missing} of its questions missing, {extra} others",
                field="--run",
                hint="--all-pairs and --control compare runs scored on the same questions; "
                "rerun the system on the set",
            )


def _system(side: Side, shared: Sequence[str]) -> System:
    record = side.record
    columns = as_columns(record.outcomes)
    # (a set, not np.isin: on object arrays that compares every id with every other)
    wanted = set(shared)
    compared = np.fromiter(
        (question in wanted for question in columns.question_ids),
        dtype=bool,
        count=len(columns.question_ids),
    )
    judged: dict[str, float | None] = {}
    for name in sorted(record.metrics, key=metric_order):
        if not name.startswith("judged@"):
            continue
        values = metric_column(columns, name)[compared]
        defined = values[~np.isnan(values)]
        judged[name] = float(np.mean(defined)) if defined.size else None
    errors = columns.errors
    return System(
        label=side.label,
        run_id=record.run_id,
        retriever=record.model,
        set_name=record.set,
        set_hash=record.manifest.set_hash,
        questions=len(columns),
        errored=sum(1 for index in errors if compared[index]),
        judged=judged,
        saved_to=side.saved_to,
    )


def metric_delta(
    left: npt.NDArray[np.float64],
    right: npt.NDArray[np.float64],
    metric: str,
    resamples: int,
    confidence: float,
    seed: int,
    clusters: npt.NDArray[np.intp] | None = None,
) -> MetricDelta:
    """``metric`` compared over the shared questions: ``left`` the baseline's values,
    ``right`` the candidate's (NaN: undefined); ``clusters``: each question's cluster."""
    paired = paired_test_by(
        left, right, resamples=resamples, confidence=confidence, seed=seed, clusters=clusters
    )
    both = ~np.isnan(left) & ~np.isnan(right)
    moves = right[both] - left[both]
    effect = paired_effect_size(moves, confidence)
    return MetricDelta(
        **paired_fields(metric, paired),
        effect_size=None
        if effect is None
        else {
            "value": effect.value,
            "ci": None if effect.ci is None else list(effect.ci),
            "kind": effect.kind,
        },
        wins=int((moves > _TIE).sum()),
        ties=int((np.abs(moves) <= _TIE).sum()),
        losses=int((moves < -_TIE).sum()),
    )


def first_relevant_rank(outcome: QuestionOutcome) -> int | None:
    """1-based rank of the first document graded 1 or more, None when there is none."""
    for rank, doc_id in enumerate(outcome.ranking, start=1):
        if outcome.judgments.get(doc_id, 0) >= 1:
            return rank
    return None


def _changed(
    baseline: tuple[Outcomes, npt.NDArray[np.intp]],
    candidate: tuple[Outcomes, npt.NDArray[np.intp]],
    shared: Sequence[str],
    metric: str,
    limit: int,
    texts: Mapping[str, str],
) -> tuple[QuestionChange, ...]:
    """The ``limit`` shared questions whose ``metric`` moved most (ties: by id), each
    side given as its columns and the positions of the shared questions in them."""
    (before, before_at), (after, after_at) = baseline, candidate
    old_values = metric_column(before, metric)[before_at]
    new_values = metric_column(after, metric)[after_at]
    differences = new_values - old_values
    moved = np.flatnonzero(~np.isnan(differences) & (np.abs(differences) > _TIE))
    if limit == 0 or not moved.size:
        return ()
    sizes = np.abs(differences[moved])
    if 0 < limit < moved.size:
        # Only moves at least as large as the limit-th largest can be among the first.
        floor = np.partition(sizes, moved.size - limit)[moved.size - limit]
        moved = moved[sizes >= floor]
    order = sorted(
        moved.tolist(), key=lambda index: (-abs(float(differences[index])), shared[index])
    )
    changes = []
    # Read from the columns' codes: building an outcome would decode every document id.
    before_errors, after_errors = before.errors, after.errors
    for index in order[:limit]:
        old, new = int(before_at[index]), int(after_at[index])
        old_value, new_value = float(old_values[index]), float(new_values[index])
        changes.append(
            QuestionChange(
                question_id=shared[index],
                question=texts.get(shared[index]),
                baseline=old_value,
                candidate=new_value,
                difference=new_value - old_value,
                baseline_rank=before.first_relevant_rank(old),
                candidate_rank=after.first_relevant_rank(new),
                baseline_error=before_errors.get(old),
                candidate_error=after_errors.get(new),
            )
        )
    return tuple(changes)
