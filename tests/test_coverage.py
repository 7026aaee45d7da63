"""Coverage of the intervals, proven by seeded simulation rather than assumed.

Thousands of samples are drawn from a known population and intervalled in one call
(:func:`retrievalkit.stats.intervals.sample_intervals`, the same method choice and interval
code as a run's); the share that covers the population's mean is the coverage. The
acceptance windows are tight enough that the same intervals at 92.5 % fail them (each
test checks that on its own harness), so a quietly narrower interval cannot pass.
The long run over the whole grid is ``benchmarks/bench_coverage.py``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from retrievalkit.stats.intervals import BCA, CLOPPER_PEARSON, bootstrap_means, sample_intervals
from retrievalkit.stats.paired import paired_test

#: Samples per cell: the standard error of a coverage near 0.95 is about 0.0015 / 0.0028.
BINARY_SAMPLES = 20_000
CONTINUOUS_SAMPLES = 6_000
BINARY_CELLS = [(n, p) for n in (30, 48, 75) for p in (0.05, 0.3, 0.5, 0.95, 0.99)]


def coverage(
    population: npt.NDArray[np.float64] | None,
    n: int,
    *,
    rate: float | None = None,
    samples: int,
    confidence: float = 0.95,
    seed: int,
) -> tuple[float, set[str]]:
    """(share of intervals covering the true mean, methods used) over ``samples`` draws."""
    rng = np.random.default_rng(seed)
    if population is None:
        assert rate is not None
        drawn = (rng.random((samples, n)) < rate).astype(np.float64)
        truth = rate
    else:
        drawn = population[rng.integers(0, len(population), (samples, n))]
        truth = float(population.mean())
    low, high, methods = sample_intervals(drawn, confidence=confidence, seed=seed)
    return float(np.mean((low <= truth) & (truth <= high))), set(methods.tolist())


def binary_accepts(value: float) -> bool:
    # Clopper-Pearson never covers less than the nominal level: only Monte Carlo error
    # (3 standard errors) may take an estimate below 95 %.
    return value >= 0.95 - 3 * np.sqrt(0.95 * 0.05 / BINARY_SAMPLES)


def test_rates_are_covered_at_least_95_percent_of_the_time_at_every_small_n() -> None:
    found = {}
    for index, (n, p) in enumerate(BINARY_CELLS):
        found[(n, p)], methods = coverage(None, n, rate=p, samples=BINARY_SAMPLES, seed=index)
        assert methods == {CLOPPER_PEARSON}
    failing = {cell: value for cell, value in found.items() if not binary_accepts(value)}
    assert not failing, failing
    # The harness can tell: the same intervals at 92.5 % fail it somewhere.
    narrower = [
        coverage(None, n, rate=p, samples=BINARY_SAMPLES, confidence=0.925, seed=index)[0]
        for index, (n, p) in enumerate(BINARY_CELLS)
    ]
    assert not all(binary_accepts(value) for value in narrower), narrower


def continuous_accepts(value: float, n: int) -> bool:
    # The promise: at least 93.5 % at n >= 30. At n = 75 BCa is close to nominal, and
    # the window around 95 % is narrow enough that a 92.5 % interval falls out of it.
    if n >= 75:
        return abs(value - 0.95) <= 0.015
    return value >= 0.935


@pytest.mark.parametrize("metric", ["rr", "ndcg@10", "ap@10"])
def test_continuous_metrics_are_covered_on_real_bm25_values(
    bm25_populations: dict[str, npt.NDArray[np.float64]], metric: str
) -> None:
    population = bm25_populations[metric]
    assert len(population) == 300
    for n in (30, 75):
        value, methods = coverage(population, n, samples=CONTINUOUS_SAMPLES, seed=n)
        assert BCA in methods
        assert continuous_accepts(value, n), (metric, n, value)
    narrower, _ = coverage(population, 75, samples=CONTINUOUS_SAMPLES, confidence=0.925, seed=75)
    assert not continuous_accepts(narrower, 75), (metric, narrower)


#: The runs of a simulation are the columns of bootstrap_means' value matrix, a few hundred
#: at a time: the matrices that map its products onto cells grow with columns squared.
CHUNKS = 10


def window_accepts(value: float) -> bool:
    # 4,000 samples: a standard error of about 0.0034 at 95 %, so the window is three of
    # them either side, and a 92.5 % interval (0.01 below) falls out of it.
    return abs(value - 0.95) <= 0.015


def test_a_slice_interval_covers_the_slice_mean_not_the_runs() -> None:
    # 4,000 independent runs of 120 questions, one per column; the first 48 questions form
    # a slice whose values come from another population than the rest. A slice interval
    # is read from resamples of the whole run (its size varies from resample to resample),
    # and must still cover the slice's own mean 95 % of the time.
    rng = np.random.default_rng(20261130)
    questions, runs, members = 120, 4000, 48
    values = np.vstack(
        [rng.beta(2.0, 5.0, (members, runs)), rng.beta(5.0, 2.0, (questions - members, runs))]
    )
    in_slice = np.arange(questions) < members
    # The run's own interval is left alone here: with the slice's size fixed by design the
    # run is a stratified sample, which a bootstrap of the whole run rightly over-covers.
    groups = np.array([np.ones(questions, dtype=bool), in_slice])
    truth = 2.0 / 7.0

    def covered(confidence: float) -> float:
        row = [
            estimate
            for columns in np.array_split(values, CHUNKS, axis=1)
            for estimate in bootstrap_means(
                columns, groups, resamples=1000, confidence=confidence, seed=5
            )[1]
        ]
        assert {estimate.method for estimate in row} == {BCA}
        assert {estimate.n for estimate in row} == {members}
        low = np.array([estimate.low for estimate in row], dtype=float)
        high = np.array([estimate.high for estimate in row], dtype=float)
        return float(np.mean((low <= truth) & (truth <= high)))

    value = covered(0.95)
    assert window_accepts(value), value
    narrower = covered(0.925)
    assert not window_accepts(narrower), narrower


@pytest.mark.parametrize("kind", ["graded", "binary"])
def test_the_paired_difference_interval_covers_the_true_difference(kind: str) -> None:
    # The interval `paired_test` gives: BCa of the per-question differences in [-1, 1],
    # never the binomial one. 4,000 pairs of runs of 60 questions, one per column.
    rng = np.random.default_rng(7 if kind == "graded" else 8)
    questions, runs = 60, 4000
    if kind == "graded":
        baseline = rng.beta(2.0, 5.0, (questions, runs))
        candidate = rng.beta(2.5, 5.0, (questions, runs))
        truth = 2.5 / 7.5 - 2.0 / 7.0
    else:
        baseline = (rng.random((questions, runs)) < 0.5).astype(float)
        candidate = (rng.random((questions, runs)) < 0.6).astype(float)
        truth = 0.1
    differences = candidate - baseline
    everyone = np.ones((1, questions), dtype=bool)

    def covered(confidence: float) -> float:
        row = [
            estimate
            for columns in np.array_split(differences, CHUNKS, axis=1)
            for estimate in bootstrap_means(
                columns,
                everyone,
                resamples=1000,
                confidence=confidence,
                seed=9,
                value_range=(-1.0, 1.0),
                binary=False,
            )[0]
        ]
        assert {estimate.method for estimate in row} == {BCA}
        low = np.array([estimate.low for estimate in row], dtype=float)
        high = np.array([estimate.high for estimate in row], dtype=float)
        return float(np.mean((low <= truth) & (truth <= high)))

    # These are the intervals paired_test reports, column by column.
    first = paired_test(baseline[:, 0], candidate[:, 0], resamples=1000, seed=9)
    (alone,) = bootstrap_means(
        differences[:, :1], everyone, resamples=1000, seed=9, value_range=(-1.0, 1.0), binary=False
    )[0]
    assert (first.low, first.high, first.interval_method) == (alone.low, alone.high, BCA)
    value = covered(0.95)
    assert window_accepts(value), value
    narrower = covered(0.925)
    assert not window_accepts(narrower), narrower
