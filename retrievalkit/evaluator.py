"""Ask a retriever every question of a set and keep what came back, question by question.

This is the only place that calls retrievers. It applies the scoring protocol's
fetching rules (ask for ``max(k) * overfetch`` ids, collapse duplicates to their first
occurrence, keep the best ``max(k)`` distinct documents) and turns every failure of a
retriever into an explicit error outcome instead of losing the question.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import attrs

from retrievalkit.model import GoldenQuestion

DEFAULT_OVERFETCH = 3
_BATCH = 64


@attrs.frozen
class Retrieval:
    """What one question got: distinct ranked documents, or the error that replaced them."""

    ranking: tuple[str, ...]
    latency_ms: float
    error: str | None = None


ProgressCallback = Callable[[int], None]


def distinct_ranking(ids: Any, limit: int, depth: int) -> tuple[str, ...]:
    """Validate what a retriever returned and keep the best ``depth`` distinct ids.

    Raises ``ValueError`` with a message for the report when the result breaks the
    contract: not a sequence, a non-string id, or more ids than asked for.
    """
    if isinstance(ids, (str, bytes)) or not hasattr(ids, "__len__"):
        raise ValueError(f"returned {type(ids).__name__} instead of a sequence of ids")
    if len(ids) > limit:
        raise ValueError(f"returned {len(ids)} ids for a limit of {limit}")
    for rank, doc_id in enumerate(ids, start=1):
        if not isinstance(doc_id, str):
            raise ValueError(
                f"returned a {type(doc_id).__name__} ({doc_id!r}) at rank {rank}; ids are strings"
            )
    return tuple(dict.fromkeys(ids))[:depth]


def _describe(error: BaseException) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def evaluate_questions(
    retriever: Any,
    questions: Sequence[GoldenQuestion],
    *,
    depth: int,
    overfetch: int = DEFAULT_OVERFETCH,
    concurrency: int = 1,
    progress: ProgressCallback | None = None,
) -> list[Retrieval]:
    """One :class:`Retrieval` per question, in the set's order."""
    limit = depth * overfetch
    texts = [question.question for question in questions]
    advance = progress or (lambda _: None)
    if callable(getattr(retriever, "retrieve_many", None)):
        return _evaluate_batched(retriever, texts, limit, depth, advance)

    def ask(text: str) -> Retrieval:
        start = time.perf_counter()
        try:
            ids = retriever.retrieve(text, limit)
            ranking = distinct_ranking(ids, limit, depth)
        except Exception as error:
            elapsed = (time.perf_counter() - start) * 1000.0
            return Retrieval((), elapsed, _describe(error))
        return Retrieval(ranking, (time.perf_counter() - start) * 1000.0)

    if concurrency <= 1:
        results = []
        for text in texts:
            results.append(ask(text))
            advance(1)
        return results
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        results = []
        for result in pool.map(ask, texts):
            results.append(result)
            advance(1)
        return results


def _evaluate_batched(
    retriever: Any, texts: list[str], limit: int, depth: int, advance: ProgressCallback
) -> list[Retrieval]:
    results: list[Retrieval] = []
    for start in range(0, len(texts), _BATCH):
        batch = texts[start : start + _BATCH]
        began = time.perf_counter()
        try:
            answers = list(retriever.retrieve_many(batch, limit))
            if len(answers) != len(batch):
                raise ValueError(
                    f"retrieve_many returned {len(answers)} rankings for {len(batch)} questions"
                )
        except Exception as error:
            answers = [error] * len(batch)
        each = (time.perf_counter() - began) * 1000.0 / len(batch)
        for answer in answers:
            if isinstance(answer, BaseException):
                results.append(Retrieval((), each, _describe(answer)))
                continue
            try:
                results.append(Retrieval(distinct_ranking(answer, limit, depth), each))
            except ValueError as error:
                results.append(Retrieval((), each, _describe(error)))
        advance(len(batch))
    return results
