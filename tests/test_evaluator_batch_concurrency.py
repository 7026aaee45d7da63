"""``--concurrency`` applies to batching retrievers too: N ``retrieve_many`` calls at once.

A retriever that offers ``retrieve_many`` (the Elasticsearch plugin's ``_msearch``
batches) used to be asked one batch after another whatever ``--concurrency`` said.
The outcomes must not depend on how many batches are in flight: same order, same
rankings, same errors, progress counted once per question.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from retrievalkit.model.values import GoldenQuestion
from retrievalkit.pipeline.engine.evaluator import _BATCH, evaluate_questions

#: Only a guard against a hang if batches were (wrongly) asked one after another.
BARRIER_WAIT = 30.0


def questions(count: int) -> list[GoldenQuestion]:
    return [
        GoldenQuestion(id=f"q{i}", question=f"text of q{i}", expected=(f"d{i % 11}",))
        for i in range(count)
    ]


class Batching:
    """``retrieve_many`` only; question 7 of every hundred fails, 13 breaks the contract."""

    identifier = "batching"

    def __init__(self, together: int = 1) -> None:
        self.calls = 0
        self.lock = threading.Lock()
        # With together > 1, each of the first `together` calls waits for the others:
        # only batches that are really in flight at the same time get through.
        self.barrier = threading.Barrier(together, timeout=BARRIER_WAIT) if together > 1 else None
        self.threads: set[str] = set()

    def retrieve(self, text: str, limit: int) -> list[str]:
        raise AssertionError("retrieve must not be called when retrieve_many exists")

    def retrieve_many(self, texts: Sequence[str], limit: int) -> list[Any]:
        with self.lock:
            self.calls += 1
            first = self.calls <= (self.barrier.parties if self.barrier else 0)
            self.threads.add(threading.current_thread().name)
        if self.barrier is not None and first:
            self.barrier.wait()
        answers: list[Any] = []
        for text in texts:
            number = int(text.rsplit("q", 1)[1])
            if number % 100 == 7:
                answers.append(RuntimeError(f"shard failed on {number}"))
            elif number % 100 == 13:
                answers.append(["d1", 13])
            else:
                answers.append([f"d{(number * step) % 11}" for step in range(1, 6)][:limit])
        return answers


def outcomes(retriever: Any, count: int, concurrency: int) -> tuple[list[Any], list[int]]:
    progress: list[int] = []
    retrievals = evaluate_questions(
        retriever,
        questions(count),
        depth=5,
        overfetch=1,
        concurrency=concurrency,
        progress=progress.append,
    )
    return [(r.ranking, r.error) for r in retrievals], progress


def test_batches_are_asked_concurrently_with_the_same_outcomes() -> None:
    count = _BATCH * 6 + 5  # seven batches, the last one short
    serial, serial_progress = outcomes(Batching(), count, concurrency=1)
    together = Batching(together=3)
    threaded, threaded_progress = outcomes(together, count, concurrency=3)
    assert threaded == serial  # order, rankings and errors alike
    assert together.calls == 7 and len(together.threads) >= 3
    assert sum(serial_progress) == sum(threaded_progress) == count
    assert sorted(threaded_progress) == sorted(serial_progress)
    errors = [error for _, error in serial if error]
    assert len(errors) == 8  # q7, q13, q107, q113, ..., q307, q313 of q0 to q388
    assert any("shard failed on 307" in error for error in errors)
    assert any("rank 2" in error for error in errors)


def test_one_batch_needs_no_thread() -> None:
    retriever = Batching()
    serial, progress = outcomes(retriever, 10, concurrency=8)
    assert retriever.calls == 1 and progress == [10]
    assert retriever.threads == {threading.current_thread().name}
    assert serial[7][1] is not None and serial[0][1] is None
