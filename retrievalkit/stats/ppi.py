"""Judge-corrected means: prediction-powered inference from judge grades and a human sample.

A model judge grades many (question, document) pairs; humans grade the pairs of a random
sample of the questions. A metric scored with the judge's grades is biased by the
judge's errors, and its interval is about the judge, not about the truth. Prediction-
powered inference (Angelopoulos, Bates, Fannjiang, Jordan & Zrnic, Science 2023; with
the power-tuned weight of PPI++, Angelopoulos, Duchi & Zrnic 2023; for IR, Oosterhuis et
al., "Reliable confidence intervals for information retrieval evaluation using
generative AI", KDD 2024) corrects it. With Y the metric under human labels (known on
the n sampled questions), J the metric under the judge's labels (known on all), and the
N other questions unlabelled::

    mean = w * mean_N(J) + mean_n(Y - w * J)
    var  = w^2 var_N(J) / N + var_n(Y - w * J) / n
    w    = cov_n(Y, J) / ((1 + n / N) var(J)), clipped to [0, 1]

With w = 0 it is the human sample's own mean; the better the judge agrees with the
humans, the closer w is to 1 and the more the N judged questions narrow it. The
interval is a BCa bootstrap of that estimator (the n and the N questions resampled
apart, w estimated again in each resample; the acceleration from the residuals
Y - w J), widened by sqrt(n / (n - 1)) t_{n-1} / z as the cluster bootstrap is: the
normal interval mean -/+ z sqrt(var) covered 89 % with 30 human-labelled questions of a
lenient judge's residuals, which are skewed. It is valid only when the human sample
is a random sample of the questions. `ppi_estimate` is the estimator and its interval;
`retrievalkit.stats.ppi_paired` applies it to the paired difference of two systems.
"""

from __future__ import annotations

import math

import attrs
import numpy as np
import numpy.typing as npt

from retrievalkit.stats.intervals import bca_bounds, mean_acceleration

FloatArray = npt.NDArray[np.float64]

#: The interval method of a judge-corrected mean.
PPI = "ppi-bca"
DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 20240611


@attrs.frozen
class CorrectedMean:
    """A metric's mean from judge grades corrected by a human sample, beside the uncorrected."""

    judge_mean: float | None
    """The mean under the judge's labels over every question (biased by the judge)."""
    judge_ci: tuple[float, float] | None
    """Its t interval: how well the judge's mean is known, not the truth."""
    mean: float | None
    """The judge-corrected (prediction-powered) mean."""
    ci: tuple[float, float] | None
    weight: float | None
    """How much the judge's grades count (0: the human sample alone, 1: classic PPI)."""
    labelled: int
    """Questions with human labels (and a defined value)."""
    unlabelled: int
    """Questions with only the judge's labels (and a defined value)."""
    method: str = PPI


def corrected_mean(
    judged: FloatArray,
    human: FloatArray,
    *,
    confidence: float = 0.95,
    value_range: tuple[float, float] = (0.0, 1.0),
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> CorrectedMean:
    """The judge-corrected mean of a metric; NaN marks an undefined value.

    ``judged`` holds each question's value under the judge's labels, ``human`` its value
    under human labels (NaN for a question outside the human sample).
    """
    from scipy.special import stdtrit

    defined = ~np.isnan(judged)
    labelled = defined & ~np.isnan(human)
    unlabelled = defined & np.isnan(human)
    n, big_n = int(labelled.sum()), int(unlabelled.sum())
    level = (1.0 + confidence) / 2.0
    judge_mean = float(judged[defined].mean()) if defined.any() else None
    judge_ci = None
    if defined.sum() > 1 and judge_mean is not None:
        spread = float(judged[defined].std(ddof=1)) / math.sqrt(int(defined.sum()))
        half = float(stdtrit(int(defined.sum()) - 1, level)) * spread
        judge_ci = _clipped(judge_mean, half, value_range)
    if n < 2:
        return CorrectedMean(judge_mean, judge_ci, None, None, None, n, big_n)
    mean, bounds, weight = ppi_estimate(
        human[labelled],
        judged[labelled],
        judged[unlabelled],
        confidence=confidence,
        value_range=value_range,
        resamples=resamples,
        seed=seed,
    )
    return CorrectedMean(judge_mean, judge_ci, mean, bounds, weight, n, big_n)


def ppi_estimate(
    y: FloatArray,
    j: FloatArray,
    rest: FloatArray,
    *,
    confidence: float,
    value_range: tuple[float, float],
    resamples: int,
    seed: int,
    weight: float | None = None,
) -> tuple[float, tuple[float, float], float]:
    """(mean, interval, weight) of PPI++ from the n human values ``y``, the judge's values
    ``j`` of the same questions and the judge's values ``rest`` of the N others (n >= 2).

    ``weight`` fixes the weight in the estimate and in every resample (0: the human
    sample's own mean and interval); None tunes it, again in every resample.
    """
    from scipy.special import ndtri, stdtrit

    n, big_n = y.size, rest.size
    level = (1.0 + confidence) / 2.0
    tuned = weight is None
    if weight is None:
        weight = tuned_weight(y, j, rest)
    residual = y - weight * j
    mean = float(residual.mean()) + (weight * float(rest.mean()) if big_n else 0.0)
    rng = np.random.default_rng((seed, 0x991))
    samples = np.empty(resamples)
    batch = max(1, (1 << 20) // max(n + big_n, 1))
    for first in range(0, resamples, batch):
        size = min(batch, resamples - first)
        picked = rng.integers(0, n, (size, n))
        others = rng.integers(0, big_n, (size, big_n)) if big_n else np.zeros((size, 0), int)
        ys, js, rs = y[picked], j[picked], rest[others]
        weights = _weight(ys, js, rs) if tuned else np.full(size, weight)
        part = (ys - weights[:, None] * js).mean(axis=1)
        if big_n:
            part += weights * rs.mean(axis=1)
        samples[first : first + size] = part
    deviation = residual - residual.mean()
    acceleration = mean_acceleration(
        np.array([(deviation**3).sum()]), np.array([(deviation**2).sum()])
    )
    low, high = bca_bounds(samples[:, None], np.array([mean]), acceleration, confidence)
    widen = math.sqrt(n / (n - 1.0)) * float(stdtrit(n - 1, level)) / float(ndtri(level))
    lowest, highest = value_range
    bounds = (
        max(lowest, min(mean, mean - (mean - float(low[0])) * widen)),
        min(highest, max(mean, mean + (float(high[0]) - mean) * widen)),
    )
    return mean, bounds, weight


def tuned_weight(human: FloatArray, judged: FloatArray, rest: FloatArray) -> float:
    """PPI++'s weight from the human values, the judge's on the same questions and the
    judge's values of the others: cov(Y, J) / ((1 + n/N) var(J)), clipped to [0, 1]."""
    return float(_weight(human[None, :], judged[None, :], rest[None, :])[0])


def _weight(human: FloatArray, judged: FloatArray, rest: FloatArray) -> FloatArray:
    """PPI++'s weight of each row (a sample): cov(Y, J) / ((1 + n/N) var(J)) in [0, 1]."""
    n, big_n = human.shape[1], rest.shape[1]
    if big_n < 2 or n < 2:
        return np.zeros(len(human))
    every = np.concatenate([judged, rest], axis=1)
    variance = every.var(axis=1, ddof=1)
    covariance = (
        (human - human.mean(axis=1, keepdims=True)) * (judged - judged.mean(axis=1, keepdims=True))
    ).sum(axis=1) / (n - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        weight = np.where(variance > 0, covariance / ((1.0 + n / big_n) * variance), 0.0)
    return np.asarray(np.clip(weight, 0.0, 1.0), dtype=np.float64)


def _clipped(mean: float, half: float, value_range: tuple[float, float]) -> tuple[float, float]:
    low, high = value_range
    return (max(low, min(mean, mean - half)), min(high, max(mean, mean + half)))


def labels_needed(
    pairs: npt.ArrayLike, *, half_width: float, confidence: float = 0.95
) -> tuple[int | None, int | None, float | None]:
    """(human labels with the judge, human labels without it, weight) for an interval of
    the relevance rate of +/- ``half_width``, from (human, judge) 0/1 pairs of a sample.

    With many judged pairs besides the human ones, the interval's variance is
    var(Y - w J) / n for the best weight w = cov(Y, J) / var(J); without a judge it is
    var(Y) / n. None where the sample cannot tell (fewer than two pairs).
    """
    from scipy.special import ndtri

    data = np.asarray(pairs, dtype=np.float64).reshape(-1, 2)
    if len(data) < 2:
        return None, None, None
    y, j = data[:, 0], data[:, 1]
    z = float(ndtri((1.0 + confidence) / 2.0))
    variance_j = float(j.var(ddof=1))
    weight = 0.0 if variance_j <= 0 else float(np.cov(y, j, ddof=1)[0, 1]) / variance_j
    weight = min(1.0, max(0.0, weight))
    scale = (z / half_width) ** 2
    with_judge = math.ceil(scale * float((y - weight * j).var(ddof=1)))
    alone = math.ceil(scale * float(y.var(ddof=1)))
    return max(with_judge, 2), max(alone, 2), weight
