"""Number formatting and the report's sections as rows, shared by the Markdown and table views."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from retrievalkit.formats.numbers import NONE as NONE
from retrievalkit.formats.numbers import (
    bounds,
    increase,
    milliseconds,
    milliseconds_interval,
    ratio,
    ratio_interval,
    signed_bounds,
)
from retrievalkit.formats.numbers import mean_and_interval as mean_and_interval
from retrievalkit.formats.numbers import number as number
from retrievalkit.formats.numbers import p_text as p_text
from retrievalkit.formats.numbers import percent as percent
from retrievalkit.formats.numbers import signed as signed
from retrievalkit.metrics.definitions import headline
from retrievalkit.model.comparisons import LatencyChange, MetricDifference
from retrievalkit.model.records import ResultRecord
from retrievalkit.model.values import MetricValue
from retrievalkit.pipeline.gating.cost import CHECK_PREFIX as COST_CHECK_PREFIX
from retrievalkit.pipeline.gating.cost import CostCheck
from retrievalkit.pipeline.gating.gate import MetricComparison, Verdict
from retrievalkit.pipeline.gating.latency import LatencyCheck

if TYPE_CHECKING:
    from retrievalkit.stats.sequential import SequentialResult


def interval(value: MetricValue) -> str:
    return bounds(value.ci)


def method_text(value: MetricValue) -> str:
    """The interval's method as the record names it (``bca``, ``clopper-pearson``, ...);
    a cluster bootstrap's with its clusters and effective sample size."""
    if value.clusters is not None:
        return f"{value.method or NONE} ({clusters_text(value.clusters, value.effective_n)})"
    return value.method or NONE


def clusters_text(clusters: int, effective_n: float | None) -> str:
    """``53 clusters, effective n 61.2`` (the effective size unknown: ``–``)."""
    effective = NONE if effective_n is None else f"{effective_n:g}"
    return f"{clusters} clusters, effective n {effective}"


def with_interval(value: MetricValue) -> str:
    """``0.512 [0.431, 0.590]``, or ``0.512 –`` when the mean has no interval."""
    if value.mean is None:
        return NONE
    return f"{number(value.mean)} {interval(value)}"


def breakdown_columns(record: ResultRecord) -> list[str]:
    return headline(record.metrics)


def breakdown_rows(record: ResultRecord, field: str) -> list[tuple[str, int, list[str]]]:
    """(label, questions, cells) for one slicing field."""
    columns = breakdown_columns(record)
    rows = []
    for label, metrics in record.slices.get(field, {}).items():
        size = metrics["hit@1"].n if "hit@1" in metrics else 0
        rows.append((label, size, [with_interval(metrics[name]) for name in columns]))
    return rows


def verdict_lines(verdict: Verdict | None, note: str | None, *, confidence: float) -> list[str]:
    """The verdict block of a report: what was compared, the decision with the checks
    behind it, and the warnings; with no baseline, `note` (or why there is none)."""
    if verdict is None:
        return [note or "no baseline: this is the first run of its key"]
    lines = []
    if not verdict.same_set:
        lines.append(
            "the baseline was run on a different version of the set; compared on the "
            f"{verdict.shared_questions} shared questions"
        )
    baseline = f"{_baseline_kind(verdict)} {verdict.baseline_run_id}"
    if verdict.retriever_changes:
        lines.append(f"the retriever changed since the {baseline}:")
        lines.extend(f"  {change}" for change in verdict.retriever_changes)
    if verdict.sequential is not None:
        lines += _sequential_lines(verdict.sequential)
    if verdict.cluster_by is not None:
        lines.append(
            f"clustered by {verdict.cluster_by}: cluster bootstrap intervals, sign-flip "
            "test on cluster sums"
        )
    lines += _decision_lines(verdict, baseline, confidence)
    if verdict.regressed:
        lines += _near_miss_lines(verdict, confidence)
    if verdict.unchecked:
        lines.append("NOT checked (each fails the gate):")
        lines.extend(f"  {item}" for item in verdict.unchecked)
    return lines + _warning_lines(verdict)


def _sequential_lines(sequence: SequentialResult) -> list[str]:
    """A sequential gate's decision, then each threshold's: the confidence sequence's
    span where it stopped early, the paired test's difference where the set was asked whole."""
    lines = [
        f"sequential gate: {sequence.decision.upper()} after {sequence.asked} of "
        f"{sequence.total} questions ({sequence.saved} not asked, "
        f"{sequence.saved_share:.0%} saved; anytime-valid betting confidence sequences, "
        f"alpha {sequence.alpha:.2f} over {len(sequence.gates)} thresholds; a set asked "
        "whole is decided by the paired test)"
    ]
    for gate in sequence.gates:
        where = f"{gate.metric} [{gate.slice}]" if gate.slice else gate.metric
        span = signed_bounds(gate.low, gate.high)
        if gate.clusters is not None:
            where += f" ({gate.clusters} clusters)"
        if gate.p_value is not None and gate.difference is not None:
            lines.append(
                f"  {where}: difference {gate.difference:+.3f} over all {gate.population} "
                f"(paired test p = {gate.p_value:.3g}), allowed drop {gate.threshold:.3f}: "
                f"{gate.decision}"
            )
            continue
        lines.append(
            f"  {where}: difference in {span} after {gate.asked} of {gate.population}, "
            f"allowed drop {gate.threshold:.3f}: {gate.decision}"
        )
    if sequence.decision == "undecided":
        lines.append("  no question had values in both runs: undecided fails the gate")
    return lines


def _decision_lines(verdict: Verdict, baseline: str, confidence: float) -> list[str]:
    """The gate's decision against `baseline`, with the checks it rests on: the failures
    of a regression, else every check (a gate failed by its note alone shows them all)."""
    failed = verdict.failures or verdict.latency_failures or verdict.cost_failures
    ratios = verdict.ratio_checks
    if verdict.regressed and not failed and verdict.note:
        lines = [f"GATE FAILED against {baseline}: {verdict.note}"]
        lines.extend("  " + comparison_line(item, confidence) for item in verdict.checked)
        lines.extend("  " + check_line(item, confidence) for item in ratios)
    elif verdict.regressed:
        lines = [f"REGRESSION against {baseline}:"]
        lines.extend("  " + comparison_line(item, confidence) for item in verdict.failures)
        lines.extend("  " + check_line(item, confidence) for item in verdict.ratio_failures)
    else:
        lines = [f"no regression against {baseline}"]
        lines.extend("  " + comparison_line(item, confidence) for item in verdict.checked)
        lines.extend("  " + check_line(item, confidence) for item in ratios)
    return lines


def _near_miss_lines(verdict: Verdict, confidence: float) -> list[str]:
    """Beside a regression, the checks past their threshold that still passed: a drop
    not significant (with ``require_significant``), or a ratio whose interval reaches below."""
    lines = []
    excused = [
        item
        for item in verdict.checked
        if not item.regressed
        and item.difference is not None
        and -item.difference > item.threshold
        and verdict.require_significant
    ]
    if excused:
        lines.append("dropped past the threshold, but not significantly (p not below alpha):")
        lines.extend("  " + comparison_line(item, confidence) for item in excused)
    slower = [item for item in verdict.latency if not item.regressed and _above(item)]
    if slower:
        lines.append("slower past the threshold, but the interval reaches below it:")
        lines.extend("  " + latency_line(item, confidence) for item in slower)
    dearer = [item for item in verdict.cost if not item.regressed and _above(item)]
    if dearer:
        lines.append("dearer past the threshold, but the interval reaches below it:")
        lines.extend("  " + check_line(item, confidence) for item in dearer)
    return lines


def _warning_lines(verdict: Verdict) -> list[str]:
    """The verdict's warnings, none of them a failure, grouped: latency timing, cost,
    then thresholds below what the set can detect."""
    from retrievalkit.pipeline.gating.latency import MACHINE_WARNING_PREFIX

    timing = [item for item in verdict.warnings if item.startswith(MACHINE_WARNING_PREFIX)]
    costs = [item for item in verdict.warnings if item.startswith(COST_CHECK_PREFIX)]
    power = [item for item in verdict.warnings if item not in timing and item not in costs]
    lines = []
    if timing:
        lines.append("latency timing (a warning, never a failure):")
        lines.extend(f"  warning: {item}" for item in timing)
    if costs:
        lines.append("cost (a warning, never a failure):")
        lines.extend(f"  warning: {item}" for item in costs)
    if power:
        lines.append("thresholds below what the set can detect (retrievalkit power):")
        lines.extend(f"  warning: {item}" for item in power)
    return lines


def _baseline_kind(verdict: Verdict) -> str:
    if verdict.baseline_kind == "pinned":
        return "pinned baseline"
    if verdict.baseline_kind == "--baseline":
        return "baseline (--baseline)"
    return "baseline"


def comparison_line(item: MetricComparison, confidence: float) -> str:
    ci = bounds(item.ci, sign=True)
    diff = signed(item.difference)
    where = "" if item.slice is None else f" [{item.slice}, {item.n} questions]"
    note = ""
    if item.difference is not None and -item.difference > item.threshold and not item.regressed:
        note = f", {item.verdict or 'not significant'}"
    elif item.verdict == "unresolvable":
        note = ", unresolvable"
    test = ""
    if item.p_value is not None:
        floor = "" if item.p_floor is None else f", smallest attainable p {p_text(item.p_floor)}"
        test = f", p {p_text(item.p_value)}, {item.discordant} discordant{floor}"
    return (
        f"{item.metric}{where}: {number(item.baseline)} -> {number(item.candidate)} "
        f"(difference {diff}, {percent(confidence)} CI {ci}{test}, "
        f"allowed drop {item.threshold:.3f}{note}){judged_text(item)}"
    )


def _above(item: LatencyCheck | CostCheck) -> bool:
    return item.ratio is not None and item.ratio > 1.0 + item.threshold


def check_line(item: LatencyCheck | CostCheck, confidence: float) -> str:
    """The line of a gated ratio: `latency_line` or `cost_check_line`."""
    if isinstance(item, CostCheck):
        return cost_check_line(item, confidence)
    return latency_line(item, confidence)


def cost_check_line(item: CostCheck, confidence: float) -> str:
    """``cost.per_question: 0.0012 -> 0.0015 (ratio 1.250x, 95% CI [1.201, 1.302], paired
    bootstrap over 300 questions, allowed increase +10%)``."""
    note = ", not significant" if _above(item) and not item.regressed else ""
    return (
        f"{item.check}: {price(item.baseline)} -> {price(item.candidate)} "
        f"(ratio {ratio(item.ratio)}, {percent(confidence)} CI {ratio_interval(item.ci)}, "
        f"{item.method} over {item.n} questions, allowed increase {increase(item.threshold)}"
        f"{note})"
    )


def latency_line(item: LatencyCheck, confidence: float) -> str:
    """``latency.p95: 45.2 ms -> 58.1 ms (ratio 1.285x, 95% CI [1.201, 1.377], paired
    bootstrap over 300 questions, allowed increase +20%)``."""
    note = ", not significant" if _above(item) and not item.regressed else ""
    return (
        f"{item.check}: {milliseconds(item.baseline)} -> {milliseconds(item.candidate)} "
        f"(ratio {ratio(item.ratio)}, {percent(confidence)} CI {ratio_interval(item.ci)}, "
        f"{item.method} over {item.n} questions, allowed increase {increase(item.threshold)}"
        f"{note})"
    )


def latency_change_line(item: LatencyChange, confidence: float) -> str:
    """``p95: 45.2 ms -> 58.1 ms, ratio 1.285x [1.201, 1.377]`` for a comparison."""
    return (
        f"{item.statistic}: {milliseconds(item.baseline)} -> {milliseconds(item.candidate)}, "
        f"ratio {ratio(item.ratio)} ({percent(confidence)} CI {ratio_interval(item.ci)})"
    )


def judged_text(item: MetricDifference) -> str:
    """The unjudged-aware part of a difference's line: both sides' judged@k, the condensed
    difference when they are far apart, and a plain word when the two disagree."""
    context = item.judged
    if context is None:
        return ""
    text = f"; {context.measure} {number(context.baseline, 2)} -> {number(context.candidate, 2)}"
    if context.condensed_metric is None:
        return text
    moved = context.condensed_difference
    text += (
        f", {context.condensed_metric} difference {signed(moved)}"
        f" ({context.condensed_verdict or 'no test'})"
    )
    if context.disagree:
        text += ": the two disagree, the difference may come from which documents were labelled"
    return text


def latency_rows(latency: Mapping[str, object]) -> list[tuple[str, str, str, str]]:
    """(statistic, value, interval, method) of a run's latency (`render.summary.run_latency`),
    p50, p95, p99 and the mean; none when no question was answered."""
    rows = []
    for name in ("p50", "p95", "p99", "mean"):
        entry = latency.get(name)
        if not isinstance(entry, Mapping):
            continue
        rows.append(
            (
                name,
                milliseconds(entry["value"]),
                milliseconds_interval(entry["ci"]),
                str(entry["method"]),
            )
        )
    return rows


def price(value: float) -> str:
    """A cost, to 4 significant digits (token prices run to 1e-5 and below)."""
    return f"{value:.4g}"


def cost_line(cost: Mapping[str, Any] | None, level: str) -> str | None:
    """``Cost: 0.0001234 per question (95% CI [...]), 0.004936 in all (40 questions);
    tokens: MODEL 1,800 in, 0 out`` of a run's ``cost`` (`metrics.cost.run_cost`); None
    for a run without tokens."""
    if not cost:
        return None
    tokens = "; ".join(
        f"{model} {counts['input']:,} in, {counts['output']:,} out"
        for model, counts in cost["tokens"].items()
    )
    each = cost.get("per_question")
    if not isinstance(each, Mapping):
        return f"Cost: none priced ([costs] has no price for the models used); tokens: {tokens}"
    low, high = each["ci"]
    return (
        f"Cost: {price(each['value'])} per question ({level} CI [{price(low)}, {price(high)}]), "
        f"{price(cost['total'])} in all ({cost['questions']} questions); tokens: {tokens}"
    )


def hits_cell(scores: Mapping[str, float | None], name: str) -> str:
    value = scores.get(name)
    return NONE if value is None else ("✓" if value >= 1.0 else "✗")
