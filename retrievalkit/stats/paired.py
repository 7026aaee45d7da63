"""The paired test of two runs over the same questions, and the one meaning of "significant".

Both the regression gate and ``retrievalkit compare`` call `paired_test`. For the
questions where both runs have a value it gives the difference of the means
(candidate - baseline), a paired interval of that difference, and a two-sided sign-flip
permutation p-value (Smucker, Allan & Carterette 2007): under "no difference" each
question's difference is as likely to have either sign, so the p-value is the share of
the 2^m sign patterns of the m discordant questions (those whose values differ) whose
sum is at least as far from zero as the observed one.

The interval depends on m, since only discordant questions carry evidence: with none,
the `constant` bound (the widest difference a sample this size could hide); with fewer
than `FEW_DISCORDANT`, `ADJUSTED_T`, a studentized interval that adds half a win and
half a loss (Agresti & Min 2005, for any differences in [-1, 1]) and takes Student's t
with m + 1 degrees of freedom, since the variance rests on the m discordant values; with
more, the BCa bootstrap of the differences (`retrievalkit.stats.intervals`). Then it is made
to agree with the test: an interval excludes 0 exactly when p < alpha. When the test
finds no difference the interval is stretched to 0; when the test finds one that the
interval does not, the bound beside 0 moves to where the inverted sign-flip test stops
rejecting. So bounds are float64 and touch 0 exactly, never a float32 -4e-9.

The p-value is exact whenever the distribution of that sum can be enumerated (few
discordant questions, or few distinct sizes of difference: every 0/1 metric, whatever
the set size); beyond that it is a Monte Carlo estimate whose standard error is
reported. The smallest p-value the test can ever give with m discordant questions is
2 / 2^m (all signs agreeing); when that floor is at or above alpha the comparison is
``unresolvable``: no outcome of these questions could have been significant.

**Significant** means, everywhere in retrievalkit: that two-sided p-value (Holm-adjusted
when several candidates are compared with one baseline, or adjusted by the randomised
Tukey HSD of `retrievalkit.stats.tukey` when asked for) is below alpha = 1 - confidence.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs
import numpy as np
import numpy.typing as npt

from retrievalkit.stats.intervals import (
    CONSTANT,
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    bootstrap_means,
    constant_bounds,
)
from retrievalkit.stats.large_samples import LARGE_SAMPLE, sign_flip_tail

FloatArray = npt.NDArray[np.float64]

#: The three verdicts of a paired comparison.
SIGNIFICANT = "significant"
NOT_SIGNIFICANT = "not significant"
UNRESOLVABLE = "unresolvable"

EXACT = "exact"
MONTE_CARLO = "monte-carlo"
EDGEWORTH = "edgeworth"
"""`EDGEWORTH_FROM` discordant questions or more: the tail of the sign-flip distribution's
Edgeworth expansion (`large_samples.sign_flip_tail`), deterministic."""
#: Discordant questions from which a p-value that cannot be enumerated is Edgeworth's
#: tail rather than a Monte Carlo estimate. At 1,000 discordant questions of a few sizes
#: (the hardest case: the sum moves in steps) the tail is within 8e-4 of full enumeration
#: at p = 0.3 and 1.2e-4 at p = 0.05, where 10,000 seeded flips have a standard error of
#: 4.6e-3 and 2.2e-3 and cost 10,000 x m multiply-adds (0.5-0.9 s at 4,000-10,000).
EDGEWORTH_FROM = 1_000

DEFAULT_PERMUTATIONS = 10_000
#: Differences closer than this are a tie (per-question values are sums of a few floats).
TIE = 1e-12
#: The exact distribution is enumerated while it has at most this many points.
EXACT_LIMIT = 1 << 18
#: Past the enumeration limit, exact is still tried with at most this many distinct sizes.
_MERGING_SIZES = 12
#: Equal differences up to which the binomial chances are computed as comb(n, k) / 2^n.
_DIRECT_BINOMIAL = 1000
#: Sign flips per batch of the Monte Carlo test (its batches shape the random stream).
_PERMUTATION_CELLS = 4_000_000
#: Below this many discordant questions the paired interval is `ADJUSTED_T`, not BCa.
FEW_DISCORDANT = 30
ADJUSTED_T = "adjusted-t"
"""Few discordant questions: mean and variance of the differences with half a win (+1) and
half a loss (-1) added (Agresti & Min 2005), Student's t with m + 1 degrees of freedom."""
#: Halvings of the search for the bound where the inverted test stops rejecting.
_BISECTIONS = 40


@attrs.frozen
class PairedTest:
    """candidate - baseline over the questions where both are defined."""

    baseline: float | None
    candidate: float | None
    difference: float | None
    low: float | None
    high: float | None
    p_value: float | None
    n: int
    discordant: int = 0
    """Questions whose two values differ: only they carry evidence."""
    p_floor: float | None = None
    """The smallest p-value attainable with ``discordant`` questions: 2 / 2^discordant."""
    p_method: str | None = None
    """``exact`` (full enumeration), ``monte-carlo`` or ``edgeworth`` (large samples)."""
    p_error: float | None = None
    """Standard error of a Monte Carlo p-value; 0 for an exact or an Edgeworth one."""
    interval_method: str | None = None
    clusters: int | None = None
    """With clusters (`retrievalkit.stats.clusters`): how many; ``discordant`` then counts
    clusters, not questions. None for independent questions."""
    effective_n: float | None = None
    """With clusters: the effective sample size of the differences."""


def p_floor(discordant: int) -> float:
    """The smallest two-sided sign-flip p-value of ``discordant`` questions: 2 / 2^m (max 1)."""
    return 1.0 if discordant <= 1 else 2.0 ** (1 - discordant)


def verdict(p_value: float | None, floor: float | None, alpha: float) -> str | None:
    """``significant``, ``not significant`` or ``unresolvable`` (None without a test).

    ``unresolvable`` wins: when even the floor is not below alpha, "not significant"
    would suggest the data spoke, when no outcome of these questions could have.
    """
    if p_value is None or floor is None:
        return None
    if floor >= alpha:
        return UNRESOLVABLE
    return SIGNIFICANT if p_value < alpha else NOT_SIGNIFICANT


def sign_flip_p_value(
    differences: FloatArray,
    *,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = DEFAULT_SEED,
    exact_limit: int = EXACT_LIMIT,
) -> tuple[float, str, float]:
    """(p-value, method, standard error): two-sided, over random sign flips of ``differences``.

    Exact when the distribution of the flipped sum fits in ``exact_limit`` points: the
    sum is built one group of equal-sized differences at a time (a group of c equal
    sizes d contributes d * (2B - c), B binomial(c, 1/2)), merging equal sums as it
    goes, so 0/1 metrics are exact at any set size and any metric is exact with up to
    18 discordant questions. Otherwise, with `EDGEWORTH_FROM` discordant questions or
    more, the tail of the distribution's Edgeworth expansion (``edgeworth``, error 0);
    with fewer, (extreme + 1) / (permutations + 1) from seeded random flips, with its
    binomial standard error.
    """
    sizes = np.abs(differences[np.abs(differences) > TIE])
    if sizes.size == 0:
        return 1.0, EXACT, 0.0
    observed = abs(float(differences.sum()))
    exact = _exact_p_value(sizes, observed, exact_limit)
    if exact is not None:
        return exact, EXACT, 0.0
    if sizes.size >= EDGEWORTH_FROM:
        return sign_flip_tail(sizes, observed - _tolerance(observed)), EDGEWORTH, 0.0
    rng = np.random.default_rng(seed + 1)
    count = sizes.size
    extreme = 0
    done = 0
    batch = max(1, min(permutations, _PERMUTATION_CELLS // count))
    while done < permutations:
        size = min(batch, permutations - done)
        signs = rng.integers(0, 2, size=(size, count)) * 2.0 - 1.0
        flipped = np.abs(signs @ sizes)
        extreme += int((flipped >= observed - _tolerance(observed)).sum())
        done += size
    p_value = (extreme + 1) / (permutations + 1)
    return p_value, MONTE_CARLO, math.sqrt(p_value * (1.0 - p_value) / permutations)


def _tolerance(observed: float) -> float:
    # Sums of the same differences in another order may differ in the last bits.
    return 1e-7 * max(1.0, observed)


def _exact_p_value(sizes: FloatArray, observed: float, limit: int) -> float | None:
    """P(|sum of randomly signed sizes| >= observed), or None when it would not fit."""
    from scipy.special import comb, gammaln

    rounded = np.round(sizes, 12)
    distinct, counts = np.unique(rounded, return_counts=True)
    # Without merging the support has prod(count + 1) points. Merging equal sums only
    # pays when the sizes are few (0/1 metrics, reciprocal ranks); with many distinct
    # sizes the sums are nearly all distinct, and the attempt would be wasted work.
    # (summed as logarithms: the product overflows a float past ~1,000 distinct sizes)
    points = float(np.log(counts.astype(np.float64) + 1.0).sum())
    if points > math.log(limit) and distinct.size > _MERGING_SIZES:
        return None
    # Largest groups first: their binomials merge most, keeping the support small.
    order = np.argsort(-counts, kind="stable")
    sums: FloatArray = np.zeros(1)
    weights: FloatArray = np.ones(1)
    for size, count in zip(distinct[order].tolist(), counts[order].tolist(), strict=True):
        if sums.size * (count + 1) > limit * 2:
            return None
        heads = np.arange(count + 1)
        step = size * (2 * heads - count)
        if count <= _DIRECT_BINOMIAL:
            chances = comb(count, heads) / 2.0**count
        else:
            # 2^count and the largest binomial coefficients overflow a float past 1,023
            # equal differences (a 0/1 metric with that many discordant questions).
            chances = np.exp(
                gammaln(count + 1.0)
                - gammaln(heads + 1.0)
                - gammaln(count - heads + 1.0)
                - count * math.log(2.0)
            )
        sums = (sums[:, None] + step[None, :]).ravel()
        weights = (weights[:, None] * chances[None, :]).ravel()
        # Merge sums equal up to rounding, so the support grows with the distinct sums.
        keys, index = np.unique(np.round(sums, 10), return_inverse=True)
        if keys.size > limit:
            return None
        weights = np.bincount(index.ravel(), weights=weights, minlength=keys.size).astype(
            np.float64
        )
        sums = keys.astype(np.float64)
    tail = float(weights[np.abs(sums) >= observed - _tolerance(observed)].sum())
    return min(1.0, tail)


def paired_test(
    baseline: FloatArray,
    candidate: FloatArray,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
    permutations: int = DEFAULT_PERMUTATIONS,
) -> PairedTest:
    """The paired comparison of two runs' per-question values (NaN: undefined).

    With clusters of questions, `retrievalkit.stats.clusters.paired_test_by` makes whole
    clusters the unit.
    """
    both = ~np.isnan(baseline) & ~np.isnan(candidate)
    n = int(both.sum())
    if n == 0:
        return PairedTest(None, None, None, None, None, None, 0)
    base = baseline[both]
    cand = candidate[both]
    diff = cand - base
    p_value, method, error = sign_flip_p_value(diff, permutations=permutations, seed=seed)
    discordant = int((np.abs(diff) > TIE).sum())
    low, high, interval_method = paired_interval(
        diff,
        p_value,
        discordant,
        resamples=resamples,
        confidence=confidence,
        seed=seed,
        permutations=permutations,
    )
    return PairedTest(
        baseline=float(base.mean()),
        candidate=float(cand.mean()),
        difference=float(diff.mean()),
        low=low,
        high=high,
        p_value=p_value,
        n=n,
        discordant=discordant,
        p_floor=p_floor(discordant),
        p_method=method,
        p_error=error,
        interval_method=interval_method,
    )


def paired_interval(
    differences: FloatArray,
    p_value: float,
    discordant: int,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
    permutations: int = DEFAULT_PERMUTATIONS,
) -> tuple[float | None, float | None, str | None]:
    """(low, high, method) of the mean of ``differences``, agreeing with ``p_value``.

    See the module docstring: `constant` without discordant questions, `ADJUSTED_T`
    with fewer than `FEW_DISCORDANT`, BCa beyond; 0 lies inside exactly when
    ``p_value`` is not below alpha = 1 - ``confidence``.
    """
    n = differences.size
    alpha = 1.0 - confidence
    mean = float(differences.mean())
    if discordant == 0:
        lowest, highest = constant_bounds(0.0, n, confidence, (-1.0, 1.0))
        return float(lowest), float(highest), CONSTANT
    low: float | None
    high: float | None
    if discordant < FEW_DISCORDANT:
        from scipy.special import stdtrit

        centre = float(differences.sum()) / (n + 2)
        variance = ((float((differences**2).sum()) + 1.0) / (n + 2) - centre**2) / (n + 2)
        spread = float(stdtrit(discordant + 1, 1.0 - alpha / 2.0)) * math.sqrt(variance)
        low = min(max(-1.0, centre - spread), mean)
        high = max(min(1.0, centre + spread), mean)
        method: str | None = ADJUSTED_T
    else:
        estimate = bootstrap_means(
            differences[:, None],
            np.ones((1, n), dtype=bool),
            resamples=resamples,
            confidence=confidence,
            seed=seed,
            value_range=(-1.0, 1.0),
            binary=False,
        )[0][0]
        low, high, method = estimate.low, estimate.high, estimate.method
    if low is None or high is None:
        return low, high, method
    if p_value >= alpha:
        return min(low, 0.0), max(high, 0.0), method
    if low <= 0.0 <= high:
        bound = _rejection_edge(differences, mean, alpha, permutations, seed)
        low, high = (bound, high) if mean > 0 else (low, bound)
    return low, high, method


def _rejection_edge(
    differences: FloatArray, mean: float, alpha: float, permutations: int, seed: int
) -> float:
    """Between 0 (rejected) and ``mean`` (not): where the sign-flip test of "the mean
    difference is d" stops rejecting, d's test being that of ``differences`` - d.

    Monte Carlo p-values use one set of seeded flips for every d, so the p-value is a
    fixed function of d and the search converges.
    """
    n = differences.size
    signs = None
    if n < LARGE_SAMPLE:
        rng = np.random.default_rng(seed + 2)
        signs = rng.integers(0, 2, size=(permutations, n)) * 2.0 - 1.0

    def rejected(shift: float) -> bool:
        shifted = differences - shift
        sizes = np.abs(shifted[np.abs(shifted) > TIE])
        if sizes.size == 0:
            return False
        observed = abs(float(shifted.sum()))
        tail = _exact_p_value(sizes, observed, EXACT_LIMIT)
        if tail is None and signs is None:
            tail = sign_flip_tail(sizes, observed - _tolerance(observed))
        elif tail is None:
            flipped = np.abs(signs @ np.abs(shifted))
            extreme = int((flipped >= observed - _tolerance(observed)).sum())
            tail = (extreme + 1) / (permutations + 1)
        return tail < alpha

    inside, outside = mean, 0.0
    for _ in range(_BISECTIONS):
        middle = 0.5 * (inside + outside)
        if rejected(middle):
            outside = middle
        else:
            inside = middle
    return inside


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm-Bonferroni adjusted p-values, in the input order; None stays None.

    The i-th smallest of m p-values is multiplied by (m - i + 1), the running maximum
    keeps the adjusted values in the order of the raw ones, and nothing exceeds 1.
    Adjusted values grow with each raw one, so the adjusted floors (``holm`` of the
    floors) are the smallest adjusted p-values the family can reach.
    """
    present = sorted((value, index) for index, value in enumerate(p_values) if value is not None)
    m = len(present)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (value, index) in enumerate(present):
        running = max(running, min(1.0, (m - rank) * value))
        adjusted[index] = running
    return adjusted
