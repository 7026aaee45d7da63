"""Intervals for many means at once, each chosen by the kind of values it summarises.

0/1 values get the exact (Clopper-Pearson) binomial interval; bounded continuous values
a BCa bootstrap interval; a slice whose values are all one number the bound of
`constant_bounds`. The method travels with each interval into the record.

The resample counts are drawn once per run (from a fixed seed) and shared by every
metric and every slice: each batch of resamples is a (resamples x questions) count
matrix, and the resampled sums of every metric in every slice come from its products
with the values (see `_resampled_means`). Undefined values (NaN) are left out
of a mean, so a resampled mean is sum(defined values) / count(defined). The same
inputs and seed give the same intervals, to the last bit, however the batches are
spread over threads. Runs of `LARGE_SAMPLE` questions or more take the analytic and
per-slice paths of `retrievalkit.stats.large_samples` instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from retrievalkit.stats.large_samples import (
    LARGE_SAMPLE,
    abc_bounds,
    cell_resampled_means,
    cell_statistics,
    centred_sums,
)

FloatArray = npt.NDArray[np.float64]

DEFAULT_RESAMPLES = 2000
DEFAULT_CONFIDENCE = 0.95
DEFAULT_SEED = 20240611
#: Resample rows per batch: about this many (resample, question) cells, so a batch stays
#: in cache for small runs, and at least _MIN_BATCH_ROWS rows, so each pass over a large
#: run's weight matrix serves enough resamples.
_BATCH_CELLS = 1 << 20
_MIN_BATCH_ROWS = 16
#: Threads that draw and multiply batches of resamples (the machines have 2 cores).
_THREADS = 2
#: Multiply-adds up to which OpenBLAS runs a product on the calling thread alone.
_SINGLE_THREADED_PRODUCT = 1 << 18
#: ...but never pieces so thin that calls outnumber the work (the per-group fallback).
_MIN_PIECE_ROWS = 256
#: Beyond this many blocks of questions sharing the same groups, see _resampled_means.
_MAX_BLOCKS = 64
#: Resampled means this close (relative) to the estimate tie with it in BCa's bias correction.
_TIE_SCALE = 1e-6
#: float32 holds every whole number up to 2**24 exactly; resampled sizes never exceed
#: the number of questions.
_EXACT_FLOAT32 = 1 << 24


#: The interval methods a record names, one per metric and slice (see docs/metrics.md).
CLOPPER_PEARSON = "clopper-pearson"
"""Values all 0 or 1 (hit@k, or any metric whose defined values in a slice are): the exact
binomial interval, whose coverage is never below the nominal level."""
BCA = "bca"
"""Bounded continuous values: the bias-corrected and accelerated bootstrap (Efron 1987)."""
CONSTANT = "constant"
"""Every defined value is the same number c (not only 0 or 1): the widest range a sample
this size could hide, at the confidence level (see `constant_bounds`)."""
PERCENTILE = "percentile"
"""Records written before intervals were chosen by kind carry percentile bootstrap intervals."""
ABC = "abc"
"""Bounded continuous values in a cell of at least `LARGE_SAMPLE` questions: the analytic
limit of BCa (ABC, DiCiccio & Efron 1992), with no resampling (see `large_samples`)."""
BCA_EXPANDED = "bca-expanded"
"""Bounded continuous values in a cell of `TINY_SAMPLE` to `SMALL_SAMPLE` - 1 values: the
BCa interval widened by sqrt(n / (n - 1)) t_{n-1} / z (Hesterberg 2015's expanded
bootstrap, 1.22 at n = 10): plain BCa covers 91-93 % there on real metric values."""
RATE_BOUND = "rate-bound"
"""Bounded continuous values in a cell of fewer than `TINY_SAMPLE` values: the
Clopper-Pearson interval of the mean read as a rate of n (0/1 values are the most spread
a mean in [0, 1] can have), wide but never below the nominal level on the metric values
measured; BCa covers 80-90 % at n = 5-6 and even the expanded interval 91 %."""
INTERVAL_METHODS = (
    CLOPPER_PEARSON,
    BCA,
    BCA_EXPANDED,
    RATE_BOUND,
    ABC,
    CONSTANT,
    PERCENTILE,
)
#: Cells of fewer values than this get `BCA_EXPANDED` or `RATE_BOUND` instead of BCa.
SMALL_SAMPLE = 30
#: Cells of fewer values than this get `RATE_BOUND`.
TINY_SAMPLE = 10


@attrs.frozen
class Estimate:
    """A mean with its interval and the method that gave it; all None when nothing is defined."""

    mean: float | None
    low: float | None
    high: float | None
    n: int
    method: str | None = None


def _draw_counts(
    count: int, size: int, seed: int, number: int, order: npt.NDArray[np.intp] | None
) -> npt.NDArray[np.float32]:
    """Batch ``number`` of the resamples: how often each question is drawn in each.

    Each batch has its own generator, seeded with (seed, number), so the counts depend
    on the seed alone, whichever thread draws which batch. Counts are small whole
    numbers, exact in float32. With ``order``, column j holds question ``order[j]``'s
    count; a question's count is the same either way.
    """
    index_type = np.int32 if count < 2**31 else np.int64
    draws = np.random.default_rng((seed, number)).integers(
        0, count, size=(size, count), dtype=index_type
    )
    counts = np.empty((size, count), dtype=np.float32)
    # Row by row keeps each bincount's table in cache and needs no row offsets.
    for row in range(size):
        drawn = np.bincount(draws[row], minlength=count)
        counts[row] = drawn if order is None else drawn[order]
    return counts


def clopper_pearson(
    successes: npt.ArrayLike, n: npt.ArrayLike, confidence: float = DEFAULT_CONFIDENCE
) -> tuple[FloatArray, FloatArray]:
    """The exact binomial interval of ``successes`` out of ``n`` (arrays broadcast).

    Its bounds are beta quantiles; 30 of 30 gives [0.884, 1]: never a zero-width
    interval, since no finite sample proves a rate of exactly 1.
    """
    from scipy.special import betaincinv

    hits = np.asarray(successes, dtype=np.float64)
    total = np.asarray(n, dtype=np.float64)
    tail = (1.0 - confidence) / 2.0
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.where(hits > 0, betaincinv(hits, total - hits + 1.0, tail), 0.0)
        high = np.where(hits < total, betaincinv(hits + 1.0, total - hits, 1.0 - tail), 1.0)
    return np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)


def constant_bounds(
    value: npt.ArrayLike,
    n: npt.ArrayLike,
    confidence: float = DEFAULT_CONFIDENCE,
    value_range: tuple[float, float] = (0.0, 1.0),
) -> tuple[FloatArray, FloatArray]:
    """The interval of the mean when all ``n`` values equal ``value``, inside ``value_range``.

    A population of values in [lo, hi] that puts a share e on lo (or on hi) and the rest on
    ``value`` shows n copies of ``value`` with chance (1 - e)^n; every e up to
    1 - (alpha/2)^(1/n) keeps that chance at least alpha/2, so the mean may lie anywhere
    in value -/+ e * (distance to the edge). For a value at an edge this is exactly the
    Clopper-Pearson bound (30 ones: [0.884, 1]).
    """
    centre = np.asarray(value, dtype=np.float64)
    size = np.asarray(n, dtype=np.float64)
    share = 1.0 - ((1.0 - confidence) / 2.0) ** (1.0 / np.maximum(size, 1.0))
    lowest, highest = value_range
    return centre - share * (centre - lowest), centre + share * (highest - centre)


def small_sample_bounds(
    means: FloatArray,
    sizes: FloatArray,
    low: FloatArray,
    high: FloatArray,
    confidence: float = DEFAULT_CONFIDENCE,
    value_range: tuple[float, float] = (0.0, 1.0),
) -> tuple[FloatArray, FloatArray, npt.NDArray[np.object_]]:
    """(low, high, method) for BCa cells (``low``, ``high``) of fewer than `SMALL_SAMPLE`
    values: `BCA_EXPANDED` from `TINY_SAMPLE` values, `RATE_BOUND` below, each at least as
    wide as the BCa interval and inside ``value_range``; larger cells are left as they are
    (method `BCA`)."""
    from scipy.special import ndtri, stdtrit

    lowest, highest = value_range
    span = highest - lowest
    level = (1.0 + confidence) / 2.0
    units = np.maximum(sizes, 2.0)
    widen = np.sqrt(units / (units - 1.0)) * stdtrit(units - 1.0, level) / ndtri(level)
    widen = np.where(sizes < SMALL_SAMPLE, widen, 1.0)
    new_low = means - (means - low) * widen
    new_high = means + (high - means) * widen
    tiny = sizes < TINY_SAMPLE
    if tiny.any():
        share = np.clip((means[tiny] - lowest) / span, 0.0, 1.0)
        rate_low, rate_high = clopper_pearson(share * sizes[tiny], sizes[tiny], confidence)
        new_low[tiny] = np.minimum(low[tiny], lowest + rate_low * span)
        new_high[tiny] = np.maximum(high[tiny], lowest + rate_high * span)
    methods = np.where(tiny, RATE_BOUND, np.where(sizes < SMALL_SAMPLE, BCA_EXPANDED, BCA))
    return (
        np.clip(new_low, lowest, highest),
        np.clip(new_high, lowest, highest),
        methods.astype(object),
    )


def bca_bounds(
    samples: FloatArray,
    estimates: FloatArray,
    acceleration: FloatArray,
    confidence: float = DEFAULT_CONFIDENCE,
) -> tuple[FloatArray, FloatArray]:
    """BCa bounds of every column of ``samples`` (resampled statistics; NaN: undefined).

    The bias correction z0 comes from the share of resampled statistics below the
    estimate (ties count half, as in scipy.stats.bootstrap), the acceleration is given
    (for a mean, the closed form of the jackknife: `mean_acceleration`), and the
    bounds are the columns' quantiles at the adjusted levels (numpy's linear method).
    """
    from scipy.special import ndtr, ndtri

    defined = (~np.isnan(samples)).sum(axis=0)
    # Resampled means equal to the estimate count half (ties); "equal" allows for the
    # float32 rounding of the shared resamples, so adding slices cannot flip a tie.
    tie = _TIE_SCALE * np.maximum(1.0, np.abs(estimates))
    below = (samples < estimates - tie).sum(axis=0) + (samples <= estimates + tie).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = below / (2.0 * defined)
        # All resamples on one side (a tiny or very skewed sample) would make z0 infinite:
        # keep it at the most extreme share that the resamples can express.
        floor = 1.0 / (2.0 * np.maximum(defined, 1))
        z0 = ndtri(np.clip(share, floor, 1.0 - floor))
        levels = []
        for tail in ((1.0 - confidence) / 2.0, (1.0 + confidence) / 2.0):
            z = z0 + ndtri(tail)
            levels.append(ndtr(z0 + z / (1.0 - acceleration * z)))
    return _column_quantiles(samples, defined, np.array(levels))


def mean_acceleration(centred_cubes: FloatArray, centred_squares: FloatArray) -> FloatArray:
    """The jackknife acceleration of a mean: sum((x - m)^3) / (6 * sum((x - m)^2)^1.5)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        result = centred_cubes / (6.0 * centred_squares**1.5)
    return np.where(centred_squares > 0, result, 0.0)


def _column_quantiles(
    samples: FloatArray, defined: npt.NDArray[np.integer[Any]], levels: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Each column's quantiles at its own two ``levels`` (2, columns), over its defined values."""
    ordered = np.sort(samples, axis=0)  # NaN sorts last
    columns = np.arange(samples.shape[1])
    bounds = []
    for level in levels:
        position = np.clip(np.nan_to_num(level, nan=0.5), 0.0, 1.0) * (defined - 1)
        position = np.maximum(position, 0.0)
        below = np.floor(position).astype(np.intp)
        above = np.minimum(below + 1, np.maximum(defined - 1, 0))
        weight = position - below
        low_value = ordered[below, columns]
        high_value = ordered[above, columns]
        bounds.append(low_value + (high_value - low_value) * weight)
    return bounds[0], bounds[1]


def bootstrap_means(
    values: FloatArray,
    groups: npt.NDArray[np.bool_],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
    value_range: tuple[float, float] = (0.0, 1.0),
    binary: bool = True,
) -> list[list[Estimate]]:
    """Estimates for every (group, metric) pair, each with the interval its values call for.

    ``values`` is (questions, metrics) with NaN for undefined; ``groups`` is
    (groups, questions), one boolean mask per slice. A cell whose defined values are all
    0 or 1 gets the Clopper-Pearson interval (unless ``binary`` is False, for values
    that are not rates, such as paired differences); a cell whose values are all one
    other number gets `constant_bounds`; every other cell a BCa bootstrap interval.
    Every group is read from the same resamples of the whole run, so a slice's
    resampled size varies from resample to resample, as it would in a fresh sample of
    questions. ``value_range`` is where a value can lie; bounds never leave it.

    A run of `LARGE_SAMPLE` questions or more is not resampled whole: a cell with that
    many values gets the ABC interval (`ABC`), a smaller one BCa from resampling its
    own members (see `_large_run_bounds` and `retrievalkit.stats.large_samples`).
    """
    count, metrics = values.shape
    group_count = groups.shape[0]
    defined = ~np.isnan(values)
    cells = group_count * metrics
    blocked = cell_statistics(values, defined, groups) if count >= LARGE_SAMPLE else None
    if blocked is not None:
        totals, sizes, non_binary, lowest, highest = blocked
    else:
        filled = np.where(defined, values, 0.0)
        is_binary = defined & ((filled == 0.0) | (filled == 1.0))
        totals = np.empty(cells)
        sizes = np.empty(cells)
        lowest = np.full(cells, np.inf)
        highest = np.full(cells, -np.inf)
        non_binary = np.zeros(cells)
        for group, mask in enumerate(groups):
            columns = slice(group * metrics, (group + 1) * metrics)
            # Summed over questions in order, as one (questions, cells) matrix would be, so
            # the means are the same to the last bit whatever the number of groups.
            totals[columns] = (filled * mask[:, None]).sum(axis=0)
            members = defined & mask[:, None]
            sizes[columns] = members.sum(axis=0)
            non_binary[columns] = (members & ~is_binary).sum(axis=0)
            if count:
                lowest[columns] = np.where(members, values, np.inf).min(axis=0)
                highest[columns] = np.where(members, values, -np.inf).max(axis=0)
    means = np.divide(totals, sizes, out=np.full_like(totals, np.nan), where=sizes > 0)
    kinds = np.full(cells, BCA, dtype=object)
    kinds[lowest == highest] = CONSTANT
    if binary:
        kinds[non_binary == 0] = CLOPPER_PEARSON
    low = np.full_like(means, np.nan)
    high = np.full_like(means, np.nan)
    bootstrapped = (kinds == BCA) & (sizes > 0)
    if count >= LARGE_SAMPLE and resamples > 0:
        _large_run_bounds(
            values,
            defined,
            groups,
            bootstrapped,
            kinds,
            (means, sizes, low, high),
            resamples,
            confidence,
            seed,
        )
    elif count and resamples > 0 and bootstrapped.any():
        # Only metrics that need the bootstrap in some group are resampled (hit@k never).
        wanted = np.flatnonzero(bootstrapped.reshape(group_count, metrics).any(axis=0))
        samples = _resampled_means(filled[:, wanted], defined[:, wanted], groups, resamples, seed)
        chosen = (np.arange(group_count)[:, None] * metrics + wanted[None, :]).ravel()
        cubes, squares = _centred_moments(values[:, wanted], defined[:, wanted], groups)
        low[chosen], high[chosen] = bca_bounds(
            samples, means[chosen], mean_acceleration(cubes, squares), confidence
        )
    small = np.flatnonzero(bootstrapped & (sizes < SMALL_SAMPLE) & ~np.isnan(low))
    if small.size:
        # A bootstrap of few values is too narrow: a wider interval that says so.
        low[small], high[small], kinds[small] = small_sample_bounds(
            means[small], sizes[small], low[small], high[small], confidence, value_range
        )
    exact = kinds == CLOPPER_PEARSON
    low[exact], high[exact] = clopper_pearson(totals[exact], sizes[exact], confidence)
    flat = kinds == CONSTANT
    low[flat], high[flat] = constant_bounds(means[flat], sizes[flat], confidence, value_range)
    # A bootstrap that could not run (no resamples asked for) has no interval to give.
    kinds[bootstrapped & np.isnan(low)] = None
    # An analytic (ABC) bound is clamped as a bootstrap bound is: its resampled means
    # could not leave [min, max] either.
    clamp = np.where(kinds == ABC, BCA, kinds)
    return _estimates(
        means, sizes, low, high, lowest, highest, kinds, clamp, value_range, group_count, metrics
    )


def _estimates(
    means: FloatArray,
    sizes: FloatArray,
    low: FloatArray,
    high: FloatArray,
    lowest: FloatArray,
    highest: FloatArray,
    kinds: npt.NDArray[np.object_],
    clamp: npt.NDArray[np.object_],
    value_range: tuple[float, float],
    group_count: int,
    metrics: int,
) -> list[list[Estimate]]:
    """One estimate a (group, metric) cell, from the cells' flat arrays."""
    estimates: list[list[Estimate]] = []
    for group in range(group_count):
        row_estimates = []
        for metric in range(metrics):
            cell = group * metrics + metric
            size = int(sizes[cell])
            if size == 0:
                row_estimates.append(Estimate(None, None, None, 0))
                continue
            if kinds[cell] is None:
                row_estimates.append(Estimate(float(means[cell]), None, None, size))
                continue
            row_estimates.append(
                Estimate(
                    float(means[cell]),
                    # A resampled mean cannot leave [min, max] of the values; float32
                    # sums can stray by an ulp (a "-0.000" bound), so clamp to the
                    # values' range for the bootstrap, and to the mean's side always.
                    _bound(low[cell], means[cell], lowest[cell], clamp[cell], value_range, True),
                    _bound(high[cell], means[cell], highest[cell], clamp[cell], value_range, False),
                    size,
                    str(kinds[cell]),
                )
            )
        estimates.append(row_estimates)
    return estimates


def _large_run_bounds(
    values: FloatArray,
    defined: npt.NDArray[np.bool_],
    groups: npt.NDArray[np.bool_],
    bootstrapped: npt.NDArray[np.bool_],
    kinds: npt.NDArray[np.object_],
    cells: tuple[FloatArray, FloatArray, FloatArray, FloatArray],
    resamples: int,
    confidence: float,
    seed: int,
) -> None:
    """Bounds for the bootstrapped cells of a run of `LARGE_SAMPLE` questions or more.

    A cell with that many values gets the ABC bounds (its kind becomes ABC); a smaller
    one is resampled on its own members (`large_samples.cell_resampled_means`), one
    draw shared by the metrics defined on the same questions of the same group, unless
    the small cells' members outnumber the run's questions: then the run is resampled
    whole for them, as a smaller run is. Either way each cell's resampled mean has the
    same distribution. Fills ``low`` and ``high`` of ``cells`` (means, sizes, low,
    high) in place.
    """
    means, sizes, low, high = cells
    count, metrics = values.shape
    analytic = bootstrapped & (sizes >= LARGE_SAMPLE)
    if analytic.any():
        kinds[analytic] = ABC
        squares, cubes = centred_sums(values, defined, groups)
        chosen = np.flatnonzero(analytic)
        low[chosen], high[chosen] = abc_bounds(
            means[chosen],
            sizes[chosen],
            squares.ravel()[chosen],
            cubes.ravel()[chosen],
            confidence,
        )
    small = np.flatnonzero(bootstrapped & ~analytic)
    if small.size == 0:
        return
    # Metrics defined on the same questions of the same group share their members.
    keys = [defined[:, metric].tobytes() for metric in range(metrics)]
    pattern_of = [keys.index(key) for key in keys]
    shared: dict[tuple[int, int], list[int]] = {}
    for cell in small.tolist():
        group, metric = divmod(cell, metrics)
        shared.setdefault((group, pattern_of[metric]), []).append(cell)
    member_sets = {key: np.flatnonzero(groups[key[0]] & defined[:, key[1]]) for key in shared}
    accelerations = {}
    for key, members_cells in shared.items():
        chosen_values = values[np.ix_(member_sets[key], [cell % metrics for cell in members_cells])]
        deviation = chosen_values - means[members_cells]
        squared = deviation * deviation
        accelerations[key] = mean_acceleration(
            (squared * deviation).sum(axis=0), squared.sum(axis=0)
        )
    if sum(len(members) for members in member_sets.values()) >= count:
        # The small cells cover the run more than once: resampling the run whole, shared
        # by all of them, costs less than resampling each on its own.
        wanted = sorted({cell % metrics for cell in small.tolist()})
        samples = _resampled_means(
            np.where(defined[:, wanted], values[:, wanted], 0.0),
            defined[:, wanted],
            groups,
            resamples,
            seed,
        )
        for key, members_cells in shared.items():
            columns = [
                (cell // metrics) * len(wanted) + wanted.index(cell % metrics)
                for cell in members_cells
            ]
            low[members_cells], high[members_cells] = bca_bounds(
                samples[:, columns], means[members_cells], accelerations[key], confidence
            )
        return
    for stream, (key, members_cells) in enumerate(shared.items()):
        chosen_values = values[np.ix_(member_sets[key], [cell % metrics for cell in members_cells])]
        samples = cell_resampled_means(chosen_values, count, resamples, seed, stream)
        low[members_cells], high[members_cells] = bca_bounds(
            samples, means[members_cells], accelerations[key], confidence
        )


def _bound(
    bound: float,
    mean: float,
    extreme: float,
    kind: str,
    value_range: tuple[float, float],
    lower: bool,
) -> float:
    value = float(mean) if np.isnan(bound) else float(bound)
    if kind == BCA:
        value = max(value, float(extreme)) if lower else min(value, float(extreme))
    value = min(max(value, value_range[0]), value_range[1])
    return min(value, float(mean)) if lower else max(value, float(mean))


def _centred_moments(
    values: FloatArray, defined: npt.NDArray[np.bool_], groups: npt.NDArray[np.bool_]
) -> tuple[FloatArray, FloatArray]:
    """Per (group, metric) cell: sums of cubed and of squared deviations from the cell mean."""
    filled = np.where(defined, values, 0.0)
    cubes = []
    squares = []
    for mask in groups:
        members = defined & mask[:, None]
        size = members.sum(axis=0)
        centre = np.divide(
            (filled * members).sum(axis=0), size, out=np.zeros(len(size)), where=size > 0
        )
        deviation = np.where(members, filled - centre, 0.0)
        squares.append((deviation**2).sum(axis=0))
        cubes.append((deviation**3).sum(axis=0))
    return np.concatenate(cubes), np.concatenate(squares)


def sample_intervals(
    samples: FloatArray,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
    value_range: tuple[float, float] = (0.0, 1.0),
    small_samples: bool = True,
) -> tuple[FloatArray, FloatArray, npt.NDArray[np.object_]]:
    """(low, high, method) for each row of ``samples`` (rows: independent samples of n).

    ``small_samples`` False keeps plain BCa below `SMALL_SAMPLE` values (what runs gave
    before 0.3), for the benchmarks that compare the two.

    The same choice of method and the same interval code as `bootstrap_means`,
    for many samples at once: the coverage simulations draw thousands of samples and
    interval them in one call. The rows share one set of resample indices, which leaves
    each row's interval a valid bootstrap interval of that row.
    """
    rows, size = samples.shape
    means = samples.mean(axis=1)
    binary = np.all((samples == 0.0) | (samples == 1.0), axis=1)
    flat = samples.min(axis=1) == samples.max(axis=1)
    kinds = np.where(binary, CLOPPER_PEARSON, np.where(flat, CONSTANT, BCA)).astype(object)
    low = np.empty(rows)
    high = np.empty(rows)
    exact = kinds == CLOPPER_PEARSON
    low[exact], high[exact] = clopper_pearson(samples[exact].sum(axis=1), size, confidence)
    same = kinds == CONSTANT
    low[same], high[same] = constant_bounds(means[same], size, confidence, value_range)
    boot = np.flatnonzero(kinds == BCA)
    if boot.size and size >= LARGE_SAMPLE:
        # As in a run: samples this large get the analytic limit of BCa.
        kinds[boot] = ABC
        chosen = samples[boot]
        deviation = chosen - means[boot, None]
        squared = deviation * deviation
        abc_low, abc_high = abc_bounds(
            means[boot],
            np.full(boot.size, float(size)),
            squared.sum(axis=1),
            (squared * deviation).sum(axis=1),
            confidence,
        )
        low[boot] = np.clip(np.minimum(abc_low, means[boot]), chosen.min(axis=1), None)
        high[boot] = np.clip(np.maximum(abc_high, means[boot]), None, chosen.max(axis=1))
    elif boot.size:
        chosen = samples[boot]
        counts = _draw_counts(size, resamples, seed, 0, None).astype(np.float64)
        resampled = counts @ chosen.T / size
        deviation = chosen - means[boot, None]
        acceleration = mean_acceleration((deviation**3).sum(axis=1), (deviation**2).sum(axis=1))
        bca_low, bca_high = bca_bounds(resampled, means[boot], acceleration, confidence)
        low[boot] = np.clip(np.minimum(bca_low, means[boot]), chosen.min(axis=1), None)
        high[boot] = np.clip(np.maximum(bca_high, means[boot]), None, chosen.max(axis=1))
        if size < SMALL_SAMPLE and small_samples:
            # As in a run: few values get the wider interval that says so.
            low[boot], high[boot], kinds[boot] = small_sample_bounds(
                means[boot],
                np.full(boot.size, float(size)),
                low[boot],
                high[boot],
                confidence,
                value_range,
            )
    return low, high, kinds


@attrs.frozen
class _Block:
    """Consecutive questions (in resampling order) whose sums one matrix product gives.

    ``weights`` has a column per metric (the values less the part's centre, 0 where
    undefined) and per definedness pattern (1 where the question counts) for each part;
    ``to_totals`` and ``to_sizes`` turn the product's columns into every (group,
    metric) cell's resampled sum of values and number of values.
    """

    start: int
    end: int
    weights: npt.NDArray[np.floating[Any]]
    to_totals: FloatArray
    to_sizes: FloatArray


def _resampled_means(
    filled: FloatArray,
    defined: npt.NDArray[np.bool_],
    groups: npt.NDArray[np.bool_],
    resamples: int,
    seed: int,
) -> FloatArray:
    """(resamples, groups x metrics) resampled means; NaN where nothing was defined.

    The questions are sorted into blocks of questions that belong to the same groups
    (form x hard class gives a handful). Each block's sums are one small product per
    batch of resamples, and a group's sums add up its blocks', so the work grows with
    the questions, not with questions x groups. Past _MAX_BLOCKS blocks (many small
    slices) one block of all questions with a part per group costs less.

    Values are centred on their part's mean before the float32 product, and the centre
    comes back in float64 (centre x resampled size): float32 then moves a resampled
    mean by less than about 1e-7, against resampling noise near 1e-3, where uncentred
    sums of thousands of values would lose several more digits.
    """
    count, metrics = filled.shape
    group_count = len(groups)
    # Metrics defined on the same questions (all but hit@k are undefined exactly on
    # no-answer questions) share one resampled size per part.
    keys = [defined[:, metric].tobytes() for metric in range(metrics)]
    distinct = list(dict.fromkeys(keys))
    pattern_of = np.array([distinct.index(key) for key in keys], dtype=np.intp)
    patterns = defined[:, [keys.index(key) for key in distinct]]
    # float32 sums of counts are exact below 2**24 questions; past that, float64.
    precision = np.float32 if count < _EXACT_FLOAT32 else np.float64
    order = np.lexsort(groups[::-1])
    member = groups[:, order]
    cuts = np.flatnonzero(np.any(member[:, 1:] != member[:, :-1], axis=0)) + 1
    bounds = list(zip([0, *cuts.tolist()], [*cuts.tolist(), count], strict=True))
    parts: list[tuple[int, int, list[tuple[list[int], npt.NDArray[np.bool_]]]]]
    if len(bounds) <= _MAX_BLOCKS:
        parts = [
            (start, end, [(np.flatnonzero(member[:, start]).tolist(), np.ones(end - start, bool))])
            for start, end in bounds
            if member[:, start].any()
        ]
        rows: npt.NDArray[np.intp] | None = order
    else:
        parts = [(0, count, [([group], mask) for group, mask in enumerate(groups)])]
        rows = None
    blocks = []
    for start, end, block_parts in parts:
        taken = slice(start, end) if rows is None else rows[start:end]
        blocks.append(
            _block(
                start,
                end,
                filled[taken],
                defined[taken],
                patterns[taken],
                pattern_of,
                block_parts,
                group_count,
                precision,
            )
        )
    sums = [np.empty((resamples, block.weights.shape[1])) for block in blocks]
    batch = max(1, min(resamples, max(_MIN_BATCH_ROWS, _BATCH_CELLS // count)))
    # Small products run on one BLAS thread (OpenBLAS threads a product only past
    # 2**18 multiply-adds), so pieces of blocks stay under that and the two cores are
    # used by drawing and multiplying whole batches in two threads instead: OpenBLAS's
    # own threads stall on every small product when the machine is busy.
    width = max(block.weights.shape[1] for block in blocks)
    piece = max(_MIN_PIECE_ROWS, _SINGLE_THREADED_PRODUCT // (batch * width))
    pieces = [
        (index, low, min(low + piece, block.end))
        for index, block in enumerate(blocks)
        for low in range(block.start, block.end, piece)
    ]

    def resample(number: int) -> None:
        first = number * batch
        size = min(batch, resamples - first)
        counts = _draw_counts(count, size, seed, number, rows).astype(precision, copy=False)
        # Pieces add up in float64: only a piece's own product rounds to float32.
        totals = [np.zeros((size, block.weights.shape[1])) for block in blocks]
        for index, low, high in pieces:
            block = blocks[index]
            weights = block.weights[low - block.start : high - block.start]
            totals[index] += counts[:, low:high] @ weights
        # Each batch writes its own rows, so the threads never touch the same cells.
        for block_sums, total in zip(sums, totals, strict=True):
            block_sums[first : first + size] = total

    numbers = range(-(-resamples // batch))
    if len(numbers) == 1:
        resample(0)
    else:
        with ThreadPoolExecutor(max_workers=_THREADS) as threads:
            for _ in threads.map(resample, numbers):
                pass
    wide = np.concatenate(sums, axis=1)
    top = wide @ np.concatenate([block.to_totals for block in blocks])
    bottom = wide @ np.concatenate([block.to_sizes for block in blocks])
    means: FloatArray = np.divide(top, bottom, out=np.full_like(top, np.nan), where=bottom > 0)
    return means


def _block(
    start: int,
    end: int,
    filled: FloatArray,
    defined: npt.NDArray[np.bool_],
    patterns: npt.NDArray[np.bool_],
    pattern_of: npt.NDArray[np.intp],
    parts: list[tuple[list[int], npt.NDArray[np.bool_]]],
    group_count: int,
    precision: type[np.floating[Any]],
) -> _Block:
    """The weights of one block: for each part (its groups, its questions), the columns."""
    metrics = filled.shape[1]
    width = metrics + patterns.shape[1]
    weights = np.empty((end - start, width * len(parts)), dtype=precision)
    to_totals = np.zeros((weights.shape[1], group_count * metrics))
    to_sizes = np.zeros_like(to_totals)
    metric_rows = np.arange(metrics)
    for index, (part_groups, mask) in enumerate(parts):
        first = index * width
        counted = defined & mask[:, None]
        tally = counted.sum(axis=0)
        center = np.divide(
            (filled * counted).sum(axis=0), tally, out=np.zeros(metrics), where=tally > 0
        )
        weights[:, first : first + metrics] = np.where(counted, filled - center, 0.0)
        weights[:, first + metrics : first + width] = patterns & mask[:, None]
        size_rows = first + metrics + pattern_of
        for group in part_groups:
            cells = group * metrics + metric_rows
            to_totals[first + metric_rows, cells] = 1.0
            to_totals[size_rows, cells] = center
            to_sizes[size_rows, cells] = 1.0
    return _Block(start, end, weights, to_totals, to_sizes)


def slice_masks(labels: Sequence[str | None]) -> dict[str, npt.NDArray[np.bool_]]:
    """One mask per distinct label, sorted; questions without a label go to ``(none)``."""
    names = np.array(["(none)" if label is None else label for label in labels], dtype=object)
    return {value: names == value for value in sorted(set(names.tolist()))}
