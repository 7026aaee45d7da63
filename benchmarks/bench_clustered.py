"""Clustered question sets and judge-corrected means: coverage and false-alarm tables.

Clusters: 20 clusters of 5 questions; a cluster draws one value from a population, each
member takes it with chance sqrt(ICC), else a fresh draw (two members correlate by ICC).
Reported: coverage (and mean width) of 95 % intervals, per-question (before) and cluster
bootstrap (after), and the A/A false alarms of the gate on hit@1 (threshold 0,
require_significant) before and after ``--cluster-by``; the A/A false fails of
``eval --sequential`` (hit@1, allowed drop 0 and 0.05, 20 and 60 clusters of 5) before and
after; and ``power --cluster-by``'s clusters needed for a drop of 0.05 in nDCG@10 (SciFact
BM25 values), with the clustered test's simulated power at that count.

PPI: BM25's reciprocal rank on SciFact is the truth; a lenient judge grades 40 % of the
questions as well as a random other question would, never worse; humans grade a random
30, 50 or 100 of 300 questions. Reported: coverage and width of the judge's own
interval, the PPI interval and the human sample's t interval.

    python benchmarks/bench_clustered.py [--replicates 1000]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import numpy.typing as npt
from harness import goal, table
from populations import population

from retrievalkit.model.records import GRADER, ResultRecord
from retrievalkit.model.values import GoldenQuestion, Manifest, QuestionOutcome
from retrievalkit.pipeline.gating.gate import compare_runs
from retrievalkit.stats.clusters import cluster_bootstrap_means
from retrievalkit.stats.intervals import bootstrap_means
from retrievalkit.stats.ppi import corrected_mean

CLUSTERS, SIZE = 20, 5
ICCS = (0.0, 0.25, 0.64, 1.0)
CODES = np.repeat(np.arange(CLUSTERS), SIZE)


def clustered(
    population: npt.NDArray[np.float64],
    icc: float,
    count: int,
    seed: int,
    clusters: int = CLUSTERS,
) -> npt.NDArray[np.float64]:
    rng = np.random.default_rng(seed)
    shared = population[rng.integers(0, len(population), (clusters, count))]
    own = population[rng.integers(0, len(population), (clusters, SIZE, count))]
    take = rng.random((clusters, SIZE, count)) < np.sqrt(icc)
    return np.where(take, shared[:, None, :], own).reshape(clusters * SIZE, count)


def sequential_false_fails(
    icc: float, replicates: int, after: bool, threshold: float, clusters: int
) -> float:
    """A/A pairs through `run_sequentially`: the share that does not pass."""
    from retrievalkit.stats.sequential import PASS, run_sequentially

    rates = (np.random.default_rng(2).random(1000) < 0.5).astype(np.float64)
    seed = 71 + int(icc * 100) + clusters
    baselines = clustered(rates, icc, replicates, seed=seed, clusters=clusters)
    candidates = clustered(rates, icc, replicates, seed=seed + 1, clusters=clusters)
    ids = [f"q{i}" for i in range(clusters * SIZE)]
    codes = np.repeat(np.arange(clusters), SIZE).tolist() if after else None
    fails = 0
    for replicate in range(replicates):
        before = {"hit@1": dict(zip(ids, baselines[:, replicate].tolist(), strict=True))}
        column = candidates[:, replicate]

        def ask(indices: list[int], column: npt.NDArray[np.float64] = column) -> list[dict]:
            return [{"hit@1": float(column[index])} for index in indices]

        _, result = run_sequentially(
            ids, ask, [(None, "hit@1", threshold, ids)], before, alpha=0.05,
            seed=replicate, points=801, clusters=codes, batch=5,
        )  # fmt: skip
        fails += result.decision != PASS
    return fails / replicates


def power_rows(values: npt.NDArray[np.float64], replicates: int) -> list[list[str]]:
    """Clusters ``power`` asks for a drop of 0.05 (from a pilot of 200 clusters), and the
    clustered sign-flip test's simulated power at that count."""
    from retrievalkit.stats.paired import sign_flip_p_value
    from retrievalkit.stats.power import questions_needed, spread_of_clusters

    rows = []
    for icc in ICCS[1:]:
        centred = values - values.mean()
        pilot = clustered(centred, icc, 2, seed=5, clusters=200)
        codes = np.repeat(np.arange(200), SIZE)
        spread, _ = spread_of_clusters(pilot[:, 0], codes, baseline=pilot[:, 1])
        needed = questions_needed(0.05, spread, 0.05)
        assert needed is not None
        found = 0
        for replicate in range(replicates):
            pair = clustered(centred, icc, 2, seed=1000 + replicate, clusters=needed)
            sums = (pair[:, 1] - pair[:, 0] - 0.05).reshape(needed, SIZE).sum(axis=1)
            p_value, _, _ = sign_flip_p_value(sums, permutations=400, seed=replicate)
            found += p_value < 0.05 and sums.sum() < 0
        rows.append([f"{icc:g}", str(needed), str(needed * SIZE), f"{found / replicates:.1%}"])
    return rows


def coverage(
    values: npt.NDArray[np.float64], icc: float, replicates: int, after: bool
) -> tuple[float, float]:
    samples = clustered(values, icc, replicates, seed=int(icc * 100) + 7)
    everyone = np.ones((1, len(samples)), dtype=bool)
    if after:
        row = cluster_bootstrap_means(samples, everyone, CODES, resamples=1000)[0]
    else:
        row = bootstrap_means(samples, everyone, resamples=1000)[0]
    truth = float(values.mean())
    covered = np.mean([e.low <= truth <= e.high for e in row])  # type: ignore[operator]
    width = np.mean([e.high - e.low for e in row])  # type: ignore[operator]
    return float(covered), float(width)


def _record(values: npt.NDArray[np.float64]) -> ResultRecord:
    manifest = Manifest("t", "sim", "sim", "r", "r", {}, "", "2026-01-01T00:00:00Z", (1,),
                        3, 0.95, 100, 1)  # fmt: skip
    outcomes = tuple(QuestionOutcome(f"q{i}", (), {"hit@1": v}, 0.0) for i, v in enumerate(values))
    return ResultRecord("base", "sim", "r", GRADER, 0.0, 0.0, {}, {}, outcomes, manifest)


def false_alarms(icc: float, replicates: int, after: bool) -> float:
    rates = (np.random.default_rng(2).random(1000) < 0.5).astype(np.float64)
    baselines = clustered(rates, icc, replicates, seed=31 + int(icc * 100))
    candidates = clustered(rates, icc, replicates, seed=57 + int(icc * 100))
    questions = [
        GoldenQuestion(f"q{i}", "q", expected=("d",), cluster=f"c{c}")
        for i, c in enumerate(CODES.tolist())
    ]
    alarms = 0
    for replicate in range(replicates):
        verdict = compare_runs(
            _record(candidates[:, replicate]).outcomes, "sim", _record(baselines[:, replicate]),
            {"hit@1": 0.0}, resamples=20, confidence=0.95, seed=replicate,
            require_significant=True, questions=questions, cluster_by="cluster" if after else None,
        )  # fmt: skip
        alarms += verdict.regressed
    return alarms / replicates


def ppi_rows(values: npt.NDArray[np.float64], replicates: int) -> list[list[str]]:
    from scipy.stats import t

    truth = float(values.mean())
    rows = []
    for labelled in (30, 50, 100):
        rng = np.random.default_rng(3)
        found = np.zeros(6)
        for replicate in range(replicates):
            human = values[rng.integers(0, len(values), 300)]
            other = values[rng.integers(0, len(values), 300)]
            judged = np.where(rng.random(300) < 0.6, human, np.maximum(human, other))
            sample = np.full(300, np.nan)
            picked = rng.choice(300, labelled, replace=False)
            sample[picked] = human[picked]
            estimate = corrected_mean(judged, sample, resamples=1000, seed=replicate)
            assert estimate.ci is not None and estimate.judge_ci is not None
            alone = human[picked]
            half = t.ppf(0.975, labelled - 1) * alone.std(ddof=1) / np.sqrt(labelled)
            found += [
                estimate.judge_ci[0] <= truth <= estimate.judge_ci[1],
                estimate.judge_ci[1] - estimate.judge_ci[0],
                estimate.ci[0] <= truth <= estimate.ci[1],
                estimate.ci[1] - estimate.ci[0],
                abs(alone.mean() - truth) <= half,
                2 * half,
            ]
        found /= replicates
        rows.append(
            [
                f"{labelled} of 300",
                *(
                    f"{value:.1%}" if i % 2 == 0 else f"{value:.3f}"
                    for i, value in enumerate(found)
                ),
            ]
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=1000)
    args = parser.parse_args()
    scifact = population("scifact")
    rate = (np.random.default_rng(1).random(1000) < 0.3).astype(np.float64)
    populations = {
        "hit rate 0.3": rate,
        "scifact rr": scifact["rr"],
        "scifact ndcg@10": scifact["ndcg@10"],
    }
    rows = []
    lowest = 1.0
    for name, values in populations.items():
        cells = [name]
        for icc in ICCS:
            before = coverage(values, icc, args.replicates, after=False)
            after = coverage(values, icc, args.replicates, after=True)
            lowest = min(lowest, after[0])
            cells.append(f"{before[0]:.1%} ({before[1]:.3f}) -> {after[0]:.1%} ({after[1]:.3f})")
        rows.append(cells)
    print("coverage of 95 % intervals, 20 clusters of 5: per question -> cluster bootstrap")
    print(table(["population", *(f"ICC {icc:g}" for icc in ICCS)], rows))
    alarms = [
        [
            f"{false_alarms(icc, args.replicates, False):.1%}",
            f"{false_alarms(icc, args.replicates, True):.1%}",
        ]
        for icc in ICCS
    ]
    print("\ngate A/A false alarms (hit@1, threshold 0, require_significant)")
    print(
        table(
            ["ICC", "per question", "--cluster-by"],
            [[f"{icc:g}", *row] for icc, row in zip(ICCS, alarms, strict=True)],
        )
    )
    few = max(50, args.replicates // 5)
    sequential = []
    highest = 0.0
    for clusters in (20, 60):
        for threshold in (0.0, 0.05):
            cells = [f"{clusters} x {SIZE}", f"{threshold:g}"]
            for icc in ICCS:
                before = sequential_false_fails(icc, few, False, threshold, clusters)
                after = sequential_false_fails(icc, few, True, threshold, clusters)
                highest = max(highest, after)
                cells.append(f"{before:.1%} -> {after:.1%}")
            sequential.append(cells)
    print(f"\neval --sequential A/A false fails (hit@1, {few} pairs): per question -> clusters")
    print(table(["clusters", "allowed drop", *(f"ICC {icc:g}" for icc in ICCS)], sequential))
    print(f"\npower --cluster-by: nDCG@10 drop 0.05, SciFact BM25 values ({few} sets each)")
    print(
        table(
            ["ICC", "clusters needed", "questions", "simulated power"],
            power_rows(scifact["ndcg@10"], few),
        )
    )
    print("\njudge-corrected means: a lenient judge, SciFact rr")
    print(
        table(
            ["human-labelled", "judge cov", "width", "PPI cov", "width", "human t cov", "width"],
            ppi_rows(scifact["rr"], args.replicates),
        )
    )
    worst = max(float(row[1].rstrip("%")) / 100 for row in alarms)
    print(
        goal(
            lowest >= 0.935,
            f"cluster bootstrap coverage >= 93.5 % at every ICC (lowest {lowest:.1%})",
        )
    )
    print(
        goal(
            worst <= 0.05, f"clustered gate false alarms <= 5 % at every ICC (highest {worst:.1%})"
        )
    )
    print(
        goal(
            highest <= 0.05,
            f"clustered sequential A/A false fails <= 5 % at every ICC (highest {highest:.1%})",
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
