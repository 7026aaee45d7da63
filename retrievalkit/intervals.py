"""Percentile bootstrap intervals for many means at once, and paired differences of two runs.

The resample counts are drawn once per run (from a fixed seed) and shared by every
metric and every slice: each batch of resamples is a (resamples x questions) count
matrix, and all means of that batch are one matrix product. Undefined values (NaN)
are left out of a mean, so a resampled mean is sum(defined values) / count(defined).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import attrs
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

DEFAULT_RESAMPLES = 2000
DEFAULT_CONFIDENCE = 0.95
DEFAULT_SEED = 20240611
_BATCH_CELLS = 4_000_000


@attrs.frozen
class Estimate:
    """A mean with its percentile interval; all None when no value is defined."""

    mean: float | None
    low: float | None
    high: float | None
    n: int


def _count_batches(count: int, resamples: int, seed: int) -> Iterator[npt.NDArray[np.float64]]:
    """Yield (batch, count) matrices: how often each question is drawn in each resample."""
    rng = np.random.default_rng(seed)
    batch = max(1, min(resamples, _BATCH_CELLS // max(count, 1)))
    done = 0
    while done < resamples:
        size = min(batch, resamples - done)
        draws = rng.integers(0, count, size=(size, count))
        draws += (np.arange(size) * count)[:, None]
        counts = np.bincount(draws.ravel(), minlength=size * count).reshape(size, count)
        yield counts.astype(np.float64)
        done += size


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
    defined = ~np.isnan(values)
    filled = np.where(defined, values, 0.0)
    group_count = groups.shape[0]
    mask = groups.T.astype(np.float64)  # (questions, groups)
    numerators = (filled[:, None, :] * mask[:, :, None]).reshape(count, group_count * metrics)
    denominators = (defined[:, None, :] * mask[:, :, None]).reshape(count, group_count * metrics)
    totals = numerators.sum(axis=0)
    sizes = denominators.sum(axis=0)
    means = np.divide(totals, sizes, out=np.full_like(totals, np.nan), where=sizes > 0)
    low = np.full_like(means, np.nan)
    high = np.full_like(means, np.nan)
    if count and resamples > 0:
        samples = np.empty((resamples, group_count * metrics))
        row = 0
        for counts in _count_batches(count, resamples, seed):
            top = counts @ numerators
            bottom = counts @ denominators
            np.divide(top, bottom, out=top, where=bottom > 0)
            top[bottom == 0] = np.nan
            samples[row : row + len(counts)] = top
            row += len(counts)
        tail = (1.0 - confidence) / 2.0 * 100.0
        with np.errstate(all="ignore"):
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                low, high = np.nanpercentile(samples, [tail, 100.0 - tail], axis=0)
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
        batch = max(1, min(permutations, _BATCH_CELLS // n))
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
