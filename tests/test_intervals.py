"""Bootstrap intervals: scipy's percentile intervals within Monte Carlo error, coverage, edges."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

from retrievalkit import intervals
from retrievalkit.intervals import Estimate, bootstrap_means


def _values(seed: int, count: int = 2000) -> np.ndarray:
    """Columns shaped like metrics: a hit rate, a reciprocal rank, a graded score."""
    rng = np.random.default_rng(seed)
    hit = (rng.random(count) < 0.35).astype(float)
    rank = 1.0 / rng.integers(1, 11, count) * (rng.random(count) < 0.6)
    graded = rng.beta(2.0, 5.0, count)
    return np.column_stack([hit, rank, graded])


@pytest.mark.parametrize("seed", [1, 2])
def test_intervals_agree_with_scipy_percentile_bootstrap(seed: int) -> None:
    values = _values(seed)
    resamples = 4000
    ours = bootstrap_means(values, np.ones((1, len(values)), dtype=bool), resamples=resamples)[0]
    for column, estimate in enumerate(ours):
        reference = stats.bootstrap(
            (values[:, column],),
            np.mean,
            n_resamples=resamples,
            method="percentile",
            vectorized=True,
            rng=np.random.default_rng(seed + column),
        )
        assert estimate.mean == pytest.approx(values[:, column].mean(), abs=1e-15)
        assert estimate.low is not None and estimate.high is not None
        # Two percentile bounds from 4000 resamples each differ by about 0.05 bootstrap
        # standard errors (one standard deviation): 0.3 leaves room for six of those.
        scale = reference.standard_error
        assert abs(estimate.low - reference.confidence_interval.low) < 0.3 * scale
        assert abs(estimate.high - reference.confidence_interval.high) < 0.3 * scale


def test_a_95_percent_interval_covers_the_true_rate_about_95_percent_of_the_time() -> None:
    rng = np.random.default_rng(20240611)
    true_rate = 0.3
    covered = 0
    repetitions = 200
    for repetition in range(repetitions):
        sample = (rng.random(300) < true_rate).astype(float)
        estimate = bootstrap_means(
            sample[:, None], np.ones((1, 300), dtype=bool), resamples=1000, seed=repetition
        )[0][0]
        assert estimate.low is not None and estimate.high is not None
        covered += estimate.low <= true_rate <= estimate.high
    assert 0.90 <= covered / repetitions <= 0.99


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
    assert other_seed[0][0].low != first[0][0].low


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
    assert every_other[0].low == every_other[0].high == 1.0
    assert empty == [Estimate(None, None, None, 0)] * 2


def test_one_question_gives_its_value_as_the_interval() -> None:
    (estimate,) = bootstrap_means(np.array([[0.25]]), np.array([[True]]))[0]
    assert estimate == Estimate(0.25, 0.25, 0.25, 1)


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


def test_percentiles_are_numpys_nanpercentile_bit_for_bit() -> None:
    rng = np.random.default_rng(12)
    for _ in range(100):
        rows, columns = int(rng.integers(1, 40)), int(rng.integers(1, 6))
        samples = rng.random((rows, columns))
        samples[rng.random((rows, columns)) < 0.3] = np.nan
        percents = (2.5, 97.5) if rng.random() < 0.5 else (0.0, 50.0, 100.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns
            expected = np.nanpercentile(samples, list(percents), axis=0)
        assert np.array_equal(
            intervals._nanpercentiles(samples, percents), expected, equal_nan=True
        )
