"""Whether a paired ratio candidate / baseline rose past an allowed relative increase.

Latency (`retrievalkit.pipeline.gating.latency`) and cost (`retrievalkit.pipeline.gating.cost`)
are gated the same way: a threshold of 0.2 lets the candidate's statistic be at most 20 %
above the baseline's. The check fails when the observed ratio is above 1 + threshold; with
``require_significant`` only when the whole interval is.
"""

from __future__ import annotations

#: Slack for a ratio that equals its limit up to floating-point rounding (0.3 / 0.25 is
#: 1.2000000000000002): it has not gone past it.
TOLERANCE = 1e-9


def increase_verdict(
    ratio: float,
    ci: tuple[float, float] | None,
    threshold: float,
    *,
    require_significant: bool,
) -> tuple[bool, bool | None]:
    """(regressed, significant) of a ratio against its allowed relative increase.

    ``significant`` says whether the whole interval lies above 1 + threshold; None
    without an interval.
    """
    limit = 1.0 + threshold + TOLERANCE
    significant = None if ci is None else ci[0] > limit
    regressed = ratio > limit and (not require_significant or bool(significant))
    return regressed, significant
