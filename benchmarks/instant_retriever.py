"""A retriever plugin that answers from precomputed rankings at once, for the overhead benchmark.

Registered under ``retrievalkit.retrievers`` by a dist-info folder that
bench_overhead.py writes, exactly as an installed plugin would be. It keeps the time
spent in its own factory and ``retrieve`` calls and writes it, at exit, to the file
named by ``RK_BENCH_RETRIEVER_REPORT``: the benchmark subtracts it, so what remains is
the framework's cost.
"""

from __future__ import annotations

import atexit
import json
import os
import time
from collections.abc import Sequence

import numpy as np


class InstantRetriever:
    """Question ``synthetic question N`` gets row N of the rankings as ``doc-K`` ids."""

    identifier = "instant"

    def __init__(self, rankings: str) -> None:
        self.rankings = np.load(rankings)
        self.spent = 0.0

    def retrieve(self, question: str, limit: int) -> Sequence[str]:
        began = time.perf_counter()
        row = self.rankings[int(question.rsplit(" ", 1)[1])]
        ranking = [f"doc-{number}" for number in row[:limit].tolist()]
        self.spent += time.perf_counter() - began
        return ranking


def create_instant(rankings: str) -> InstantRetriever:
    began = time.perf_counter()
    retriever = InstantRetriever(rankings)
    retriever.spent += time.perf_counter() - began
    report = os.environ.get("RK_BENCH_RETRIEVER_REPORT")
    if report:

        def write() -> None:
            with open(report, "w", encoding="utf-8") as handle:
                json.dump({"seconds": retriever.spent}, handle)

        atexit.register(write)
    return retriever
