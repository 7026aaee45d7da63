"""One metric's paired difference between two runs: what the gate checks and compare shows."""

from __future__ import annotations

from typing import Any

import attrs

from retrievalkit.stats.paired import PairedTest


@attrs.frozen
class MetricDifference:
    """candidate - baseline for one metric over the questions where both are defined,
    with the paired test of `retrievalkit.stats.paired`."""

    metric: str
    baseline: float | None
    candidate: float | None
    difference: float | None
    ci: tuple[float, float] | None
    p_value: float | None
    significant: bool | None = None
    """Whether the p-value (Holm-adjusted in a comparison of several candidates) is below
    1 - confidence; None without a test."""
    n: int = 0
    """Questions compared (where both runs have a defined value)."""
    discordant: int = 0
    """Questions whose values differ: only they carry evidence."""
    p_floor: float | None = None
    """The smallest p-value attainable with ``discordant`` questions."""
    verdict: str | None = None
    """``significant``, ``not significant`` or ``unresolvable`` (the floor is not below
    alpha: no outcome of these questions could have been significant)."""
    p_method: str | None = None
    """``exact`` or ``monte-carlo``."""
    p_error: float | None = None
    """Standard error of a Monte Carlo p-value (0 when exact)."""
    ci_method: str | None = None
    """How ``ci`` was computed (see `retrievalkit.stats.intervals`)."""
    clusters: int | None = None
    """With ``--cluster-by``: the clusters compared (``discordant`` then counts clusters)."""
    effective_n: float | None = None
    """With ``--cluster-by``: the effective sample size of the differences."""


def paired_fields(metric: str, paired: PairedTest) -> dict[str, Any]:
    """The `MetricDifference` fields that ``paired`` (a paired test of ``metric``) gives."""
    interval = None if paired.low is None or paired.high is None else (paired.low, paired.high)
    return {
        "metric": metric,
        "baseline": paired.baseline,
        "candidate": paired.candidate,
        "difference": paired.difference,
        "ci": interval,
        "p_value": paired.p_value,
        "n": paired.n,
        "discordant": paired.discordant,
        "p_floor": paired.p_floor,
        "p_method": paired.p_method,
        "p_error": paired.p_error,
        "ci_method": paired.interval_method,
        "clusters": paired.clusters,
        "effective_n": paired.effective_n,
    }
