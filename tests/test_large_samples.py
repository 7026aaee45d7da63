"""Intervals of large runs: the analytic ABC limit of BCa, and small cells resampled alone.

The claims of `retrievalkit.stats.large_samples` are measured here, on real per-query
BM25 values (SciFact), by simulations that could fail: ABC agrees with BCa run with
many resamples far within the Monte Carlo error of the default 2,000; it covers the
true mean at the nominal rate; a small slice of a large run, resampled on its own
members, gets the interval the whole-run resampling gives it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

import retrievalkit.stats.intervals as intervals
from retrievalkit.stats.intervals import (
    ABC,
    BCA,
    CLOPPER_PEARSON,
    CONSTANT,
    bootstrap_means,
    sample_intervals,
)
from retrievalkit.stats.large_samples import LARGE_SAMPLE, cell_resampled_means, centred_sums
from retrievalkit.stats.paired import paired_test


def whole_run_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every run resample whole, as runs below LARGE_SAMPLE questions do."""
    monkeypatch.setattr(intervals, "LARGE_SAMPLE", 10**12)


@pytest.mark.parametrize("metric", ["rr", "ndcg@10", "ap@10"])
def test_abc_bounds_agree_with_bca_from_many_resamples(
    bm25_populations: dict[str, npt.NDArray[np.float64]],
    metric: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(7)
    population = bm25_populations[metric]
    values = population[rng.integers(0, len(population), LARGE_SAMPLE)][:, None]
    groups = np.ones((1, LARGE_SAMPLE), dtype=bool)
    analytic = bootstrap_means(values, groups)[0][0]
    assert analytic.method == ABC
    whole_run_path(monkeypatch)
    resampled = bootstrap_means(values, groups, resamples=20_000)[0][0]
    assert resampled.method == BCA
    assert analytic.mean == resampled.mean
    error = float(values.std()) / np.sqrt(LARGE_SAMPLE)
    # 20,000 resamples leave about 0.02 standard errors of Monte Carlo noise on a bound,
    # the default 2,000 about 0.06: ABC must sit well inside the latter.
    assert analytic.low is not None and resampled.low is not None
    assert analytic.high is not None and resampled.high is not None
    assert abs(analytic.low - resampled.low) < 0.05 * error
    assert abs(analytic.high - resampled.high) < 0.05 * error


def abc_coverage(
    population: npt.NDArray[np.float64], samples: int, confidence: float, seed: int
) -> float:
    rng = np.random.default_rng(seed)
    truth = float(population.mean())
    covered = 0
    for _ in range(samples // 250):
        drawn = population[rng.integers(0, len(population), (250, LARGE_SAMPLE))]
        low, high, methods = sample_intervals(drawn, confidence=confidence)
        assert set(methods.tolist()) == {ABC}
        covered += int(np.sum((low <= truth) & (truth <= high)))
    return covered / samples


@pytest.mark.parametrize("metric", ["rr", "ndcg@10", "ap@10"])
def test_abc_covers_the_true_mean_at_the_nominal_rate(
    bm25_populations: dict[str, npt.NDArray[np.float64]], metric: str
) -> None:
    # 4,000 samples of 10,000 questions: a standard error of 0.0034 near 95 %; three of
    # them either side, so a 92.5 % interval falls out of the window.
    population = bm25_populations[metric]
    value = abc_coverage(population, 4000, 0.95, seed=3)
    assert abs(value - 0.95) <= 0.0105, value
    narrower = abc_coverage(population, 4000, 0.925, seed=3)
    assert not abs(narrower - 0.95) <= 0.0105, narrower


def test_cells_of_a_large_run_choose_their_method_by_size() -> None:
    rng = np.random.default_rng(11)
    count = LARGE_SAMPLE + 500
    continuous = rng.beta(0.5, 2.0, count)
    hits = (rng.random(count) < 0.4).astype(np.float64)
    values = np.column_stack([continuous, hits])
    small = np.zeros(count, dtype=bool)
    small[rng.choice(count, 300, replace=False)] = True
    groups = np.array([np.ones(count, dtype=bool), small, ~small])
    (whole, small_slice, rest) = bootstrap_means(values, groups)
    assert [estimate.method for estimate in whole] == [ABC, CLOPPER_PEARSON]
    assert [estimate.method for estimate in small_slice] == [BCA, CLOPPER_PEARSON]
    assert [estimate.method for estimate in rest] == [ABC, CLOPPER_PEARSON]
    for estimate in (*whole, *small_slice, *rest):
        assert estimate.low is not None and estimate.high is not None
        assert estimate.mean is not None
        assert estimate.low < estimate.mean < estimate.high
    # The same inputs give the same digits.
    assert bootstrap_means(values, groups) == [whole, small_slice, rest]
    # No resamples asked for: no interval for a bootstrap cell, analytic or not.
    unresampled = bootstrap_means(values, groups, resamples=0)
    assert [estimate.method for estimate in unresampled[0]] == [None, CLOPPER_PEARSON]
    assert unresampled[0][0].low is None
    assert unresampled[1][0].method is None


def test_a_small_slice_of_a_large_run_gets_the_whole_run_resampling_interval(
    bm25_populations: dict[str, npt.NDArray[np.float64]], monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(5)
    population = bm25_populations["ndcg@10"]
    count = LARGE_SAMPLE
    values = population[rng.integers(0, len(population), count)][:, None]
    sliced = np.zeros(count, dtype=bool)
    sliced[:400] = True
    groups = np.array([np.ones(count, dtype=bool), sliced])
    alone = bootstrap_means(values, groups, resamples=8000)[1][0]
    assert alone.method == BCA
    whole_run_path(monkeypatch)
    shared = bootstrap_means(values, groups, resamples=8000)[1][0]
    assert alone.mean == pytest.approx(shared.mean, rel=1e-12)
    # 8,000 resamples: each bound carries about 0.03 standard errors of Monte Carlo
    # noise, so the two paths' bounds differ by about 0.04 of them; a slice resampled
    # with a fixed size would still agree, but a wrong size or members would not.
    error = float(values[:400].std()) / np.sqrt(400)
    assert alone.low is not None and shared.low is not None
    assert alone.high is not None and shared.high is not None
    assert abs(alone.low - shared.low) < 0.2 * error
    assert abs(alone.high - shared.high) < 0.2 * error


def test_a_cells_resampled_size_is_binomial_as_in_the_whole_run() -> None:
    count = 1_000_000
    members = np.ones((2, 1))  # two members out of a million: often no draw lands
    means = cell_resampled_means(members, count, 20_000, seed=1, stream=0)
    landed = ~np.isnan(means[:, 0])
    assert np.all(means[landed, 0] == 1.0)
    # Binomial(10^6, 2e-6) is 0 with chance exp(-2) = 0.1353; 20,000 resamples give a
    # standard error of 0.0024.
    assert abs((~landed).mean() - np.exp(-2.0)) < 0.0075
    # The spread of a resampled mean of 0/1 members follows the draws landing, not the
    # members: p(1 - p) / E[K] with E[K] = members.
    coin = np.array([[0.0], [1.0]] * 200)
    spread = cell_resampled_means(coin, count, 20_000, seed=2, stream=0)[:, 0]
    assert abs(spread.mean() - 0.5) < 0.002
    assert abs(spread.var() / (0.25 / 400) - 1.0) < 0.05


def test_centred_sums_match_a_direct_computation() -> None:
    rng = np.random.default_rng(3)
    count = 70_000  # more than one chunk
    values = rng.beta(0.4, 1.5, (count, 3))
    values[rng.random((count, 3)) < 0.2] = np.nan
    defined = ~np.isnan(values)
    groups = np.array([np.ones(count, dtype=bool), rng.random(count) < 0.1])
    squares, cubes = centred_sums(np.where(defined, values, 0.0), defined, groups)
    for group, mask in enumerate(groups):
        for metric in range(3):
            member = values[mask & defined[:, metric], metric]
            deviation = member - member.mean()
            assert squares[group, metric] == pytest.approx(np.sum(deviation**2), rel=1e-9)
            assert cubes[group, metric] == pytest.approx(np.sum(deviation**3), rel=1e-6)


@pytest.mark.filterwarnings("error")
def test_a_large_paired_comparison_gets_the_analytic_interval() -> None:
    # (with thousands of distinct differences, and no overflow warning on the way)
    rng = np.random.default_rng(9)
    baseline = rng.beta(0.6, 1.2, LARGE_SAMPLE + 1)
    candidate = np.clip(baseline + rng.normal(0.01, 0.1, baseline.size), 0.0, 1.0)
    test = paired_test(baseline, candidate)
    assert test.low is not None and test.high is not None
    difference = candidate - baseline
    error = float(difference.std()) / np.sqrt(difference.size)
    assert test.low < float(difference.mean()) < test.high
    assert abs((test.high - test.low) - 2 * 1.959964 * error) < 0.02 * error


def test_small_cells_covering_a_large_run_share_the_whole_run_resamples(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(13)
    count = LARGE_SAMPLE + 1000
    values = rng.beta(0.5, 2.0, (count, 2))
    labels = rng.integers(0, 40, count)  # forty slices of about 275: they cover the run
    groups = np.array([np.ones(count, dtype=bool), *(labels == label for label in range(40))])
    large = bootstrap_means(values, groups)
    assert {estimate.method for estimate in large[0]} == {ABC}
    assert {estimate.method for row in large[1:] for estimate in row} == {BCA}
    whole_run_path(monkeypatch)
    whole = bootstrap_means(values, groups)
    # The same resamples as a smaller run would draw: the same bounds but for rounding
    # in the slice sums and the acceleration.
    for row, expected in zip(large[1:], whole[1:], strict=True):
        for estimate, reference in zip(row, expected, strict=True):
            assert estimate.mean == pytest.approx(reference.mean, rel=1e-12)
            assert estimate.low == pytest.approx(reference.low, rel=1e-9)
            assert estimate.high == pytest.approx(reference.high, rel=1e-9)


@pytest.mark.parametrize("metrics", [1, 4])
def test_a_large_runs_cells_are_summed_as_a_smaller_runs_are(
    metrics: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(17)
    count = LARGE_SAMPLE + 70_001  # more than one chunk of the one-pass statistics
    values = rng.beta(0.5, 2.0, (count, metrics))
    values[:, 0] = rng.random(count) < 0.3  # a 0/1 metric
    values[rng.random((count, metrics)) < 0.1] = np.nan
    forms = rng.integers(0, 3, count)
    tiny = np.zeros(count, dtype=bool)
    tiny[[5, 70_000]] = True  # one value each side of a chunk boundary
    values[tiny, -1] = 0.25  # ... the same value: a constant cell
    groups = np.array(
        [np.ones(count, dtype=bool), *(forms == form for form in range(3)), tiny, ~tiny]
    )
    large = bootstrap_means(values, groups, resamples=0)
    whole_run_path(monkeypatch)
    small = bootstrap_means(values, groups, resamples=0)
    for group, (row, expected) in enumerate(zip(large, small, strict=True)):
        for estimate, reference in zip(row, expected, strict=True):
            assert estimate.n == reference.n
            assert estimate.method == reference.method
            if group == 0:  # the whole run: summed in order, to the last bit
                assert estimate.mean == reference.mean
            else:
                assert estimate.mean == pytest.approx(reference.mean, rel=1e-12)
            if reference.method in (CLOPPER_PEARSON, CONSTANT):
                assert estimate.low == pytest.approx(reference.low, rel=1e-12)
                assert estimate.high == pytest.approx(reference.high, rel=1e-12)
    assert large[4][-1].method == CONSTANT
    if metrics > 1:  # (a single column holds the constant cell's 0.25s too)
        assert large[0][0].method == CLOPPER_PEARSON


@pytest.mark.parametrize("target", [0.3, 0.05, 0.005])
def test_the_edgeworth_tail_matches_full_enumeration(target: float) -> None:
    from scipy.special import ndtri

    from retrievalkit.stats.large_samples import sign_flip_tail
    from retrievalkit.stats.paired import EXACT_LIMIT, _exact_p_value

    # Mostly one size of difference, a few of two others: the exact distribution can
    # still be enumerated, and the sum moves in steps, the hardest case for a smooth
    # expansion.
    sizes = np.repeat([1.0, 0.5, 0.25], [LARGE_SAMPLE + 1950, 42, 20])
    observed = float(-ndtri(target / 2.0) * np.sqrt(np.sum(sizes**2)))
    exact = _exact_p_value(sizes, observed, EXACT_LIMIT)
    assert exact is not None
    assert exact == pytest.approx(target, rel=0.1)
    assert abs(sign_flip_tail(sizes, observed) - exact) < 1e-3 * max(1.0, 10 * target)


@pytest.mark.parametrize("target", [0.3, 0.05, 0.005])
@pytest.mark.parametrize("mix", [(930, 42, 20, 8), (500, 250, 125, 125)])
def test_from_a_thousand_discordant_questions_edgeworth_beats_monte_carlo(
    target: float, mix: tuple[int, ...]
) -> None:
    # Where the p-value switches from 10,000 seeded flips to the Edgeworth tail, the tail
    # must be closer to the enumerated p-value than half the flips' standard error.
    from scipy.special import ndtri

    from retrievalkit.stats.large_samples import sign_flip_tail
    from retrievalkit.stats.paired import DEFAULT_PERMUTATIONS, EDGEWORTH_FROM, _exact_p_value

    sizes = np.repeat([1.0, 0.5, 0.25, 0.2], mix)
    assert sizes.size == EDGEWORTH_FROM
    observed = float(-ndtri(target / 2.0) * np.sqrt(np.sum(sizes**2)))
    exact = _exact_p_value(sizes, observed, 1 << 24)
    assert exact is not None and exact == pytest.approx(target, rel=0.1)
    error = np.sqrt(exact * (1 - exact) / DEFAULT_PERMUTATIONS)
    assert abs(sign_flip_tail(sizes, observed) - exact) < error / 2


def test_a_large_paired_test_gives_the_edgeworth_p_value(monkeypatch: pytest.MonkeyPatch) -> None:
    import retrievalkit.stats.paired as paired

    rng = np.random.default_rng(23)
    baseline = rng.beta(0.6, 1.2, LARGE_SAMPLE)
    candidate = np.clip(baseline + rng.normal(0.002, 0.1, baseline.size), 0.0, 1.0)
    test = paired_test(baseline, candidate)
    assert test.p_method == paired.EDGEWORTH
    assert test.p_error == 0.0
    assert test.p_value is not None and 0.0 < test.p_value < 1.0
    # The Monte Carlo test of a smaller run, on the same differences, agrees within its
    # own standard error.
    monkeypatch.setattr(paired, "EDGEWORTH_FROM", 10**12)
    sampled = paired_test(baseline, candidate)
    assert sampled.p_method == paired.MONTE_CARLO
    assert sampled.p_value is not None and sampled.p_error is not None
    assert abs(test.p_value - sampled.p_value) < 4 * sampled.p_error + 1e-3
    assert test.difference == sampled.difference


@pytest.mark.parametrize("discordant", [1000, 1024, 5000, 200_000])
def test_a_sign_test_with_thousands_of_discordant_questions_is_exact(discordant: int) -> None:
    from scipy.stats import binomtest

    rng = np.random.default_rng(discordant)
    baseline = (rng.random(discordant + 50) < 0.5).astype(np.float64)
    candidate = baseline.copy()
    changed = rng.choice(baseline.size, discordant, replace=False)
    # A 0/1 metric: every discordant question moves by 1, up or (a little more often) down.
    up = rng.random(discordant) < 0.49
    baseline[changed] = np.where(up, 0.0, 1.0)
    candidate[changed] = np.where(up, 1.0, 0.0)
    test = paired_test(baseline, candidate)
    assert test.discordant == discordant
    assert test.p_method == "exact"
    expected = binomtest(int(up.sum()), discordant, 0.5).pvalue
    assert test.p_value == pytest.approx(expected, rel=1e-9, abs=1e-300)
