"""One metric's paired difference between two runs, from its paired test: what the gate
checks and compare shows (`retrievalkit.model.comparisons.MetricDifference`)."""

from __future__ import annotations

from typing import Any

from retrievalkit.stats.paired import PairedTest


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
