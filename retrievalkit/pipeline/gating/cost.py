"""Cost between two runs of the same questions: the paired change, and the gate's check.

Each run prices its questions' tokens at its own ``[costs]`` (`retrievalkit.metrics.cost`).
Two runs are paired by question id over every question both asked (an errored question's
calls were billed all the same). The change is the ratio candidate / baseline of the mean
cost per question, with a paired bootstrap interval (`retrievalkit.stats.latency.paired_ratios`:
questions resampled together for both runs).

A cost threshold is a relative increase: ``per_question = 0.1`` lets the candidate's
cost per question be at most 10 % above the baseline's. The check ``cost.per_question``
fails when the observed ratio is above 1.1; with ``require_significant`` only when the
whole interval is. A run without a cost (no tokens recorded, or none priced) cannot be
compared: the check is skipped with a warning, never a failure, since a baseline stored
before its retriever reported tokens says nothing about a regression.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import numpy.typing as npt

from retrievalkit.formats.limits import COST_STATISTICS
from retrievalkit.metrics.cost import question_costs
from retrievalkit.model.comparisons import CostChange
from retrievalkit.pipeline.gating.increases import increase_verdict
from retrievalkit.stats.latency import RATIO_METHOD, paired_ratios

if TYPE_CHECKING:
    from retrievalkit.metrics.scoring import Pairing
    from retrievalkit.model.outcomes import Outcomes

#: How a cost check is named in a verdict, JUnit and the job summary.
CHECK_PREFIX = "cost."
#: The most resamples a cost interval takes (the run's count when it is smaller).
COST_RESAMPLES = 1000


@attrs.frozen
class CostCheck(CostChange):
    """A gated cost statistic: its paired change, its threshold and whether it regressed."""

    check: str = attrs.field(kw_only=True)
    """``cost.per_question``."""
    threshold: float = attrs.field(kw_only=True)
    """The largest allowed relative increase (0.1: at most 10 % above the baseline)."""
    regressed: bool = attrs.field(kw_only=True)
    significant: bool | None = attrs.field(default=None, kw_only=True)
    """Whether the whole interval lies above 1 + threshold; None without an interval."""


def paired_costs(
    baseline: Outcomes,
    baseline_prices: Mapping[str, Any],
    candidate: Outcomes,
    candidate_prices: Mapping[str, Any],
    pairing: Pairing,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]] | str:
    """Each paired question's cost in both runs, or why there is none to compare."""
    missing = []
    found = []
    for side, outcomes, prices in (
        ("baseline", baseline, baseline_prices),
        ("candidate", candidate, candidate_prices),
    ):
        costs = question_costs(outcomes, prices)
        if costs is None:
            missing.append(f"the {side} run recorded no tokens")
        elif costs.values is None:
            missing.append(f"the {side} run's models ({', '.join(costs.unpriced)}) have no price")
        else:
            found.append(costs.values)
    if missing:
        return "; ".join(missing)
    if not len(pairing.question_ids):
        return "no question is in both runs"
    return found[0][pairing.baseline], found[1][pairing.candidate]


def cost_change(
    before: npt.NDArray[np.float64],
    after: npt.NDArray[np.float64],
    *,
    resamples: int,
    confidence: float,
    seed: int,
) -> CostChange:
    """The paired change of the mean cost per question, candidate / baseline (at most
    `COST_RESAMPLES` resamples, as latency takes)."""
    found = paired_ratios(
        before,
        after,
        ("mean",),
        level=confidence,
        resamples=min(resamples, COST_RESAMPLES),
        seed=seed,
    )["mean"]
    ratio, ci = found["ratio"], found["ci"]
    return CostChange(
        statistic="per_question",
        baseline=float(before.mean()),
        candidate=float(after.mean()),
        ratio=None if ratio is None else float(ratio),  # type: ignore[arg-type]
        ci=None if ci is None else (float(ci[0]), float(ci[1])),  # type: ignore[index]
        method=RATIO_METHOD,
        n=len(before),
    )


def pair_cost_change(
    baseline: Outcomes,
    baseline_prices: Mapping[str, Any],
    candidate: Outcomes,
    candidate_prices: Mapping[str, Any],
    pairing: Pairing,
    *,
    resamples: int,
    confidence: float,
    seed: int,
) -> CostChange | str:
    """`cost_change` of two runs' paired questions, or why they have none."""
    costs = paired_costs(baseline, baseline_prices, candidate, candidate_prices, pairing)
    if isinstance(costs, str):
        return costs
    return cost_change(*costs, resamples=resamples, confidence=confidence, seed=seed)


def cost_checks(
    change: CostChange | str,
    thresholds: Mapping[str, float],
    *,
    require_significant: bool,
) -> tuple[tuple[CostCheck, ...], tuple[str, ...]]:
    """The gate's cost checks, and the warnings of those it skipped (never a failure)."""
    checks = []
    skipped = []
    for name in COST_STATISTICS:
        if name not in thresholds:
            continue
        threshold = thresholds[name]
        if isinstance(change, str):
            skipped.append(f"{CHECK_PREFIX}{name} not checked: {change} (a warning, not a failure)")
            continue
        if change.ratio is None:
            skipped.append(
                f"{CHECK_PREFIX}{name} not checked: the baseline's cost per question is 0 "
                "(a warning, not a failure)"
            )
            continue
        regressed, significant = increase_verdict(
            change.ratio, change.ci, threshold, require_significant=require_significant
        )
        checks.append(
            CostCheck(
                **attrs.asdict(change, recurse=False),
                check=f"{CHECK_PREFIX}{name}",
                threshold=threshold,
                regressed=regressed,
                significant=significant,
            )
        )
    return tuple(checks), tuple(skipped)
