"""Intervals by kind: exact binomial for 0/1 values, BCa as scipy computes it, and the edges."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

from retrievalkit.stats import intervals
from retrievalkit.stats.intervals import Estimate, bootstrap_means


def _values(seed: int, count: int = 2000) -> np.ndarray:
    """Columns shaped like metrics: a hit rate, a reciprocal rank, a graded score."""
    rng = np.random.default_rng(seed)
    hit = (rng.random(count) < 0.35).astype(float)
    rank = 1.0 / rng.integers(1, 11, count) * (rng.random(count) < 0.6)
    graded = rng.beta(2.0, 5.0, count)
    return np.column_stack([hit, rank, graded])


@pytest.mark.parametrize("seed", [1, 2])
def test_continuous_intervals_agree_with_scipy_bca_and_rates_with_the_exact_binomial(
    seed: int,
) -> None:
    values = _values(seed)
    resamples = 4000
    ours = bootstrap_means(values, np.ones((1, len(values)), dtype=bool), resamples=resamples)[0]
    hits = int(values[:, 0].sum())
    exact = stats.binomtest(hits, len(values)).proportion_ci(0.95, method="exact")
    assert ours[0].method == intervals.CLOPPER_PEARSON
    assert ours[0].low == pytest.approx(exact.low, rel=1e-9)
    assert ours[0].high == pytest.approx(exact.high, rel=1e-9)
    for column, estimate in enumerate(ours[1:], start=1):
        reference = stats.bootstrap(
            (values[:, column],),
            np.mean,
            n_resamples=resamples,
            method="BCa",
            vectorized=True,
            rng=np.random.default_rng(seed + column),
        )
        assert estimate.method == intervals.BCA
        assert estimate.mean == pytest.approx(values[:, column].mean(), abs=1e-15)
        assert estimate.low is not None and estimate.high is not None
        # Two BCa bounds from 4000 resamples each differ by about 0.05 bootstrap
        # standard errors (one standard deviation): 0.3 leaves room for six of those.
        scale = reference.standard_error
        assert abs(estimate.low - reference.confidence_interval.low) < 0.3 * scale
        assert abs(estimate.high - reference.confidence_interval.high) < 0.3 * scale


def test_bca_moves_a_skewed_interval_towards_the_long_tail() -> None:
    # Mostly zeros with a few large values: the percentile interval sits too low; BCa's
    # bias correction and acceleration move both bounds up.
    rng = np.random.default_rng(3)
    values = np.where(rng.random(60) < 0.15, rng.uniform(0.5, 1.0, 60), 0.0)
    values[0] = 0.05  # not all 0/1, not constant: the bootstrap case
    (estimate,) = bootstrap_means(values[:, None], np.ones((1, 60), dtype=bool), resamples=4000)[0]
    counts = intervals._draw_counts(60, 4000, intervals.DEFAULT_SEED, 0, None).astype(float)
    percentile_low, percentile_high = np.percentile(counts @ values / 60, [2.5, 97.5])
    assert estimate.method == intervals.BCA
    assert estimate.low is not None and estimate.high is not None
    assert estimate.low > percentile_low and estimate.high > percentile_high


def test_thirty_hits_of_thirty_is_not_certainty() -> None:
    values = np.ones((30, 1))
    (estimate,) = bootstrap_means(values, np.ones((1, 30), dtype=bool))[0]
    assert estimate.method == intervals.CLOPPER_PEARSON
    # The exact one-sided 97.5 % bound: 0.025 ** (1 / 30).
    assert estimate.low == pytest.approx(0.025 ** (1 / 30), rel=1e-12)
    assert round(estimate.low, 3) == 0.884 and estimate.high == 1.0
    (nothing,) = bootstrap_means(values * 0.0, np.ones((1, 30), dtype=bool))[0]
    assert nothing.low == 0.0 and nothing.high == pytest.approx(1 - 0.025 ** (1 / 30))


def test_a_slice_of_equal_continuous_values_gets_the_bound_a_sample_that_size_allows() -> None:
    values = np.full((30, 1), 0.5)
    (estimate,) = bootstrap_means(values, np.ones((1, 30), dtype=bool))[0]
    share = 1 - 0.025 ** (1 / 30)
    assert estimate.method == intervals.CONSTANT
    assert estimate.low == pytest.approx(0.5 - 0.5 * share)
    assert estimate.high == pytest.approx(0.5 + 0.5 * share)
    differences = np.zeros((12, 1))
    (paired,) = bootstrap_means(
        differences, np.ones((1, 12), dtype=bool), value_range=(-1.0, 1.0), binary=False
    )[0]
    assert paired.method == intervals.CONSTANT
    assert paired.low == pytest.approx(-(1 - 0.025 ** (1 / 12)))
    assert paired.high == pytest.approx(1 - 0.025 ** (1 / 12))


def test_the_method_is_chosen_per_slice() -> None:
    # recall is 0/1 where questions have one expected document, fractional elsewhere.
    recall = np.array([1.0, 0.0, 1.0, 1.0, 0.5, 0.25, 1.0, 0.0] * 10)
    single = np.array([True, True, True, True, False, False, True, True] * 10)
    groups = np.array([np.ones(80, dtype=bool), single, ~single])
    overall, one_expected, several = bootstrap_means(recall[:, None], groups, resamples=500)
    assert overall[0].method == intervals.BCA
    assert one_expected[0].method == intervals.CLOPPER_PEARSON
    # 20 fractional values: a slice that small gets the wider interval that says so.
    assert several[0].method == intervals.BCA_EXPANDED


def test_same_seed_same_intervals_and_slices_leave_the_overall_interval_alone() -> None:
    values = _values(3, 3000)
    labels = np.random.default_rng(4).integers(0, 3, len(values))
    groups = np.array([np.ones(len(values), dtype=bool), *(labels == k for k in range(3))])
    first = bootstrap_means(values, groups, resamples=3000, seed=9)
    again = bootstrap_means(values, groups, resamples=3000, seed=9)
    alone = bootstrap_means(values, groups[:1], resamples=3000, seed=9)
    assert first == again
    for with_slices, without in zip(first[0], alone[0], strict=True):
        assert with_slices.mean == without.mean
        assert with_slices.low == pytest.approx(without.low, abs=1e-7)
        assert with_slices.high == pytest.approx(without.high, abs=1e-7)
    other_seed = bootstrap_means(values, groups, resamples=3000, seed=10)
    assert other_seed[0][1].low != first[0][1].low  # the bootstrap column
    assert other_seed[0][0] == first[0][0]  # the exact binomial one needs no seed


def test_a_slice_interval_matches_bootstrapping_the_slice_alone_in_distribution() -> None:
    # A slice is read from resamples of the whole run, so its size varies; its interval
    # is still close to the slice's own bootstrap when the slice is large.
    values = _values(5, 4000)
    in_slice = np.random.default_rng(6).random(len(values)) < 0.5
    groups = np.array([np.ones(len(values), dtype=bool), in_slice])
    sliced = bootstrap_means(values, groups, resamples=4000)[1][2]
    alone = bootstrap_means(values[in_slice], groups[:1, : in_slice.sum()], resamples=4000)[0][2]
    assert sliced.mean == pytest.approx(alone.mean, abs=1e-12)
    assert sliced.low is not None and alone.low is not None
    assert sliced.high is not None and alone.high is not None
    width = alone.high - alone.low
    assert abs(sliced.low - alone.low) < 0.1 * width
    assert abs(sliced.high - alone.high) < 0.1 * width


def test_undefined_values_are_left_out_and_an_all_undefined_slice_has_no_interval() -> None:
    values = np.array([[1.0, np.nan], [0.0, 0.5], [1.0, np.nan], [0.0, 1.0]] * 50)
    groups = np.array([[True] * 200, [True, False] * 100, [False] * 200])
    overall, every_other, empty = bootstrap_means(values, groups, resamples=500)
    assert overall[1].n == 100 and overall[1].mean == 0.75
    assert every_other[1] == Estimate(None, None, None, 0)
    assert every_other[0].n == 100 and every_other[0].mean == 1.0
    assert every_other[0].method == intervals.CLOPPER_PEARSON
    assert every_other[0].low == pytest.approx(0.025 ** (1 / 100)) and every_other[0].high == 1.0
    assert empty == [Estimate(None, None, None, 0)] * 2


def test_one_question_gives_a_wide_interval_not_its_value() -> None:
    (estimate,) = bootstrap_means(np.array([[0.25]]), np.array([[True]]))[0]
    assert estimate == Estimate(0.25, 0.25 - 0.25 * 0.975, 0.25 + 0.75 * 0.975, 1, "constant")


def test_the_float64_and_per_group_fallbacks_agree_with_the_fast_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    values = _values(7, 1500)
    values[::7, 1:] = np.nan
    labels = np.random.default_rng(8).integers(0, 4, len(values))
    groups = np.array([np.ones(len(values), dtype=bool), *(labels == k for k in range(4))])
    fast = bootstrap_means(values, groups, resamples=1500)
    monkeypatch.setattr(intervals, "_EXACT_FLOAT32", 1)
    wide = bootstrap_means(values, groups, resamples=1500)
    monkeypatch.setattr(intervals, "_MAX_BLOCKS", 1)
    per_group = bootstrap_means(values, groups, resamples=1500)
    for other in (wide, per_group):
        for row, other_row in zip(fast, other, strict=True):
            for ours, theirs in zip(row, other_row, strict=True):
                assert ours.mean == theirs.mean and ours.n == theirs.n
                assert ours.low == pytest.approx(theirs.low, abs=1e-6)
                assert ours.high == pytest.approx(theirs.high, abs=1e-6)


def _bca_by_definition(
    values: np.ndarray, members: np.ndarray, counts: np.ndarray, confidence: float
) -> tuple[float, float]:
    """BCa of a mean written out from Efron (1987), for one slice of one metric.

    ``counts`` (resamples x questions) says how often each question of the run is drawn;
    a slice's resampled mean is over the members drawn that have a value. The
    acceleration comes from an explicit leave-one-out jackknife, the bias correction
    from the share of resampled means below the estimate, the bounds from numpy's
    linear quantiles at the adjusted levels.
    """
    taken = members & ~np.isnan(values)
    sample = values[taken]
    estimate = sample.mean()
    drawn = counts[:, taken]
    sizes = drawn.sum(axis=1)
    resampled = (drawn @ sample)[sizes > 0] / sizes[sizes > 0]
    # The data are chosen so that no resampled mean comes within float32 rounding of
    # the estimate (BCa would count such a tie half).
    assert np.all(np.abs(resampled - estimate) > 2e-6)
    z0 = stats.norm.ppf(np.mean(resampled < estimate))
    jackknife = (sample.sum() - sample) / (len(sample) - 1)
    spread = jackknife.mean() - jackknife
    acceleration = (spread**3).sum() / (6.0 * ((spread**2).sum()) ** 1.5)
    levels = []
    for tail in ((1 - confidence) / 2, (1 + confidence) / 2):
        z = z0 + stats.norm.ppf(tail)
        levels.append(stats.norm.cdf(z0 + z / (1 - acceleration * z)))
    low, high = np.quantile(resampled, levels)
    return float(low), float(high)


def _small_sample(
    n: int, mean: float | None, low: float, high: float, confidence: float
) -> tuple[str, float, float]:
    """The method and bounds a cell of ``n`` values gets from BCa's (low, high)."""
    if n >= intervals.SMALL_SAMPLE:
        return intervals.BCA, low, high
    assert mean is not None
    new_low, new_high, methods = intervals.small_sample_bounds(
        np.array([mean]), np.array([float(n)]), np.array([low]), np.array([high]), confidence
    )
    return str(methods[0]), float(new_low[0]), float(new_high[0])


@pytest.mark.parametrize("confidence", [0.95, 0.8])
def test_bca_bounds_of_the_run_and_its_slices_follow_the_definition(confidence: float) -> None:
    # Skewed values (the acceleration matters at this size), some undefined, three
    # slices of the run: every cell's bounds equal BCa written out on the same resamples.
    rng = np.random.default_rng(28)
    count, resamples, seed = 45, 3000, 17
    skewed = rng.exponential(0.15, count).clip(0.0, 1.0)
    graded = rng.beta(2.0, 5.0, count)
    skewed[::6] = np.nan
    values = np.column_stack([skewed, graded])
    first = np.arange(count) < 20
    groups = np.array([np.ones(count, dtype=bool), first, ~first])
    estimates = bootstrap_means(
        values, groups, resamples=resamples, confidence=confidence, seed=seed
    )
    counts = intervals._draw_counts(count, resamples, seed, 0, None).astype(np.float64)
    for group, members in enumerate(groups):
        for metric in range(2):
            estimate = estimates[group][metric]
            taken = members & ~np.isnan(values[:, metric])
            low, high = _bca_by_definition(values[:, metric], members, counts, confidence)
            method, low, high = _small_sample(estimate.n, estimate.mean, low, high, confidence)
            assert estimate.method == method
            assert estimate.n == taken.sum()
            assert estimate.mean == pytest.approx(values[taken, metric].mean(), rel=1e-12)
            assert estimate.low == pytest.approx(low, abs=1e-6), (group, metric)
            assert estimate.high == pytest.approx(high, abs=1e-6), (group, metric)


def test_sample_intervals_give_each_row_the_interval_a_run_of_it_gets() -> None:
    rng = np.random.default_rng(12)
    size = 40
    rows = np.vstack(
        [
            (rng.random(size) < 0.3).astype(float),
            np.zeros(size),
            np.ones(size),
            np.full(size, 0.4),
            rng.beta(2.0, 5.0, size),
            rng.exponential(0.1, size).clip(0.0, 1.0),
        ]
    )
    low, high, methods = intervals.sample_intervals(rows, resamples=2000, seed=3)
    assert (
        methods.tolist()
        == [intervals.CLOPPER_PEARSON] * 3 + [intervals.CONSTANT] + [intervals.BCA] * 2
    )
    for row in range(3):
        hits = int(rows[row].sum())
        exact = stats.binomtest(hits, size).proportion_ci(0.95, method="exact")
        assert (low[row], high[row]) == pytest.approx((exact.low, exact.high), rel=1e-9)
    share = 1 - 0.025 ** (1 / size)
    assert (low[3], high[3]) == pytest.approx((0.4 - share * 0.4, 0.4 + share * 0.6))
    # Differences live in [-1, 1]: a constant row's bound reaches as far as that range.
    same, _, _ = intervals.sample_intervals(np.full((1, size), 0.4), value_range=(-1.0, 1.0))
    assert same[0] == pytest.approx(0.4 - share * 1.4)
    counts = intervals._draw_counts(size, 2000, 3, 0, None).astype(np.float64)
    everyone = np.ones(size, dtype=bool)
    for row in (4, 5):
        expected = _bca_by_definition(rows[row], everyone, counts, 0.95)
        assert (low[row], high[row]) == pytest.approx(expected, abs=1e-9)


def test_slice_masks_name_each_label_and_put_unlabelled_questions_under_none() -> None:
    masks = intervals.slice_masks(["b", None, "a", "b", None])
    assert list(masks) == ["(none)", "a", "b"]
    assert {label: mask.tolist() for label, mask in masks.items()} == {
        "(none)": [False, True, False, False, True],
        "a": [False, False, True, False, False],
        "b": [True, False, False, True, False],
    }
    assert intervals.slice_masks([]) == {}


def test_bootstrap_bounds_never_leave_the_range_of_the_values() -> None:
    # Rows of one repeated value and one outlier: a resampled mean is an average of the
    # values, but float sums of 0.1s or 1/3s land an ulp outside [min, max], which would
    # show as a bound of -0.000 or an upper bound above every value.
    rng = np.random.default_rng(0)
    size, count = 30, 300
    rows = np.repeat(rng.choice([0.1, 0.2, 0.3, 0.7, 1 / 3, 0.15], count)[:, None], size, axis=1)
    rows[np.arange(count), rng.integers(0, size, count)] = rng.choice([0.9, 0.05, 1.0, 0.0], count)
    low, high, methods = intervals.sample_intervals(rows, resamples=2000)
    assert set(methods.tolist()) == {intervals.BCA}
    assert np.all(low >= rows.min(axis=1)) and np.all(high <= rows.max(axis=1))
    estimates = bootstrap_means(rows.T, np.ones((1, size), dtype=bool), resamples=2000)[0]
    for estimate, row in zip(estimates, rows, strict=True):
        assert estimate.low is not None and estimate.low >= row.min()
        assert estimate.high is not None and estimate.high <= row.max()


def test_a_slice_of_one_repeated_value_is_constant_within_a_varied_run() -> None:
    # The method and the bootstrap's clamp read each slice's own smallest and largest
    # value, over its defined values only.
    rng = np.random.default_rng(31)
    varied = rng.beta(2.0, 5.0, 40)
    values = np.column_stack(
        [np.r_[np.full(20, 0.5), varied[:20]], np.r_[np.full(20, 0.5), varied[20:]]]
    )
    values[::5, 1] = np.nan
    first = np.arange(40) < 20
    rows = bootstrap_means(values, np.array([np.ones(40, dtype=bool), first, ~first]))
    for metric in range(2):
        alike, other = rows[1][metric], rows[2][metric]
        size = int((~np.isnan(values[first, metric])).sum())
        share = 1 - 0.025 ** (1 / size)
        assert (alike.method, alike.n, alike.mean) == (intervals.CONSTANT, size, 0.5)
        assert (alike.low, alike.high) == pytest.approx((0.5 - 0.5 * share, 0.5 + 0.5 * share))
        # 20 or fewer varied values: the wider small-sample interval, inside [0, 1].
        assert other.method == intervals.BCA_EXPANDED
        assert other.low is not None and other.high is not None
        assert 0.0 <= other.low < other.mean < other.high <= 1.0


def test_without_resamples_a_continuous_mean_has_no_interval_and_a_rate_keeps_its_own() -> None:
    values = _values(5, 200)
    groups = np.vstack([np.ones(200, dtype=bool), np.arange(200) < 80])
    rows = bootstrap_means(values, groups, resamples=0)
    for row, mask in zip(rows, groups, strict=True):
        assert len(row) == 3
        hits = int(values[mask, 0].sum())
        exact = stats.binomtest(hits, int(mask.sum())).proportion_ci(0.95, method="exact")
        assert row[0].method == intervals.CLOPPER_PEARSON
        assert (row[0].low, row[0].high) == pytest.approx((exact.low, exact.high), rel=1e-9)
        for column in (1, 2):
            estimate = row[column]
            assert estimate.mean == pytest.approx(values[mask, column].mean(), abs=1e-15)
            assert (estimate.low, estimate.high, estimate.method) == (None, None, None)
            assert estimate.n == int(mask.sum())


def test_intervals_follow_the_confidence_level_asked_for() -> None:
    rng = np.random.default_rng(21)
    size = 50
    rows = np.vstack([(rng.random(size) < 0.4).astype(float), rng.beta(2.0, 5.0, size)])
    low, high, _ = intervals.sample_intervals(rows, resamples=2000, seed=4, confidence=0.8)
    hits = int(rows[0].sum())
    exact = stats.binomtest(hits, size).proportion_ci(0.8, method="exact")
    assert (low[0], high[0]) == pytest.approx((exact.low, exact.high), rel=1e-9)
    counts = intervals._draw_counts(size, 2000, 4, 0, None).astype(np.float64)
    expected = _bca_by_definition(rows[1], np.ones(size, dtype=bool), counts, 0.8)
    assert (low[1], high[1]) == pytest.approx(expected, abs=1e-9)
    estimate = bootstrap_means(rows[0][:, None], np.ones((1, size), dtype=bool), confidence=0.8)
    assert (estimate[0][0].low, estimate[0][0].high) == pytest.approx(
        (exact.low, exact.high), rel=1e-9
    )


def test_the_acceleration_of_values_without_spread_is_zero_and_silent() -> None:
    # sum((x - m)^3) / (6 * sum((x - m)^2)^1.5): 6 / (6 * 1) = 1; no spread at all is 0/0,
    # which means no skew to correct for, not NaN (and no warning).
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = intervals.mean_acceleration(np.array([6.0, 0.0, -2.0]), np.array([1.0, 0.0, 4.0]))
    assert result.tolist() == pytest.approx([1.0, 0.0, -2.0 / 48.0])


def test_resamples_drawn_in_two_batches_all_count() -> None:
    # Enough questions that the resamples are drawn in two batches (each seeded with its
    # number): the bounds are BCa written out on both batches' resamples together.
    rng = np.random.default_rng(34)
    count, resamples, seed = 600, 2000, 17
    values = rng.beta(2.0, 5.0, count)
    batch = max(intervals._MIN_BATCH_ROWS, intervals._BATCH_CELLS // count)
    assert batch < resamples <= 2 * batch
    counts = np.vstack(
        [
            intervals._draw_counts(count, batch, seed, 0, None),
            intervals._draw_counts(count, resamples - batch, seed, 1, None),
        ]
    ).astype(np.float64)
    everyone = np.ones(count, dtype=bool)
    (estimate,) = bootstrap_means(
        values[:, None], everyone[None, :], resamples=resamples, seed=seed
    )[0]
    low, high = _bca_by_definition(values, everyone, counts, 0.95)
    assert estimate.method == intervals.BCA
    assert (estimate.low, estimate.high) == pytest.approx((low, high), abs=1e-6)


def test_a_metric_undefined_on_a_whole_slice_keeps_its_interval_in_the_run() -> None:
    # The first 20 questions (a slice of their own) have no value of the first metric:
    # the run's interval of it comes from the other questions alone, BCa as written out.
    rng = np.random.default_rng(40)
    count, resamples, seed = 45, 3000, 17
    partial = rng.beta(2.0, 5.0, count)
    partial[:20] = np.nan
    values = np.column_stack([partial, rng.beta(2.0, 5.0, count)])
    first = np.arange(count) < 20
    groups = np.array([np.ones(count, dtype=bool), first])
    estimates = bootstrap_means(values, groups, resamples=resamples, seed=seed)
    counts = intervals._draw_counts(count, resamples, seed, 0, None).astype(np.float64)
    assert estimates[1][0] == Estimate(None, None, None, 0)
    for group, metric in ((0, 0), (0, 1), (1, 1)):
        low, high = _bca_by_definition(values[:, metric], groups[group], counts, 0.95)
        estimate = estimates[group][metric]
        method, low, high = _small_sample(estimate.n, estimate.mean, low, high, 0.95)
        assert estimate.method == method
        assert (estimate.low, estimate.high) == pytest.approx((low, high), abs=1e-6)


def test_every_question_can_be_drawn_including_the_first() -> None:
    # One outlier among 20 equal values, first in line: it is drawn k ~ Binomial(20, 1/20)
    # times, so the upper bound is near 0.2 + 3 * 0.3 / 20 = 0.245, far above the mean.
    row = np.full((1, 20), 0.2)
    row[0, 0] = 0.5
    counts = intervals._draw_counts(20, 2000, 5, 0, None)
    assert counts.sum(axis=1).tolist() == [20.0] * 2000
    assert counts.min(axis=0).tolist() == [0.0] * 20
    assert 1900 < counts[:, 0].sum() < 2100
    low, high, methods = intervals.sample_intervals(row, resamples=2000, seed=5)
    assert methods[0] == intervals.BCA_EXPANDED
    assert low[0] <= 0.2
    assert high[0] > 0.23
