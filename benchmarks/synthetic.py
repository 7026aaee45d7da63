"""Seeded synthetic judgments and rankings, the same inputs for every tool a benchmark times.

Each question has 1 to 5 relevant documents graded 1 to 3 and a ranking of ``depth``
distinct documents. A relevant document lands in the ranking with probability 0.7, at
a rank drawn with weight 1/rank, so the metrics take realistic, varied values.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: A prime corpus size: stepping through it with any non-zero stride never repeats a
#: document within a ranking, so rankings are distinct without a per-question loop.
CORPUS = 1_000_003
EXTRA = 5  # ids beyond the ranking that relevant-but-not-retrieved documents take


def synthetic_indices(questions: int, depth: int = 100, seed: int = 7) -> tuple[Any, Any, Any, Any]:
    """(rankings, relevant, relevant counts, grades) as document numbers, all seeded.

    ``rankings`` is (questions, depth); ``relevant`` and ``grades`` are (questions, 5),
    of which the first ``relevant counts`` entries of a row are that question's.
    """
    rng = np.random.default_rng(seed)
    start = rng.integers(0, CORPUS, questions)
    stride = rng.integers(1, CORPUS, questions)
    steps = np.arange(depth + EXTRA)
    docs = (start[:, None] + steps[None, :] * stride[:, None]) % CORPUS
    relevant_count = rng.integers(1, 6, questions)
    # Weighted sampling of ranks without replacement (Gumbel top-k), weight 1/rank.
    keys = -np.log(np.arange(1, depth + 1))[None, :] + rng.gumbel(size=(questions, depth))
    ranks = np.argsort(-keys, axis=1)[:, :EXTRA]
    retrieved = rng.random((questions, EXTRA)) < 0.7
    positions = np.where(retrieved, ranks, depth + np.arange(EXTRA)[None, :])
    grades = rng.integers(1, 4, (questions, EXTRA))
    relevant = np.take_along_axis(docs, positions, axis=1)
    return docs[:, :depth], relevant, relevant_count, grades


def synthetic_run(
    questions: int, depth: int = 100, seed: int = 7
) -> tuple[list[str], list[list[str]], list[dict[str, int]]]:
    """(question ids, rankings best first, judgments doc id -> grade), all seeded."""
    docs, relevant, relevant_count, grades = synthetic_indices(questions, depth, seed)
    names = np.array([f"doc-{index}" for index in range(CORPUS)], dtype=object)
    qids = [f"q{index}" for index in range(questions)]
    rankings: list[list[str]] = names[docs].tolist()
    # Judgment ids are separate string objects, as when the set is read from a file: a
    # lookup then hashes and compares text, as it would in a real run.
    judgments: list[dict[str, int]] = [
        {f"doc-{doc}": grade for doc, grade in zip(row[:count], grade_row[:count], strict=True)}
        for row, count, grade_row in zip(
            relevant.tolist(), relevant_count.tolist(), grades.tolist(), strict=True
        )
    ]
    return qids, rankings, judgments
