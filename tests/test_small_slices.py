"""Small slices (5 to 29 values) get a wider interval that says so, and it covers.

Plain BCa covers 80-93 % of the time at 5-20 values of real, skewed metric values
(Cranfield's ap@10 at n = 5: 83 %). A seeded simulation on BM25's per-query values of
SciFact and Cranfield draws thousands of slices of each size, intervals them with the
code a run uses (`sample_intervals`), and counts how often the population mean is
covered; the same intervals at 90 % confidence labelled 95 % must fail the check.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from retrievalkit.stats.intervals import (
    BCA,
    BCA_EXPANDED,
    RATE_BOUND,
    bootstrap_means,
    sample_intervals,
)

SIZES = (5, 6, 10, 20)
SAMPLES = 4000
FLOOR = 0.935


@pytest.fixture(scope="module")
def cranfield_populations(data_dir: Path) -> dict[str, npt.NDArray[np.float64]]:
    from retrievalkit.formats.golden_sets import load_beir
    from retrievalkit.metrics.definitions import compute_metrics, judge_rankings
    from retrievalkit.retrievers.bm25 import BM25Retriever

    directory = data_dir / "cranfield"
    golden = load_beir(directory)
    retriever = BM25Retriever(directory / "corpus.jsonl", k1=1.2, b=0.75)
    rankings = [retriever.retrieve(question.question, 10) for question in golden.questions]
    judged = judge_rankings(rankings, [q.judgments() for q in golden.questions], 10)
    table = compute_metrics(judged, (1, 3, 10))
    return {name: table[name][~np.isnan(table[name])] for name in ("rr", "ndcg@10", "ap@10")}


def coverage(
    population: npt.NDArray[np.float64], n: int, confidence: float, seed: int
) -> tuple[float, set[str]]:
    rng = np.random.default_rng(seed)
    drawn = population[rng.integers(0, len(population), (SAMPLES, n))]
    low, high, methods = sample_intervals(drawn, resamples=1000, confidence=confidence, seed=seed)
    truth = float(population.mean())
    continuous = np.isin(methods, [BCA, BCA_EXPANDED, RATE_BOUND])
    covered = (low <= truth) & (truth <= high)
    return float(covered[continuous].mean()), set(methods[continuous].tolist())


def test_slices_of_5_to_20_questions_are_covered_at_least_93_5_percent(
    cranfield_populations: dict[str, npt.NDArray[np.float64]],
    bm25_populations: dict[str, npt.NDArray[np.float64]],
) -> None:
    populations = {
        **{f"cranfield {name}": values for name, values in cranfield_populations.items()},
        "scifact ndcg@10": bm25_populations["ndcg@10"],
    }
    found: dict[tuple[str, int], float] = {}
    narrower: dict[tuple[str, int], float] = {}
    for index, (name, population) in enumerate(populations.items()):
        for n in SIZES:
            found[(name, n)], methods = coverage(population, n, 0.95, seed=100 * index + n)
            assert methods == {RATE_BOUND if n < 10 else BCA_EXPANDED}, (name, n, methods)
            narrower[(name, n)], _ = coverage(population, n, 0.90, seed=100 * index + n)
    failing = {cell: value for cell, value in found.items() if value < FLOOR}
    assert not failing, failing
    # The check can fail: the same intervals at 90 % fall below the floor somewhere.
    assert any(value < FLOOR for value in narrower.values()), narrower


def test_a_run_names_the_method_of_each_slice_by_its_size() -> None:
    rng = np.random.default_rng(4)
    values = rng.beta(2.0, 5.0, (80, 1))
    sizes = (6, 15, 40)
    groups = np.zeros((len(sizes) + 1, 80), dtype=bool)
    groups[0] = True
    for row, size in enumerate(sizes, start=1):
        groups[row, :size] = True
    estimates = bootstrap_means(values, groups, resamples=1000, seed=2)
    methods = [row[0].method for row in estimates]
    assert methods == [BCA, RATE_BOUND, BCA_EXPANDED, BCA]
    # Each wider interval still holds its mean and stays inside [0, 1].
    for row in estimates:
        estimate = row[0]
        assert estimate.low is not None and estimate.high is not None
        assert 0.0 <= estimate.low <= estimate.mean <= estimate.high <= 1.0
