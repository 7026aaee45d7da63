"""What a Ray worker runs: it builds a retriever from its configuration once and asks it batches.

Nothing here imports Ray: `ray_cluster` wraps `Worker` in a Ray actor.
A worker builds each retriever in its own process from what the run names it by (the
configured retriever's name and the configuration's tables, or a pickled object), so
the secrets its plugins read from ``*_env`` options come from the worker's environment
and never travel with a task. It asks a batch exactly as a local run asks it
(`pipeline.engine.evaluator.ask_in_batches`, `pipeline.engine.stages.ask_stages`),
so the rankings, errors and their messages are those of the local run.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import attrs

from retrievalkit.formats.config import Config
from retrievalkit.formats.ids import ReturnedIds
from retrievalkit.model.values import GoldenQuestion
from retrievalkit.pipeline.engine.evaluator import Retrievals

#: How a batch is asked: the answer only, the answer and its raw chunk ranking, or stages.
PLAIN, CHUNKS, STAGES = "plain", "chunks", "stages"


@attrs.frozen
class Build:
    """What a worker builds a retriever from: a name in ``config``, or an object."""

    name: str
    config: Config
    options: dict[str, Any] | None = None
    instance: Any = None


@attrs.frozen
class Profile:
    """What the run's record needs to know of a retriever built on a worker."""

    identifier: str | None
    description: dict[str, str]
    embedding_backend: str | None
    embedding_model_id: str | None
    staged: bool

    def describe(self) -> dict[str, str]:
        return dict(self.description)


@attrs.frozen
class Failure:
    """An error a worker met building a retriever, handed back to be raised as it was."""

    kind: str
    message: str


@attrs.frozen
class Answers:
    """One batch's answers: the retrievals, the raw chunk rankings (CHUNKS), the stages
    (STAGES), how many returned ids the identity policy changed, and how many answers a
    shared stage gave from memory (a sweep's)."""

    retrievals: Retrievals
    chunks: list[tuple[str, ...]] | None = None
    stages: list[dict[str, tuple[str, ...]] | None] | None = None
    changed: int = 0
    example: tuple[str, str] | None = None
    reused: int = 0
    question: str | None = None
    """The text of the question whose answer held ``example``."""

    def notes(self) -> ReturnedIds:
        """The identity policy's changes as a `ReturnedIds`, to merge into the run's."""
        notes = ReturnedIds()
        if self.changed and self.example is not None:
            notes.note(*self.example, self.question)
            notes.changed = self.changed  # the worker noted them all; one example came
        return notes


class Worker:
    """Holds the retrievers it built, by key, for as long as the run (or the sweep) lasts."""

    def __init__(self, directory: str | None = None) -> None:
        if directory is not None and os.path.isdir(directory):
            # Relative paths of the configuration mean what they meant to the caller.
            os.chdir(directory)
        self._built: dict[str, Any] = {}
        self._shared: Any = None

    def prepare(self, key: str, build: Build, share: bool = False) -> Profile | Failure:
        """Build the retriever of ``key`` (once) and describe it."""
        from retrievalkit.embedders import embedding_of
        from retrievalkit.errors import RetrievalkitError
        from retrievalkit.pipeline.engine.run import resolve_retriever
        from retrievalkit.pipeline.engine.stages import has_stages
        from retrievalkit.redaction import scrub

        if key not in self._built:
            if share and self._shared is None:
                from retrievalkit.pipeline.engine.shared_answers import SharedRetrievers

                self._shared = SharedRetrievers()
            try:
                self._built[key] = resolve_retriever(
                    build.instance if build.instance is not None else build.name,
                    build.options if build.instance is not None else None,
                    build.name,
                    build.config,
                    share=self._shared if share else None,
                )
            except RetrievalkitError as error:
                return Failure(type(error).__name__, str(error))
            except Exception as error:
                from retrievalkit.pipeline.engine.evaluator import describe_retriever_error

                secrets = _secrets_of(build.config)
                return Failure("EvaluationError", scrub(describe_retriever_error(error), secrets))
        resolved = self._built[key]
        retriever = resolved.retriever
        describe = getattr(retriever, "describe", None)
        description = (
            {str(k): scrub(str(v), resolved.secrets) for k, v in describe().items()}
            if callable(describe)
            else {}
        )
        identifier = getattr(retriever, "identifier", None)
        backend, model_id = embedding_of(retriever)
        return Profile(
            identifier if isinstance(identifier, str) and identifier else None,
            description,
            backend,
            model_id,
            has_stages(retriever),
        )

    def ask(
        self,
        key: str,
        questions: Sequence[GoldenQuestion],
        mode: str,
        depth: int,
        overfetch: int,
        timeout: float | None,
        concurrency: int,
        chunk_separator: str | None = None,
    ) -> Answers:
        """Ask the retriever of ``key`` (built by `prepare`) ``questions`` as a local run would."""
        from retrievalkit.pipeline.engine.evaluator import ask_in_batches

        resolved = self._built[key]
        notes = ReturnedIds()
        reused = 0
        if self._shared is not None:
            self._shared.charges(())
            reused = self._shared.reused
        if mode == STAGES:
            from retrievalkit.pipeline.engine.stages import ask_stages

            answers, stages = ask_stages(
                resolved.retriever,
                questions,
                depth=depth,
                overfetch=overfetch,
                timeout=timeout,
                secrets=resolved.secrets,
                concurrency=concurrency,
                notes=notes,
            )
            return Answers(
                answers,
                stages=stages,
                changed=notes.changed,
                example=notes.example,
                reused=self._reused_since(reused),
                question=notes.question,
            )
        asked = resolved.retriever
        keeper = None
        if mode == CHUNKS:
            from retrievalkit.pipeline.engine.chunks import ChunkKeeper

            asked = keeper = ChunkKeeper(resolved.retriever, chunk_separator, notes)
        parts = list(
            ask_in_batches(
                asked,
                questions,
                depth=depth,
                overfetch=overfetch,
                concurrency=concurrency,
                timeout=timeout,
                secrets=resolved.secrets,
                batch=max(1, len(questions)),
                notes=notes,
            )
        )
        retrievals = Retrievals.joined(parts) if parts else Retrievals([], [], [], {})
        chunks = None
        if keeper is not None:
            texts = [question.question for question in questions]
            chunks = [ranking[:depth] for ranking in keeper.chunks_of(texts)]
        return Answers(
            retrievals,
            chunks,
            None,
            notes.changed,
            notes.example,
            self._reused_since(reused),
            notes.question,
        )

    def _reused_since(self, before: int) -> int:
        return 0 if self._shared is None else self._shared.reused - before


def _secrets_of(config: Config) -> list[str]:
    from retrievalkit.redaction import secret_values

    return [value for entry in config.retrievers.values() for value in secret_values(entry.options)]
