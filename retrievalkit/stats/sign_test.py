"""The exact two-sided sign test of wins against losses (ties carry no evidence).

Under "no preference" each of the n = wins + losses untied outcomes is a win with chance
1/2, so the p-value is P(X <= min(wins, losses)) + P(X >= max(wins, losses)) for
X ~ Bin(n, 1/2): twice the smaller tail, at most 1. That is what
``scipy.stats.binomtest(wins, n, 0.5).pvalue`` gives (the binomial is symmetric at 1/2).
"""

from __future__ import annotations


def sign_test_p_value(wins: int, losses: int) -> float | None:
    """The exact two-sided p-value; None when there is neither a win nor a loss."""
    from scipy.special import bdtr

    n = wins + losses
    if n == 0:
        return None
    if wins == losses:
        return 1.0
    return min(1.0, 2.0 * float(bdtr(min(wins, losses), n, 0.5)))
