"""Per-question BM25 values on SciFact and Cranfield: the populations of the statistics runs.

The coverage, power and gate-calibration simulations draw questions from these real
per-query values (rr, ndcg@10, ap@10, recall@10, hit@1, hit@3), so their skew, their
mass at 0 and 1 and their ties are those of a real retriever on a real collection.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import numpy.typing as npt

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
METRICS = ("rr", "ndcg@10", "ap@10", "recall@10", "hit@1", "hit@3")
#: BM25 settings per collection: SciFact as published (k1=0.9, b=0.4), Cranfield as Terrier.
SETTINGS = {"scifact": (0.9, 0.4), "cranfield": (1.2, 0.75)}


def data_dir() -> Path:
    for candidate in (DATA, Path(__file__).resolve().parents[1] / "shared" / "data"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("../shared/data with the IR test collections is missing")


@functools.cache
def population(collection: str) -> dict[str, npt.NDArray[np.float64]]:
    """metric -> the defined per-question values of BM25 on ``collection``'s test queries."""
    from retrievalkit.formats.golden_sets import load_beir
    from retrievalkit.metrics.definitions import compute_metrics, judge_rankings
    from retrievalkit.retrievers.bm25 import BM25Retriever

    directory = data_dir() / collection
    golden = load_beir(directory)
    k1, b = SETTINGS[collection]
    retriever = BM25Retriever(directory / "corpus.jsonl", k1=k1, b=b)
    rankings = [retriever.retrieve(question.question, 10) for question in golden.questions]
    judged = judge_rankings(rankings, [q.judgments() for q in golden.questions], depth=10)
    table = compute_metrics(judged, (1, 3, 10))
    return {name: table[name][~np.isnan(table[name])] for name in METRICS}
