"""Outcomes by column against the one-JSON-document form of schema 2: bytes and seconds.

A synthetic run (default 100,000 questions) at the default cut-offs with judged@k (25
metrics), rankings 10 deep over a corpus of a million documents, two or three judged
documents a question, latency with three decimals and a few errors. Its values come
from the real metric kernels. Measured in the same process:

- writing: ``Outcomes.to_columns`` against the inline JSON of the outcomes (what a
  schema-2 store wrote a run), and the bytes of each;
- reading: the first metric column from the stored columns (what the gate reads)
  against parsing and structuring the inline JSON (what it read before).

Goal: one stored 100,000-question run under 8 MB.

    python benchmarks/bench_outcomes.py [--questions 100000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from harness import goal, seconds, table

from retrievalkit.formats.convert import structure, to_json
from retrievalkit.metrics.definitions import DEFAULT_KS, compute_metrics, judge_rankings
from retrievalkit.model.outcomes import Judgments, Outcomes, Rankings
from retrievalkit.stores.columns import columns_header, decode_columns, encode_columns

CORPUS = 1_000_000
GOAL_BYTES = 8_000_000


def synthetic(count: int, seed: int = 1) -> Outcomes:
    rng = np.random.default_rng(seed)
    documents = [f"doc-{i:07d}" for i in range(CORPUS)]
    ranked = rng.integers(0, CORPUS, (count, 10))
    sizes = rng.integers(2, 4, count)
    offsets = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    judged_codes = rng.integers(0, CORPUS, offsets[-1])
    grades = rng.integers(0, 3, offsets[-1])
    found = rng.random(count) < 0.7  # a judged document somewhere in 70 % of rankings
    at = rng.integers(0, 10, count)
    ranked[found, at[found]] = judged_codes[offsets[:-1][found]]
    rankings = [tuple(documents[c] for c in row) for row in ranked.tolist()]
    labels = [
        dict(zip([documents[c] for c in judged_codes[a:b]], grades[a:b].tolist(), strict=True))
        for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)
    ]
    values = compute_metrics(
        judge_rankings(rankings, labels, depth=10, errored=[False] * count),
        DEFAULT_KS,
        with_judged=True,
    )
    errors = rng.choice(count, min(50, count), replace=False).tolist()
    return Outcomes.from_arrays(
        [f"q{i}" for i in range(count)],
        values,
        latency_ms=np.round(rng.gamma(2.0, 20.0, count), 3),
        errors=dict.fromkeys(errors, "TimeoutError: no answer in 30 s"),
        forms=rng.choice(np.array(["MATCH", "GAP", None], dtype=object), count).tolist(),
        documents=documents,
        rankings=Rankings(np.arange(0, 10 * count + 1, 10), ranked.ravel()),
        judgments=Judgments(offsets, judged_codes, grades),
    )


def best(repeats: int, work: Callable[[], Any]) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeats):
        began = time.perf_counter()
        result = work()
        times.append(time.perf_counter() - began)
    return min(times), result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    outcomes = synthetic(args.questions)

    write_columns, columns = best(args.repeats, lambda: encode_columns(outcomes))
    write_json, text = best(1, lambda: to_json(outcomes))
    stored = sum(map(len, columns.values()))
    inline = len(text.encode("utf-8"))
    header = columns_header(outcomes)

    def first_column() -> Any:
        return decode_columns(header, columns.__getitem__).values("hit@1")

    read_column, hits = best(args.repeats, first_column)
    read_json, parsed = best(1, lambda: structure(json.loads(text), Outcomes))
    every, _ = best(1, lambda: list(decode_columns(header, columns.__getitem__)))
    if not (np.array_equal(hits, outcomes.values("hit@1")) and parsed == outcomes):
        print("stored outcomes disagree with the ones written", file=sys.stderr)
        return 1

    print(f"{args.questions:,} questions, {len(outcomes.metric_names)} metrics\n")
    rows = [
        ["stored bytes", f"{stored:,}", f"{inline:,}", stored / inline],
        ["write", seconds(write_columns), seconds(write_json), write_columns / write_json],
        ["read hit@1", seconds(read_column), seconds(read_json), read_column / read_json],
        ["read every outcome", seconds(every), seconds(read_json), every / read_json],
    ]
    header_row = ["what", "columns (schema 3)", "inline JSON (schema 2)", "ratio"]
    print(table(header_row, [[*row[:3], f"{row[3]:.3g}x"] for row in rows]))
    largest = sorted(columns.items(), key=lambda column: -len(column[1]))[:5]
    print("\nlargest columns: " + ", ".join(f"{name} {len(data):,}" for name, data in largest))
    if args.questions == 100_000:
        print(
            goal(stored < GOAL_BYTES, f"one stored 100k-question run under 8 MB: {stored:,} bytes")
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
