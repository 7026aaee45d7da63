"""Haystack components that embed with any retrievalkit embedder plugin.

`RetrievalkitTextEmbedder` embeds a question (``text`` -> ``embedding``), as the model
wants questions embedded; `RetrievalkitDocumentEmbedder` embeds documents' ``content``
(``documents`` -> ``documents`` with ``embedding`` set). A pipeline built with them and a
Haystack in-memory store ranks as retrievalkit's own ``dense`` retriever does with the
same embedder, so a difference in the numbers is a difference in the pipeline.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from haystack import Document, component
from retrievalkit.plugin_api import Embedder, create_embedder, embed_queries


def _embedder(embedder: str | Embedder, options: Mapping[str, Any] | None) -> Embedder:
    if isinstance(embedder, str):
        return create_embedder(embedder, options)
    return embedder


@component
class RetrievalkitTextEmbedder:
    """A question to its vector (``embed_queries``), for an embedding retriever."""

    def __init__(
        self,
        embedder: str | Embedder = "wordllama",
        embedder_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.embedder = _embedder(embedder, embedder_options)

    @component.output_types(embedding=list[float])
    def run(self, text: str) -> dict[str, list[float]]:
        return {"embedding": embed_queries(self.embedder, [text])[0].tolist()}


@component
class RetrievalkitDocumentEmbedder:
    """Documents with ``embedding`` set from their ``content``, ``batch_size`` at a time."""

    def __init__(
        self,
        embedder: str | Embedder = "wordllama",
        embedder_options: Mapping[str, Any] | None = None,
        batch_size: int = 256,
    ) -> None:
        self.embedder = _embedder(embedder, embedder_options)
        self.batch_size = batch_size

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        out: list[Document] = []
        for start in range(0, len(documents), self.batch_size):
            batch = documents[start : start + self.batch_size]
            vectors = self.embedder.embed([doc.content or "" for doc in batch])
            # New documents, not mutated ones: other components may hold the originals.
            out.extend(
                dataclasses.replace(doc, embedding=vector.tolist())
                for doc, vector in zip(batch, vectors, strict=True)
            )
        return {"documents": out}
