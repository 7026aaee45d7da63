"""Warming a retriever up before a timed run, staged or not: one call for every run path."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from retrievalkit.model.values import GoldenQuestion
from retrievalkit.pipeline.engine.evaluator import warm_up, warmup_questions
from retrievalkit.pipeline.engine.stages import ask_stages, has_stages


def warm_up_retriever(
    retriever: Any,
    questions: Sequence[GoldenQuestion],
    count: int,
    *,
    depth: int,
    overfetch: int,
    concurrency: int = 1,
    timeout: float | None = None,
) -> None:
    """Ask ``count`` questions (`warmup_questions`) as the run will ask them, stage by stage
    for a staged retriever, and discard every answer."""
    if not has_stages(retriever):
        warm_up(
            retriever,
            questions,
            count,
            depth=depth,
            overfetch=overfetch,
            concurrency=concurrency,
            timeout=timeout,
        )
        return
    ask_stages(
        retriever,
        warmup_questions(questions, count),
        depth=depth,
        overfetch=overfetch,
        timeout=timeout,
        concurrency=concurrency,
    )
