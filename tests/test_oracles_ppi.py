"""The judge-corrected (PPI++) mean against ppi-python, the authors' own implementation.

At labelled shares n/N of 0.05, 0.3 and 0.9 (and 9: nine labelled questions for every
unlabelled one), many seeds each. Where retrievalkit differs from ppi-python on purpose
(docs/metrics.md#ppi) the difference itself is tested exactly:

- the weight's covariance divides by n - 1, as its variance does; ppi-python divides
  the covariance by n (``_calc_lam_glm``), so its lambda is (n - 1)/n of the weight
  before both clip to [0, 1];
- the interval is a BCa bootstrap widened by sqrt(n/(n-1)) t_{n-1} / z, not
  ppi-python's normal interval, so it is compared with a tolerance (and the widening
  exactly), and it never leaves the value range, where ppi-python's may.
"""

from __future__ import annotations

import inspect
import math
from typing import Any

import numpy as np
import ppi_py
import ppi_py.ppi
import pytest
from scipy.stats import norm, t
from statsmodels.regression.linear_model import OLS
from statsmodels.stats.weightstats import DescrStatsW
from statsmodels.tools import add_constant

from retrievalkit.stats import ppi
from retrievalkit.stats.ppi import corrected_mean, labels_needed

RATIOS = (0.05, 0.3, 0.9, 9.0)

# ppi-python 0.2.0-0.2.2 call the weight `lhat` (and return a float for 1-D data),
# 0.2.3 on `lam`; both compute the same thing.
_WEIGHT = "lam" if "lam" in inspect.signature(ppi_py.ppi_mean_ci).parameters else "lhat"
_calc_lam_glm = getattr(ppi_py.ppi, "_calc_lam_glm", None) or ppi_py.ppi._calc_lhat_glm


def ppi_mean_pointestimate(y: np.ndarray, j: np.ndarray, rest: np.ndarray, lam: float) -> float:
    found: Any = ppi_py.ppi_mean_pointestimate(y, j, rest, **{_WEIGHT: lam})
    return float(np.ravel(found)[0])


def ppi_mean_ci(
    y: np.ndarray, j: np.ndarray, rest: np.ndarray, alpha: float, lam: float
) -> tuple[float, float]:
    low, high = ppi_py.ppi_mean_ci(y, j, rest, alpha=alpha, **{_WEIGHT: lam})
    return float(np.ravel(low)[0]), float(np.ravel(high)[0])


SEEDS = 12


def _sample(ratio: float, seed: int, kind: str = "lenient") -> tuple[np.ndarray, ...]:
    """(human values y, judge values j on the same questions, judge values of the rest)."""
    rng = np.random.default_rng((seed, int(ratio * 100)))
    n = int(rng.integers(40, 90)) if ratio < 1 else int(rng.integers(300, 600))
    big_n = max(2, round(n / ratio))
    truth = rng.beta(2, 3, n + big_n)
    if kind == "lenient":
        judge = np.clip(truth + rng.normal(0.1, 0.15, n + big_n), 0, 1)
    elif kind == "binary":
        truth = (truth > 0.4).astype(float)
        flip = rng.uniform(size=n + big_n) < 0.15
        judge = np.where(flip, 1 - truth, truth)
    elif kind == "contrary":  # a judge that gets it backwards: the weight clips to 0
        judge = 1.0 - truth + rng.normal(0, 0.05, n + big_n)
    else:  # "timid": judge = 0.3 truth, cov/var = 1/0.3, clipped to 1
        judge = 0.3 * truth + rng.normal(0, 0.01, n + big_n)
    return truth[:n], judge[:n], judge[n:]


def _corrected(y: np.ndarray, j: np.ndarray, rest: np.ndarray, **options: object):  # type: ignore[no-untyped-def]
    human = np.r_[y, np.full(rest.size, np.nan)]
    return corrected_mean(np.r_[j, rest], human, **options)  # type: ignore[arg-type]


def _ppi_lambda(y: np.ndarray, j: np.ndarray, rest: np.ndarray) -> float:
    """ppi-python's power-tuned lambda before clipping, as ``ppi_mean_ci(lam=None)`` finds it."""
    centre = ppi_mean_pointestimate(y, j, rest, lam=1)
    grads = [np.reshape(values - centre, (-1, 1)) for values in (y, j, rest)]
    return float(np.ravel(_calc_lam_glm(*grads, np.eye(1), clip=False))[0])


@pytest.mark.parametrize("ratio", RATIOS)
@pytest.mark.parametrize("kind", ["lenient", "binary", "contrary", "timid"])
def test_weight_and_mean_are_ppi_pythons(ratio: float, kind: str) -> None:
    for seed in range(SEEDS):
        y, j, rest = _sample(ratio, seed, kind)
        n = y.size
        got = _corrected(y, j, rest, resamples=20)
        tuned = _ppi_lambda(y, j, rest)
        # ppi-python's public tuned estimate is its mean at this lambda, clipped:
        public = float(np.ravel(ppi_py.ppi_mean_pointestimate(y, j, rest))[0])
        clipped = min(1.0, max(0.0, tuned))
        assert public == pytest.approx(ppi_mean_pointestimate(y, j, rest, clipped), abs=1e-12)
        # The one documented difference: covariance over n - 1 rather than n.
        expected = min(1.0, max(0.0, tuned * n / (n - 1)))
        assert got.weight == pytest.approx(expected, rel=1e-9, abs=1e-12), (ratio, seed)
        assert got.mean == pytest.approx(
            ppi_mean_pointestimate(y, j, rest, lam=got.weight), rel=1e-12, abs=1e-12
        )
        assert got.labelled == n and got.unlabelled == rest.size
        if kind == "contrary":
            assert got.weight == 0.0 and got.mean == pytest.approx(y.mean(), rel=1e-12)
        if kind == "timid" and ratio < 1:  # cov/var = 1/0.3 over 1 + n/N < 2
            assert got.weight == 1.0


@pytest.mark.timeout(600)
@pytest.mark.parametrize("ratio", RATIOS)
def test_interval_is_ppi_pythons_widened(ratio: float) -> None:
    """The BCa interval of the estimator, widened, against ppi-python's normal interval at
    the same weight times the same widening: the bootstrap re-estimates the weight in
    every resample, so it is a little wider (measured: 0.96-1.20 per sample, 1.00-1.07
    on average), never half or double."""
    ratios = []
    for seed in range(SEEDS):
        y, j, rest = _sample(ratio, seed)
        n = y.size
        got = _corrected(y, j, rest, resamples=2000)
        low, high = ppi_mean_ci(y, j, rest, alpha=0.05, lam=got.weight)
        widen = math.sqrt(n / (n - 1)) * t.ppf(0.975, n - 1) / norm.ppf(0.975)
        assert got.ci is not None
        width = (got.ci[1] - got.ci[0]) / ((high - low) * widen)
        assert 0.85 < width < 1.35, (ratio, seed, width)
        middle = (got.ci[0] + got.ci[1]) / 2
        assert abs(middle - got.mean) < 0.25 * (got.ci[1] - got.ci[0])
        ratios.append(width)
    assert 0.97 < float(np.mean(ratios)) < 1.12, ratios


def test_the_widening_is_the_t_quantile(monkeypatch: pytest.MonkeyPatch) -> None:
    """The BCa bounds (read through a pass-through wrapper) are pushed away from the mean
    by exactly sqrt(n/(n-1)) t_{n-1, (1+c)/2} / z_{(1+c)/2}, scipy's quantiles."""
    seen: list[tuple[float, float]] = []
    real = ppi.bca_bounds

    def reading(*args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        low, high = real(*args, **kwargs)  # type: ignore[arg-type]
        seen.append((float(low[0]), float(high[0])))
        return low, high

    monkeypatch.setattr(ppi, "bca_bounds", reading)
    for seed in range(20):
        confidence = (0.8, 0.9, 0.95, 0.99)[seed % 4]
        y, j, rest = _sample((0.05, 0.3, 0.9)[seed % 3], seed)
        y, j = y[: 2 + seed], j[: 2 + seed]  # 2 to 21 labelled: where the widening matters
        got = _corrected(y, j, rest, resamples=200, confidence=confidence)
        raw_low, raw_high = seen.pop()
        n = y.size
        level = (1 + confidence) / 2
        widen = math.sqrt(n / (n - 1)) * t.ppf(level, n - 1) / norm.ppf(level)
        assert got.ci is not None and got.mean is not None
        expected_low = max(0.0, min(got.mean, got.mean - (got.mean - raw_low) * widen))
        expected_high = min(1.0, max(got.mean, got.mean + (raw_high - got.mean) * widen))
        assert got.ci == pytest.approx((expected_low, expected_high), rel=1e-12, abs=1e-12)


def test_the_interval_stays_in_the_value_range_where_ppi_pythons_does_not() -> None:
    """Documented difference: bounds are clipped to [0, 1]. A nearly perfect metric with
    few labels: ppi-python's normal interval passes 1, retrievalkit's stops at 1."""
    crossed = 0
    for seed in range(30):
        rng = np.random.default_rng(seed)
        n, big_n = 12, 200
        truth = np.where(rng.uniform(size=n + big_n) < 0.95, 1.0, rng.uniform(0, 1, n + big_n))
        judge = np.clip(truth - rng.uniform(0, 0.05, n + big_n), 0, 1)
        y, j, rest = truth[:n], judge[:n], judge[n:]
        got = _corrected(y, j, rest, resamples=400)
        _, high = ppi_mean_ci(y, j, rest, alpha=0.05, lam=got.weight)
        assert got.ci is not None and got.mean is not None
        assert 0.0 <= got.ci[0] <= got.mean <= got.ci[1] <= 1.0
        if high > 1.0:
            crossed += 1
    assert crossed >= 5


def test_the_judge_interval_is_statsmodels_t_interval() -> None:
    for seed in range(40):
        _, j, rest = _sample(0.3, seed)
        every = np.r_[j, rest][: 3 + seed * 5]
        got = corrected_mean(every, np.full(every.size, np.nan), confidence=0.9)
        low, high = DescrStatsW(every).tconfint_mean(alpha=0.1)
        assert got.judge_mean == pytest.approx(every.mean(), rel=1e-12)
        assert got.judge_ci == pytest.approx((max(0.0, low), min(1.0, high)), rel=1e-9)


def test_labels_needed_uses_the_regression_slope() -> None:
    """w is the OLS slope of Y on J (statsmodels), clipped to [0, 1]; labels needed are
    (z / h)^2 var(Y - w J) with a judge and (z / h)^2 var(Y) without, rounded up."""
    for seed in range(60):
        rng = np.random.default_rng(seed)
        size = int(rng.integers(10, 200))
        y = (rng.uniform(size=size) < rng.uniform(0.1, 0.9)).astype(float)
        j = np.where(rng.uniform(size=size) < rng.uniform(0.0, 0.5), 1 - y, y)
        if j.var() == 0:
            continue
        half = float(rng.uniform(0.01, 0.1))
        with_judge, alone, weight = labels_needed(np.c_[y, j], half_width=half)
        slope = float(OLS(y, add_constant(j)).fit().params[1])
        slope = min(1.0, max(0.0, slope))
        assert weight == pytest.approx(slope, rel=1e-9, abs=1e-12)
        z = norm.ppf(0.975)
        assert with_judge == max(2, math.ceil((z / half) ** 2 * (y - slope * j).var(ddof=1)))
        assert alone == max(2, math.ceil((z / half) ** 2 * y.var(ddof=1)))


@pytest.mark.timeout(600)
def test_the_bootstrap_reestimates_the_weight_in_every_resample(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The resampled estimates (read through a pass-through wrapper of the BCa step) spread
    as an independent bootstrap's do: the n and the N questions resampled apart, the weight
    found again by ppi-python's lambda (x n/(n-1), clipped) and the mean by its point
    estimate. Where the labelled questions' judge values sit apart from the rest (here
    0.3 lower), a weight held fixed would spread 12-50 % less."""
    seen: list[np.ndarray] = []
    real = ppi.bca_bounds

    def reading(samples: np.ndarray, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        seen.append(np.array(samples[:, 0]))
        return real(samples, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ppi, "bca_bounds", reading)
    for seed in range(5):
        rng = np.random.default_rng(seed)
        n, big_n = 40, 400
        truth = rng.beta(2, 3, n + big_n)
        judge = np.clip(truth + rng.normal(0, 0.15, n + big_n), 0, 1)
        judge[:n] = np.clip(judge[:n] - 0.3, 0, 1)
        y, j, rest = truth[:n], judge[:n], judge[n:]
        _corrected(y, j, rest, resamples=2000)
        theirs = []
        for _ in range(1500):
            a, b = rng.integers(0, n, n), rng.integers(0, big_n, big_n)
            weight = min(1.0, max(0.0, _ppi_lambda(y[a], j[a], rest[b]) * n / (n - 1)))
            theirs.append(ppi_mean_pointestimate(y[a], j[a], rest[b], weight))
        ratio = float(np.std(seen.pop()) / np.std(theirs))
        assert 0.9 < ratio < 1.1, (seed, ratio)
