"""Compare a candidate run with a baseline of the same key, question by question.

Each thresholded metric (an absolute drop, e.g. ``hit@1`` may fall by at most 0.05)
is compared on the questions both runs share, with the paired test of
`retrievalkit.stats.paired` (paired interval, sign-flip p-value, discordant questions,
smallest attainable p). A drop past its threshold is a regression; with
``require_significant`` it is one only when the drop is also significant (the p-value
below 1 - confidence, the one meaning of the word in retrievalkit). A drop whose
comparison is ``unresolvable`` (too few discordant questions for any p below alpha)
cannot be significant, and the verdict says so rather than "not significant". Slice
thresholds (``hard_class=near-duplicate``: ``hit@3`` may fall by 0.1) gate one form,
hard class or meta value on its own, because a regression inside one class can cancel
out against a gain in another and leave the overall mean unchanged. The verdict lists
each metric and slice that failed, with both values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import numpy.typing as npt

from retrievalkit.errors import InputError
from retrievalkit.model.comparisons import MetricDifference
from retrievalkit.model.records import ResultRecord
from retrievalkit.model.values import GoldenQuestion, Machine, QuestionOutcome
from retrievalkit.pipeline.gating.cost import CostCheck, cost_checks, pair_cost_change
from retrievalkit.pipeline.gating.differences import paired_fields
from retrievalkit.pipeline.gating.latency import (
    LatencyCheck,
    answered_latencies,
    latency_changes,
    latency_checks,
    machine_warning,
)
from retrievalkit.pipeline.gating.unjudged import judged_context

if TYPE_CHECKING:
    from retrievalkit.model.outcomes import Outcomes
from retrievalkit.metrics.scoring import (
    Pairing,
    as_columns,
    pair_questions,
    slice_label,
)
from retrievalkit.metrics.scoring import (
    split_slice as split_slice,
)
from retrievalkit.stats.clusters import paired_test_by
from retrievalkit.stats.paired import SIGNIFICANT, verdict
from retrievalkit.stats.power import (
    power_row,
    spread_of_clusters,
    spread_of_pair,
    undetectable_warning,
)
from retrievalkit.stats.sequential import FAIL, PASS, SequentialResult

#: Without any threshold configured, any drop of the two record rates is a regression.
DEFAULT_THRESHOLDS: dict[str, float] = {"hit@1": 0.0, "hit@3": 0.0}
_TOLERANCE = 1e-9


@attrs.frozen
class MetricComparison(MetricDifference):
    """A gated metric's difference, its threshold and whether it regressed."""

    threshold: float = attrs.field(kw_only=True)
    regressed: bool = attrs.field(kw_only=True)
    slice: str | None = attrs.field(default=None, kw_only=True)
    """``FIELD=LABEL`` (e.g. ``hard_class=near-duplicate``) for a slice threshold."""


@attrs.frozen
class Verdict:
    """The gate's decision on a candidate run against its baseline."""

    baseline_run_id: str | None
    """None when there was no baseline to compare with (see ``note``)."""
    regressed: bool
    failures: tuple[MetricComparison, ...]
    checked: tuple[MetricComparison, ...]
    shared_questions: int
    same_set: bool
    baseline_kind: str = "newest earlier run"
    """How the baseline was chosen: ``pinned``, ``--baseline`` or ``newest earlier run``."""
    require_significant: bool = False
    unchecked: tuple[str, ...] = ()
    """Thresholds that could not be checked, each with the reason, so none is dropped silently."""
    note: str | None = None
    """Why nothing was compared, when there was no baseline."""
    warnings: tuple[str, ...] = ()
    """Thresholds below the smallest drop the set can detect at 80% power (see
    `retrievalkit.stats.power`): a drop between the two passes or fails by chance; and,
    when a latency threshold is checked, runs timed on different machines or under
    different load (`retrievalkit.pipeline.gating.latency.machine_warning`). Never a
    failure."""
    sequential: SequentialResult | None = None
    """With ``eval --sequential``: the decision of the confidence sequences, which is the
    verdict (``undecided`` fails the gate)."""
    retriever_changes: tuple[str, ...] = ()
    """What changed in the retriever since the baseline (its plugin, its options, what a
    composed retriever says of its parts), e.g. ``options candidates: 50 -> 10``: the
    difference may be the change, not a regression of the same retriever."""
    cluster_by: str | None = None
    """The field whose clusters the paired tests treated as the unit; None: questions."""
    latency: tuple[LatencyCheck, ...] = ()
    """The latency checks (``latency.p95``: the paired ratio candidate / baseline against
    its largest allowed relative increase); empty when no latency threshold is set."""
    cost: tuple[CostCheck, ...] = ()
    """The cost checks (``cost.per_question``: the paired ratio of the mean cost per
    question against its largest allowed relative increase); empty when no cost threshold
    is set, or when it was skipped (a run without a cost: then a warning says so)."""

    @property
    def latency_failures(self) -> tuple[LatencyCheck, ...]:
        """The latency checks that regressed."""
        return tuple(item for item in self.latency if item.regressed)

    @property
    def cost_failures(self) -> tuple[CostCheck, ...]:
        """The cost checks that regressed."""
        return tuple(item for item in self.cost if item.regressed)

    @property
    def ratio_checks(self) -> tuple[LatencyCheck | CostCheck, ...]:
        """The latency checks, then the cost checks: each a paired ratio against its
        largest allowed relative increase."""
        return (*self.latency, *self.cost)

    @property
    def ratio_failures(self) -> tuple[LatencyCheck | CostCheck, ...]:
        """The latency and cost checks that regressed."""
        return tuple(item for item in self.ratio_checks if item.regressed)


def settle_sequentially(verdict: Verdict, result: SequentialResult) -> Verdict:
    """The verdict of a sequential run: its gates' decisions replace the fixed-sample ones."""
    decided = {(gate.metric, gate.slice): gate.decision for gate in result.gates}
    failures = tuple(
        item for item in verdict.checked if decided.get((item.metric, item.slice), FAIL) != PASS
    )
    # What the gate could not check still fails it, whatever the sequences decided.
    unchecked = bool(verdict.unchecked) or not verdict.checked
    return attrs.evolve(
        verdict,
        sequential=result,
        regressed=result.decision != PASS
        or unchecked
        or bool(verdict.latency_failures)
        or bool(verdict.cost_failures),
        failures=failures,
    )


def check_slices(
    slice_thresholds: Mapping[str, Mapping[str, float]],
    questions: Sequence[GoldenQuestion],
    *,
    source: str | None,
    set_name: str,
) -> None:
    """Every configured slice must hold a question of the set: an empty gate never closes."""
    for name in sorted(slice_thresholds):
        field, label = split_slice(name)
        labels = {slice_label(question, field) for question in questions}
        if label in labels:
            continue
        known = sorted(value for value in labels if value is not None)
        raise InputError(
            f"no question of set {set_name} has {field} = {label!r}, so this threshold "
            f"could never fail (values of {field} in the set: {', '.join(known) or 'none'})",
            source=source,
            field=f'regression.slices."{name}"',
            hint="fix the slice name, or remove it for this set",
        )


def compare_runs(
    candidate: Sequence[QuestionOutcome],
    candidate_set_hash: str,
    baseline: ResultRecord,
    thresholds: Mapping[str, float],
    *,
    resamples: int,
    confidence: float,
    seed: int,
    require_significant: bool = False,
    slice_thresholds: Mapping[str, Mapping[str, float]] | None = None,
    questions: Sequence[GoldenQuestion] = (),
    baseline_kind: str = "newest earlier run",
    cluster_by: str | None = None,
    candidate_record: ResultRecord | None = None,
    latency_thresholds: Mapping[str, float] | None = None,
    candidate_machine: Machine | None = None,
    cost_thresholds: Mapping[str, float] | None = None,
    candidate_costs: Mapping[str, Any] | None = None,
) -> Verdict:
    """The verdict of a candidate's outcomes against a stored baseline run.

    ``slice_thresholds`` maps ``FIELD=LABEL`` to per-metric thresholds; a question's
    labels come from ``questions`` (the candidate's set) when given, else from the
    form and hard class its outcome carries. With ``cluster_by`` every paired test
    treats the questions' clusters as the unit (`retrievalkit.stats.clusters`); the
    labels come from ``questions``, else from the records (``candidate_record``, the
    baseline). ``cost_thresholds`` price each run at its own ``[costs]``: the candidate's
    are ``candidate_costs``, else ``candidate_record``'s, else the baseline's.
    """
    before = as_columns(baseline.outcomes)
    after = as_columns(candidate)
    # Questions are matched by id once; each gate then reads only its metric's columns,
    # so a stored baseline loads nothing else.
    pairing = pair_questions(before, after)
    everyone = np.arange(len(pairing.question_ids), dtype=np.intp)
    codes = None
    warnings = []
    if cluster_by is not None:
        from retrievalkit.pipeline.engine.clustering import (
            labelled_clusters,
            missing_field_warning,
        )

        codes, without = labelled_clusters(
            cluster_by,
            pairing.question_ids,
            after,
            pairing.candidate,
            [record for record in (candidate_record, baseline) if record is not None],
            {question.id: question for question in questions},
        )
        partial = missing_field_warning(cluster_by, without, len(pairing.question_ids))
        if partial is not None:
            warnings.append(partial)
    gates: list[tuple[str | None, str, float, npt.NDArray[np.intp]]] = [
        (None, metric, threshold, everyone) for metric, threshold in sorted(thresholds.items())
    ]
    if slice_thresholds:
        by_id = {question.id: question for question in questions}
        for name, metrics in sorted(slice_thresholds.items()):
            field, label = split_slice(name)
            labels = _labels(pairing, field, by_id, after)
            members = np.fromiter(
                (index for index, found in enumerate(labels) if found == label), np.intp
            )
            gates.extend(
                (name, metric, threshold, members) for metric, threshold in sorted(metrics.items())
            )
    checked = []
    unchecked = []
    for slice_name, metric, threshold, ids in gates:
        values = pairing.values(before, after, metric)
        item, warning = _compare_metric(
            values,
            ids,
            metric,
            threshold,
            slice_name,
            require_significant=require_significant,
            resamples=resamples,
            confidence=confidence,
            seed=seed,
            clusters=None if codes is None else codes[ids],
        )
        if warning is not None:
            warnings.append(warning)
        if item is not None:
            context = judged_context(
                (before, pairing.baseline[ids]),
                (after, pairing.candidate[ids]),
                metric,
                difference=item.difference,
                significant=item.significant,
                resamples=resamples,
                confidence=confidence,
                seed=seed,
                clusters=None if codes is None else codes[ids],
            )
            if context is not None:
                item = attrs.evolve(item, judged=context)
            checked.append(item)
            continue
        where = f"{metric} [{slice_name}]" if slice_name else metric
        computed = (metric in before.metric_names, metric in after.metric_names)
        unchecked.append(f"{where}: {_unchecked_reason(values, ids, slice_name, computed)}")
    latency: tuple[LatencyCheck, ...] = ()
    if latency_thresholds:
        times = answered_latencies(before, after, pairing)
        changes = latency_changes(*times, resamples=resamples, confidence=confidence, seed=seed)
        latency, not_timed = latency_checks(
            changes,
            latency_thresholds,
            require_significant=require_significant,
            questions=len(pairing.question_ids),
        )
        unchecked.extend(not_timed)
        if candidate_record is not None:
            candidate_machine = candidate_record.manifest.machine
        timed_apart = machine_warning(baseline.manifest.machine, candidate_machine)
        if timed_apart is not None:
            warnings.append(timed_apart)
    cost: tuple[CostCheck, ...] = ()
    if cost_thresholds:
        if candidate_costs is None:
            candidate_costs = (
                candidate_record.manifest.costs
                if candidate_record is not None
                else baseline.manifest.costs
            )
        change = pair_cost_change(
            before,
            baseline.manifest.costs,
            after,
            candidate_costs,
            pairing,
            resamples=resamples,
            confidence=confidence,
            seed=seed,
        )
        cost, skipped = cost_checks(
            change, cost_thresholds, require_significant=require_significant
        )
        warnings.extend(skipped)
    failures = tuple(item for item in checked if item.regressed)
    total = len(gates) + len(latency_thresholds or {})
    note = None
    if unchecked or not checked:
        # A gate passes only what it checked: a threshold it could not check (a metric
        # the baseline lacks, one undefined on every question) fails it, with the reason.
        note = (
            f"the gate fails: {len(unchecked)} of {total} thresholds could not be "
            "checked, and a gate cannot pass what it did not compare"
            if total
            else "the gate fails: it was given no threshold to check"
        )
    return Verdict(
        baseline_run_id=baseline.run_id,
        regressed=bool(failures)
        or any(item.regressed for item in latency)
        or any(item.regressed for item in cost)
        or note is not None,
        note=note,
        failures=failures,
        checked=tuple(checked),
        shared_questions=len(pairing.question_ids),
        same_set=baseline.manifest.set_hash == candidate_set_hash,
        baseline_kind=baseline_kind,
        require_significant=require_significant,
        unchecked=tuple(unchecked),
        warnings=tuple(warnings),
        cluster_by=cluster_by,
        latency=latency,
        cost=cost,
    )


def _unchecked_reason(
    values: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]],
    ids: npt.NDArray[np.intp],
    slice_name: str | None,
    computed: tuple[bool, bool],
) -> str:
    """Why a gated metric has no paired value: which side lacks it, and the likely cause."""
    if not len(ids):
        return f"no question{' of the slice' if slice_name else ''} is in both runs"
    if not computed[1]:
        return "the run did not compute it (was it asked for, e.g. a k of --k?)"
    if not computed[0]:
        return (
            "no question has a value in both runs (is the metric missing from the "
            "baseline, e.g. a deeper k?)"
        )
    before, after = (~np.isnan(side[ids]) for side in values)
    for side, held, run in ((after, computed[1], "run"), (before, computed[0], "baseline")):
        if held and not side.any():
            return (
                f"undefined on every question of the {run} (every metric but hit@k is "
                "undefined on a no-answer question)"
            )
    return "no question has a value in both runs"


def _labels(
    pairing: Pairing,
    field: str,
    questions: Mapping[str, GoldenQuestion],
    candidate: Outcomes,
) -> list[str | None]:
    """Each paired question's label for ``field``: from its question of the set when
    given, else from the form and hard class its outcome carries."""
    forms = candidate.forms if field == "form" else None
    hard_classes = candidate.hard_classes if field == "hard_class" else None
    labels: list[str | None] = []
    for question_id, position in zip(pairing.question_ids, pairing.candidate.tolist(), strict=True):
        question = questions.get(question_id)
        if question is not None:
            labels.append(slice_label(question, field))
        elif forms is not None:
            form = forms[position]
            labels.append(None if form is None else form.value)
        elif hard_classes is not None:
            labels.append(hard_classes[position])
        else:
            labels.append(None)
    return labels


def _compare_metric(
    values: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]],
    ids: npt.NDArray[np.intp],
    metric: str,
    threshold: float,
    slice_name: str | None,
    *,
    require_significant: bool,
    resamples: int,
    confidence: float,
    seed: int,
    clusters: npt.NDArray[np.intp] | None = None,
) -> tuple[MetricComparison | None, str | None]:
    """The comparison of one gated metric over the paired questions at ``ids``, and a
    warning when its threshold is undetectable."""
    if not len(ids):
        return None, None
    left, right = values[0][ids], values[1][ids]
    paired = paired_test_by(
        left, right, resamples=resamples, confidence=confidence, seed=seed, clusters=clusters
    )
    if paired.difference is None:
        return None, None
    spread, units = spread_of_pair(left, right), None
    if clusters is not None:
        by_cluster, units = spread_of_clusters(right, clusters, baseline=left)
        if units == paired.n:  # clusters of one question: the per-question test
            units = None
        else:
            spread = by_cluster
    row = power_row(
        metric,
        slice_name,
        paired.n,
        spread,
        alpha=1.0 - confidence,
        threshold=threshold,
        clusters=units,
    )
    warning = undetectable_warning(row) if row.below_detectable else None
    said = verdict(paired.p_value, paired.p_floor, 1.0 - confidence)
    dropped = -paired.difference > threshold + _TOLERANCE
    regressed = dropped and (not require_significant or said == SIGNIFICANT)
    return MetricComparison(
        **paired_fields(metric, paired),
        threshold=threshold,
        regressed=regressed,
        slice=slice_name,
        significant=None if said is None else said == SIGNIFICANT,
        verdict=said,
    ), warning


def retriever_changes(baseline: ResultRecord, candidate: ResultRecord) -> tuple[str, ...]:
    """The retriever's plugin, options (redacted values) and parts (a composed retriever's
    ``describe()``) that differ between the two runs' manifests."""
    from retrievalkit.pipeline.gating.history import mapping_changes

    before, after = baseline.manifest, candidate.manifest
    changes = []
    if before.plugin != after.plugin:
        changes.append(f"plugin: {before.plugin} -> {after.plugin}")
    if before.retriever_options_hash != after.retriever_options_hash:
        named = mapping_changes(before.retriever_options, after.retriever_options)
        # A secret's value is redacted in both: only the hash tells it changed.
        changes += [f"options {line}" for line in named] or ["options: a redacted value"]
    parts = mapping_changes(before.extra, after.extra)
    changes += [f"parts {line}" for line in parts if not line.startswith("sequential")]
    return tuple(changes)
