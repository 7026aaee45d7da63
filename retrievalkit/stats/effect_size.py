"""The paired standardised mean difference d_z with its exact interval.

d_z = mean(d) / sd(d) over the paired differences d (sd with n - 1). Its interval
inverts the noncentral t distribution of t = d_z * sqrt(n) (n - 1 degrees of freedom):
the bounds are the noncentrality parameters under which the observed t sits at the
upper and lower (1 - confidence) / 2 tails, divided by sqrt(n) (Cumming & Finch 2001).
"""

from __future__ import annotations

import math

import attrs
import numpy as np
import numpy.typing as npt

#: The kind of effect size `paired_effect_size` reports.
KIND = "d_z"


@attrs.frozen
class EffectSize:
    value: float
    ci: tuple[float, float] | None
    kind: str = KIND


def paired_effect_size(
    differences: npt.NDArray[np.float64], confidence: float
) -> EffectSize | None:
    """d_z of ``differences`` (NaN dropped) with its ``confidence`` interval; None with
    fewer than two differences or when they are all equal (sd 0: d_z is undefined)."""
    values = differences[~np.isnan(differences)]
    n = int(values.size)
    if n < 2:
        return None
    sd = float(np.std(values, ddof=1))
    if not sd > 1e-12:
        return None
    d_z = float(np.mean(values)) / sd
    return EffectSize(value=d_z, ci=_noncentral_interval(d_z, n, confidence))


def _noncentral_interval(d_z: float, n: int, confidence: float) -> tuple[float, float] | None:
    from scipy.optimize import brentq
    from scipy.special import nctdtr

    t = d_z * math.sqrt(n)
    df = n - 1
    tail = (1.0 - confidence) / 2.0

    def bound(target: float) -> float:
        # The noncentral t cdf at t falls as ncp grows: bracket the root around t.
        def gap(ncp: float) -> float:
            return float(nctdtr(df, ncp, t)) - target

        width = 10.0 + abs(t)
        low, high = t - width, t + width
        while gap(low) < 0:
            low -= width
        while gap(high) > 0:
            high += width
        return float(brentq(gap, low, high, xtol=1e-10))

    try:
        lower, upper = bound(1.0 - tail), bound(tail)
    except (ValueError, RuntimeError):
        return None
    root = math.sqrt(n)
    return (lower / root, upper / root)
