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

from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt

QUANTILES = {"p50": 0.50, "p95": 0.95, "p99": 0.99}
QUANTILE_METHOD = "order-statistic (binomial)"
MEAN_METHOD = "percentile bootstrap"
RATIO_METHOD = "paired bootstrap"


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(Binomial(n, p) <= k), from the regularised incomplete beta (scipy.special.bdtr)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    # Here, not at the top: scipy takes most of a second to import, and every command
    # that imports the gate (eval among them) would pay it before its first line.
    from scipy import special

    return float(special.bdtr(k, n, p))


def order_statistic_ranks(n: int, q: float, level: float = 0.95) -> tuple[int, int]:
    """1-based ranks (l, u) of the order statistics bounding the q-quantile; clipped to
    1..n when the sample is too small for the level (the coverage is then below it).

    B(k) is monotone in k, so each rank is a binary search over the distribution
    function: O(log n) evaluations of it, whatever n."""
    if n < 1:
        raise ValueError("an order-statistic interval needs at least one value")
    if not 0.0 < q < 1.0 or not 0.0 < level < 1.0:
        raise ValueError("q and level must lie strictly between 0 and 1")
    tail = (1.0 - level) / 2.0
    # largest l with B(l - 1) <= tail: l - 1 = (the number of k in 0..n with B(k) <= tail) - 1
    below = _count_at_most(n, q, tail)
    lower = below if below else 1
    # smallest u with B(u - 1) >= 1 - tail: u - 1 = the number of k with B(k) < 1 - tail
    upper = _count_below(n, q, 1.0 - tail) + 1
    return max(1, min(lower, n)), max(1, min(upper, n))


def _count_at_most(n: int, q: float, bound: float) -> int:
    """How many k in 0..n have B(k) <= bound (B increasing: a prefix of them)."""
    low, high = 0, n + 1  # the answer lies in [low, high]
    while low < high:
        middle = (low + high) // 2
        if binomial_cdf(middle, n, q) <= bound:
            low = middle + 1
        else:
            high = middle
    return low


def _count_below(n: int, q: float, bound: float) -> int:
    """How many k in 0..n have B(k) < bound."""
    low, high = 0, n + 1
    while low < high:
        middle = (low + high) // 2
        if binomial_cdf(middle, n, q) < bound:
            low = middle + 1
        else:
            high = middle
    return low


def quantile(values: npt.ArrayLike, q: float) -> float:
    """The q-quantile of the values (linear interpolation, numpy's default)."""
    return float(np.quantile(np.asarray(values, dtype=np.float64), q))


def quantile_interval(values: npt.ArrayLike, q: float, level: float = 0.95) -> tuple[float, float]:
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    lower, upper = order_statistic_ranks(len(ordered), q, level)
    return float(ordered[lower - 1]), float(ordered[upper - 1])


#: Resampled latencies drawn at once: bootstraps of 10^5 questions run in blocks this size.
_BLOCK = 4_000_000


def _resampled_blocks(
    count: int, resamples: int, rng: np.random.Generator
) -> Iterator[npt.NDArray[np.intp]]:
    """Bootstrap draws of ``count`` indices, ``resamples`` rows in all, one block of rows
    at a time, each holding at most `_BLOCK` indices (memory stays flat for large runs)."""
    rows = max(1, _BLOCK // max(count, 1))
    for start in range(0, resamples, rows):
        size = min(rows, resamples - start)
        yield rng.integers(0, count, size=(size, count))


class _Ranked:
    """One side's latencies sorted, with each question's rank among them: the q-quantile
    of a resample is read from the order statistics of its ranks (a partial sort of small
    integers), numpy's linear interpolation exactly, without gathering its floats."""

    def __init__(self, values: npt.NDArray[np.float64]) -> None:
        order = np.argsort(values, kind="stable")
        self.sorted = values[order]
        self.ranks = np.empty(len(values), dtype=np.int32 if len(values) < 2**31 else np.int64)
        self.ranks[order] = np.arange(len(values))

    def quantiles(
        self, picks: npt.NDArray[np.intp], levels: Sequence[float]
    ) -> npt.NDArray[np.float64]:
        """``len(levels)`` rows: each level's quantile of every resampled row of ``picks``."""
        count = picks.shape[1]
        positions = [level * (count - 1) for level in levels]
        below = [int(np.floor(position)) for position in positions]
        above = [min(low + 1, count - 1) for low in below]
        kth = sorted({*below, *above})
        chosen = np.partition(self.ranks[picks], kth, axis=1)
        at = {k: self.sorted[chosen[:, k]] for k in kth}
        return np.array(
            [
                at[low] + (position - low) * (at[high] - at[low])
                for position, low, high in zip(positions, below, above, strict=True)
            ]
        )


def _percentile_interval(draws: npt.NDArray[np.float64], level: float) -> list[float]:
    tail = (1.0 - level) / 2.0
    return [float(np.quantile(draws, tail)), float(np.quantile(draws, 1.0 - tail))]


def bootstrap_mean(
    values: npt.ArrayLike, level: float = 0.95, resamples: int = 2000, seed: int = 0
) -> dict[str, object]:
    """``{"value", "ci", "method"}``: the mean of ``values`` (finite, at least one) with
    its percentile bootstrap interval (the mean latency's, and a run's cost per question)."""
    array = np.asarray(values, dtype=np.float64)
    if not len(array):
        raise ValueError("a mean needs at least one value")
    rng = np.random.default_rng(seed)
    means = np.concatenate(
        [array[picks].mean(axis=1) for picks in _resampled_blocks(len(array), resamples, rng)]
    )
    return {
        "value": float(array.mean()),
        "ci": _percentile_interval(means, level),
        "method": MEAN_METHOD,
    }


def latency_summary(
    latency_ms: npt.ArrayLike, level: float = 0.95, resamples: int = 2000, seed: int = 0
) -> dict[str, object]:
    """``{"p50": {"value", "ci", "method"}, "p95": ..., "p99": ..., "mean": ...,
    "questions", "level"}`` of the defined (finite) latencies; ``{}`` when there are none."""
    values = np.asarray(latency_ms, dtype=np.float64)
    values = values[np.isfinite(values)]
    if not len(values):
        return {}
    summary: dict[str, object] = {}
    ordered = np.sort(values)
    for name, q in QUANTILES.items():
        lower, upper = order_statistic_ranks(len(ordered), q, level)
        summary[name] = {
            "value": quantile(ordered, q),
            "ci": [float(ordered[lower - 1]), float(ordered[upper - 1])],
            "method": QUANTILE_METHOD,
        }
    summary["mean"] = bootstrap_mean(values, level, resamples, seed)
    summary["questions"] = len(values)
    summary["level"] = level
    return summary


def _of(name: str, rows: npt.NDArray[np.float64]) -> npt.NDArray[np.float64] | np.float64:
    if name == "mean":
        return rows.mean(axis=-1)  # type: ignore[no-any-return]
    if name not in QUANTILES:
        raise ValueError(f"unknown latency statistic {name!r}: p50, p95, p99 or mean")
    return np.quantile(rows, QUANTILES[name], axis=-1)


def paired_ratios(
    baseline_ms: npt.ArrayLike,
    candidate_ms: npt.ArrayLike,
    statistics: tuple[str, ...] = ("p50", "p95", "p99"),
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> dict[str, dict[str, object]]:
    """For each statistic, the ratio statistic(candidate) / statistic(baseline) over the
    same questions (one latency each, in the same order), with a paired bootstrap
    percentile interval: ``{"ratio", "ci", "method", "questions"}``. The statistics share
    one set of resamples (questions drawn together for both runs); a ratio whose baseline
    statistic is 0 is None, an interval without a finite resampled ratio is None."""
    base = np.asarray(baseline_ms, dtype=np.float64)
    cand = np.asarray(candidate_ms, dtype=np.float64)
    if base.shape != cand.shape or base.ndim != 1 or not len(base):
        raise ValueError("baseline and candidate need one latency each for the same questions")
    keep = np.isfinite(base) & np.isfinite(cand)
    base, cand = base[keep], cand[keep]
    found: dict[str, dict[str, object]] = {}
    if not len(base):
        return {
            name: {"ratio": None, "ci": None, "method": RATIO_METHOD, "questions": 0}
            for name in statistics
        }
    rng = np.random.default_rng(seed)
    draws: dict[str, list[npt.NDArray[np.float64]]] = {name: [] for name in statistics}
    for name in statistics:
        _of(name, base[:1])  # an unknown name is refused before any resampling
    named = [name for name in statistics if name in QUANTILES]
    levels = [QUANTILES[name] for name in named]
    left_side, right_side = _Ranked(base), _Ranked(cand)
    for picks in _resampled_blocks(len(base), resamples, rng):
        with np.errstate(divide="ignore", invalid="ignore"):
            if named:  # one partial sort a side for every quantile at once
                ratios = right_side.quantiles(picks, levels) / left_side.quantiles(picks, levels)
                for row, name in enumerate(named):
                    draws[name].append(ratios[row])
            if "mean" in statistics:
                draws["mean"].append(cand[picks].mean(axis=-1) / base[picks].mean(axis=-1))
    for name in statistics:
        observed = float(_of(name, base))
        ratio = float(_of(name, cand)) / observed if observed > 0 else None
        ratios = np.concatenate(draws[name])
        ratios = ratios[np.isfinite(ratios)]
        found[name] = {
            "ratio": ratio,
            "ci": _percentile_interval(ratios, level) if len(ratios) else None,
            "method": RATIO_METHOD,
            "questions": len(base),
        }
    return found


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
    _of(statistic, base[:1])  # an unknown name is refused before any resampling
    rng = np.random.default_rng(seed)
    # The blocks of `paired_ratios`, so both draw the same resamples for one seed.
    lefts, rights = [], []
    for picks in _resampled_blocks(len(base), resamples, rng):
        lefts.append(np.atleast_1d(_of(statistic, base[picks])))
        rights.append(np.atleast_1d(_of(statistic, cand[picks])))
    left, right = np.concatenate(lefts), np.concatenate(rights)
    return float(_of(statistic, base)), float(_of(statistic, cand)), left, right, len(base)


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
    return {
        "baseline": base,
        "candidate": cand,
        "difference": cand - base,
        "ci": _percentile_interval(cand_rows - base_rows, level),
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
    """`paired_ratios` of one statistic (``p50``, ``p95``, ``p99`` or ``mean``)."""
    return paired_ratios(baseline_ms, candidate_ms, (statistic,), level, resamples, seed)[statistic]
