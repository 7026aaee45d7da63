"""Randomised Tukey HSD: every pair of systems on one metric, adjusted over the systems.

Carterette (2012, "Multiple testing in statistical analysis of systems-based information
retrieval experiments", ACM TOIS 30(1)) and ranx adjust all pairwise comparisons of k
systems at once with a permutation version of Tukey's honestly significant difference:
under "all systems are equal" the k scores of a question are exchangeable, so each of B
random permutations shuffles, question by question, which system got which score, and
records the range of the systems' means (the largest mean minus the smallest). The
adjusted p-value of a pair (i, j) is the share of permutations whose range is at least
|mean_i - mean_j|, with the +1 of `retrievalkit.stats.paired`'s Monte Carlo p-values:
(count + 1) / (B + 1), so it is never 0 and the test keeps its level exactly.

Since the largest pairwise difference of a permutation is its range, the chance that any
of the pairs whose systems are truly equal comes out below alpha is at most alpha:
the family-wise error over the pairs of one metric is controlled (strongly, for the
permutation null of the systems compared).

Only questions where every system has a value take part (a question without one cannot
be shuffled), and questions where all systems score the same are left out of the
shuffling: they add one constant to every system's sum and cannot change a range.
"""

from __future__ import annotations

import attrs
import numpy as np
import numpy.typing as npt

from retrievalkit.stats.intervals import DEFAULT_SEED
from retrievalkit.stats.paired import DEFAULT_PERMUTATIONS

FloatArray = npt.NDArray[np.float64]

#: Cells (permutations x questions x systems) shuffled per batch; the batches shape the
#: random stream, so this is part of what a seed reproduces.
_BATCH_CELLS = 4_000_000
#: Sums of the same scores in another order may differ in the last bits.
_RELATIVE_TOLERANCE = 1e-9


@attrs.frozen
class TukeyTest:
    """The randomised Tukey HSD of k systems on one metric."""

    p_values: FloatArray
    """k x k adjusted p-values, symmetric, 1 on the diagonal; NaN without questions."""
    means: FloatArray
    """Each system's mean over the questions every system has a value for."""
    questions: int
    """Questions where every system has a value (the ones shuffled or constant)."""
    permutations: int
    floor: float
    """The smallest p-value the estimate can report: 1 / (permutations + 1)."""


def tukey_hsd(
    scores: FloatArray,
    *,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = DEFAULT_SEED,
) -> TukeyTest:
    """The randomised Tukey HSD of ``scores`` (questions x systems, NaN: undefined).

    Reproducible: the same scores, ``permutations`` and ``seed`` give the same p-values.
    """
    matrix = np.asarray(scores, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[1] < 2:
        raise ValueError(f"scores must be questions x systems (2 or more), got {matrix.shape}")
    if permutations < 1:
        raise ValueError(f"permutations must be 1 or more, got {permutations}")
    complete = matrix[~np.isnan(matrix).any(axis=1)]
    count, systems = complete.shape
    floor = 1.0 / (permutations + 1)
    if count == 0:
        nan = np.full((systems, systems), np.nan)
        return TukeyTest(nan, np.full(systems, np.nan), 0, permutations, floor)
    sums = complete.sum(axis=0)
    observed = np.abs(sums[:, None] - sums[None, :])
    varying = complete[np.ptp(complete, axis=1) > 0]
    ranges = permuted_ranges(varying, permutations=permutations, seed=seed)
    # Each pair's count of ranges at least as large, by a search in the sorted ranges.
    ordered = np.sort(ranges)
    edge = observed - _RELATIVE_TOLERANCE * np.maximum(1.0, observed)
    at_least = permutations - np.searchsorted(ordered, edge, side="left")
    p_values = (at_least + 1.0) / (permutations + 1.0)
    np.fill_diagonal(p_values, 1.0)
    return TukeyTest(p_values, sums / count, count, permutations, floor)


def permuted_ranges(varying: FloatArray, *, permutations: int, seed: int) -> FloatArray:
    """The range (max - min) of the systems' score sums in each of ``permutations``
    shuffles of every row (question) of ``varying`` (questions x systems)."""
    count, systems = varying.shape
    ranges = np.zeros(permutations)
    if count == 0:
        return ranges
    rng = np.random.default_rng(seed + 3)
    batch = max(1, _BATCH_CELLS // (count * systems))
    shuffled = np.empty((min(batch, permutations), count, systems))
    for start in range(0, permutations, batch):
        size = min(batch, permutations - start)
        cells = shuffled[:size]
        cells[...] = varying
        # Shuffles each question's scores among the systems, in place.
        rng.permuted(cells, axis=2, out=cells)
        totals = cells.sum(axis=1)
        ranges[start : start + size] = totals.max(axis=1) - totals.min(axis=1)
    return ranges
