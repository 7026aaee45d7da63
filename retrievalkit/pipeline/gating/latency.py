"""Latency between two runs of the same questions: the paired change, and the gate's checks.

Each question's latency (ms) is recorded in every run's outcomes. Two runs are paired
by question id over the questions both answered (an errored question's time measures
the failure, not an answer, and the error rate has its own gate). For p50, p95 and p99
the change is the ratio candidate / baseline with a paired bootstrap interval
(`retrievalkit.stats.latency.paired_ratios`: questions resampled together for both runs).

A latency threshold is a relative increase: ``p95 = 0.2`` lets the candidate's p95 be
at most 20 % above the baseline's. The check ``latency.p95`` fails when the observed
ratio is above 1.2; with ``require_significant`` only when the whole interval is.

Latency is the machine's as much as the retriever's: a gate that checks a latency
threshold warns (`machine_warning`) when the two runs' manifests say they were timed on
different machines or under clearly different load, or do not say.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import attrs
import numpy as np
import numpy.typing as npt

from retrievalkit.model.comparisons import LatencyChange
from retrievalkit.pipeline.gating.increases import increase_verdict
from retrievalkit.stats.latency import QUANTILES, RATIO_METHOD, paired_ratios

if TYPE_CHECKING:
    from retrievalkit.metrics.scoring import Pairing
    from retrievalkit.model.outcomes import Outcomes
    from retrievalkit.model.values import Machine

#: The statistics a latency threshold can name, in the order they are shown.
LATENCY_STATISTICS: tuple[str, ...] = tuple(QUANTILES)
#: How a latency check is named in a verdict, JUnit and the job summary.
CHECK_PREFIX = "latency."


@attrs.frozen
class LatencyCheck(LatencyChange):
    """A gated latency statistic: its paired change, its threshold and whether it regressed."""

    check: str = attrs.field(kw_only=True)
    """``latency.p95``."""
    threshold: float = attrs.field(kw_only=True)
    """The largest allowed relative increase (0.2: at most 20 % above the baseline)."""
    regressed: bool = attrs.field(kw_only=True)
    significant: bool | None = attrs.field(default=None, kw_only=True)
    """Whether the whole interval lies above 1 + threshold; None without an interval."""


#: The most resamples a latency interval takes (the run's count when it is smaller).
LATENCY_RESAMPLES = 1000


def answered_latencies(
    baseline: Outcomes, candidate: Outcomes, pairing: Pairing
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The two runs' latencies (ms) over the paired questions that neither run errored on."""
    before = baseline.latency_ms[pairing.baseline]
    after = candidate.latency_ms[pairing.candidate]
    keep = np.ones(len(pairing.question_ids), dtype=bool)
    for outcomes, positions in ((baseline, pairing.baseline), (candidate, pairing.candidate)):
        errored = outcomes.errors
        if errored:
            keep &= ~np.isin(positions, np.fromiter(errored, np.intp, len(errored)))
    return before[keep], after[keep]


def latency_changes(
    before: npt.NDArray[np.float64],
    after: npt.NDArray[np.float64],
    *,
    resamples: int,
    confidence: float,
    seed: int,
) -> tuple[LatencyChange, ...]:
    """The paired change of p50, p95 and p99, candidate / baseline (empty without questions).

    The interval takes at most `LATENCY_RESAMPLES` resamples: a bootstrap of 10^5
    questions costs seconds a thousand resamples, and the percentile interval of a ratio
    moves in its third decimal beyond that."""
    if not len(before):
        return ()
    found = paired_ratios(
        before,
        after,
        LATENCY_STATISTICS,
        level=confidence,
        resamples=min(resamples, LATENCY_RESAMPLES),
        seed=seed,
    )
    changes = []
    for name in LATENCY_STATISTICS:
        entry = found[name]
        ci = entry["ci"]
        ratio = entry["ratio"]
        q = QUANTILES[name]
        changes.append(
            LatencyChange(
                statistic=name,
                baseline=float(np.quantile(before, q)),
                candidate=float(np.quantile(after, q)),
                ratio=None if ratio is None else float(ratio),  # type: ignore[arg-type]
                ci=None if ci is None else (float(ci[0]), float(ci[1])),  # type: ignore[index]
                method=RATIO_METHOD,
                n=len(before),
            )
        )
    return tuple(changes)


def latency_checks(
    changes: tuple[LatencyChange, ...],
    thresholds: Mapping[str, float],
    *,
    require_significant: bool,
    questions: int,
) -> tuple[tuple[LatencyCheck, ...], tuple[str, ...]]:
    """The gate's latency checks, and the thresholds it could not check, each with why."""
    by_name = {change.statistic: change for change in changes}
    checks = []
    unchecked = []
    for name in LATENCY_STATISTICS:
        if name not in thresholds:
            continue
        threshold = thresholds[name]
        change = by_name.get(name)
        if change is None:
            reason = (
                "no question is in both runs"
                if not questions
                else "no question was answered (without an error) in both runs"
            )
            unchecked.append(f"{CHECK_PREFIX}{name}: {reason}")
            continue
        if change.ratio is None:
            unchecked.append(
                f"{CHECK_PREFIX}{name}: the baseline's {name} latency is 0 ms (did it record "
                "latency? a run built from outcomes without latency_ms has none)"
            )
            continue
        regressed, significant = increase_verdict(
            change.ratio, change.ci, threshold, require_significant=require_significant
        )
        checks.append(
            LatencyCheck(
                **attrs.asdict(change, recurse=False),
                check=f"{CHECK_PREFIX}{name}",
                threshold=threshold,
                regressed=regressed,
                significant=significant,
            )
        )
    return tuple(checks), tuple(unchecked)


#: Start load averages per core further apart than this time the runs under clearly
#: different load (0.5: half a core's worth of other work per core).
LOAD_PER_CORE_DIFFERENCE = 0.5
#: How a `machine_warning` begins, so that a verdict's text shows it with the latency.
MACHINE_WARNING_PREFIX = "latency: "


def machine_warning(baseline: Machine | None, candidate: Machine | None) -> str | None:
    """Why two runs' latencies may not be comparable, for a gate that checks a latency
    threshold: a run without a machine record, a different CPU model or core count, or
    start load averages (1 minute, per core) more than `LOAD_PER_CORE_DIFFERENCE` apart.
    None when their machine records agree."""
    missing = [
        name for name, machine in (("baseline", baseline), ("candidate", candidate)) if not machine
    ]
    if missing or baseline is None or candidate is None:
        runs = " and the ".join(missing) + (" runs have" if len(missing) > 1 else " run has")
        return (
            f"latency: the {runs} no machine record, so whether both were timed on the same "
            "machine under the same load is unknown (a run asked by Ray workers, or stored "
            "before runs recorded one, has none)"
        )
    differences = []
    if baseline.cpu != candidate.cpu:
        differences.append(f"CPU {baseline.cpu or 'unknown'} -> {candidate.cpu or 'unknown'}")
    if baseline.cores != candidate.cores:
        differences.append(f"cores {baseline.cores} -> {candidate.cores}")
    if differences:
        return (
            "latency: the runs were timed on different machines ("
            + ", ".join(differences)
            + "); a latency change may be the machine's"
        )
    before, after = _load_per_core(baseline), _load_per_core(candidate)
    if before is not None and after is not None and abs(after - before) > LOAD_PER_CORE_DIFFERENCE:
        return (
            f"latency: the runs were timed under different load (load average per core at "
            f"the start {before:.2f} -> {after:.2f}); a latency change may be the load's"
        )
    return None


def _load_per_core(machine: Machine) -> float | None:
    """The 1-minute load average at the run's start, per core; None when unknown."""
    if not machine.load_at_start or not machine.cores:
        return None
    return machine.load_at_start[0] / machine.cores
