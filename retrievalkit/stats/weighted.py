"""Bootstrap intervals over weighted queries: a log's distinct queries with their counts.

The distinct queries are the units resampled (a cluster bootstrap, each query a cluster
of its occurrences): a resample draws n of the n distinct queries with replacement, and
each drawn query brings its count, so a statistic's resampled value is computed with
(times drawn x count) as weights. Resampling single occurrences instead would treat the
1,000 occurrences of a head query as 1,000 independent draws and give intervals too
narrow whenever the counts are not independent (bursts, retries, bots). The interval is the
percentile interval of those values. Undefined values (NaN) are left out of a mean:
a weighted mean is sum(count x value) / sum(count) over the defined values. The same
weights and seed give the same intervals.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

RESAMPLES = 1000
#: Resamples drawn at once: a (block x queries) count matrix.
_BLOCK = 50


def resampled_counts(
    weights: FloatArray, resamples: int = RESAMPLES, seed: int = 0
) -> Iterator[FloatArray]:
    """(block x queries) weight matrices of ``resamples`` resamples in all: the times each
    distinct query was drawn, times its weight."""
    count = weights.size
    chances = np.full(count, 1.0 / count)
    generator = np.random.default_rng(seed)
    left = resamples
    while left > 0:
        size = min(_BLOCK, left)
        yield generator.multinomial(count, chances, size=size) * weights[None, :]
        left -= size


def weighted_mean(values: FloatArray, weights: FloatArray) -> float | None:
    """sum(weight x value) / sum(weight) over the defined values; None if none is."""
    defined = ~np.isnan(values)
    mass = float(weights[defined].sum())
    if mass == 0.0:
        return None
    return float(np.dot(weights[defined], values[defined])) / mass


def mean_intervals(
    columns: dict[str, FloatArray],
    weights: FloatArray,
    *,
    resamples: int = RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, tuple[float | None, tuple[float, float] | None]]:
    """Each column's weighted mean and percentile bootstrap interval, from one shared set
    of resamples (so the intervals of paired columns come from the same draws)."""
    names = list(columns)
    if not names or weights.size == 0:
        return {name: (None, None) for name in names}
    values = np.vstack([columns[name] for name in names])
    defined = (~np.isnan(values)).astype(np.float64)
    filled = np.nan_to_num(values, nan=0.0)
    found: list[FloatArray] = []
    for counts in resampled_counts(weights, resamples, seed):
        sums = counts @ filled.T
        masses = counts @ defined.T
        with np.errstate(invalid="ignore", divide="ignore"):
            found.append(sums / masses)
    means = np.vstack(found)
    tail = (1.0 - confidence) / 2.0
    out: dict[str, tuple[float | None, tuple[float, float] | None]] = {}
    for index, name in enumerate(names):
        point = weighted_mean(values[index], weights)
        column = means[:, index]
        column = column[~np.isnan(column)]
        if point is None or column.size == 0:
            out[name] = (point, None)
            continue
        low, high = np.quantile(column, [tail, 1.0 - tail])
        out[name] = (point, (float(low), float(high)))
    return out
