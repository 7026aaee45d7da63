"""Asking one question after another without a timeout takes a shorter road than asking
with one (no thread, no call a question to check the ids, rankings kept by column): it
must give what the general road gives, answer by answer, whatever a retriever returns,
and the scorer must score the columns as it scores the same retrievals one by one."""

from __future__ import annotations

import threading
from collections import UserList
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from retrievalkit.metrics.scoring import RunScorer, ScoringOptions
from retrievalkit.model.values import GoldenQuestion, Retrieval
from retrievalkit.pipeline.engine.evaluator import (
    Retrievals,
    ask_in_batches,
    distinct_ranking,
    evaluate_questions,
)

DEPTH, OVERFETCH = 4, 3
LIMIT = DEPTH * OVERFETCH


class Tagged(str):
    """A string subclass, as some clients return: still a string id."""


#: What a retriever may send back, from the usual to the broken.
ANSWERS: list[Any] = [
    ["a", "b", "c", "d", "e"],
    ("a", "b", "c", "d", "e"),
    ["a", "a", "b", "c", "d", "e"],
    ["a", "b", "c", "a", "d", "e"],
    ["a", "b", "c", "d", "a", "b", "e"],
    ["a", "a", "a", "a", "a", "a"],
    ["x", "y"],
    ["x", "x"],
    [],
    (),
    ["zz-not-judged", "a", "zz-not-judged", "b"],
    [Tagged("a"), "a", Tagged("b")],
    UserList(["a", "b", "b", "c", "d", "e"]),
    np.array(["a", "b", "a", "c"]),
    [f"d{rank}" for rank in range(LIMIT)],
    [f"d{rank}" for rank in range(LIMIT + 1)],
    [*"abcd", "e", "f", "g", 7],
    ["a", None],
    [b"a", "b"],
    "abc",
    b"abc",
    None,
    42,
    iter(["a", "b"]),
    {"a": 1, "b": 2},
    RuntimeError("backend down\nwith a second line"),
    ValueError(""),
]


class Replaying:
    """Question ``n`` gets answer ``n`` of `ANSWERS` (raised when it is an exception)."""

    identifier = "replaying"

    def __init__(self, answers: Sequence[Any]) -> None:
        self.answers = answers

    def retrieve(self, text: str, limit: int) -> Any:
        answer = self.answers[int(text.rsplit(" ", 1)[1])]
        if isinstance(answer, BaseException):
            raise answer
        return answer


def questions(count: int) -> list[GoldenQuestion]:
    return [
        GoldenQuestion(
            id=f"q{index}",
            question=f"question {index}",
            expected=("a", "c", "a") if index % 3 else (),
            grades={"d": 2, "zz-not-judged": 0} if index % 2 else {},
        )
        for index in range(count)
    ]


def asked(
    timeout: float | None, count: int = len(ANSWERS), concurrency: int = 1
) -> list[tuple[Any, ...]]:
    progress: list[int] = []
    retrievals = evaluate_questions(
        Replaying(ANSWERS),
        questions(count),
        depth=DEPTH,
        overfetch=OVERFETCH,
        timeout=timeout,
        concurrency=concurrency,
        progress=progress.append,
        secrets=("second",),
    )
    assert progress == [1] * count
    return [(r.ranking, r.error, r.returned) for r in retrievals]


@pytest.mark.parametrize("concurrency", [1, 3])
def test_without_a_timeout_every_answer_is_taken_as_with_one(concurrency: int) -> None:
    # A generous timeout takes the general road (a waiting thread, distinct_ranking a
    # question), as concurrency does.
    assert asked(None) == asked(600.0, concurrency=concurrency)
    assert asked(None) == asked(None, concurrency=concurrency)


def test_the_answers_are_the_ranking_and_messages_of_distinct_ranking() -> None:
    for (ranking, error, returned), answer in zip(asked(None), ANSWERS, strict=True):
        if isinstance(answer, BaseException):
            assert ranking == () and returned == 0 and error is not None
            assert error.startswith(type(answer).__name__)
            assert "second" not in error
            continue
        try:
            expected = distinct_ranking(answer, LIMIT, DEPTH)
        except ValueError as failure:
            assert (ranking, error, returned) == ((), f"ValueError: {failure}", 0)
        else:
            # The protocol's definition: every id collapsed to its first occurrence.
            assert expected == tuple(dict.fromkeys(answer))[:DEPTH]
            assert (ranking, error, returned) == (expected, None, len(answer))
            assert all(isinstance(doc, str) for doc in ranking)
    # Collapsing keeps first occurrences and runs past the first ``depth`` ids.
    assert asked(None)[4][0] == ("a", "b", "c", "d")
    assert asked(None)[3][0] == ("a", "b", "c", "d")
    assert asked(None)[16][1] == "ValueError: returned a int (7) at rank 8; ids are strings"


def test_the_batches_of_the_short_road_are_columns_in_the_sets_order() -> None:
    count = len(ANSWERS) * 3
    answers = Replaying(ANSWERS * 3)
    batches = list(
        ask_in_batches(answers, questions(count), depth=DEPTH, overfetch=OVERFETCH, batch=10)
    )
    assert all(isinstance(batch, Retrievals) for batch in batches)
    assert [len(batch) for batch in batches] == [10] * (count // 10) + [count % 10]
    flat = [(r.ranking, r.error, r.returned) for batch in batches for r in batch]
    assert flat == asked(None) * 3


def retrievals() -> list[Retrieval]:
    return [
        Retrieval(("a", "b"), 1.23456, returned=3),
        Retrieval((), 0.5, "RuntimeError: down"),
        Retrieval(("c",), 2.0005, returned=1),
        Retrieval((), 0.25, returned=0),
        Retrieval((), 7.0, ""),
    ]


def test_retrievals_read_as_the_sequence_they_hold() -> None:
    plain = retrievals()
    columns = Retrievals.of(plain)
    assert Retrievals.of(columns) is columns
    assert len(columns) == len(plain)
    assert list(columns) == plain and columns == plain
    assert [columns[index] for index in range(-len(plain), len(plain))] == plain + plain
    assert columns.errors == {1: "RuntimeError: down", 4: ""}
    for part in (slice(1, 4), slice(None, None, 2), slice(-2, None), slice(3, 1)):
        assert list(columns[part]) == plain[part]
        assert columns[part] == Retrievals.of(plain[part])
    with pytest.raises(IndexError):
        columns[len(plain)]
    with pytest.raises(ValueError, match="one entry a question"):
        Retrievals([()], [], [], {})


def columns_of(scorer: RunScorer) -> list[Any]:
    outcomes = scorer.outcomes()
    return [
        [o.ranking for o in outcomes],
        [dict(o.judgments) for o in outcomes],
        [o.error for o in outcomes],
        scorer.latency.tolist(),
        scorer.returned.tolist(),
        tuple(scorer.documents),
        *(outcomes.values(name).tobytes() for name in outcomes.metric_names),
    ]


def test_the_scorer_scores_columns_as_the_retrievals_they_hold() -> None:
    plain = retrievals() * 3
    asked = questions(len(plain))
    options = ScoringOptions(ks=(1, 3))
    by_object, by_column = RunScorer(asked, options), RunScorer(asked, options)
    for low in range(0, len(plain), 4):
        by_object.add(plain[low : low + 4])
        by_column.add(Retrievals.of(plain)[low : low + 4])
    assert columns_of(by_object) == columns_of(by_column)
    outcomes = by_column.outcomes()
    assert [o.ranking for o in outcomes] == [r.ranking for r in plain]
    assert [dict(o.judgments) for o in outcomes] == [q.judgments() for q in asked]
    assert dict(outcomes.errors) == {i: r.error for i, r in enumerate(plain) if r.error is not None}
    # Latency is rounded by Python's round, as each outcome's always was.
    assert by_column.latency.tolist() == [round(r.latency_ms, 3) for r in plain]
    # Each document has one code, the documents in the order they were first met.
    labels_first = [doc for q in asked[:4] for doc in q.judgments()]
    assert tuple(by_column.documents)[:2] == tuple(dict.fromkeys(labels_first))[:2]
    assert len(set(by_column.documents)) == len(by_column.documents)
    assert sorted(by_column.documents.values()) == list(range(len(by_column.documents)))


class ReplayingMany(Replaying):
    """`Replaying` through ``retrieve_many`` only, an exception standing for its answer."""

    def retrieve(self, text: str, limit: int) -> Any:
        raise AssertionError("retrieve must not be called when retrieve_many exists")

    def retrieve_many(self, texts: Sequence[str], limit: int) -> list[Any]:
        return [self.answers[int(text.rsplit(" ", 1)[1])] for text in texts]


@pytest.mark.parametrize("concurrency", [1, 3])
def test_batched_answers_are_taken_as_answers_one_by_one(concurrency: int) -> None:
    # Several groups of retrieve_many, so that errors land in every group but the first.
    count = len(ANSWERS) * 7
    many = evaluate_questions(
        ReplayingMany(ANSWERS * 7),
        questions(count),
        depth=DEPTH,
        overfetch=OVERFETCH,
        concurrency=concurrency,
        secrets=("second",),
    )
    assert [(r.ranking, r.error, r.returned) for r in many] == asked(None) * 7


class Hanging:
    """Question 1 hangs until question 2 is asked, then answers late; the others answer at
    once. Records the thread each question was asked from."""

    identifier = "hanging"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.late = threading.Event()
        self.threads: list[threading.Thread] = []

    def retrieve(self, text: str, limit: int) -> list[str]:
        number = int(text.rsplit(" ", 1)[1])
        self.threads.append(threading.current_thread())
        if number == 1:
            self.release.wait(BOUND)
            self.late.set()
            return ["stale"]
        if number == 2:
            self.release.set()
            self.late.wait(BOUND)
        return [f"fresh-{number}"]


#: Only a guard against a hang if the waits were (wrongly) never released.
BOUND = 30.0


def test_with_a_timeout_questions_share_a_thread_and_a_late_answer_is_dropped() -> None:
    retriever = Hanging()
    answers = evaluate_questions(retriever, questions(6), depth=DEPTH, timeout=0.2)
    assert [(r.ranking, r.error) for r in answers] == [
        (("fresh-0",), None),
        ((), "TimeoutError: no answer within 0.2 s (--timeout)"),
        *((((f"fresh-{number}",), None)) for number in range(2, 6)),
    ]
    first, hung, *rest = retriever.threads
    # One thread until a question hangs; the hung one is left, the rest share a new one.
    assert first is hung and len(set(rest)) == 1 and rest[0] is not hung
    assert threading.current_thread() not in retriever.threads
    # Once the run is over, no thread of it is left waiting for more questions.
    for thread in (hung, rest[0]):
        thread.join(BOUND)
        assert not thread.is_alive()


class HangingOnce:
    """Question 1 hangs until released; the others answer at once, from any thread."""

    identifier = "hanging-once"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.threads: set[threading.Thread] = set()

    def retrieve(self, text: str, limit: int) -> list[str]:
        number = int(text.rsplit(" ", 1)[1])
        with self.lock:
            self.threads.add(threading.current_thread())
        if number == 1:
            self.release.wait(BOUND)
            return ["stale"]
        return [f"fresh-{number}"]


def test_concurrent_questions_with_a_timeout_wait_on_a_thread_each_asker() -> None:
    retriever = HangingOnce()
    count = 40
    try:
        answers = evaluate_questions(
            retriever, questions(count), depth=DEPTH, timeout=0.2, concurrency=3
        )
    finally:
        retriever.release.set()
    assert [(r.ranking, r.error) for r in answers] == [
        ((f"fresh-{number}",), None)
        if number != 1
        else ((), "TimeoutError: no answer within 0.2 s (--timeout)")
        for number in range(count)
    ]
    # Three askers' waiting threads, and one more for the asker whose question hung.
    assert len(retriever.threads) <= 4
    for thread in retriever.threads:
        thread.join(BOUND)
        assert not thread.is_alive()
