"""Statistics of runs too large to resample whole: analytic intervals and p-values.

Resampling a run of n questions 2,000 times draws 2,000 x n indices: 3.6 s at 100,000
questions and ten times that at a million, for intervals whose Monte Carlo noise is
then the largest error left. Two things replace it in a run of `LARGE_SAMPLE`
questions or more:

- A cell (slice x metric) with at least `LARGE_SAMPLE` defined values gets the ABC
  interval (DiCiccio & Efron 1992, "More accurate confidence intervals in exponential
  families"; Efron & Tibshirani 1993, ch. 22.6): the BCa interval with the bootstrap
  distribution replaced by its analytic expansion, so no resample is drawn. For a mean
  (a linear statistic: no bias term, no curvature) it is, with t_i = x_i - mean,

      sigma = sqrt(sum t^2) / n,  a = sum t^3 / (6 (sum t^2)^1.5),  z0 = a,
      bound(alpha) = mean + sigma * w / (1 - a w)^2,   w = z0 + z_alpha,

  which agrees with BCa to second order. At 10,000 values the two differ by far less
  than the Monte Carlo error of 2,000 resamples (about 0.06 standard errors on each
  bound): `tests/test_large_samples.py` measures both.
- A smaller cell of such a run (a slice of a few hundred questions) is still
  bootstrapped, but on its own members: under resampling of the whole run, the number
  of draws landing in the cell is Binomial(n, cell / n) and each lands uniformly on a
  member, so drawing exactly that reproduces the cell's resampled mean in distribution
  at a cost that grows with the cell, not with the run.
- A paired comparison with `LARGE_SAMPLE` discordant questions or more, whose
  sign-flip distribution cannot be enumerated, gets its p-value from the Edgeworth
  expansion of that distribution (`sign_flip_tail`) instead of 10,000 random sign
  flips of every question: 28 s a metric at 100,000 questions, and a Monte Carlo error
  of about 0.002 at p = 0.05 that the expansion does not have.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: From this many defined values, a cell's interval is analytic (ABC) and a run is not
#: resampled whole.
LARGE_SAMPLE = 10_000
#: Questions per pass when summing powers of values (bounds the temporaries).
_CHUNK_ROWS = 1 << 16
#: Draws per batch of per-cell resamples (bounds the index arrays).
_BATCH_DRAWS = 1 << 22
#: Marks the per-cell streams apart from the whole-run batches of intervals._draw_counts.
_CELL_STREAM = 0x5EED


def abc_bounds(
    means: FloatArray,
    sizes: FloatArray,
    squares: FloatArray,
    cubes: FloatArray,
    confidence: float,
) -> tuple[FloatArray, FloatArray]:
    """ABC bounds of means from their values' centred sums of squares and cubes."""
    from scipy.special import ndtri

    with np.errstate(invalid="ignore", divide="ignore"):
        sigma = np.sqrt(squares) / sizes
        acceleration = np.where(squares > 0, cubes / (6.0 * squares**1.5), 0.0)
        bounds = []
        for tail in ((1.0 - confidence) / 2.0, (1.0 + confidence) / 2.0):
            w = acceleration + ndtri(tail)
            bounds.append(means + sigma * w / (1.0 - acceleration * w) ** 2)
    return bounds[0], bounds[1]


def centred_sums(
    values: FloatArray,
    defined: npt.NDArray[np.bool_],
    groups: npt.NDArray[np.bool_],
) -> tuple[FloatArray, FloatArray]:
    """(groups x metrics) sums of squared and of cubed deviations from each cell's mean.

    Power sums of the values, shifted by each metric's overall mean, are accumulated a
    chunk of questions at a time with one product per power, then centred per cell:
    memory stays at a chunk's temporaries, not questions x metrics x groups.
    """
    count, metrics = values.shape
    # Any centre near the values' keeps the power sums from cancelling: the first
    # chunk's mean will do.
    head = slice(0, _CHUNK_ROWS)
    seen = defined[head].sum(axis=0)
    shift = np.zeros(metrics)
    np.divide(
        np.where(defined[head], values[head], 0.0).sum(axis=0), seen, out=shift, where=seen > 0
    )
    sums = [np.zeros((len(groups), metrics)) for _ in range(4)]
    for start in range(0, count, _CHUNK_ROWS):
        rows = slice(start, start + _CHUNK_ROWS)
        taken = defined[rows]
        weight = groups[:, rows].astype(np.float64)
        shifted = np.where(taken, values[rows] - shift, 0.0)
        power = taken.astype(np.float64)
        for order in range(4):
            sums[order] += weight @ power
            if order < 3:
                power = power * shifted
    size, first, second, third = sums
    with np.errstate(invalid="ignore", divide="ignore"):
        centre = np.where(size > 0, first / size, 0.0)
    squares = np.maximum(second - centre * first, 0.0)
    cubes = third - 3.0 * centre * second + 2.0 * centre**2 * first
    return squares, cubes


def cell_resampled_means(
    values: FloatArray, count: int, resamples: int, seed: int, stream: int
) -> FloatArray:
    """(resamples, metrics) resampled means of one cell's members (NaN: no draw landed).

    ``values`` holds the members' values (all defined), ``count`` the questions of the
    whole run: each resample takes Binomial(count, members / count) draws from the
    members, as resampling the whole run would.
    """
    members, metrics = values.shape
    generator = np.random.default_rng((seed, _CELL_STREAM, stream))
    drawn = generator.binomial(count, members / count, size=resamples)
    totals = np.zeros((resamples, metrics))
    ends = np.cumsum(drawn)
    first = 0
    while first < resamples:
        # Whole resamples per batch: at least one, about _BATCH_DRAWS draws in all.
        before = int(ends[first - 1]) if first else 0
        last = int(np.searchsorted(ends, before + _BATCH_DRAWS, side="right"))
        last = min(max(last, first + 1), resamples)
        sizes = drawn[first:last]
        rows = last - first
        picks = generator.integers(0, members, size=int(sizes.sum()))
        cells = np.repeat(np.arange(rows) * members, sizes) + picks
        counts = np.bincount(cells, minlength=rows * members).reshape(rows, members)
        totals[first:last] = counts.astype(np.float64) @ values
        first = last
    means = np.full_like(totals, np.nan)
    np.divide(totals, drawn[:, None], out=means, where=drawn[:, None] > 0)
    return means


#: Past this many blocks of questions sharing the same groups (many small slices),
#: `cell_statistics` leaves the work to the per-group loop.
_MAX_BLOCKS = 256


def cell_statistics(
    values: FloatArray,
    defined: npt.NDArray[np.bool_],
    groups: npt.NDArray[np.bool_],
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray] | None:
    """Every (group, metric) cell's sum, size, non-0/1 count, min and max, flattened.

    One pass over the questions, a chunk at a time, with no questions x metrics
    temporary: each question belongs to one block of questions in exactly the same
    groups (form x hard class gives a dozen), each chunk's block sums are one product,
    and a group's sums are its blocks'. A group of every question is summed in order
    instead, row after row as a smaller run's is, so the whole run's means are the same
    to the last bit whatever slices are asked for. None past `_MAX_BLOCKS` blocks.
    """
    count, metrics = values.shape
    group_count = len(groups)
    if group_count > 62:
        return None
    codes = np.zeros(count, dtype=np.int64)
    for group, mask in enumerate(groups):
        codes |= mask.astype(np.int64) << group
    distinct, block_of = np.unique(codes, return_inverse=True)
    blocks = len(distinct)
    if blocks > _MAX_BLOCKS:
        return None
    block_sums = np.zeros((blocks, metrics))
    block_sizes = np.zeros((blocks, metrics))
    block_other = np.zeros((blocks, metrics))
    block_low = np.full((blocks, metrics), np.inf)
    block_high = np.full((blocks, metrics), -np.inf)
    in_order: FloatArray | None = None
    numbers = np.arange(blocks)
    for start in range(0, count, _CHUNK_ROWS):
        rows = slice(start, start + _CHUNK_ROWS)
        owner = block_of[rows]
        taken = defined[rows]
        filled = np.where(taken, values[rows], 0.0)
        one_hot = (owner[None, :] == numbers[:, None]).astype(np.float64)
        block_sums += one_hot @ filled
        block_sizes += one_hot @ taken
        block_other += one_hot @ (taken & (filled != 0.0) & (filled != 1.0))
        order = np.argsort(owner, kind="stable")
        present = np.flatnonzero(np.bincount(owner, minlength=blocks))
        starts = np.searchsorted(owner[order], present)
        chunk = values[rows][order]
        lows = np.minimum.reduceat(np.where(taken[order], chunk, np.inf), starts, axis=0)
        highs = np.maximum.reduceat(np.where(taken[order], chunk, -np.inf), starts, axis=0)
        block_low[present] = np.minimum(block_low[present], lows)
        block_high[present] = np.maximum(block_high[present], highs)
        # Row after row, continuing from the last chunk's total.
        stacked = filled if in_order is None else np.vstack([in_order[None, :], filled])
        in_order = stacked.sum(axis=0)
    membership = ((distinct[None, :] >> np.arange(group_count)[:, None]) & 1).astype(bool)
    weights = membership.astype(np.float64)
    totals = weights @ block_sums
    sizes = weights @ block_sizes
    other = weights @ block_other
    lowest = np.full((group_count, metrics), np.inf)
    highest = np.full((group_count, metrics), -np.inf)
    if metrics == 1:
        # A single column is summed pairwise, not row after row: sum it whole.
        in_order = np.where(defined, values, 0.0).sum(axis=0)
    for group, inside in enumerate(membership):
        if inside.any():
            lowest[group] = block_low[inside].min(axis=0)
            highest[group] = block_high[inside].max(axis=0)
        if inside.all() and in_order is not None:
            totals[group] = in_order
    return totals.ravel(), sizes.ravel(), other.ravel(), lowest.ravel(), highest.ravel()


def sign_flip_tail(sizes: FloatArray, observed: float) -> float:
    """P(|sum of randomly signed sizes| >= observed), from the distribution's expansion.

    The sum S = sum(e_i d_i) of independent fair signs e_i has variance sum(d^2), no
    skew, and fourth cumulant -2 sum(d^4); its Edgeworth expansion to that order gives

        P(|S| >= s) = 2 (1 - Phi(z) + phi(z) g (z^3 - 3 z) / 24),  z = s / sd(S),

    with g = -2 sum(d^4) / sum(d^2)^2 the excess kurtosis. The next terms shrink with
    the square of the number of sizes; at `LARGE_SAMPLE` of them the tail is within
    1e-3 of the exact one even when the sizes take only a few values (the sum then
    moves in steps), as `tests/test_large_samples.py` checks against full enumeration.
    """
    from scipy.special import ndtr

    squares = sizes * sizes
    variance = float(squares.sum())
    if variance <= 0.0:
        return 1.0
    z = observed / np.sqrt(variance)
    kurtosis = -2.0 * float((squares * squares).sum()) / variance**2
    density = np.exp(-0.5 * z * z) / np.sqrt(2.0 * np.pi)
    tail = 2.0 * (float(ndtr(-z)) + density * kurtosis * (z**3 - 3.0 * z) / 24.0)
    return float(min(1.0, max(0.0, tail)))
