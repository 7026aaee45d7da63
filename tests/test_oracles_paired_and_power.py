"""Sign-flip p-values by full enumeration, the few-discordant interval by hand, and the
power of the paired test against scipy's binomial test and normal distribution.

Enumeration is the definition: every one of the 2^m sign patterns (of the questions,
or of whole clusters), the share whose flipped sum is at least as far from 0 as the
observed one.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import binom, binomtest, norm, t

from retrievalkit.stats.clusters import clustered_paired_test
from retrievalkit.stats.paired import (
    ADJUSTED_T,
    EXACT,
    paired_interval,
    paired_test,
    sign_flip_p_value,
)
from retrievalkit.stats.power import (
    Spread,
    _sign_test_power,
    min_discordant,
    power_at,
    spread_of_clusters,
    worst_case_of_clusters,
)

#: Per-question values as metrics give them: 0/1, reciprocal ranks, graded fractions.
VALUES = np.array([0.0, 1.0, 0.5, 1 / 3, 0.25, 0.2, 0.1, 0.6309, 0.7654, 0.4307])


def enumerated(units: np.ndarray) -> float:
    """P(|sum of randomly signed units| >= |observed sum|), over all 2^m patterns."""
    signs = np.array(list(itertools.product([-1.0, 1.0], repeat=units.size)))
    return float(np.mean(np.abs(signs @ units) >= abs(units.sum()) - 1e-9))


def test_sign_flip_p_values_are_the_full_enumeration() -> None:
    """Up to 12 discordant questions, ties and zero differences included: exact."""
    rng = np.random.default_rng(21)
    for _ in range(400):
        n = int(rng.integers(1, 13))
        kind = rng.integers(0, 3)
        if kind == 0:  # metric values: many ties among the differences
            differences = rng.choice(VALUES, n) - rng.choice(VALUES, n)
        elif kind == 1:  # 0/1 metrics
            differences = rng.integers(-1, 2, n).astype(float)
        else:  # all distinct
            differences = rng.uniform(-1, 1, n)
        p_value, method, error = sign_flip_p_value(differences)
        assert method == EXACT and error == 0.0
        assert p_value == pytest.approx(enumerated(differences), abs=1e-12), differences


def test_the_clustered_p_value_enumerates_the_flips_of_whole_clusters() -> None:
    rng = np.random.default_rng(22)
    for _ in range(200):
        clusters = int(rng.integers(1, 11))
        codes = np.repeat(np.arange(clusters), rng.integers(1, 5, clusters))
        codes = codes[rng.permutation(codes.size)]
        baseline = rng.choice(VALUES, codes.size)
        candidate = np.where(
            rng.uniform(size=codes.size) < 0.5, baseline, rng.choice(VALUES, codes.size)
        )
        undefined = rng.uniform(size=codes.size) < 0.1
        baseline[undefined] = np.nan
        both = ~np.isnan(baseline)
        if not both.any():
            continue
        result = clustered_paired_test(baseline, candidate, codes, resamples=20)
        differences = (candidate - baseline)[both]
        sums = np.array([differences[codes[both] == code].sum() for code in np.unique(codes[both])])
        # Each cluster's questions flip together: enumerate the clusters' signs.
        assert result.p_value == pytest.approx(enumerated(sums), abs=1e-12)
        assert result.discordant == int((np.abs(sums) > 1e-12).sum())
        assert result.p_floor == (1.0 if result.discordant <= 1 else 2.0 ** (1 - result.discordant))
        assert result.p_method == "cluster-exact"
        assert result.difference == pytest.approx(differences.mean(), rel=1e-12, abs=1e-15)


def test_the_few_discordant_interval_is_agresti_min_with_t_quantiles() -> None:
    """Fewer than 30 discordant: Agresti & Min (2005) add half an observation to each cell
    of the paired 2 x 2 table: half a win (+1), half a loss (-1) and two halves of a tie
    (0), so n + 2 values whose sum is unchanged and whose sum of squares gains 1; Student's
    t at m + 1 degrees of freedom (scipy); a bound is then stretched to 0 when the test
    finds no difference. Worked: differences (1, 1, 0, 1): mean 3/6 = 0.5, second moment
    (3 + 1)/6, variance of the mean (4/6 - 0.25) / 6 = 0.069444, t_4 at 97.5 % 2.776445,
    so 0.5 -/+ 2.776445 x 0.263523 = [-0.231658, 1.231658] -> [-0.231658, 1]."""
    low, high, method = paired_interval(np.array([1.0, 1.0, 0.0, 1.0]), 0.25, 3)
    assert method == ADJUSTED_T
    assert (low, high) == pytest.approx((-0.231658, 1.0), abs=1e-6)
    rng = np.random.default_rng(23)
    checked = 0
    for _ in range(300):
        n = int(rng.integers(2, 40))
        differences = rng.choice(VALUES, n) - rng.choice(VALUES, n)
        differences[rng.uniform(size=n) < 0.3] = 0.0
        m = int((np.abs(differences) > 1e-12).sum())
        if not 1 <= m < 30:
            continue
        confidence = float(rng.choice([0.9, 0.95]))
        result = paired_test(np.zeros(n), differences, confidence=confidence, resamples=50)
        alpha = 1 - confidence
        p_value = enumerated(differences[np.abs(differences) > 1e-12]) if m <= 12 else None
        if p_value is not None:
            assert result.p_value == pytest.approx(p_value, abs=1e-12)
        if result.p_value is None or result.p_value < alpha:
            continue  # the bound beside 0 is then the inverted test's, not the formula's
        centre = (differences.sum() + 0.5 - 0.5) / (n + 2)
        variance = ((differences**2).sum() + 1) / (n + 2) - centre**2
        spread = t.ppf(1 - alpha / 2, m + 1) * math.sqrt(variance / (n + 2))
        mean = differences.mean()
        want_low = min(min(max(-1.0, centre - spread), mean), 0.0)
        want_high = max(max(min(1.0, centre + spread), mean), 0.0)
        assert result.interval_method == ADJUSTED_T
        assert (result.low, result.high) == pytest.approx((want_low, want_high), abs=1e-12)
        checked += 1
    assert checked > 100


def oracle_sign_test_power(drop: float, n: int, discordance: float, alpha: float) -> float:
    """P(the two-sided exact sign test, scipy's binomtest, rejects with more losses than
    wins), M ~ Bin(n, discordance) discordant questions, each a loss with chance
    (discordance + drop) / (2 discordance)."""
    lose = min(1.0, (discordance + drop) / (2 * discordance))
    total = 0.0
    for m in range(n + 1):
        chance = binom.pmf(m, n, discordance)
        if chance < 1e-300:
            continue
        for losses in range(m + 1):
            if 2 * losses > m and binomtest(losses, m, 0.5).pvalue < alpha:
                total += chance * binom.sf(losses - 1, m, lose)
                break  # every larger count rejects too
    return total


def test_the_exact_sign_test_power_is_scipys_binomial_test() -> None:
    """Significant is p < alpha, not p <= alpha: at alpha = 2 / 2^m (0.0625, 0.125) the
    all-losses pattern of m discordant questions has p exactly alpha and is not."""
    rng = np.random.default_rng(24)
    for _ in range(30):
        n = int(rng.integers(6, 60))
        discordance = float(rng.uniform(0.05, 1.0))
        drop = float(rng.uniform(0.0, discordance))
        alpha = float(rng.choice([0.01, 0.05, 0.1, 2.0**-4, 2.0**-3]))
        assert _sign_test_power(drop, n, discordance, alpha) == pytest.approx(
            oracle_sign_test_power(drop, n, discordance, alpha), abs=1e-12
        ), (n, discordance, drop, alpha)
        assert power_at(drop, n, Spread(True, discordance, 0.0, "t"), alpha) == pytest.approx(
            oracle_sign_test_power(drop, n, max(discordance, drop), alpha), abs=1e-12
        )


def test_the_fewest_discordant_questions_is_the_first_floor_below_alpha() -> None:
    for alpha in (0.001, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3):
        fewest = next(m for m in range(2, 40) if 2.0 / 2.0**m < alpha)
        assert min_discordant(alpha) == fewest, alpha


def test_continuous_power_is_the_documented_normal_formula() -> None:
    """Phi((d sqrt(n) - z sqrt(sd^2 + f d^2)) / sd) (docs/power.md), scipy's norm."""
    rng = np.random.default_rng(25)
    for _ in range(300):
        n = int(rng.integers(6, 5000))
        sd = float(rng.uniform(0.01, 0.6))
        drop = float(rng.uniform(0.001, 0.5))
        factor = float(rng.choice([1.0, rng.uniform(1.0, 3.0)]))
        alpha = float(rng.choice([0.01, 0.05, 0.1]))
        z = norm.ppf(1 - alpha / 2)
        want = norm.cdf((drop * math.sqrt(n) - z * math.sqrt(sd**2 + factor * drop**2)) / sd)
        got = power_at(drop, n, Spread(False, 0.0, sd, "t", factor), alpha)
        assert got == pytest.approx(want, rel=1e-9, abs=1e-12)


def test_the_clustered_worst_case_power_is_the_normal_formula() -> None:
    """Clusters of unequal sizes that move by a full 1 together: in units of the mean size
    the sum has mean n d and variance n f (1 - d^2), its flips spread sqrt(n f), with
    f = E[m^2] / E[m]^2. Worked: sizes 1 and 3: E[m] = 2, E[m^2] = 5, f = 1.25."""
    spread, count = worst_case_of_clusters(np.repeat([0, 1], [1, 3]))
    assert count == 2 and spread.size_factor == pytest.approx(1.25)
    rng = np.random.default_rng(26)
    for _ in range(100):
        sizes = rng.integers(1, 9, int(rng.integers(2, 60)))
        if np.all(sizes == sizes[0]):
            continue
        spread, count = worst_case_of_clusters(np.repeat(np.arange(sizes.size), sizes))
        factor = float((sizes**2).mean() / sizes.mean() ** 2)
        assert count == sizes.size and spread.size_factor == pytest.approx(factor, rel=1e-12)
        n = int(rng.integers(6, 3000))
        drop = float(rng.uniform(0.001, 0.9))
        z = norm.ppf(0.975)
        want = norm.cdf(
            (drop * math.sqrt(n) - z * math.sqrt(factor)) / math.sqrt(factor * (1 - drop**2))
        )
        assert power_at(drop, n, spread, 0.05) == pytest.approx(want, rel=1e-9, abs=1e-12)


def test_the_clustered_spread_worked_example() -> None:
    """Clusters {a: 3 questions, b: 1}, differences a = (0.2, 0.2, 0.5), b = (-0.1): mean
    size 2, mean difference 0.8 / 4 = 0.2, units ((0.9 - 3 x 0.2) / 2, (-0.1 - 0.2) / 2) =
    (0.15, -0.15), sd 0.15; factor E[m^2] / E[m]^2 = 5 / 4."""
    baseline = np.array([0.3, 0.3, 0.2, 0.6])
    candidate = baseline + np.array([0.2, 0.2, 0.5, -0.1])
    spread, count = spread_of_clusters(candidate, np.array([0, 0, 0, 1]), baseline=baseline)
    assert count == 2 and not spread.binary
    assert spread.sd == pytest.approx(0.15, rel=1e-12)
    assert spread.size_factor == pytest.approx(1.25, rel=1e-12)
    assert spread.binary_questions == 0.0
    # One run: sqrt(2) times the spread of its own units (values 0.3, 0.3, 0.2 | 0.6: mean
    # 0.35, units ((0.8 - 1.05) / 2, (0.6 - 0.35) / 2) = (-0.125, 0.125)).
    spread, _ = spread_of_clusters(baseline, np.array([0, 0, 0, 1]))
    assert spread.sd == pytest.approx(math.sqrt(2) * 0.125, rel=1e-12)
    # 0/1 values: the mean cluster size bounds the units' spread from below.
    hits = np.array([1.0, 1.0, 0.0, 1.0])
    spread, _ = spread_of_clusters(hits, np.array([0, 0, 0, 1]), baseline=hits)
    assert spread.binary_questions == 2.0 and spread.sd == 0.0
    drop = 0.1
    want = norm.cdf(
        drop * math.sqrt(40) / math.sqrt(drop * 0.9 / 2)
        - norm.ppf(0.975) * math.sqrt(1 + 1.25 * drop**2 / (drop * 0.9 / 2))
    )
    assert power_at(drop, 40, spread, 0.05) == pytest.approx(want, rel=1e-9)


@pytest.mark.timeout(600)
def test_clustered_power_holds_in_a_seeded_simulation() -> None:
    """The clustered `power` at its own detectable drop, against the sign-flip test of
    cluster sums on 400 simulated sets: 80 % within 3.5 standard errors (2 points each)."""
    from retrievalkit.stats.power import detectable_drop

    rng = np.random.default_rng(27)
    sizes = rng.integers(1, 8, 80)
    codes = np.repeat(np.arange(sizes.size), sizes)

    def differences(layout: np.ndarray, clusters: int) -> np.ndarray:
        # Related questions move together: a cluster effect, and each question's own.
        effects = rng.normal(0, 0.15, clusters)
        return effects[layout] + rng.normal(0, 0.1, layout.size)

    # The spread from a pilot of the same cluster sizes, 25 times over (sd within 3 %).
    pilot_codes = np.repeat(np.arange(sizes.size * 25), np.tile(sizes, 25))
    pilot = differences(pilot_codes, sizes.size * 25)
    spread, _ = spread_of_clusters(pilot, pilot_codes, baseline=np.zeros(pilot.size))
    drop = detectable_drop(sizes.size, spread, 0.05)
    assert drop is not None and 0.01 < drop < 0.3
    found = 0
    runs = 400
    for _ in range(runs):
        sums = np.bincount(codes, weights=differences(codes, sizes.size) - drop)
        p_value, _, _ = sign_flip_p_value(sums, permutations=2000)
        found += p_value < 0.05 and sums.sum() < 0
    error = math.sqrt(0.8 * 0.2 / runs)
    assert abs(found / runs - 0.8) < 3.5 * error + 0.01, (found / runs, drop)


def test_the_bound_beside_zero_is_where_the_enumerated_test_stops_rejecting() -> None:
    """When the test rejects but the interval holds 0, the bound beside 0 moves to the d
    where the test of "the mean difference is d" (the differences less d, enumerated)
    stops rejecting: just inside it the test does not reject, just outside it does."""
    rng = np.random.default_rng(28)
    checked = 0
    for _ in range(3000):
        n = int(rng.integers(6, 13))
        differences = rng.choice(VALUES, n) - rng.choice(VALUES, n)
        if abs(differences.mean()) < 0.05:
            continue
        m = int((np.abs(differences) > 1e-12).sum())
        p_value = enumerated(differences[np.abs(differences) > 1e-12])
        low, high, _ = paired_interval(differences, p_value, m)
        if p_value >= 0.05 or low is None or high is None:
            continue
        mean = differences.mean()
        # Only where the Agresti-Min interval (as in the test above) holds 0.
        centre = differences.sum() / (n + 2)
        variance = (((differences**2).sum() + 1) / (n + 2) - centre**2) / (n + 2)
        spread = t.ppf(0.975, m + 1) * math.sqrt(variance)
        if not centre - spread <= 0.0 <= centre + spread:
            continue
        bound = low if mean > 0 else high
        step = abs(mean) * 1e-6
        toward_mean = bound + np.sign(mean) * step
        toward_zero = bound - np.sign(mean) * step

        def p_at(d: float, differences: np.ndarray = differences) -> float:
            shifted = differences - d
            return enumerated(shifted[np.abs(shifted) > 1e-12])

        assert 0.0 < bound / mean < 1.0
        assert p_at(toward_mean) >= 0.05 and p_at(toward_zero) < 0.05, (differences, bound)
        checked += 1
    assert checked >= 20


def test_monte_carlo_p_values_agree_with_the_enumeration_past_its_limit() -> None:
    """19-21 distinct differences: too many sums to enumerate in retrievalkit (2^18
    points), so the p-value is (extreme + 1) / (flips + 1) from 10,000 seeded flips; the
    brute-force enumeration of all 2^m patterns here puts it within 4 of its reported
    standard errors (plus the +1's bias)."""
    from retrievalkit.stats.paired import MONTE_CARLO

    rng = np.random.default_rng(29)
    for _ in range(4):
        m = int(rng.integers(19, 22))
        differences = rng.uniform(0.05, 1.0, m) * rng.choice([-1.0, 1.0], m)
        differences += rng.uniform(0.0, 0.3) / m * np.sign(differences.sum())
        p_value, method, error = sign_flip_p_value(differences)
        observed = abs(differences.sum()) - 1e-9
        extreme = 0
        tail = np.array(list(itertools.product([-1.0, 1.0], repeat=m - 6)))
        for first in range(1 << 6):  # the first six signs, then all the others at once
            head = np.array([1.0 if first >> bit & 1 else -1.0 for bit in range(6)])
            extreme += int(
                (np.abs(tail @ differences[6:] + head @ differences[:6]) >= observed).sum()
            )
        exact = extreme / 2.0**m
        assert 0.01 < exact < 0.9 and method == MONTE_CARLO
        assert error == pytest.approx(math.sqrt(p_value * (1 - p_value) / 10_000), rel=1e-9)
        assert abs(p_value - exact) < 4 * math.sqrt(exact * (1 - exact) / 10_000) + 2e-4, (
            p_value,
            exact,
        )


def test_the_edgeworth_tail_is_the_documented_expansion() -> None:
    """2 (1 - Phi(z) + phi(z) g (z^3 - 3 z) / 24), z = s / sqrt(sum d^2), g = -2 sum d^4 /
    (sum d^2)^2 (docs/metrics.md), with scipy's normal distribution; and within 0.002 of
    the enumerated tail for 20 sizes (where the expansion is already close)."""
    from retrievalkit.stats.large_samples import sign_flip_tail

    rng = np.random.default_rng(30)
    for _ in range(200):
        sizes = rng.uniform(0.01, 1.0, int(rng.integers(2, 3000)))
        observed = float(rng.uniform(0, 3.5) * math.sqrt((sizes**2).sum()))
        z = observed / math.sqrt((sizes**2).sum())
        g = -2 * (sizes**4).sum() / (sizes**2).sum() ** 2
        want = 2 * (norm.sf(z) + norm.pdf(z) * g * (z**3 - 3 * z) / 24)
        assert sign_flip_tail(sizes, observed) == pytest.approx(
            min(1.0, max(0.0, want)), rel=1e-9, abs=1e-15
        )
    tail = np.array(list(itertools.product([-1.0, 1.0], repeat=20)))
    for _ in range(3):
        sizes = rng.uniform(0.2, 1.0, 20)
        flips = np.abs(tail @ sizes)
        for z in (1.0, 1.96, 2.5):
            observed = z * math.sqrt((sizes**2).sum())
            exact = float(np.mean(flips >= observed))
            assert sign_flip_tail(sizes, observed) == pytest.approx(exact, abs=0.002)


def test_the_worst_case_is_every_question_discordant_in_scipys_binomial_test() -> None:
    """Without a run the spread is the worst case: every question differs between the
    runs, so the sign test has all n questions and a drop d makes each a loss with
    chance (1 + d) / 2 (scipy's binomial, `oracle_sign_test_power`)."""
    from retrievalkit.stats.power import EXACT as EXACT_POWER
    from retrievalkit.stats.power import WORST_CASE, worst_case

    spread = worst_case()
    assert spread.binary and spread.method == EXACT_POWER and spread.basis == WORST_CASE
    for n, drop, alpha in ((12, 0.5, 0.05), (40, 0.3, 0.05), (75, 0.2, 0.1)):
        assert power_at(drop, n, spread, alpha) == pytest.approx(
            oracle_sign_test_power(drop, n, 1.0, alpha), abs=1e-12
        )


def test_the_spreads_of_0_1_runs_are_exact_and_of_others_simulated() -> None:
    """0/1 values: a discordance (one run: 2 p (1 - p) at the run's rate p; a pair: the
    share of questions that differ), the sign test's exact power. Other values: the sd of
    the differences (one run: sqrt 2 x the values' sd, an independent candidate's), with
    the centred differences as the pilot of the simulation."""
    from retrievalkit.stats.power import (
        AGAINST_BASELINE,
        ONE_RUN,
        SIMULATED,
        spread_of_pair,
        spread_of_run,
    )
    from retrievalkit.stats.power import EXACT as EXACT_POWER

    hits = np.array([1.0, 0.0, 1.0, 1.0, np.nan])
    run = spread_of_run(hits)
    assert (run.binary, run.discordance, run.basis, run.rate) == (True, 0.375, ONE_RUN, 0.75)
    assert run.method == EXACT_POWER and run.sd == 0.0
    assert spread_of_run(np.array([1.0])).rate == 1.0  # one defined value has a rate
    values = np.array([0.2, 0.5, 0.9, 0.4])
    continuous = spread_of_run(values)
    assert not continuous.binary and continuous.discordance == 0.0
    assert continuous.sd == pytest.approx(math.sqrt(2.0) * np.std(values))
    assert continuous.method == SIMULATED and continuous.basis == ONE_RUN
    baseline = np.array([1.0, 0.0, 1.0, 0.0, np.nan, 1.0])
    candidate = np.array([1.0, 1.0, 0.0, 0.0, 1.0, np.nan])
    pair = spread_of_pair(baseline, candidate)  # the four questions both have: two differ
    assert (pair.binary, pair.discordance, pair.sd, pair.basis) == (
        True,
        0.5,
        0.0,
        AGAINST_BASELINE,
    )
    before, after = np.array([0.2, 0.5, 0.9, np.nan]), np.array([0.3, 0.3, 0.9, 0.1])
    graded = spread_of_pair(before, after)
    differences = np.array([0.1, -0.2, 0.0])
    assert not graded.binary and graded.discordance == 0.0 and graded.basis == AGAINST_BASELINE
    assert graded.sd == pytest.approx(np.std(differences))
    assert graded.pilot is not None
    assert graded.pilot == pytest.approx(differences - differences.mean())
    assert graded.method == SIMULATED
