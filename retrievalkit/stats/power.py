"""What a set can detect: the smallest drop the paired test finds at 80 % power, and the
questions a given drop needs.

The test is the one of `retrievalkit.stats.paired` (two-sided sign-flip, alpha = 1 -
confidence), and a drop is detected when that test is significant. Three bases, from
the least to the most informed:

- ``worst case`` (a set alone): a per-question difference lies in [-1, 1], and its
  spread is largest when every question moves by a full 1 either way. The sign-flip
  test is then the exact sign test, whose power is computed exactly.
- ``one run`` (no baseline): a run's own values, with the candidate assumed to vary
  independently of it (no pairing benefit): for a 0/1 metric at rate p, a candidate at
  rate p - d; for a continuous one, the difference of two of the run's values drawn at
  random (a spread sqrt(2) times the run's own).
- ``against baseline``: the discordance (0/1 metrics) or the spread of the differences
  (continuous metrics) actually seen between the run and its baseline.

How the power is found (a row's ``method``):

- `EXACT`, 0/1 metrics: the exact sign test of the discordant questions. With a run's
  rate p (``one run``) the candidate is one at rate p - d independent of it
  (`binary_alternative`); otherwise the discordance is ``max(observed, drop)`` (a drop
  of d needs at least a share d of the questions to change) and the losses outnumber
  the wins by d.
- `SIMULATED`, continuous metrics with a pilot, up to `SIMULATE_UP_TO` questions:
  `SIMULATIONS` seeded sets drawn from the pilot's centred differences, shifted by the
  drop, through the normal tail of the sign-flip test (`simulated_power`).
- `NORMAL`, clusters and larger continuous sets: Phi((d sqrt(n) - z sqrt(sd^2 + d^2)) /
  sd), as the sign-flip test's flips spread by the differences' second moment about 0,
  which a drop adds to (the plain z-test's Phi(d sqrt(n) / sd - z) promises too much
  power at large drops).

The floor of the exact test (at least `min_discordant` questions must differ) is checked
as well. The questions needed for a drop are topic set size design (Sakai 2016, "Topic
set size design", Information Retrieval Journal 19) from a pilot, for the gate's test
rather than the t-test.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

import attrs
import numpy as np
import numpy.typing as npt

from retrievalkit.stats.paired import TIE

if TYPE_CHECKING:
    from retrievalkit.model.values import GoldenQuestionSet, QuestionOutcome

DEFAULT_POWER = 0.8
WORST_CASE = "worst case"
ONE_RUN = "one run"
AGAINST_BASELINE = "against baseline"
#: How a row's power was found: the exact power of the sign-flip test of {-1, 0, 1}
#: differences (0/1 metrics), a seeded simulation of it from the pilot's differences
#: (continuous metrics, up to `SIMULATE_UP_TO` questions), or its normal approximation
#: (continuous metrics past that, and clusters).
EXACT = "exact"
SIMULATED = "simulated"
NORMAL = "normal"
#: Simulated sets per set size, and the seed of their draws: the Monte Carlo standard
#: error of a simulated power near 80 % is sqrt(0.8 x 0.2 / 4000) = 0.6 points.
SIMULATIONS = 4000
SIMULATION_SEED = 2016
#: Set sizes up to which a continuous metric's power is simulated; past it the normal
#: approximation is within a point of the simulation (docs/power.md).
SIMULATE_UP_TO = 2000
#: Pairs of a run's own values drawn for the differences of an independent candidate.
_PILOT_PAIRS = 20_000
#: Sets are searched up to this many questions for "questions needed".
_MAX_QUESTIONS = 10_000_000


@attrs.frozen
class Spread:
    """How per-question differences spread, for one metric: what power depends on."""

    binary: bool
    """0/1 metric: differences are -1, 0 or 1, and ``discordance`` is their share not 0."""
    discordance: float
    """Share of questions whose value changes (0/1 metrics; 1 in the worst case)."""
    sd: float
    """Standard deviation of a per-question difference (continuous metrics); with clusters,
    of a cluster's summed difference in units of the mean cluster size."""
    basis: str
    size_factor: float = 1.0
    """With clusters as the unit, the mean squared cluster size over the squared mean size
    (1 for questions, or clusters of one size): a drop adds that much more to the spread
    of the flips."""
    binary_questions: float = 0.0
    """With clusters of 0/1 values: the mean cluster size. A drop d then moves at least a
    share d of the questions, which spreads the units by d (1 - d) / size at least, however
    alike the runs were."""
    rate: float | None = None
    """0/1 metrics of one run (`ONE_RUN`): the run's rate p. The candidate is then one at
    rate p - d, independent of the run: it wins on (1 - p)(p - d) of the questions and
    loses on p (1 - p + d), so the discordance falls with the drop when p < 1/2 and rises
    when p > 1/2 (2 p (1 - p) holds only at d = 0)."""
    pilot: npt.NDArray[np.float64] | None = attrs.field(default=None, eq=False, repr=False)
    """Continuous metrics: per-question differences of the pilot, centred on 0 (the run
    against its baseline, or pairs of the run's own values). A drop d shifts them by -d,
    and the power is simulated from them (`SIMULATED`)."""

    @property
    def method(self) -> str:
        """How the power of this spread is found: `EXACT`, `SIMULATED` or `NORMAL` (the
        simulation gives way to `NORMAL` past `SIMULATE_UP_TO` questions)."""
        if self.binary and self.size_factor == 1.0:
            return EXACT
        if self.pilot is not None and self.size_factor == 1.0:
            return SIMULATED
        return NORMAL


def min_discordant(alpha: float) -> int:
    """The fewest discordant questions whose floor 2 / 2^m is below alpha."""
    return max(2, math.floor(1.0 + math.log2(1.0 / alpha)) + 1)


def worst_case() -> Spread:
    return Spread(binary=True, discordance=1.0, sd=1.0, basis=WORST_CASE)


def spread_of_run(values: npt.NDArray[np.float64]) -> Spread:
    """From one run's per-question values (NaN: undefined), the candidate independent of it."""
    defined = values[~np.isnan(values)]
    if defined.size == 0:
        return worst_case()
    if np.all((defined == 0.0) | (defined == 1.0)):
        rate = float(defined.mean())
        return Spread(True, 2.0 * rate * (1.0 - rate), 0.0, ONE_RUN, rate=rate)
    return Spread(
        False,
        0.0,
        math.sqrt(2.0) * float(defined.std()),
        ONE_RUN,
        pilot=_independent_differences(defined),
    )


def _independent_differences(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Differences of an independent candidate: every ordered pair of two of ``values``
    (up to `_PILOT_PAIRS` of them, else that many seeded pairs), centred on 0."""
    if values.size * (values.size - 1) <= _PILOT_PAIRS:
        left, right = np.meshgrid(values, values, indexing="ij")
        off = ~np.eye(values.size, dtype=bool)
        pairs = (right - left)[off]
    else:
        rng = np.random.default_rng(SIMULATION_SEED)
        chosen = rng.integers(0, values.size, (2, _PILOT_PAIRS))
        pairs = values[chosen[1]] - values[chosen[0]]
    return np.asarray(pairs - pairs.mean(), dtype=np.float64)


def spread_of_pair(baseline: npt.NDArray[np.float64], candidate: npt.NDArray[np.float64]) -> Spread:
    """From the per-question differences between a run and its baseline."""
    both = ~np.isnan(baseline) & ~np.isnan(candidate)
    if not both.any():
        return worst_case()
    before, after = baseline[both], candidate[both]
    differences = after - before
    if np.all(np.isin(before, (0.0, 1.0))) and np.all(np.isin(after, (0.0, 1.0))):
        return Spread(True, float((np.abs(differences) > TIE).mean()), 0.0, AGAINST_BASELINE)
    centred = np.asarray(differences - differences.mean(), dtype=np.float64)
    return Spread(False, 0.0, float(differences.std()), AGAINST_BASELINE, pilot=centred)


def spread_of_clusters(
    values: npt.NDArray[np.float64],
    clusters: npt.NDArray[np.intp],
    *,
    baseline: npt.NDArray[np.float64] | None = None,
) -> tuple[Spread, int]:
    """(spread, clusters) with whole clusters as the unit, as the clustered paired test
    (the sign-flip test of the clusters' summed differences) takes them.

    ``clusters`` gives each question's cluster code. A cluster's unit is its summed
    difference over the mean cluster size, less its share of the mean difference, so
    that related questions that move together count once: with ``baseline``, of the
    differences seen (`AGAINST_BASELINE`); without, of one run's values, the candidate
    independent of it (`ONE_RUN`, sqrt(2) times their spread). Always continuous (a
    cluster's sum is no 0/1 value), and of clusters of one question exactly the
    per-question spread of a continuous metric.
    """
    if baseline is None:
        defined = ~np.isnan(values)
        measured, basis, scale = values[defined], ONE_RUN, math.sqrt(2.0)
        binary = bool(np.isin(values[defined], (0.0, 1.0)).all())
    else:
        defined = ~np.isnan(values) & ~np.isnan(baseline)
        measured, basis, scale = values[defined] - baseline[defined], AGAINST_BASELINE, 1.0
        binary = bool(np.isin(np.r_[values[defined], baseline[defined]], (0.0, 1.0)).all())
    if not defined.any():
        return worst_case(), 0
    _, codes = np.unique(clusters[defined], return_inverse=True)
    sums = np.bincount(codes, weights=measured)
    sizes = np.bincount(codes).astype(np.float64)
    mean_size = float(sizes.mean())
    units = (sums - sizes * float(measured.mean())) / mean_size
    factor = float((sizes**2).mean()) / mean_size**2
    sd = scale * float(units.std())
    return Spread(False, 0.0, sd, basis, factor, mean_size if binary else 0.0), len(sizes)


def worst_case_of_clusters(clusters: npt.NDArray[np.intp]) -> tuple[Spread, int]:
    """(spread, clusters) when every question moves by a full 1 with its whole cluster."""
    _, codes = np.unique(clusters, return_inverse=True)
    sizes = np.bincount(codes).astype(np.float64)
    if not len(sizes):
        return worst_case(), 0
    factor = float((sizes**2).mean()) / float(sizes.mean()) ** 2
    return Spread(True, 1.0, math.sqrt(factor), WORST_CASE, factor), len(sizes)


def power_at(drop: float, n: int, spread: Spread, alpha: float) -> float:
    """The chance that the paired test finds a drop of ``drop`` with ``n`` questions."""
    if n < min_discordant(alpha) or drop <= 0.0:
        return 0.0
    from scipy.special import ndtr, ndtri

    if spread.binary and spread.size_factor != 1.0:
        # The worst case of clusters of unequal sizes m: each cluster moves by a full 1
        # together, a loss with chance (1 + drop) / 2. In units of the mean size the sum
        # has mean n drop and variance n f (1 - drop^2), its flips spread by sqrt(n f).
        if drop >= 1.0:
            return 1.0
        z = -ndtri(alpha / 2.0)
        factor = spread.size_factor
        return float(
            ndtr((drop * math.sqrt(n) - z * math.sqrt(factor)) / math.sqrt(factor * (1 - drop**2)))
        )
    if spread.binary:
        discordance, lose = binary_alternative(drop, spread)
        return _sign_test_power(drop, n, discordance, alpha, lose=lose)
    if spread.pilot is not None and spread.size_factor == 1.0 and n <= SIMULATE_UP_TO:
        return simulated_power(drop, n, spread.pilot, alpha)

    sd = max(spread.sd, 1e-12)
    if spread.binary_questions:
        sd = max(sd, math.sqrt(drop * max(0.0, 1.0 - drop) / spread.binary_questions))
    # The sign-flip test compares the sum of the differences with the spread of its
    # flips, sqrt(sum of squares): under a drop that is n (sd^2 + drop^2), not n sd^2
    # (clusters of unequal sizes m: n (sd^2 + drop^2 E[m^2] / E[m]^2)).
    critical = -ndtri(alpha / 2.0) * math.sqrt(1.0 + spread.size_factor * (drop / sd) ** 2)
    return float(ndtr(drop * math.sqrt(n) / sd - critical))


def binary_alternative(drop: float, spread: Spread) -> tuple[float, float]:
    """(discordance, share of the discordant questions that are losses) under a drop of
    ``drop``, for a 0/1 metric's spread.

    With the run's rate p (`ONE_RUN`) the candidate is one at rate q = p - d independent
    of it: losses p (1 - q), wins (1 - p) q (a drop past p is one to rate 0). Otherwise
    (the worst case, or the discordance seen against a baseline) the discordance is
    ``max(discordance, d)`` and the losses outnumber the wins by d.
    """
    if spread.rate is not None:
        rate = spread.rate
        after = max(0.0, rate - drop)
        losses, wins = rate * (1.0 - after), (1.0 - rate) * after
        discordance = losses + wins
        if discordance <= 0.0:
            return 0.0, 1.0
        return min(1.0, discordance), losses / discordance
    discordance = min(1.0, max(spread.discordance, drop))
    return discordance, min(1.0, (discordance + drop) / (2.0 * discordance))


def simulated_power(drop: float, n: int, pilot: npt.NDArray[np.float64], alpha: float) -> float:
    """The share of `SIMULATIONS` seeded sets of ``n`` differences, drawn from ``pilot``
    and shifted by -``drop``, whose drop the gate's sign-flip test finds.

    The test rejects when the sum S of the differences lies past z = Phi^-1(1 - alpha/2)
    times the spread of its sign flips, sqrt(sum of squares) Q, and S < 0: the normal
    tail of the sign-flip distribution (within a point of the enumerated and Monte Carlo
    test for sets of 30 and more, docs/power.md). Each set needs only the sum and the
    sum of squares of its draws, kept per size, so every drop is two passes over 4,000
    numbers; the same draws for every drop make the power rise with it.
    """
    from scipy.special import ndtri

    sums, squares = _pilot_sums(n, pilot)
    total = sums - n * drop
    flips = np.sqrt(np.maximum(squares - 2.0 * drop * sums + n * drop * drop, 0.0))
    critical = -float(ndtri(alpha / 2.0))
    return float(np.mean((total < 0.0) & (-total > critical * flips)))


def simulation_error(power: float) -> float:
    """The Monte Carlo standard error of a simulated power."""
    return math.sqrt(max(power * (1.0 - power), 0.0) / SIMULATIONS)


_PILOT_SUMS: dict[tuple[int, int, int], tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]]
_PILOT_SUMS = {}


def _pilot_sums(
    n: int, pilot: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Sum and sum of squares of each of `SIMULATIONS` seeded sets of ``n`` draws from
    ``pilot`` (the last few asked are kept: a search asks one size at many drops)."""
    key = (hash(pilot.tobytes()), pilot.size, n)
    found = _PILOT_SUMS.pop(key, None)
    if found is None:
        rng = np.random.default_rng([SIMULATION_SEED, n])
        sums = np.zeros(SIMULATIONS)
        squares = np.zeros(SIMULATIONS)
        rows = max(1, _DRAWS_PER_BATCH // max(n, 1))
        for start in range(0, SIMULATIONS, rows):
            stop = min(SIMULATIONS, start + rows)
            draws = pilot[rng.integers(0, pilot.size, (stop - start, n))]
            sums[start:stop] = draws.sum(axis=1)
            squares[start:stop] = (draws * draws).sum(axis=1)
        found = (sums, squares)
    _PILOT_SUMS[key] = found
    while len(_PILOT_SUMS) > _CRITICAL_KEPT:
        del _PILOT_SUMS[next(iter(_PILOT_SUMS))]
    return found


#: Draws held in memory at once while simulating (8 MB of float64).
_DRAWS_PER_BATCH = 1_000_000


def _reaches(drop: float, n: int, spread: Spread, alpha: float, power: float) -> bool:
    """Whether ``power_at(drop, n, spread, alpha) >= power``, the same answer to the last
    bit, usually from a fraction of the sign test's terms.

    The exact power sums P(M = m) P(detect | m) over the counts m whose chance is a
    float at all. Summed over a narrower window of counts instead (those within
    n KL(m/n || p) <= K of the centre), the sum falls short of the exact one by the
    chance of the counts left out, which Chernoff's bound puts below 2 e^-K (twice that
    is allowed, for the rounding of the bound itself), and by rounding (the same terms,
    summed in another grouping: far below 1e-12). When the
    partial sum clears ``power`` by more than that, the exact sum falls on the same side;
    otherwise a wider window is tried, and at last the exact power itself. Detection
    searches (`detectable_drop`, `questions_needed`) only ever ask this question, and
    most of their probes are far from the power asked.
    """
    if n < min_discordant(alpha) or drop <= 0.0 or not spread.binary or spread.size_factor != 1:
        return power_at(drop, n, spread, alpha) >= power
    discordance, lose = binary_alternative(drop, spread)
    if discordance <= 0.0:
        return power_at(drop, n, spread, alpha) >= power
    every = _binomial_window(n, discordance)
    for exponent in _QUICK_EXPONENTS:
        low, high = _binomial_window(n, discordance, exponent)
        if (low, high) == every:
            break
        partial = _sign_test_sum(drop, n, discordance, alpha, low, high, lose=lose)
        if partial > power + _ROUNDING:
            return True
        if partial + 4.0 * math.exp(-exponent) + _ROUNDING < power:
            return False
    return _sign_test_power(drop, n, discordance, alpha, lose=lose) >= power


#: The windows `_reaches` tries before the exact power: counts within n KL <= 12 (all
#: but a chance of 1.2e-5 left out), then within 36 (4.6e-16).
_QUICK_EXPONENTS = (12.0, 36.0)
#: Far above the rounding of a float sum of at most 10 million terms below 1.
_ROUNDING = 1e-12


def _sign_test_power(
    drop: float, n: int, discordance: float, alpha: float, *, lose: float | None = None
) -> float:
    """Exact power of the two-sided sign test: M ~ Bin(n, discordance) questions differ,
    each a loss with chance ``lose`` (by default (discordance + drop) / (2 discordance)).

    Only the counts m whose chance is representable at all are evaluated: outside the
    window of `_binomial_window` the chance of m is below the smallest float, so its
    term is exactly 0, as the full sum over 0..n gives it. The sum itself still runs
    over all n + 1 terms, in the same order, so the power is the same to the last bit.
    """
    discordance = min(1.0, discordance)
    if discordance <= 0.0:
        return 0.0
    low, high = _binomial_window(n, discordance)
    return _sign_test_sum(drop, n, discordance, alpha, low, high, whole=True, lose=lose)


def _sign_test_sum(
    drop: float,
    n: int,
    discordance: float,
    alpha: float,
    low: int,
    high: int,
    *,
    whole: bool = False,
    lose: float | None = None,
) -> float:
    """The terms of the sign test's power for the counts ``low..high``, summed (``whole``:
    laid out among the n + 1 terms of every count, the others 0, as the exact power)."""
    binomial = _binomial()
    if lose is None:
        lose = min(1.0, (discordance + drop) / (2.0 * discordance))
    counts = np.arange(low, high + 1)
    critical = _critical_losses(n, alpha)(low, high)
    reachable = critical <= counts
    chance_of_m = _chances(n, discordance, low, high)
    detect = np.where(reachable, binomial.sf(critical - 1.0, counts, lose), 0.0)
    if not whole:
        return float(np.sum(chance_of_m * detect))
    terms = np.zeros(n + 1)
    terms[low : high + 1] = chance_of_m * detect
    return float(np.sum(terms))


_CHANCES: dict[tuple[int, float, int, int], npt.NDArray[np.float64]] = {}


def _chances(n: int, p: float, low: int, high: int) -> npt.NDArray[np.float64]:
    """P(M = m) for m = low..high, M ~ Bin(n, p); the last few asked are kept (a search
    over the drop asks the same ones again while the drop is below the discordance)."""
    key = (n, p, low, high)
    found = _CHANCES.pop(key, None)
    if found is None:
        found = _binomial().pmf(np.arange(low, high + 1), n, p)
    _CHANCES[key] = found
    while len(_CHANCES) > _CRITICAL_KEPT:
        del _CHANCES[next(iter(_CHANCES))]
    return found


class _Binomial(NamedTuple):
    """``scipy.stats.binom``'s pmf, sf and isf, or the same functions without it."""

    pmf: Callable[..., npt.NDArray[np.float64]]
    sf: Callable[..., npt.NDArray[np.float64]]
    isf: Callable[..., npt.NDArray[np.float64]]


@functools.cache
def _binomial() -> _Binomial:
    """The binomial distribution's functions, computing what ``scipy.stats.binom`` does.

    ``scipy.stats`` takes longer to import than the whole evaluation of a small set
    spends on power; its binomial calls the ufuncs of ``scipy.special`` (already
    imported for the intervals), so those are called here directly, with the argument
    handling of ``scipy.stats`` for the arguments this module passes (integer counts,
    chances in [0, 1], tail probabilities strictly between 0 and 1). A SciPy without
    them gets ``scipy.stats.binom`` itself.
    """
    try:
        from scipy.special._ufuncs import (
            _binom_isf,
            _binom_pmf,
            _binom_sf,
        )
    except ImportError:
        return _stats_binomial()

    def pmf(k: npt.ArrayLike, n: npt.ArrayLike, p: float) -> npt.NDArray[np.float64]:
        k, n = np.broadcast_arrays(np.asarray(k, dtype=np.float64), np.asarray(n))
        inside = (k >= 0) & (k <= n) & (np.floor(k) == k)
        output = np.zeros(k.shape)
        output[np.isnan(k)] = np.nan
        output[inside] = np.clip(_binom_pmf(k[inside], n[inside], p), 0.0, 1.0)
        return output

    def sf(k: npt.ArrayLike, n: npt.ArrayLike, p: float) -> npt.NDArray[np.float64]:
        k, n = np.broadcast_arrays(np.asarray(k, dtype=np.float64), np.asarray(n))
        inside = (k >= 0) & (k < n) & np.isfinite(k)
        output = np.zeros(k.shape)
        output[np.isnan(k)] = np.nan
        output[k < 0] = 1.0
        output[inside] = np.clip(_binom_sf(np.floor(k[inside]), n[inside], p), 0.0, 1.0)
        return output

    def isf(q: float, n: npt.ArrayLike, p: float) -> npt.NDArray[np.float64]:
        if not 0.0 < q < 1.0:
            raise ValueError(f"a tail probability strictly between 0 and 1, not {q}")
        result: npt.NDArray[np.float64] = np.asarray(_binom_isf(q, np.asarray(n), p) + 0.0)
        return result

    return _Binomial(pmf, sf, isf)


def _stats_binomial() -> _Binomial:
    from scipy.stats import binom

    return _Binomial(binom.pmf, binom.sf, binom.isf)


#: n * KL(m/n || p) past which Chernoff's bound puts P(M = m) below e^-800 (about
#: 1e-348): far below the smallest subnormal float, so its pmf evaluates to exactly 0.
_NEGLIGIBLE_EXPONENT = 800.0


def _binomial_window(n: int, p: float, exponent: float = _NEGLIGIBLE_EXPONENT) -> tuple[int, int]:
    """A range of counts m outside which P(M = m), M ~ Bin(n, p), is 0 in floats (with
    a smaller ``exponent``: outside which all of them together are at most 2 e^-exponent).

    Chernoff: P(M <= m) <= exp(-n KL(m/n || p)) below the mean (and P(M >= m) above),
    and KL falls towards p from either side, so each end is found by bisection.
    """
    from scipy.special import rel_entr

    def negligible(m: int) -> bool:
        share = m / n
        with np.errstate(all="ignore"):
            divergence = n * (float(rel_entr(share, p)) + float(rel_entr(1.0 - share, 1.0 - p)))
        return divergence > exponent

    centre = min(n, max(0, round(n * p)))
    low, high = 0, centre  # the first count that is not negligible lies in [low, high]
    while low < high:
        middle = (low + high) // 2
        if negligible(middle):
            low = middle + 1
        else:
            high = middle
    first = low
    low, high = centre, n  # the last count that is not negligible lies in [low, high]
    while low < high:
        middle = (low + high + 1) // 2
        if negligible(middle):
            high = middle - 1
        else:
            low = middle
    return first, low


class _CriticalLosses:
    """For m = 0..n, the smallest number of losses out of m whose two-sided sign-test
    p-value is below alpha, computed for a range of m on first use and kept."""

    def __init__(self, n: int, alpha: float) -> None:
        self.alpha = alpha
        self.values = np.zeros(n + 1)
        self.known = np.zeros(n + 1, dtype=bool)

    def __call__(self, low: int, high: int) -> npt.NDArray[np.float64]:
        window: npt.NDArray[np.float64] = self.values[low : high + 1]
        missing = np.flatnonzero(~self.known[low : high + 1])
        if missing.size:
            counts = (missing + low).astype(np.int64)
            # isf gives the smallest c with P(X > c) <= alpha/2; step up while
            # P(X >= c) >= alpha/2.
            critical = _binomial().isf(self.alpha / 2.0, counts, 0.5) + 1.0
            too_likely = _binomial().sf(critical - 1.0, counts, 0.5) * 2.0 >= self.alpha
            window[missing] = np.where(too_likely, critical + 1, critical)
            self.known[missing + low] = True
        return np.array(window)


_CRITICAL: dict[tuple[int, float], _CriticalLosses] = {}
#: Sets sizes whose critical counts are kept at once (a bisection asks one size many times).
_CRITICAL_KEPT = 8


def _critical_losses(n: int, alpha: float) -> _CriticalLosses:
    found = _CRITICAL.pop((n, alpha), None) or _CriticalLosses(n, alpha)
    _CRITICAL[(n, alpha)] = found
    while len(_CRITICAL) > _CRITICAL_KEPT:
        del _CRITICAL[next(iter(_CRITICAL))]
    return found


def detectable_drop(
    n: int, spread: Spread, alpha: float, power: float = DEFAULT_POWER
) -> float | None:
    """The smallest drop found with ``power`` (bisection to 1e-4); None when none can be."""
    if n < min_discordant(alpha) or not _reaches(1.0, n, spread, alpha, power):
        return None
    low, high = 0.0, 1.0
    while high - low > 1e-4:
        middle = (low + high) / 2.0
        if _reaches(middle, n, spread, alpha, power):
            high = middle
        else:
            low = middle
    return high


def questions_needed(
    drop: float, spread: Spread, alpha: float, power: float = DEFAULT_POWER
) -> int | None:
    """About how many questions find a drop of ``drop`` with ``power``; None past 10 million.

    The power of a discrete test saw-tooths with n, so this is the first n of a bisection
    between powers of two, not a guarantee for every larger n.
    """
    high = min_discordant(alpha)
    while not _reaches(drop, high, spread, alpha, power):
        high *= 2
        if high > _MAX_QUESTIONS:
            return None
    low = high // 2
    while high - low > 1:
        middle = (low + high) // 2
        if _reaches(drop, middle, spread, alpha, power):
            high = middle
        else:
            low = middle
    return high


@attrs.frozen
class PowerRow:
    """What one gated metric in one slice can detect."""

    metric: str
    slice: str | None
    n: int
    basis: str
    discordance: float | None
    sd: float | None
    detectable: float | None
    """Smallest drop found at the power asked (None: no drop can be, too few questions)."""
    threshold: float | None = None
    drop: float | None = None
    needed: int | None = None
    """Questions needed to find ``drop`` (None without --drop, or past 10 million)."""
    clusters: int | None = None
    """With clusters as the unit: how many the questions form (``detectable`` is for them)."""
    needed_clusters: int | None = None
    """With clusters: the clusters needed to find ``drop``; ``needed`` is as many clusters
    of the mean size."""
    method: str = EXACT
    """How the power behind ``detectable`` was found: `EXACT`, `SIMULATED` or `NORMAL`."""
    mc_error: float | None = None
    """With `SIMULATED`: the Monte Carlo standard error of the power at ``detectable``."""
    needed_method: str | None = None
    """How the power behind ``needed`` was found (None without ``drop``)."""

    @property
    def below_detectable(self) -> bool:
        """The threshold allows a drop smaller than the set can tell from noise."""
        return self.threshold is not None and (
            self.detectable is None or self.threshold < self.detectable
        )


def power_row(
    metric: str,
    slice_name: str | None,
    n: int,
    spread: Spread,
    *,
    alpha: float,
    power: float = DEFAULT_POWER,
    threshold: float | None = None,
    drop: float | None = None,
    clusters: int | None = None,
) -> PowerRow:
    """What ``n`` questions detect; with ``clusters`` (how many they form, the spread's
    units then), what that many clusters detect."""
    units = n if clusters is None else clusters
    needed_units = None if drop is None else questions_needed(drop, spread, alpha, power)
    needed = needed_units
    if clusters is not None and needed_units is not None:
        needed = math.ceil(needed_units * n / max(clusters, 1))
    detectable = detectable_drop(units, spread, alpha, power)
    method = _method_at(spread, units)
    mc_error = None
    if method == SIMULATED and detectable is not None:
        mc_error = round(simulation_error(power_at(detectable, units, spread, alpha)), 4)
    needed_method = None
    if drop is not None:
        needed_method = _method_at(spread, needed_units or _MAX_QUESTIONS)
    return PowerRow(
        metric=metric,
        slice=slice_name,
        n=n,
        basis=spread.basis,
        discordance=round(spread.discordance, 6) if spread.binary else None,
        sd=None if spread.binary else round(spread.sd, 6),
        detectable=detectable,
        threshold=threshold,
        drop=drop,
        needed=needed,
        clusters=clusters,
        needed_clusters=None if clusters is None else needed_units,
        method=method,
        mc_error=mc_error,
        needed_method=needed_method,
    )


def _method_at(spread: Spread, units: int) -> str:
    method = spread.method
    return NORMAL if method == SIMULATED and units > SIMULATE_UP_TO else method


def undetectable_warning(row: PowerRow) -> str:
    where = f"{row.metric} [{row.slice}]" if row.slice else row.metric
    count = f"{row.n} questions" + ("" if row.clusters is None else f" in {row.clusters} clusters")
    can = (
        f"no drop at all with {count}"
        if row.detectable is None
        else f"{row.detectable:.3f} with {count}"
    )
    return (
        f"{where}: the allowed drop {row.threshold:.3f} is below what this set can detect "
        f"at 80% power ({can}, {row.basis}); a drop between the two passes or fails by chance"
    )


def gated_metrics(
    thresholds: Mapping[str, float], slice_thresholds: Mapping[str, Mapping[str, float]]
) -> list[tuple[str | None, str, float]]:
    """(slice or None, metric, threshold) for every configured threshold, overall first."""
    gates: list[tuple[str | None, str, float]] = [
        (None, metric, threshold) for metric, threshold in sorted(thresholds.items())
    ]
    for name, metrics in sorted(slice_thresholds.items()):
        gates.extend((name, metric, threshold) for metric, threshold in sorted(metrics.items()))
    return gates


@attrs.frozen
class PowerReport:
    """``retrievalkit power``'s answer: one row per gated metric and slice."""

    set_name: str
    questions: int
    alpha: float
    power: float
    evidence: str
    """Where the spreads came from: the set alone, a run, a run against its baseline."""
    rows: tuple[PowerRow, ...]
    drop: float | None = None
    min_discordant: int = 0
    """The fewest questions that must differ for any p below alpha (with clusters:
    clusters)."""
    cluster_by: str | None = None
    """The field whose clusters are the unit of the paired test; None: questions."""


def set_power(
    golden: GoldenQuestionSet,
    thresholds: Mapping[str, float],
    slice_thresholds: Mapping[str, Mapping[str, float]],
    *,
    alpha: float,
    power: float = DEFAULT_POWER,
    drop: float | None = None,
    outcomes: Sequence[QuestionOutcome] | None = None,
    baseline: Sequence[QuestionOutcome] | None = None,
    evidence: str = "the set alone",
    cluster_by: str | None = None,
) -> PowerReport:
    """What ``golden`` can detect for every gated metric and slice.

    Without ``outcomes`` the spread is the worst case and a metric's size is the
    questions that define it (hit@k: all; the others: those with an answer). With
    ``outcomes`` (a run of the set) the run's values give the size and the spread, paired
    with ``baseline``'s when given. With ``cluster_by`` (a field of
    `retrievalkit.stats.clusters`) whole clusters are the unit, as in the clustered
    paired test: the spread is of clusters (`spread_of_clusters`), a drop is detected by
    enough clusters, and the questions needed are that many clusters of the mean size.
    """
    from retrievalkit.metrics.scoring import outcome_values, slice_label, split_slice
    from retrievalkit.stats.clusters import questions_clusters

    questions = golden.questions
    codes: dict[str, int] = {}
    if cluster_by is not None:
        labels = questions_clusters(questions, cluster_by).tolist()
        codes = dict(zip([q.id for q in questions], labels, strict=True))
    rows = []
    for slice_name, metric, threshold in gated_metrics(thresholds, slice_thresholds):
        if slice_name is None:
            members = [question.id for question in questions]
        else:
            field, label = split_slice(slice_name)
            members = [q.id for q in questions if slice_label(q, field) == label]
        member_codes = np.array([codes.get(i, -1 - k) for k, i in enumerate(members)])
        clusters: int | None = None
        if outcomes is None:
            hit = metric.partition("@")[0] == "hit"
            wanted = {q.id for q in questions if hit or q.answerable}
            defining = np.array([i in wanted for i in members], dtype=bool)
            n = int(defining.sum())
            spread = worst_case()
            if codes:
                by_cluster, clusters = worst_case_of_clusters(member_codes[defining])
                if clusters != n:
                    spread = by_cluster
        else:
            values = outcome_values(outcomes, metric)
            run_values = np.array([values.get(i, np.nan) for i in members])
            base_values = None
            if baseline is not None:
                before = outcome_values(baseline, metric)
                base_values = np.array([before.get(i, np.nan) for i in members])
                both = ~np.isnan(run_values) & ~np.isnan(base_values)
                n = int(both.sum())
                spread = spread_of_pair(base_values, run_values)
            else:
                n = int((~np.isnan(run_values)).sum())
                spread = spread_of_run(run_values)
            if codes:
                by_cluster, clusters = spread_of_clusters(
                    run_values, member_codes, baseline=base_values
                )
                if clusters != n:  # else clusters of one question: the per-question test
                    spread = by_cluster
        if clusters == n:
            clusters = None
        rows.append(
            power_row(
                metric,
                slice_name,
                n,
                spread,
                alpha=alpha,
                power=power,
                threshold=threshold,
                drop=drop,
                clusters=clusters,
            )
        )
    return PowerReport(
        set_name=golden.name,
        questions=len(questions),
        alpha=alpha,
        power=power,
        evidence=evidence,
        rows=tuple(rows),
        drop=drop,
        min_discordant=min_discordant(alpha),
        cluster_by=cluster_by,
    )
