"""The regression gate calibrated: false alarms of A/A runs, detection of known drops.

Per-question values come from BM25 on SciFact's 300 test queries (hit@1, hit@3, rr,
ndcg@10 of the same question together, benchmarks/populations.py). A simulated set
draws n of those questions. Each run of "the same system" re-draws a question's values
from another random question with chance 0.3 (the noise of re-indexing, a changed
tokenizer, a tie broken differently), independently for the two runs, so the two runs
are exchangeable (A/A). An A/B candidate also misses a question entirely (every metric
0) with the chance that makes its hit@1 drop by the given amount.

Each pair goes through the real gate (``retrievalkit.pipeline.gating.gate.compare_runs``) with
the default thresholds (hit@1 and hit@3 may not drop at all). Reported: the share of
A/A pairs flagged (false alarms) with and without ``--require-significant``, and the
share of A/B pairs flagged with it (detection), by drop and set size.

    python benchmarks/bench_gate.py [--replicates 400] [--markdown]
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

from retrievalkit.model.records import GRADER, ResultRecord
from retrievalkit.model.values import Manifest, QuestionOutcome
from retrievalkit.pipeline.gating.gate import DEFAULT_THRESHOLDS, compare_runs

METRICS = ("hit@1", "hit@3", "rr", "ndcg@10")
SIZES = (30, 75, 150, 300, 1000)
DROPS = (0.02, 0.05, 0.10, 0.20)
NOISE = 0.3
GOAL = 0.05


def _record(values: npt.NDArray[np.float64]) -> ResultRecord:
    manifest = Manifest(
        retrievalkit_version="bench",
        set_name="sim",
        set_hash="sim",
        retriever="bm25",
        plugin="bm25",
        retriever_options={},
        retriever_options_hash="",
        created_at="2026-01-01T00:00:00Z",
        ks=(1, 3, 10),
        overfetch=3,
        confidence=0.95,
        resamples=200,
        seed=1,
    )
    return ResultRecord(
        run_id="baseline",
        set="sim",
        model="bm25",
        grader=GRADER,
        pass_rate=0.0,
        mean_score=0.0,
        metrics={},
        slices={},
        outcomes=_outcomes(values),
        manifest=manifest,
    )


def _outcomes(values: npt.NDArray[np.float64]) -> tuple[QuestionOutcome, ...]:
    return tuple(
        QuestionOutcome(f"q{index}", (), dict(zip(METRICS, row, strict=True)), 0.0)
        for index, row in enumerate(values.tolist())
    )


def _noisy(
    table_values: npt.NDArray[np.float64], chosen: npt.NDArray[np.intp], rng: np.random.Generator
) -> npt.NDArray[np.float64]:
    redraw = rng.random(len(chosen)) < NOISE
    others = rng.integers(0, len(table_values), len(chosen))
    return np.where(redraw[:, None], table_values[others], table_values[chosen])


def flagged(
    table_values: npt.NDArray[np.float64],
    n: int,
    drop: float,
    replicates: int,
    *,
    require_significant: bool,
    seed: int,
) -> float:
    rng = np.random.default_rng(seed)
    hit_rate = float(table_values[:, 0].mean())
    found = 0
    for replicate in range(replicates):
        chosen = rng.integers(0, len(table_values), n)
        baseline = _noisy(table_values, chosen, rng)
        candidate = _noisy(table_values, chosen, rng)
        if drop > 0:
            missed = rng.random(n) < drop / hit_rate
            candidate = np.where(missed[:, None], 0.0, candidate)
        verdict = compare_runs(
            _outcomes(candidate),
            "sim",
            _record(baseline),
            DEFAULT_THRESHOLDS,
            resamples=200,
            confidence=0.95,
            seed=replicate,
            require_significant=require_significant,
        )
        found += verdict.regressed
    return found / replicates


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=400)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    values = population("scifact")
    table_values = np.column_stack([values[metric] for metric in METRICS])
    began = time.perf_counter()
    aa_rows = []
    worst = 0.0
    for n in SIZES:
        strict = flagged(table_values, n, 0.0, args.replicates, require_significant=True, seed=n)
        loose = flagged(table_values, n, 0.0, args.replicates, require_significant=False, seed=n)
        worst = max(worst, strict)
        aa_rows.append((n, f"{strict:.1%}", f"{loose:.1%}"))
    ab_rows = []
    for n in SIZES:
        rates = [
            flagged(
                table_values, n, drop, args.replicates // 2, require_significant=True, seed=n + 1
            )
            for drop in DROPS
        ]
        ab_rows.append((n, *(f"{rate:.0%}" for rate in rates)))
    spent = time.perf_counter() - began
    error = np.sqrt(GOAL * (1 - GOAL) / args.replicates)
    print(f"## The gate calibrated ({args.replicates} A/A pairs per size, SciFact BM25 values)\n")
    aa_header = ("questions", "A/A flagged, --require-significant", "A/A flagged, threshold only")
    ab_header = ("questions", *(f"hit@1 drop {drop:g}" for drop in DROPS))
    if args.markdown:
        for header, rows in ((aa_header, aa_rows), (ab_header, ab_rows)):
            print("| " + " | ".join(header) + " |")
            print("|---:|" + "---:|" * (len(header) - 1))
            for row in rows:
                print("| " + " | ".join(str(cell) for cell in row) + " |")
            print()
    else:
        print(table(aa_header, aa_rows))
        print(f"\ndetection with --require-significant ({args.replicates // 2} pairs per cell)\n")
        print(table(ab_header, ab_rows))
    print(f"\n{spent:.0f} s")
    print(
        goal(
            worst <= GOAL + 2 * error,
            f"A/A false alarms with --require-significant at most {GOAL:.0%} "
            f"(worst {worst:.1%}, Monte Carlo error {error:.1%})",
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
