"""Coverage and width of the intervals over the whole grid: today's methods beside the old one.

0/1 metrics: n in {10, 30, 48, 75, 150, 300, 1000} x true rate in {0.05, 0.3, 0.5, 0.85,
0.95, 0.99}; each cell draws samples of n questions, intervals them with retrievalkit
(Clopper-Pearson) and with the percentile bootstrap retrievalkit used before, and
reports the share of intervals that cover the true rate and their mean width.
Continuous metrics: the same sizes, drawing questions from real per-query BM25 values
(rr, ndcg@10, ap@10, recall@10 on SciFact and Cranfield, benchmarks/populations.py);
retrievalkit's method there is BCa (or the exact binomial interval when a sample's
values happen to be all 0 or 1, as the run would choose). Goal: at least 93.5 % in
every cell with n >= 30. Small slices (5, 6, 10, 20 values of the continuous metrics):
today's method (``bca-expanded`` from 10 values, ``rate-bound`` below) beside plain BCa,
goal at least 93.5 % in every cell. ``--markdown`` prints the tables for docs/metrics.md.

    python benchmarks/bench_coverage.py [--samples 2000] [--markdown]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import numpy.typing as npt
from harness import goal, table
from populations import population

from retrievalkit.stats.intervals import _draw_counts, clopper_pearson, sample_intervals

SIZES = (10, 30, 48, 75, 150, 300, 1000)
RATES = (0.05, 0.3, 0.5, 0.85, 0.95, 0.99)
CONTINUOUS = ("rr", "ndcg@10", "ap@10", "recall@10")
COLLECTIONS = ("scifact", "cranfield")
RESAMPLES = 2000
GOAL = 0.935


def percentile_bootstrap(
    samples: npt.NDArray[np.float64], seed: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The intervals retrievalkit gave before (2.5th and 97.5th percentile of the means)."""
    size = samples.shape[1]
    counts = _draw_counts(size, RESAMPLES, seed, 0, None).astype(np.float64)
    means = counts @ samples.T / size
    low, high = np.percentile(means, [2.5, 97.5], axis=0)
    return low, high


def summary(
    low: npt.NDArray[np.float64], high: npt.NDArray[np.float64], truth: float
) -> tuple[float, float]:
    return float(np.mean((low <= truth) & (truth <= high))), float(np.mean(high - low))


def binary_grid(samples: int) -> list[tuple[int, float, float, float, float, float]]:
    """(n, rate, new coverage, new width, old coverage, old width) per cell."""
    rows = []
    for n in SIZES:
        for index, rate in enumerate(RATES):
            rng = np.random.default_rng((n, index))
            # Clopper-Pearson depends on the count of hits alone: draw counts for many samples.
            hits = rng.binomial(n, rate, samples * 10)
            low, high = clopper_pearson(hits, n)
            new = summary(low, high, rate)
            drawn = (rng.random((samples, n)) < rate).astype(np.float64)
            old = summary(*percentile_bootstrap(drawn, n), rate)
            rows.append((n, rate, *new, *old))
    return rows


def continuous_grid(samples: int) -> list[tuple[str, str, int, float, float, float, float]]:
    rows = []
    for collection in COLLECTIONS:
        values = population(collection)
        for metric in CONTINUOUS:
            people = values[metric]
            truth = float(people.mean())
            for n in SIZES:
                rng = np.random.default_rng((n, len(people)))
                drawn = people[rng.integers(0, len(people), (samples, n))]
                low, high, _ = sample_intervals(drawn, resamples=RESAMPLES, seed=n)
                new = summary(low, high, truth)
                old = summary(*percentile_bootstrap(drawn, n), truth)
                rows.append((collection, metric, n, *new, *old))
    return rows


SLICE_SIZES = (5, 6, 10, 20)


def small_slice_grid(samples: int) -> list[tuple[str, str, int, float, float, float, float]]:
    """(collection, metric, n, coverage, width, plain BCa coverage, width) per cell, over
    the samples whose values are not all 0/1 or all one number (the continuous cells)."""
    rows = []
    for collection in COLLECTIONS:
        values = population(collection)
        for metric in CONTINUOUS:
            people = values[metric]
            truth = float(people.mean())
            for n in SLICE_SIZES:
                rng = np.random.default_rng((n, len(people), 5))
                drawn = people[rng.integers(0, len(people), (samples, n))]
                low, high, kinds = sample_intervals(drawn, resamples=RESAMPLES, seed=n)
                plain_low, plain_high, _ = sample_intervals(
                    drawn, resamples=RESAMPLES, seed=n, small_samples=False
                )
                varied = np.isin(kinds, ["bca-expanded", "rate-bound"])
                if not varied.any():
                    continue
                new = summary(low[varied], high[varied], truth)
                old = summary(plain_low[varied], plain_high[varied], truth)
                rows.append((collection, metric, n, *new, *old))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2000, help="samples per cell")
    parser.add_argument("--markdown", action="store_true", help="tables for the docs")
    args = parser.parse_args()
    began = time.perf_counter()
    binary = binary_grid(args.samples)
    continuous = continuous_grid(args.samples)
    slices = small_slice_grid(args.samples)
    spent = time.perf_counter() - began

    def cell(coverage: float, width: float) -> str:
        return f"{coverage:.1%} ({width:.3f})"

    print(f"## Coverage of nominal 95 % intervals ({args.samples:,} samples per cell)\n")
    print("0/1 metrics: coverage (mean width), Clopper-Pearson | old percentile bootstrap\n")
    header = ("n", *(f"p={rate:g}" for rate in RATES))
    by_n: dict[int, list[str]] = {}
    for n, _, cov, width, old_cov, old_width in binary:
        by_n.setdefault(n, []).append(f"{cell(cov, width)} · old {cell(old_cov, old_width)}")
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|---:|" + "---|" * len(RATES))
        for n, cells in by_n.items():
            print(f"| {n} | " + " | ".join(cells) + " |")
    else:
        print(table(header, [(n, *cells) for n, cells in by_n.items()]))
    print("\ncontinuous metrics (real BM25 per-query values): BCa | old percentile bootstrap\n")
    header = ("collection", "metric", *(f"n={n}" for n in SIZES))
    grouped: dict[tuple[str, str], list[str]] = {}
    for collection, metric, _, cov, width, old_cov, old_width in continuous:
        grouped.setdefault((collection, metric), []).append(
            f"{cell(cov, width)} · old {cell(old_cov, old_width)}"
        )
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|---|---|" + "---|" * len(SIZES))
        for (collection, metric), cells in grouped.items():
            print(f"| {collection} | {metric} | " + " | ".join(cells) + " |")
    else:
        print(table(header, [(c, m, *cells) for (c, m), cells in grouped.items()]))

    print("\nsmall slices (continuous samples): today's method | plain BCa before\n")
    header = ("collection", "metric", *(f"n={n}" for n in SLICE_SIZES))
    grouped = {}
    for collection, metric, _, cov, width, old_cov, old_width in slices:
        grouped.setdefault((collection, metric), []).append(
            f"{cell(cov, width)} · old {cell(old_cov, old_width)}"
        )
    print(table(header, [(c, m, *cells) for (c, m), cells in grouped.items()]))
    smallest = min((row[3], f"{row[0]} {row[1]} n={row[2]}") for row in slices)
    print(f"lowest small-slice coverage: {smallest[0]:.1%} ({smallest[1]})")
    print(goal(smallest[0] >= GOAL, f"small slices covered at least {GOAL:.1%}"))

    thirty = next(row for row in binary if row[0] == 30 and row[1] == 0.95)
    low, high = clopper_pearson(30, 30)
    print(
        f"\nn = 30, p = 0.95: coverage {thirty[4]:.1%} before (percentile bootstrap), "
        f"{thirty[2]:.1%} now (Clopper-Pearson)"
    )
    print(f"30 hits of 30: [{float(low):.3f}, {float(high):.3f}] (before: [1.000, 1.000])")
    worst = min(
        [(row[2], f"0/1 n={row[0]} p={row[1]}") for row in binary if row[0] >= 30]
        + [(row[3], f"{row[0]} {row[1]} n={row[2]}") for row in continuous if row[2] >= 30]
    )
    print(f"lowest coverage with n >= 30: {worst[0]:.1%} ({worst[1]}); {spent:.0f} s")
    print(goal(worst[0] >= GOAL, f"coverage at least {GOAL:.1%} in every cell with n >= 30"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
