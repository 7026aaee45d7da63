"""Latency quantiles with distribution-free intervals, and their paired ratio.

`latency_summary` gives p50, p95, p99 and the mean of a run's per-question latency (ms).
A quantile's interval is the order-statistic (binomial) interval: with n latencies, the
ranks l < u are chosen so that P(X_(l) <= Q_q <= X_(u)) = B(u - 1) - B(l - 1) >= level,
where B is the Binomial(n, q) distribution function, splitting the miss evenly between
the two tails. It assumes nothing about the distribution. The mean's interval is the
percentile bootstrap. `paired_ratio` is the ratio candidate / baseline of one statistic
over the same questions, with a paired bootstrap interval (questions resampled together).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

QUANTILES = {"p50": 0.50, "p95": 0.95, "p99": 0.99}
QUANTILE_METHOD = "order-statistic (binomial)"
MEAN_METHOD = "percentile bootstrap"
RATIO_METHOD = "paired bootstrap"


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(Binomial(n, p) <= k), summed from log-probabilities."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    logs = [
        math.lgamma(n + 1)
        - math.lgamma(i + 1)
        - math.lgamma(n - i + 1)
        + (i * math.log(p) if i else 0.0)
        + ((n - i) * math.log1p(-p) if n - i else 0.0)
        for i in range(k + 1)
    ]
    top = max(logs)
    return min(1.0, math.exp(top) * sum(math.exp(value - top) for value in logs))


def order_statistic_ranks(n: int, q: float, level: float = 0.95) -> tuple[int, int]:
    """1-based ranks (l, u) of the order statistics bounding the q-quantile; clipped to
    1..n when the sample is too small for the level (the coverage is then below it)."""
    if n < 1:
        raise ValueError("an order-statistic interval needs at least one value")
    if not 0.0 < q < 1.0 or not 0.0 < level < 1.0:
        raise ValueError("q and level must lie strictly between 0 and 1")
    tail = (1.0 - level) / 2.0
    cdf = [binomial_cdf(k, n, q) for k in range(n + 1)]
    # largest l with B(l - 1) <= tail; smallest u with B(u - 1) >= 1 - tail
    lower = max([k + 1 for k in range(n + 1) if cdf[k] <= tail], default=1)
    upper = min([k + 1 for k in range(n + 1) if cdf[k] >= 1.0 - tail], default=n)
    return max(1, min(lower, n)), max(1, min(upper, n))


def quantile(values: npt.ArrayLike, q: float) -> float:
    """The q-quantile of the values (linear interpolation, numpy's default)."""
    return float(np.quantile(np.asarray(values, dtype=np.float64), q))


def quantile_interval(values: npt.ArrayLike, q: float, level: float = 0.95) -> tuple[float, float]:
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    lower, upper = order_statistic_ranks(len(ordered), q, level)
    return float(ordered[lower - 1]), float(ordered[upper - 1])


def latency_summary(
    latency_ms: npt.ArrayLike, level: float = 0.95, resamples: int = 2000, seed: int = 0
) -> dict[str, object]:
    """``{"p50": {"value", "ci", "method"}, "p95": ..., "p99": ..., "mean": ...}`` of
    the defined (finite) latencies; ``{}`` when there are none."""
    values = np.asarray(latency_ms, dtype=np.float64)
    values = values[np.isfinite(values)]
    if not len(values):
        return {}
    summary: dict[str, object] = {}
    for name, q in QUANTILES.items():
        low, high = quantile_interval(values, q, level)
        summary[name] = {"value": quantile(values, q), "ci": [low, high], "method": QUANTILE_METHOD}
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(values), size=(resamples, len(values)))
    means = values[picks].mean(axis=1)
    tail = (1.0 - level) / 2.0
    summary["mean"] = {
        "value": float(values.mean()),
        "ci": [float(np.quantile(means, tail)), float(np.quantile(means, 1.0 - tail))],
        "method": MEAN_METHOD,
    }
    summary["questions"] = len(values)
    summary["level"] = level
    return summary


def _statistic(name: str) -> Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]]:
    if name == "mean":
        return lambda rows: rows.mean(axis=-1)
    q = QUANTILES[name]
    return lambda rows: np.quantile(rows, q, axis=-1)


def _paired_resamples(
    baseline_ms: npt.ArrayLike,
    candidate_ms: npt.ArrayLike,
    statistic: str,
    resamples: int,
    seed: int,
) -> tuple[float, float, npt.NDArray[np.float64], npt.NDArray[np.float64], int]:
    """The statistic of each side over the questions both have a latency for, and of each
    side's paired bootstrap resamples (questions resampled together)."""
    base = np.asarray(baseline_ms, dtype=np.float64)
    cand = np.asarray(candidate_ms, dtype=np.float64)
    if base.shape != cand.shape or base.ndim != 1 or not len(base):
        raise ValueError("baseline and candidate need one latency each for the same questions")
    keep = np.isfinite(base) & np.isfinite(cand)
    base, cand = base[keep], cand[keep]
    if not len(base):
        raise ValueError("no question has a latency on both sides")
    of = _statistic(statistic)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(base), size=(resamples, len(base)))
    return float(of(base)), float(of(cand)), of(base[picks]), of(cand[picks]), len(base)


def paired_difference(
    baseline_ms: npt.ArrayLike,
    candidate_ms: npt.ArrayLike,
    statistic: str = "p95",
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> dict[str, object]:
    """The difference statistic(candidate) - statistic(baseline) in ms over the same
    questions, with the paired bootstrap percentile interval (the resamples of
    `paired_ratio` with the same seed)."""
    base, cand, base_rows, cand_rows, n = _paired_resamples(
        baseline_ms, candidate_ms, statistic, resamples, seed
    )
    differences = cand_rows - base_rows
    tail = (1.0 - level) / 2.0
    return {
        "baseline": base,
        "candidate": cand,
        "difference": cand - base,
        "ci": [float(np.quantile(differences, tail)), float(np.quantile(differences, 1.0 - tail))],
        "method": RATIO_METHOD,
        "questions": n,
    }


def paired_ratio(
    baseline_ms: npt.ArrayLike,
    candidate_ms: npt.ArrayLike,
    statistic: str = "p95",
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> dict[str, object]:
    """The ratio statistic(candidate) / statistic(baseline) over the same questions (one
    latency each, in the same order), with a paired bootstrap percentile interval."""
    base = np.asarray(baseline_ms, dtype=np.float64)
    cand = np.asarray(candidate_ms, dtype=np.float64)
    if base.shape != cand.shape or base.ndim != 1 or not len(base):
        raise ValueError("baseline and candidate need one latency each for the same questions")
    keep = np.isfinite(base) & np.isfinite(cand)
    base, cand = base[keep], cand[keep]
    of = _statistic(statistic)
    observed_base = float(of(base))
    ratio = float(of(cand)) / observed_base if observed_base > 0 else math.inf
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(base), size=(resamples, len(base)))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = of(cand[picks]) / of(base[picks])
    ratios = ratios[np.isfinite(ratios)]
    tail = (1.0 - level) / 2.0
    ci = (
        [float(np.quantile(ratios, tail)), float(np.quantile(ratios, 1.0 - tail))]
        if len(ratios)
        else [math.nan, math.nan]
    )
    return {"ratio": ratio, "ci": ci, "method": RATIO_METHOD, "questions": len(base)}
