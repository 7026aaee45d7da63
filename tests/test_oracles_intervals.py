"""Interval formulas against statsmodels and scipy: Clopper-Pearson, the constant-sample
bound, the small-slice and few-cluster widenings (t quantiles), Korn & Graubard's
effective-size interval, BCa and ABC against ``scipy.stats.bootstrap``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import bootstrap, norm, t
from statsmodels.stats.proportion import proportion_confint

from retrievalkit.stats import clusters as clustered
from retrievalkit.stats.clusters import _expansion, _korn_graubard
from retrievalkit.stats.intervals import (
    ABC,
    BCA,
    BCA_EXPANDED,
    CLOPPER_PEARSON,
    RATE_BOUND,
    bootstrap_means,
    clopper_pearson,
    constant_bounds,
    small_sample_bounds,
)
from retrievalkit.stats.large_samples import abc_bounds

CONFIDENCES = (0.8, 0.9, 0.95, 0.99)


def test_clopper_pearson_is_statsmodels_beta() -> None:
    rng = np.random.default_rng(11)
    for _ in range(400):
        n = int(rng.integers(1, 400))
        hits = int(rng.integers(0, n + 1))
        confidence = float(rng.choice(CONFIDENCES))
        low, high = clopper_pearson(hits, n, confidence)
        want_low, want_high = proportion_confint(hits, n, alpha=1 - confidence, method="beta")
        assert float(low) == pytest.approx(want_low, rel=1e-9, abs=1e-14), (hits, n)
        assert float(high) == pytest.approx(want_high, rel=1e-9, abs=1e-14), (hits, n)


def test_a_rate_cell_gets_the_statsmodels_clopper_pearson_interval() -> None:
    """Through `bootstrap_means`, as a run's hit@k gets it, slices included."""
    rng = np.random.default_rng(12)
    for _ in range(40):
        n = int(rng.integers(2, 300))
        values = (rng.uniform(size=(n, 2)) < rng.uniform(0.05, 0.95)).astype(float)
        values[rng.uniform(size=(n, 2)) < 0.1] = np.nan
        groups = np.vstack([np.ones(n, bool), rng.uniform(size=n) < 0.5])
        for group, row in zip(groups, bootstrap_means(values, groups, resamples=10), strict=True):
            for metric, estimate in enumerate(row):
                cell = values[group, metric]
                cell = cell[~np.isnan(cell)]
                if cell.size == 0:
                    continue
                want = proportion_confint(int(cell.sum()), cell.size, alpha=0.05, method="beta")
                assert estimate.method == CLOPPER_PEARSON
                assert (estimate.low, estimate.high) == pytest.approx(want, rel=1e-9, abs=1e-14)


def test_constant_bounds_worked_example() -> None:
    """30 copies of 1: the lower bound is the exact one-sided 97.5 % bound 0.025^(1/30) =
    0.884299..., which is Clopper-Pearson's for 30 of 30. 30 copies of c = 0.5 in [0, 1]:
    e = 1 - 0.884297 = 0.115703, so [0.5 - 0.5 e, 0.5 + 0.5 e] = [0.442148, 0.557852]."""
    low, high = constant_bounds(1.0, 30)
    assert float(low) == pytest.approx(0.025 ** (1 / 30), rel=1e-12) and float(high) == 1.0
    assert float(low) == pytest.approx(proportion_confint(30, 30, method="beta")[0], rel=1e-9)
    low, high = constant_bounds(0.5, 30)
    assert (float(low), float(high)) == pytest.approx((0.442148, 0.557852), abs=1e-6)
    rng = np.random.default_rng(13)
    for _ in range(100):
        n = int(rng.integers(1, 200))
        confidence = float(rng.choice(CONFIDENCES))
        low, high = constant_bounds(0.0, n, confidence)
        _, want = proportion_confint(0, n, alpha=1 - confidence, method="beta")
        assert float(low) == 0.0 and float(high) == pytest.approx(want, rel=1e-9)


def _widening(n: np.ndarray | float, confidence: float) -> np.ndarray:
    level = (1 + confidence) / 2
    return np.asarray(np.sqrt(n / (n - 1)) * t.ppf(level, np.asarray(n) - 1) / norm.ppf(level))


def test_small_slice_widening_is_scipys_t_quantile() -> None:
    """Hesterberg's factor sqrt(n/(n-1)) t_{n-1} / z from scipy.stats.t.ppf, for n = 10-29.
    Worked: at n = 10 and 95 %, sqrt(10/9) = 1.05409, t_9 = 2.26216, z = 1.95996, so
    1.05409 x 2.26216 / 1.95996 = 1.2166; at n = 29, 1.01770 x 2.04841 / 1.95996 = 1.0636."""
    rng = np.random.default_rng(14)
    for _ in range(200):
        confidence = float(rng.choice(CONFIDENCES))
        sizes = rng.integers(1, 60, 8).astype(float)
        means = rng.uniform(0.2, 0.8, 8)
        low = means - rng.uniform(0.0, 0.15, 8)
        high = means + rng.uniform(0.0, 0.15, 8)
        new_low, new_high, methods = small_sample_bounds(means, sizes, low, high, confidence)
        for i, n in enumerate(sizes):
            if 10 <= n < 30:
                factor = float(_widening(n, confidence))
                assert methods[i] == BCA_EXPANDED
                assert new_low[i] == pytest.approx(
                    max(0.0, means[i] - (means[i] - low[i]) * factor), rel=1e-12
                )
                assert new_high[i] == pytest.approx(
                    min(1.0, means[i] + (high[i] - means[i]) * factor), rel=1e-12
                )
            elif n >= 30:
                assert methods[i] == BCA
                assert (new_low[i], new_high[i]) == (low[i], high[i])
            else:
                # The rate bound: Clopper-Pearson of the mean read as a rate of n.
                assert methods[i] == RATE_BOUND
                cp_low, cp_high = proportion_confint(
                    means[i] * n, n, alpha=1 - confidence, method="beta"
                )
                assert new_low[i] == pytest.approx(min(low[i], cp_low), rel=1e-9)
                assert new_high[i] == pytest.approx(max(high[i], cp_high), rel=1e-9)
    assert float(_widening(10.0, 0.95)) == pytest.approx(1.2166, abs=1e-4)
    assert float(_widening(29.0, 0.95)) == pytest.approx(1.0636, abs=1e-4)


def test_few_cluster_widening_is_scipys_t_quantile(monkeypatch: pytest.MonkeyPatch) -> None:
    """sqrt(C/(C-1)) t_{C-1} / z (x1.10 at 20 clusters, docs/metrics.md), and the cluster
    bootstrap's BCa bounds (read through a pass-through wrapper) pushed out by it."""
    for confidence in CONFIDENCES:
        counts = np.arange(2.0, 200.0)
        assert _expansion(counts, confidence) == pytest.approx(
            _widening(counts, confidence), rel=1e-12
        )
    assert float(_expansion(np.array([20.0]), 0.95)[0]) == pytest.approx(1.10, abs=0.005)
    seen: list[tuple[np.ndarray, np.ndarray]] = []
    real = clustered.bca_bounds

    def reading(*args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        low, high = real(*args, **kwargs)  # type: ignore[arg-type]
        seen.append((low.copy(), high.copy()))
        return low, high

    monkeypatch.setattr(clustered, "bca_bounds", reading)
    rng = np.random.default_rng(15)
    for _ in range(30):
        count = int(rng.integers(3, 40))
        codes = np.repeat(np.arange(count), rng.integers(1, 6, count))
        values = np.clip(rng.uniform(0.2, 0.8, count)[codes] + rng.normal(0, 0.1, codes.size), 0, 1)
        confidence = float(rng.choice(CONFIDENCES))
        estimate = clustered.cluster_bootstrap_means(
            values[:, None],
            np.ones((1, codes.size), bool),
            codes,
            resamples=200,
            confidence=confidence,
            binary=False,
        )[0][0]
        raw_low, raw_high = seen.pop()
        mean = values.mean()
        factor = float(_widening(float(count), confidence))
        want_low = max(values.min(), min(mean, mean - (mean - raw_low[0]) * factor))
        want_high = min(values.max(), max(mean, mean + (raw_high[0] - mean) * factor))
        assert (estimate.low, estimate.high) == pytest.approx((want_low, want_high), rel=1e-12)


def test_korn_graubard_is_clopper_pearson_at_the_corrected_effective_size() -> None:
    """Clopper-Pearson (statsmodels) at n_eff (t_{n-1} / t_{C-1})^2, at most n, with
    successes mean x that size (Korn & Graubard 1998)."""
    rng = np.random.default_rng(16)
    for _ in range(200):
        n = float(rng.integers(4, 300))
        present = float(rng.integers(2, n + 1))
        effective = float(rng.uniform(1.0, n))
        mean = float(rng.uniform(0.0, 1.0))
        confidence = float(rng.choice(CONFIDENCES))
        level = (1 + confidence) / 2
        size = min(effective * (t.ppf(level, n - 1) / t.ppf(level, present - 1)) ** 2, n)
        want = proportion_confint(mean * size, size, alpha=1 - confidence, method="beta")
        low, high = _korn_graubard(
            np.array([mean]), np.array([effective]), np.array([n]), np.array([present]), confidence
        )
        assert (float(low[0]), float(high[0])) == pytest.approx(want, rel=1e-9, abs=1e-14)


def test_bca_agrees_with_scipy_bootstrap() -> None:
    """Same method, other resamples: with 20,000 resamples each, the bounds agree within
    a tenth of a standard error (their Monte Carlo error is about 0.03 standard errors)."""
    rng = np.random.default_rng(17)
    for seed in range(10):
        n = int(rng.integers(30, 200))
        values = rng.beta(0.6, 1.5, n)  # skewed, as reciprocal ranks are
        estimate = bootstrap_means(values[:, None], np.ones((1, n), bool), resamples=20_000)[0][0]
        found = bootstrap(
            (values,), np.mean, n_resamples=20_000, method="BCa", random_state=seed
        ).confidence_interval
        se = values.std(ddof=1) / math.sqrt(n)
        assert estimate.method == BCA
        assert estimate.low == pytest.approx(found.low, abs=0.1 * se)
        assert estimate.high == pytest.approx(found.high, abs=0.1 * se)


@pytest.mark.timeout(600)
def test_abc_agrees_with_scipy_bca_on_a_large_run() -> None:
    """ABC, BCa's analytic limit, for 10,000+ values against scipy's BCa (4,000 resamples:
    Monte Carlo error about 0.06 standard errors on each bound)."""
    rng = np.random.default_rng(18)
    for seed in range(2):
        n = 10_000 + int(rng.integers(0, 2000))
        values = rng.beta(0.5, 2.0, n)
        estimate = bootstrap_means(values[:, None], np.ones((1, n), bool))[0][0]
        found = bootstrap(
            (values,), np.mean, n_resamples=4000, batch=200, method="BCa", random_state=seed
        ).confidence_interval
        se = values.std(ddof=1) / math.sqrt(n)
        assert estimate.method == ABC
        assert estimate.low == pytest.approx(found.low, abs=0.2 * se)
        assert estimate.high == pytest.approx(found.high, abs=0.2 * se)


def test_abc_worked_example() -> None:
    """Values 0, 0, 1 (mean 1/3): t = (-1/3, -1/3, 2/3), sum t^2 = 2/3, sum t^3 = 2/9,
    sigma = sqrt(2/3) / 3 = 0.272166, a = (2/9) / (6 (2/3)^1.5) = 0.068041; at 95 %,
    w = a -/+ 1.959964, bound = 1/3 + sigma w / (1 - a w)^2:
    low = 1/3 + 0.272166 x (-1.891923) / 1.128729^2 = 1/3 - 0.514916 / 1.274029 = -0.070830,
    high = 1/3 + 0.272166 x 2.028005 / 0.862012^2 = 1/3 + 0.551953 / 0.743064 = 1.076140."""
    low, high = abc_bounds(
        np.array([1 / 3]), np.array([3.0]), np.array([2 / 3]), np.array([2 / 9]), 0.95
    )
    assert float(low[0]) == pytest.approx(-0.070830, abs=2e-6)
    assert float(high[0]) == pytest.approx(1.076140, abs=2e-6)
