"""Latency in the gate and in compare: what the latency checks cost over the metric checks.

Two synthetic runs of the same questions (default 10,000 and 100,000), each with hit@1,
hit@3, rr and ndcg@10 per question and a latency (gamma-distributed, the candidate's
10 % slower), built by column in memory. Measured in one process, the two sides of
each pair taking turns within each repeat so a noisy spell hits both; best of
``--repeats``:

- ``rk.gate`` of the candidate against the baseline kept in a ``memory:`` store, with
  the default thresholds (hit@1 and hit@3) and with the same plus
  ``rk.Thresholds(latency={"p95": 0.2})`` (what ``[regression.latency] p95 = 0.2``
  configures); the ratio with / without is the latency checks' overhead;
- ``rk.compare`` of the two runs, which always reports the paired latency change of
  p50, p95 and p99, and that latency part alone (`answered_latencies` and
  `latency_changes` on the same pairing): its share of compare's time;
- ``latency_summary`` of one run (p50, p95, p99 and the mean with their intervals), as
  `eval` reports it.

Before a time is printed, every verdict with the latency threshold must name
``latency.p95`` with the ratio 1.1 (the candidate's latencies are the baseline's times
1.1), every one without it no latency check, and compare's latency change must be the
latency part's.

    python benchmarks/bench_latency_gate.py [--sizes 10000,100000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from harness import load_now, ratio, seconds, table, target

import retrievalkit as rk
from retrievalkit.metrics.scoring import pair_questions
from retrievalkit.model.outcomes import Outcomes
from retrievalkit.model.records import GRADER, ResultRecord
from retrievalkit.model.values import Manifest, MetricValue
from retrievalkit.pipeline.gating.latency import answered_latencies, latency_changes
from retrievalkit.stats.latency import latency_summary

#: What an eval run records unless told (its manifest's resamples and confidence).
RESAMPLES = 1000
CONFIDENCE = 0.95
SLOWDOWN = 1.1
#: The targets.py row: the gate with a latency threshold at 10^5 questions, in seconds.
GOAL_SECONDS = 15.0


def synthetic_record(run_id: str, questions: int, seed: int, slowdown: float) -> ResultRecord:
    """A run of ``questions`` synthetic questions (ids shared by every seed): the metric
    values drawn from ``seed``, the latencies the same for every run times ``slowdown``."""
    rng = np.random.default_rng(seed)
    rank = rng.geometric(0.4, questions)  # the rank of the first relevant document
    values = {
        "hit@1": (rank <= 1).astype(np.float64),
        "hit@3": (rank <= 3).astype(np.float64),
        "rr": np.where(rank <= 100, 1.0 / rank, 0.0),
        "ndcg@10": np.where(rank <= 10, 1.0 / np.log2(rank + 1.0), 0.0),
    }
    # The same draws for every run, scaled: the candidate's quantiles are SLOWDOWN times.
    latency = np.round(np.random.default_rng(0).gamma(2.0, 20.0, questions) * slowdown, 3)
    outcomes = Outcomes.from_arrays(
        [f"q{index}" for index in range(questions)], values, latency_ms=latency
    )
    manifest = Manifest(
        retrievalkit_version="bench",
        set_name="sim",
        set_hash="sim",
        retriever="bm25",
        plugin="bm25",
        retriever_options={},
        retriever_options_hash="",
        created_at=f"2026-01-0{1 + seed % 9}T00:00:00Z",
        ks=(1, 3, 10),
        overfetch=3,
        confidence=CONFIDENCE,
        resamples=RESAMPLES,
        seed=1,
    )
    return ResultRecord(
        run_id=run_id,
        set="sim",
        model="bm25",
        grader=GRADER,
        pass_rate=0.0,
        mean_score=0.0,
        # Each metric's mean and count (no interval: the gate and compare read the columns).
        metrics={
            name: MetricValue(float(column.mean()), None, questions)
            for name, column in values.items()
        },
        slices={},
        outcomes=outcomes,
        manifest=manifest,
    )


def measure(questions: int, repeats: int) -> dict[str, Any]:
    # Run ids name the size: a process's memory: store is one store for every size.
    baseline = synthetic_record(f"baseline-{questions}", questions, seed=1, slowdown=1.0)
    candidate = synthetic_record(f"candidate-{questions}", questions, seed=2, slowdown=SLOWDOWN)
    store = rk.open_store("memory:")
    store.save(baseline)
    plain = rk.Thresholds()
    timed = rk.Thresholds(latency={"p95": 0.2})

    def gate_plain() -> Any:
        return rk.gate(candidate, store, plain, baseline=baseline.run_id)

    def gate_timed() -> Any:
        return rk.gate(candidate, store, timed, baseline=baseline.run_id)

    def compare() -> Any:
        return rk.compare([baseline, candidate], question_texts={})

    def latency_part() -> Any:
        pairing = pair_questions(baseline.outcomes, candidate.outcomes)
        return latency_changes(
            *answered_latencies(baseline.outcomes, candidate.outcomes, pairing),
            resamples=RESAMPLES,
            confidence=CONFIDENCE,
            seed=1,
        )

    def summary() -> Any:
        return latency_summary(candidate.outcomes.latency_ms, CONFIDENCE)

    work: dict[str, Callable[[], Any]] = {
        "gate": gate_plain,
        "gate+latency": gate_timed,
        "compare": compare,
        "latency part": latency_part,
        "latency_summary": summary,
    }
    best = dict.fromkeys(work, float("inf"))
    answers: dict[str, Any] = {}
    for _ in range(repeats):
        for name, call in work.items():
            began = time.perf_counter()
            answers[name] = call()
            best[name] = min(best[name], time.perf_counter() - began)
    check(answers)
    return best


def check(answers: dict[str, Any]) -> None:
    """What each call found is what the runs hold, else its time means nothing."""
    if answers["gate"].latency:
        raise SystemExit("the gate without a latency threshold checked latency")
    (checked,) = answers["gate+latency"].latency
    if checked.check != "latency.p95" or not abs(checked.ratio - SLOWDOWN) < 0.01:
        raise SystemExit(f"the latency check found {checked.check} ratio {checked.ratio}")
    (pair,) = answers["compare"].pairs
    ratios = {change.statistic: change.ratio for change in pair.latency}
    if ratios != {change.statistic: change.ratio for change in answers["latency part"]}:
        raise SystemExit(f"compare's latency {ratios} is not the latency part's")
    if "p95" not in answers["latency_summary"]:
        raise SystemExit("latency_summary gave no p95")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print("## Latency checks in the gate and in compare")
    print(f"in one process, best of {args.repeats}; {RESAMPLES} resamples; {load_now()}\n")
    rows = []
    lines = []
    at_goal = None
    for questions in (int(size) for size in args.sizes.split(",")):
        best = measure(questions, args.repeats)
        with_latency = best["gate+latency"] / best["gate"]
        share = best["latency part"] / best["compare"]
        rows.append(
            (
                f"{questions:,}",
                seconds(best["gate"]),
                seconds(best["gate+latency"]),
                ratio(with_latency),
                seconds(best["compare"]),
                seconds(best["latency part"]),
                f"{share:.0%}",
                seconds(best["latency_summary"]),
            )
        )
        lines.append(
            f"{questions:,} questions: gate with latency.p95 {ratio(with_latency)} the gate "
            f"without ({seconds(best['gate+latency'])} against {seconds(best['gate'])}); "
            f"latency is {share:.0%} of compare"
        )
        if questions == 100_000:
            at_goal = (with_latency, best)
    header = (
        "questions",
        "gate",
        "gate + latency.p95",
        "with/without",
        "compare",
        "its latency part",
        "share",
        "latency_summary",
    )
    print(table(header, rows))
    print()
    print("\n".join(lines))
    if at_goal is None:
        print(target("latency-gate", False, f"not measured: sizes {args.sizes}, not 100000"))
    else:
        found, best = at_goal
        print(
            target(
                "latency-gate",
                best["gate+latency"] <= GOAL_SECONDS,
                f"{seconds(best['gate+latency'])}, {ratio(found)} the gate without "
                f"({seconds(best['gate'])}), best of {args.repeats}; {load_now()}",
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
