"""Percentile bootstrap intervals for many means at once, and paired differences of two runs.

The resample counts are drawn once per run (from a fixed seed) and shared by every
metric and every slice: each batch of resamples is a (resamples x questions) count
matrix, and all means of that batch are one matrix product. Undefined values (NaN)
are left out of a mean, so a resampled mean is sum(defined values) / count(defined).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import attrs
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

DEFAULT_RESAMPLES = 2000
DEFAULT_CONFIDENCE = 0.95
DEFAULT_SEED = 20240611
#: Resample rows per batch: about this many (resample, question) cells, so a batch stays
#: in cache for small runs, and at least _MIN_BATCH_ROWS rows, so each pass over a large
#: run's weight matrix serves enough resamples.
_BATCH_CELLS = 1 << 20
_MIN_BATCH_ROWS = 64
#: Sign flips per batch of the permutation test (its batches shape the random stream).
_PERMUTATION_CELLS = 4_000_000
#: float32 holds every whole number up to 2**24 exactly; resample counts and sizes never
#: exceed the number of questions.
_EXACT_FLOAT32 = 1 << 24


@attrs.frozen
class Estimate:
    """A mean with its percentile interval; all None when no value is defined."""

    mean: float | None
    low: float | None
    high: float | None
    n: int


def _count_batches(count: int, resamples: int, seed: int) -> Iterator[npt.NDArray[np.float32]]:
    """Yield (batch, count) matrices: how often each question is drawn in each resample.

    Counts are whole numbers far below 2**24, so float32 holds them exactly and halves
    the memory the matrix product streams through. One generator draws every batch in
    order, so the counts depend on the seed alone; a helper thread draws the next batch
    while the caller multiplies this one (numpy releases the GIL for both).
    """
    rng = np.random.default_rng(seed)
    batch = max(1, min(resamples, max(_MIN_BATCH_ROWS, _BATCH_CELLS // max(count, 1))))
    sizes = [min(batch, resamples - done) for done in range(0, resamples, batch)]
    # int32 draws are the same stream as int64 ones below 2**31, at half the memory.
    index_type = np.int32 if count < 2**31 else np.int64

    def draw(size: int) -> npt.NDArray[np.float32]:
        draws = rng.integers(0, count, size=(size, count), dtype=index_type)
        counts = np.empty((size, count), dtype=np.float32)
        # Row by row keeps each bincount's table in cache and needs no row offsets.
        for row in range(size):
            counts[row] = np.bincount(draws[row], minlength=count)
        return counts

    if len(sizes) == 1:
        yield draw(sizes[0])
        return
    with ThreadPoolExecutor(max_workers=1) as helper:
        pending = helper.submit(draw, sizes[0])
        for size in sizes[1:]:
            ready = pending.result()
            pending = helper.submit(draw, size)
            yield ready
        yield pending.result()


def bootstrap_means(
    values: FloatArray,
    groups: npt.NDArray[np.bool_],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
) -> list[list[Estimate]]:
    """Estimates for every (group, metric) pair.

    ``values`` is (questions, metrics) with NaN for undefined; ``groups`` is
    (groups, questions), one boolean mask per slice. Every group is read from the
    same resamples of the whole run, so a slice's resampled size varies from
    resample to resample, as it would in a fresh sample of questions.
    """
    count, metrics = values.shape
    group_count = groups.shape[0]
    defined = ~np.isnan(values)
    filled = np.where(defined, values, 0.0)
    # Which questions count towards a mean: metrics defined on the same questions (all
    # but hit@k are undefined exactly on no-answer questions) share one pattern, so
    # each group needs a resampled size per pattern, not per metric.
    keys = [defined[:, metric].tobytes() for metric in range(metrics)]
    distinct = list(dict.fromkeys(keys))
    pattern_of = np.array([distinct.index(key) for key in keys], dtype=np.intp)
    patterns = defined[:, [keys.index(key) for key in distinct]]
    pattern_count = len(distinct)
    cells = group_count * metrics
    totals = np.empty(cells)
    sizes = np.empty(cells)
    # One matrix: a column per (group, metric) sum of values, then a column per
    # (group, pattern) count of questions; float32 (see _count_batches) when the
    # counts stay exact, float64 for runs past 2**24 questions.
    weights = np.empty(
        (count, cells + group_count * pattern_count),
        dtype=np.float32 if count < _EXACT_FLOAT32 else np.float64,
    )
    means = np.full(cells, np.nan)
    for group, mask in enumerate(groups):
        columns = slice(group * metrics, (group + 1) * metrics)
        numerators = filled * mask[:, None]
        # Summed over questions in order, as one (questions, cells) matrix would be, so
        # the means are the same to the last bit whatever the number of groups.
        totals[columns] = numerators.sum(axis=0)
        counted = defined & mask[:, None]
        sizes[columns] = counted.sum(axis=0)
        np.divide(totals[columns], sizes[columns], out=means[columns], where=sizes[columns] > 0)
        # Centred on the group's mean: a resampled mean is mean + sum(count * deviation)
        # / size, and deviations sum to a small number, so float32 rounding in the
        # product stays far below the resampling noise (about 1e-9 instead of 1e-7).
        center = np.nan_to_num(means[columns])
        weights[:, columns] = np.where(counted, filled - center, 0.0)
        first = cells + group * pattern_count
        weights[:, first : first + pattern_count] = patterns & mask[:, None]
    low = np.full_like(means, np.nan)
    high = np.full_like(means, np.nan)
    if count and resamples > 0:
        sums = np.empty((resamples, weights.shape[1]), dtype=weights.dtype)
        row = 0
        for counts in _count_batches(count, resamples, seed):
            batch = counts.astype(weights.dtype, copy=False)
            np.matmul(batch, weights, out=sums[row : row + len(batch)])
            row += len(batch)
        deviations = sums[:, :cells].astype(np.float64)
        size_columns = cells + np.repeat(np.arange(group_count) * pattern_count, metrics)
        bottom = sums[:, size_columns + np.tile(pattern_of, group_count)].astype(np.float64)
        samples = np.divide(deviations, bottom, out=np.full_like(deviations, np.nan), where=bottom > 0)
        samples += means
        tail = (1.0 - confidence) / 2.0 * 100.0
        low, high = _nanpercentiles(samples, (tail, 100.0 - tail))
    estimates: list[list[Estimate]] = []
    for group in range(group_count):
        row_estimates = []
        for metric in range(metrics):
            cell = group * metrics + metric
            size = int(sizes[cell])
            if size == 0:
                row_estimates.append(Estimate(None, None, None, 0))
                continue
            row_estimates.append(
                Estimate(
                    float(means[cell]),
                    _clip(low[cell], means[cell]),
                    _clip(high[cell], means[cell]),
                    size,
                )
            )
        estimates.append(row_estimates)
    return estimates


def _nanpercentiles(samples: FloatArray, percents: tuple[float, ...]) -> FloatArray:
    """``np.nanpercentile(samples, percents, axis=0)``, bit for bit, in a few array calls.

    numpy's version runs its quantile code once per column (and imports numpy.ma on
    first use); here the columns that have the same number of defined values share one
    partition, with numpy's own index and interpolation arithmetic (linear method).
    """
    rows, columns = samples.shape
    ordered = np.ascontiguousarray(samples.T)
    defined = rows - np.isnan(ordered).sum(axis=1)
    result = np.full((len(percents), columns), np.nan)
    quantiles = np.asarray(percents, dtype=np.float64) / 100.0
    for size in sorted(set(defined.tolist()) - {0}):
        chosen = np.flatnonzero(defined == size)
        virtual = (size - 1) * quantiles
        below = np.floor(virtual)
        before = np.clip(below, 0, size - 1).astype(np.intp)
        after = np.clip(below + 1, 0, size - 1).astype(np.intp)
        beyond = virtual >= size - 1
        before[beyond] = after[beyond] = size - 1
        under = virtual < 0
        before[under] = after[under] = 0
        # NaN sorts last, so the order statistics below ``size`` are the defined values'.
        block = np.partition(ordered[chosen], sorted({*before.tolist(), *after.tolist()}), axis=1)
        gamma = virtual - below
        for position, weight in enumerate(gamma.tolist()):
            low_value = block[:, before[position]]
            high_value = block[:, after[position]]
            step = high_value - low_value
            if weight >= 0.5:
                result[position, chosen] = high_value - step * (1 - weight)
            else:
                result[position, chosen] = low_value + step * weight
    return result


def _clip(bound: float, mean: float) -> float:
    # An interval is never NaN for a defined mean; with one question it is the point itself.
    return float(mean) if np.isnan(bound) else float(bound)


@attrs.frozen
class PairedDifference:
    """candidate - baseline over the questions where both are defined."""

    baseline: float | None
    candidate: float | None
    difference: float | None
    low: float | None
    high: float | None
    p_value: float | None
    n: int


def paired_difference(
    baseline: FloatArray,
    candidate: FloatArray,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
    permutations: int = 10_000,
) -> PairedDifference:
    """Mean difference with a paired bootstrap interval and a sign-flip permutation p-value.

    The p-value is two-sided: how often a random sign flip of the per-question
    differences gives a mean at least as far from zero as the observed one.
    """
    both = ~np.isnan(baseline) & ~np.isnan(candidate)
    n = int(both.sum())
    if n == 0:
        return PairedDifference(None, None, None, None, None, None, 0)
    base = baseline[both]
    cand = candidate[both]
    diff = cand - base
    observed = float(diff.mean())
    estimate = bootstrap_means(
        diff[:, None],
        np.ones((1, n), dtype=bool),
        resamples=resamples,
        confidence=confidence,
        seed=seed,
    )[0][0]
    rng = np.random.default_rng(seed + 1)
    if np.allclose(diff, 0.0):
        p_value = 1.0
    else:
        extreme = 0
        done = 0
        batch = max(1, min(permutations, _PERMUTATION_CELLS // n))
        while done < permutations:
            size = min(batch, permutations - done)
            signs = rng.integers(0, 2, size=(size, n)) * 2.0 - 1.0
            flipped = np.abs(signs @ diff) / n
            extreme += int((flipped >= abs(observed) - 1e-12).sum())
            done += size
        p_value = (extreme + 1) / (permutations + 1)
    return PairedDifference(
        float(base.mean()),
        float(cand.mean()),
        observed,
        estimate.low,
        estimate.high,
        p_value,
        n,
    )


def slice_masks(labels: Sequence[str | None]) -> dict[str, npt.NDArray[np.bool_]]:
    """One mask per distinct label, sorted; questions without a label go to ``(none)``."""
    names = np.array(["(none)" if label is None else label for label in labels], dtype=object)
    return {value: names == value for value in sorted(set(names.tolist()))}
