"""How alike two rankings of the same query are, with no labels: RBO, overlap@k, Jaccard@k.

Rank-biased overlap (Webber, Moffat and Zobel, "A similarity measure for indefinite
rankings", TOIS 2010) is the expected agreement of the two top-d prefixes for a reader
who goes on to the next depth with probability ``p``:

    RBO = (1 - p) * sum over d >= 1 of p^(d-1) * X_d / d

where X_d is the number of documents the two top-d prefixes share. Seen rankings are
finite, so three numbers are reported, each read off that definition:

- ``rbo_min``: the rankings go on with documents that match nothing (the lower bound);
- ``rbo_max``: at every depth, as much agreement as the unseen documents can give (the
  upper bound);
- ``rbo`` (extrapolated, Webber et al.'s RBO_EXT, their equation 32 for lists of
  different lengths): the shorter list's unseen documents agree at the rate its seen
  prefix does (X_s / s), and beyond the longer list the agreement stays what it was at
  its end.

Ties. A retriever that gives two documents the same score has not ordered them; the
order it listed them in is arbitrary. Tied documents (consecutive equal scores) are put
in one canonical order (by document id) in both rankings before comparing, so the order
a retriever happened to list tied documents in never counts as a difference: a ranking
compared with itself scores 1, and swapping two tied documents changes nothing. (Taking
the mean over independent tie orders instead would score a ranking with ties against
itself below 1.)

Where this differs from the ``rbo`` package on PyPI (version 0.1.3): its
``RankingSimilarity.rbo(p, ext=True)`` and ``rbo(p)`` cut both lists to the shorter one's
length, so on lists of different lengths the longer list's documents below that depth
count for nothing (``['a', 'b']`` against ``['c', 'd', 'a', 'b']`` gives 0.0 there, 0.3915
here); and its ``rbo(p)`` is the sum over the seen depths, not RBO_MIN, which adds the
tail of Webber et al.'s equation 11. Its ``rbo_ext`` follows equation 32 and agrees with
``rbo`` here, on lists of any lengths without ties (the tests check this). Two empty
lists give 1 there and None here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: The persistence RBO uses unless told: a reader who looks about 10 documents deep.
DEFAULT_RBO_P = 0.9


@attrs.frozen
class RBO:
    """Rank-biased overlap of two rankings: the extrapolated value and its bounds."""

    value: float
    """Webber et al.'s RBO_EXT."""
    lower: float
    """RBO_MIN: nothing unseen agrees."""
    upper: float
    """RBO_MAX: everything unseen agrees as far as the seen documents allow."""


def _groups(ranking: Sequence[str], scores: Sequence[float] | None) -> list[tuple[int, int]]:
    """(first rank, last rank), 1-based, of the tie group of each document of ``ranking``."""
    if scores is None:
        return [(rank, rank) for rank in range(1, len(ranking) + 1)]
    if len(scores) != len(ranking):
        raise ValueError(f"{len(scores)} scores for a ranking of {len(ranking)} documents")
    spans: list[tuple[int, int]] = []
    start = 0
    for index in range(1, len(ranking) + 1):
        if index == len(ranking) or scores[index] != scores[start]:
            spans += [(start + 1, index)] * (index - start)
            start = index
    return spans


def _presence(spans: list[tuple[int, int]], depths: npt.NDArray[np.int64]) -> FloatArray:
    """(documents x depths): the chance each document is inside the top d of its ranking."""
    first = np.array([span[0] for span in spans], dtype=np.float64)[:, None]
    last = np.array([span[1] for span in spans], dtype=np.float64)[:, None]
    inside = (depths[None, :] - first + 1.0) / (last - first + 1.0)
    return np.clip(inside, 0.0, 1.0)


def expected_overlaps(
    first: Sequence[str],
    second: Sequence[str],
    depth: int,
    first_scores: Sequence[float] | None = None,
    second_scores: Sequence[float] | None = None,
) -> FloatArray:
    """X_1 .. X_depth: the expected number of documents the two top-d prefixes share.

    A ranking shorter than d contributes all of itself at depth d; ids must be distinct
    within each ranking (what the evaluator hands on).
    """
    depths = np.arange(1, depth + 1, dtype=np.int64)
    position = {doc_id: index for index, doc_id in enumerate(second)}
    shared = [(index, position[doc_id]) for index, doc_id in enumerate(first) if doc_id in position]
    if not shared or depth == 0:
        return np.zeros(depth, dtype=np.float64)
    spans_first = _groups(first, first_scores)
    spans_second = _groups(second, second_scores)
    left = _presence([spans_first[index] for index, _ in shared], depths)
    right = _presence([spans_second[index] for _, index in shared], depths)
    return (left * right).sum(axis=0)  # type: ignore[no-any-return]


def untied(ranking: Sequence[str], scores: Sequence[float] | None) -> list[str]:
    """``ranking`` with each run of equal scores put in document-id order."""
    if scores is None:
        return list(ranking)
    spans = _groups(ranking, scores)
    return [
        doc_id
        for _, doc_id in sorted(((spans[index][0], doc_id) for index, doc_id in enumerate(ranking)))
    ]


def rbo(
    first: Sequence[str],
    second: Sequence[str],
    p: float = DEFAULT_RBO_P,
    *,
    first_scores: Sequence[float] | None = None,
    second_scores: Sequence[float] | None = None,
) -> RBO | None:
    """RBO of two rankings (best first), ties by equal scores when scores are given.

    None when both rankings are empty (nothing to compare: a zero-result query on both
    sides, which `zero_result_rate` counts); 0 when only one is.
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"the RBO persistence p must be between 0 and 1 (not {p})")
    first, second = untied(first, first_scores), untied(second, second_scores)
    if not first and not second:
        return None
    if not first or not second:
        return RBO(0.0, 0.0, 0.0)
    if len(first) <= len(second):
        short, long_ = first, second
    else:
        short, long_ = second, first
    s, l = len(short), len(long_)  # noqa: E741 (the paper's names)
    overlaps = expected_overlaps(short, long_, l)
    depths = np.arange(1, l + 1, dtype=np.float64)
    weights = (1.0 - p) * p ** (depths - 1.0)
    x_s, x_l = float(overlaps[s - 1]), float(overlaps[l - 1])
    seen = float(np.sum(weights * overlaps / depths))
    beyond = depths > s
    filled = float(np.sum(weights[beyond] * x_s * (depths[beyond] - s) / (s * depths[beyond])))
    extrapolated = seen + filled + ((x_l - x_s) / l + x_s / s) * p**l
    # sum over d > l of p^(d-1) / d, from -ln(1 - p) = sum over d >= 1 of p^d / d.
    tail = (-math.log1p(-p) - float(np.sum(p**depths / depths))) / p
    lower = seen + (1.0 - p) * x_l * tail
    upper = seen + float(np.sum(weights[beyond] * (depths[beyond] - s) / depths[beyond]))
    upper += _upper_tail(s, l, x_l, p)
    return RBO(_unit(extrapolated), _unit(lower), _unit(upper))


def _upper_tail(s: int, l: int, x: float, p: float) -> float:  # noqa: E741
    """(1 - p) sum over d > l of p^(d-1) A_d at the most agreement the unseen allow.

    At depth d > l the shorter list's seen documents missing from the longer list can
    fill its d - l new places, the longer list's missing ones the shorter list's d - s
    new places, and new documents of both can match each other: X_d = min(s + x + d - l
    ... ) as below, which reaches d from depth l + s - x on.
    """
    full = math.ceil(l + s - x)
    total = 0.0
    for d in range(l + 1, full):
        bound = min(min(s, x + d - l) + d - s, min(l, x + d - s) + d - l, d)
        total += (1.0 - p) * p ** (d - 1) * bound / d
    return total + p ** (max(full, l + 1) - 1)


def _unit(value: float) -> float:
    """Rounding noise of the sums kept inside [0, 1]."""
    return min(1.0, max(0.0, value))


def overlap_at(baseline: Sequence[str], candidate: Sequence[str], k: int) -> float | None:
    """The share of the baseline's top k that the candidate's top k keeps; None when the
    baseline returned nothing."""
    top = baseline[:k]
    if not top:
        return None
    return len(set(top) & set(candidate[:k])) / len(top)


def jaccard_at(baseline: Sequence[str], candidate: Sequence[str], k: int) -> float | None:
    """|B_k & C_k| / |B_k | C_k| of the two top k; None when both returned nothing."""
    left, right = set(baseline[:k]), set(candidate[:k])
    union = left | right
    if not union:
        return None
    return len(left & right) / len(union)
