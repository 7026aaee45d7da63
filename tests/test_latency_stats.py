"""The latency quantile intervals against scipy.stats.binom and seeded simulations."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from retrievalkit.stats.latency import (
    binomial_cdf,
    latency_summary,
    order_statistic_ranks,
    paired_difference,
    paired_ratio,
    quantile_interval,
)


@pytest.mark.parametrize("n", [20, 50, 300, 1000])
@pytest.mark.parametrize("q", [0.5, 0.95, 0.99])
def test_ranks_match_scipy_binomial(n: int, q: float) -> None:
    for k in range(0, n, max(1, n // 25)):
        assert binomial_cdf(k, n, q) == pytest.approx(stats.binom.cdf(k, n, q), abs=1e-9)
    lower, upper = order_statistic_ranks(n, q, 0.95)
    coverage = stats.binom.cdf(upper - 1, n, q) - stats.binom.cdf(lower - 1, n, q)
    if lower > 1 and upper < n:
        assert coverage >= 0.95
        # each tail misses at most 2.5 %, and moving either rank inward would break that
        assert stats.binom.cdf(lower - 1, n, q) <= 0.025 < stats.binom.cdf(lower, n, q)
        assert stats.binom.cdf(upper - 2, n, q) < 0.975 <= stats.binom.cdf(upper - 1, n, q)


def test_quantile_interval_covers_true_quantile_in_simulation() -> None:
    """Lognormal latencies, true p95 = exp(mu + sigma * z_0.95); 2,000 seeded samples
    of 300 questions: the interval holds it at least 94 % of the time."""
    rng = np.random.default_rng(38)
    mu, sigma = 3.0, 0.6
    truth = float(np.exp(mu + sigma * stats.norm.ppf(0.95)))
    hits = 0
    for _ in range(2000):
        low, high = quantile_interval(rng.lognormal(mu, sigma, 300), 0.95)
        hits += low <= truth <= high
    assert hits / 2000 >= 0.94


def test_summary_shape_and_order() -> None:
    summary = latency_summary(np.random.default_rng(1).lognormal(3, 0.5, 200))
    for name in ("p50", "p95", "p99", "mean"):
        entry = summary[name]
        assert isinstance(entry, dict)
        assert entry["ci"][0] <= entry["value"] <= entry["ci"][1]
    assert latency_summary([]) == {}


def _recorded() -> np.ndarray:
    """A recorded-like latency distribution: lognormal body with a heavy tail."""
    rng = np.random.default_rng(7)
    return np.concatenate([rng.lognormal(3.0, 0.4, 900), rng.lognormal(4.2, 0.3, 100)])


def test_paired_ratio_calibration() -> None:
    """Reruns of the same 300 questions (each question's latency redrawn with 10 %
    timing noise): the ratio interval holds 1 in >= 90 % of 200 seeded trials; a real
    30 % slowdown gives an observed p95 ratio above the 1.20 threshold in >= 80 %."""
    recorded = _recorded()
    rng = np.random.default_rng(38)
    holds, caught = 0, 0
    trials = 200
    for trial in range(trials):
        questions = rng.choice(recorded, 300)
        base = questions * rng.lognormal(0, 0.1, 300)
        same = questions * rng.lognormal(0, 0.1, 300)
        slow = 1.3 * questions * rng.lognormal(0, 0.1, 300)
        rerun = paired_ratio(base, same, "p95", resamples=500, seed=trial)
        holds += rerun["ci"][0] <= 1.0 <= rerun["ci"][1]
        caught += paired_ratio(base, slow, "p95", resamples=500, seed=trial)["ratio"] > 1.2
    assert holds / trials >= 0.90
    assert caught / trials >= 0.80


def test_paired_difference_is_the_definition_resample_by_resample() -> None:
    """The difference of p95s over the same questions, and its interval: the 2.5 % and
    97.5 % quantiles of the differences over resamples that draw questions together,
    written out here one resample at a time."""
    rng = np.random.default_rng(3)
    base = rng.lognormal(3.0, 0.5, 80)
    cand = base * rng.uniform(0.9, 1.4, 80)
    found = paired_difference(base, cand, "p95", 0.95, resamples=400, seed=11)
    assert found["difference"] == pytest.approx(np.quantile(cand, 0.95) - np.quantile(base, 0.95))
    picks = np.random.default_rng(11).integers(0, 80, size=(400, 80))
    by_hand = [np.quantile(cand[row], 0.95) - np.quantile(base[row], 0.95) for row in picks]
    assert found["ci"] == pytest.approx([np.quantile(by_hand, 0.025), np.quantile(by_hand, 0.975)])
    # the same resamples as the ratio's: its interval comes from the same draws
    ratio = paired_ratio(base, cand, "p95", 0.95, resamples=400, seed=11)
    ratios = [np.quantile(cand[row], 0.95) / np.quantile(base[row], 0.95) for row in picks]
    assert ratio["ci"] == pytest.approx([np.quantile(ratios, 0.025), np.quantile(ratios, 0.975)])


def test_paired_difference_of_means_covers_the_true_shift() -> None:
    """Seeded: candidate = baseline + 4 ms + skewed noise of mean 0, so the true difference
    of means is 4 ms; the 90 % interval holds it in 83 to 95 % of 300 samples of 150
    questions (a percentile bootstrap is near its level for a mean at this size)."""
    rng = np.random.default_rng(5)
    held = 0
    for _ in range(300):
        base = rng.exponential(20.0, 150)
        cand = base + 4.0 + rng.exponential(3.0, 150) - 3.0
        found = paired_difference(
            base, cand, "mean", 0.90, resamples=300, seed=int(rng.integers(1e9))
        )
        low, high = found["ci"]  # type: ignore[misc]
        held += low <= 4.0 <= high
    assert 0.83 <= held / 300 <= 0.95


def test_paired_difference_refuses_sides_without_common_latencies() -> None:
    with pytest.raises(ValueError, match="both sides"):
        paired_difference([np.nan, 1.0], [2.0, np.nan])
