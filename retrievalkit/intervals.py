"""Percentile bootstrap intervals for many means at once, and paired differences of two runs.

The resample counts are drawn once per run (from a fixed seed) and shared by every
metric and every slice: each batch of resamples is a (resamples x questions) count
matrix, and the resampled sums of every metric in every slice come from its products
with the values (see `_resampled_means`). Undefined values (NaN) are left out
of a mean, so a resampled mean is sum(defined values) / count(defined). The same
inputs and seed give the same intervals, to the last bit, however the batches are
spread over threads.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

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
_MIN_BATCH_ROWS = 16
#: Threads that draw and multiply batches of resamples (the machines have 2 cores).
_THREADS = 2
#: Multiply-adds up to which OpenBLAS runs a product on the calling thread alone.
_SINGLE_THREADED_PRODUCT = 1 << 18
#: ...but never pieces so thin that calls outnumber the work (the per-group fallback).
_MIN_PIECE_ROWS = 256
#: Beyond this many blocks of questions sharing the same groups, see _resampled_means.
_MAX_BLOCKS = 64
#: Sign flips per batch of the permutation test (its batches shape the random stream).
_PERMUTATION_CELLS = 4_000_000
#: float32 holds every whole number up to 2**24 exactly; resampled sizes never exceed
#: the number of questions.
_EXACT_FLOAT32 = 1 << 24


@attrs.frozen
class Estimate:
    """A mean with its percentile interval; all None when no value is defined."""

    mean: float | None
    low: float | None
    high: float | None
    n: int


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
    cells = group_count * metrics
    totals = np.empty(cells)
    sizes = np.empty(cells)
    lowest = np.full(cells, np.inf)
    highest = np.full(cells, -np.inf)
    for group, mask in enumerate(groups):
        columns = slice(group * metrics, (group + 1) * metrics)
        # Summed over questions in order, as one (questions, cells) matrix would be, so
        # the means are the same to the last bit whatever the number of groups.
        totals[columns] = (filled * mask[:, None]).sum(axis=0)
        members = defined & mask[:, None]
        sizes[columns] = members.sum(axis=0)
        if count:
            lowest[columns] = np.where(members, values, np.inf).min(axis=0)
            highest[columns] = np.where(members, values, -np.inf).max(axis=0)
    means = np.divide(totals, sizes, out=np.full_like(totals, np.nan), where=sizes > 0)
    low = np.full_like(means, np.nan)
    high = np.full_like(means, np.nan)
    if count and resamples > 0 and group_count:
        samples = _resampled_means(filled, defined, groups, resamples, seed)
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
                    # A resampled mean cannot leave [min, max] of the values; float32
                    # sums can stray by an ulp (a "-0.000" bound), so clamp to it.
                    max(_clip(low[cell], means[cell]), float(lowest[cell])),
                    min(_clip(high[cell], means[cell]), float(highest[cell])),
                    size,
                )
            )
        estimates.append(row_estimates)
    return estimates


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
