"""Judge-corrected comparisons: PPI++ for the paired difference of two systems, and which
questions to give humans next.

Two systems A and B are scored on the same questions. On the n questions of the human
sample, D = Y_A - Y_B is a question's difference under human labels; on every question,
Dhat = J_A - J_B is its difference under the judge's labels. The mean difference is the
mean of D, so the judge-corrected (PPI++) estimate of a comparison is the one-run
estimator of `retrievalkit.stats.ppi` applied to D and Dhat (`ppi_estimate`)::

    mean = w * mean_N(Dhat) + mean_n(D - w * Dhat)
    w    = cov_n(D, Dhat) / ((1 + n / N) var(Dhat)), clipped to [0, 1]

with the same interval: a BCa bootstrap of that estimator (the n and the N questions
resampled apart, w tuned again in every resample), widened by sqrt(n/(n-1)) t_{n-1} / z.
The human-only interval beside it is the same bootstrap with w fixed at 0: the human
sample's paired mean difference, with no judge. A judge whose differences say nothing
about the humans' gets w near 0 and (nearly) the human-only interval; a good judge gets
w near 1 and an interval narrowed by the N judged questions. As for one run, it is
valid only when the human-labelled questions are a random sample of the questions.
"""

from __future__ import annotations

import math

import attrs
import numpy as np
import numpy.typing as npt

from retrievalkit.stats.ppi import DEFAULT_RESAMPLES, DEFAULT_SEED, PPI, ppi_estimate, tuned_weight

FloatArray = npt.NDArray[np.float64]


@attrs.frozen
class CorrectedDifference:
    """The judge-corrected mean difference of two systems (A - B), beside the human-only one."""

    mean: float | None
    """The judge-corrected (prediction-powered) mean difference; None with fewer than two
    human-labelled questions."""
    ci: tuple[float, float] | None
    width: float | None
    """``ci``'s high bound minus its low bound."""
    weight: float | None
    """PPI++'s lambda: how much the judge's differences count (0: the human sample alone)."""
    human_mean: float | None
    """The mean difference of the human-labelled questions alone (no judge)."""
    human_ci: tuple[float, float] | None
    human_width: float | None
    judge_mean: float | None
    """The mean difference under the judge's labels over every question (biased by the judge)."""
    labelled: int
    """Questions with a difference under human labels (and under the judge's)."""
    unlabelled: int
    """Questions with only the judge's difference."""
    method: str = PPI


def corrected_difference(
    judged_a: npt.ArrayLike,
    judged_b: npt.ArrayLike,
    human_a: npt.ArrayLike,
    human_b: npt.ArrayLike,
    *,
    confidence: float = 0.95,
    value_range: tuple[float, float] = (0.0, 1.0),
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> CorrectedDifference:
    """The judge-corrected mean of A - B from per-question values, aligned by question.

    ``judged_a``/``judged_b`` hold each question's metric under the judge's labels,
    ``human_a``/``human_b`` under human labels, NaN for a question outside the human
    sample (or an undefined value). ``value_range`` is the metric's: the difference and
    its intervals stay within (low - high, high - low).
    """
    judged = _array(judged_a) - _array(judged_b)
    human = _array(human_a) - _array(human_b)
    if judged.shape != human.shape or judged.ndim != 1:
        raise ValueError(
            "the four arrays must be one value per question, the same questions in the "
            f"same order (got shapes {judged.shape} and {human.shape})"
        )
    defined = ~np.isnan(judged)
    labelled = defined & ~np.isnan(human)
    unlabelled = defined & np.isnan(human)
    n, big_n = int(labelled.sum()), int(unlabelled.sum())
    judge_mean = float(judged[defined].mean()) if defined.any() else None
    if n < 2:
        human_mean = float(human[labelled].mean()) if n else None
        return CorrectedDifference(
            None, None, None, None, human_mean, None, None, judge_mean, n, big_n
        )
    low, high = value_range
    spread = (low - high, high - low)
    y, j, rest = human[labelled], judged[labelled], judged[unlabelled]
    mean, ci, weight = ppi_estimate(
        y, j, rest, confidence=confidence, value_range=spread, resamples=resamples, seed=seed
    )
    human_mean, human_ci, _ = ppi_estimate(
        y,
        j,
        rest[:0],
        confidence=confidence,
        value_range=spread,
        resamples=resamples,
        seed=seed,
        weight=0.0,
    )
    return CorrectedDifference(
        mean,
        ci,
        ci[1] - ci[0],
        weight,
        human_mean,
        human_ci,
        human_ci[1] - human_ci[0],
        judge_mean,
        n,
        big_n,
    )


def labelling_priority(
    judged_a: npt.ArrayLike,
    judged_b: npt.ArrayLike,
    human_a: npt.ArrayLike,
    human_b: npt.ArrayLike,
) -> list[tuple[int, float]]:
    """(question index, score) of every question without human labels, the one a human
    label is expected to help the comparison's interval most first.

    The rule is active inference's (Zrnic & Candes, "Active statistical inference", ICML
    2024): the PPI estimator's variance is smallest when a question is labelled with a
    probability proportional to sqrt(E[(D - w Dhat)^2 | Dhat]), the judge's expected
    error on it. The score is that square root, the expectation estimated from the
    human-labelled questions by a Gaussian kernel in Dhat (Nadaraya-Watson, Silverman's
    bandwidth): questions whose judge difference looks like those where the judge was
    wrong come first, questions like those where it was right (e.g. both systems ranked
    alike) last. Ties go to the larger |Dhat - mean(Dhat)|, then the earlier question.
    With fewer than two human-labelled questions the score is |Dhat - mean(Dhat)|.
    """
    judged = _array(judged_a) - _array(judged_b)
    human = _array(human_a) - _array(human_b)
    defined = ~np.isnan(judged)
    labelled = defined & ~np.isnan(human)
    candidates = np.flatnonzero(defined & np.isnan(human))
    spread = np.abs(judged[candidates] - (judged[defined].mean() if defined.any() else 0.0))
    if labelled.sum() < 2:
        scores = spread
    else:
        y, j = human[labelled], judged[labelled]
        rest = judged[candidates]
        weight = tuned_weight(y, j, rest)
        residual = y - weight * j
        squares = (residual - residual.mean()) ** 2
        scores = np.sqrt(_kernel_mean(j, squares, rest))
    order = np.lexsort((candidates, -spread, -scores))
    return [(int(candidates[i]), float(scores[i])) for i in order]


def _kernel_mean(at: FloatArray, values: FloatArray, where: FloatArray) -> FloatArray:
    """The Nadaraya-Watson (Gaussian kernel) mean of ``values`` observed ``at``, at ``where``."""
    scale = float(at.std(ddof=1)) if at.size > 1 else 0.0
    bandwidth = 1.06 * scale * at.size ** (-0.2)
    if not math.isfinite(bandwidth) or bandwidth <= 0:
        return np.full(where.size, float(values.mean()))
    kernel = np.exp(-0.5 * ((where[:, None] - at[None, :]) / bandwidth) ** 2)
    total = kernel.sum(axis=1)
    pooled = float(values.mean())
    with np.errstate(invalid="ignore", divide="ignore"):
        found = (kernel * values[None, :]).sum(axis=1) / total
    return np.where(total > 1e-12, found, pooled)


def _array(values: npt.ArrayLike) -> FloatArray:
    return np.asarray(values, dtype=np.float64).ravel()
