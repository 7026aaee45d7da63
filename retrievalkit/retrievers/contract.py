"""What a retriever must offer retrievalkit, and the chunk-id helper adapters share.

The contract is deliberately minimal: a question and a limit in, ranked document ids
out. Anything that can do that (an Elasticsearch query, a vector store, a reranking
pipeline) can be evaluated.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class EvaluatableRetriever(Protocol):
    """Ranked document ids, best first, for one question."""

    identifier: str

    def retrieve(self, question: str, limit: int) -> Sequence[str]:
        """At most ``limit`` document ids, best first. Duplicates are allowed (chunks)."""
        ...


@runtime_checkable
class BatchRetriever(EvaluatableRetriever, Protocol):
    """A retriever that can also answer many questions in one call (e.g. ``_msearch``)."""

    def retrieve_many(
        self, questions: Sequence[str], limit: int
    ) -> Sequence[Sequence[str] | BaseException]:
        """One ranking per question, in order; an exception in place of a failed one."""
        ...


@runtime_checkable
class ScoredRetriever(EvaluatableRetriever, Protocol):
    """A retriever that can also say how strongly it matched: needed by score fusion."""

    def retrieve_scored(self, question: str, limit: int) -> Sequence[tuple[str, float]]:
        """(document id, score) pairs, best first; higher scores are better."""
        ...


def document_id_of(chunk_id: str, separator: str | None = "#") -> str:
    """The document a chunk belongs to: ``doc-7#chunk-3`` -> ``doc-7``.

    With ``separator`` None (or absent from the id) the id is returned unchanged. Only
    the first separator splits, so document ids may not contain it themselves.
    """
    if not separator:
        return chunk_id
    head, found, _ = chunk_id.partition(separator)
    return head if found else chunk_id
