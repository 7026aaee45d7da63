"""Index fidelity without labels: how much of a reference retriever's top k a candidate returns.

``overlap@k`` is |top k of candidate ∩ top k of reference| / min(k, size of the
reference's top k); ``rbo`` is rank-biased overlap (Webber, Moffat and Zobel, 2010)
at depth k with persistence p, extrapolated (their RBO_ext). Both are undefined for a
question the reference answers with nothing. This is the ANN-recall check that needs
no golden labels: swap an index type or its parameters and see what it loses.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import numpy as np

from retrievalkit.model.values import GoldenQuestion, Retrieval
from retrievalkit.stats.intervals import Estimate, bootstrap_means


def overlap_at(candidate: Sequence[str], reference: Sequence[str], k: int) -> float:
    top = list(reference[:k])
    if not top:
        return float("nan")
    return len(set(candidate[:k]) & set(top)) / len(top)


def rank_biased_overlap(
    candidate: Sequence[str], reference: Sequence[str], k: int, p: float = 0.9
) -> float:
    """RBO_ext of two rankings cut at depth k (Webber et al. 2010, equation 32)."""
    left, right = list(candidate[:k]), list(reference[:k])
    if not right:
        return float("nan")
    depth = max(len(left), len(right))
    if depth == 0:
        return float("nan")
    seen_left: set[str] = set()
    seen_right: set[str] = set()
    overlap = 0
    total = 0.0
    for d in range(1, depth + 1):
        a = left[d - 1] if d <= len(left) else None
        b = right[d - 1] if d <= len(right) else None
        if a is not None and b is not None and a == b:
            overlap += 1
        else:
            if a is not None and a in seen_right:
                overlap += 1
            if b is not None and b in seen_left:
                overlap += 1
        if a is not None:
            seen_left.add(a)
        if b is not None:
            seen_right.add(b)
        total += overlap / d * p**d
    return float(overlap / depth * p**depth + (1 - p) / p * total)


@attrs.frozen
class FidelityQuestion:
    question_id: str
    overlap: float | None
    rbo: float | None
    error: str | None


@attrs.frozen
class FidelityReport:
    candidate: str
    reference: str
    k: int
    p: float
    overall: dict[str, Estimate]
    questions: tuple[FidelityQuestion, ...]


def measure_fidelity(
    questions: Sequence[GoldenQuestion],
    candidate: Sequence[Retrieval],
    reference: Sequence[Retrieval],
    *,
    names: tuple[str, str],
    k: int,
    p: float = 0.9,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 20240611,
) -> FidelityReport:
    rows = []
    values = np.full((len(questions), 2), np.nan)
    for index, (question, mine, theirs) in enumerate(
        zip(questions, candidate, reference, strict=True)
    ):
        error = mine.error or theirs.error
        if error is None:
            values[index] = (
                overlap_at(mine.ranking, theirs.ranking, k),
                rank_biased_overlap(mine.ranking, theirs.ranking, k, p),
            )
        overlap, rbo = (None if np.isnan(v) else float(v) for v in values[index])
        rows.append(FidelityQuestion(question.id, overlap, rbo, error))
    estimates = bootstrap_means(
        values,
        np.ones((1, len(questions)), dtype=bool),
        resamples=resamples,
        confidence=confidence,
        seed=seed,
    )[0]
    return FidelityReport(
        candidate=names[0],
        reference=names[1],
        k=k,
        p=p,
        overall={f"overlap@{k}": estimates[0], f"rbo@{k}": estimates[1]},
        questions=tuple(rows),
    )
