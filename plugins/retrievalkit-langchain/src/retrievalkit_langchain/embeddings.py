"""Any retrievalkit embedder plugin as a LangChain ``Embeddings``.

`RetrievalkitEmbeddings` embeds documents with ``embed`` and questions with
``embed_queries`` (a query prefix or another tower where the model has one), ``batch_size``
texts per call. A LangChain ``InMemoryVectorStore`` built with it ranks as retrievalkit's
own ``dense`` retriever does with the same embedder, so a difference in the numbers is a
difference in the retriever.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.embeddings import Embeddings
from retrievalkit.plugin_api import Embedder, InputError, create_embedder, embed_queries


class RetrievalkitEmbeddings(Embeddings):
    """LangChain's embedding interface over a retrievalkit embedder (a name or an object)."""

    def __init__(
        self,
        embedder: str | Embedder = "wordllama",
        embedder_options: Mapping[str, Any] | None = None,
        batch_size: int = 256,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InputError(f"must be a whole number >= 1, got {batch_size!r}", field="batch_size")
        self.embedder = (
            create_embedder(embedder, embedder_options) if isinstance(embedder, str) else embedder
        )
        self.batch_size = batch_size

    @property
    def model_id(self) -> str:
        """The embedder's ``model_id``: what made the vectors."""
        return str(self.embedder.model_id)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            vectors.extend(self.embedder.embed(texts[start : start + self.batch_size]).tolist())
        return vectors

    def embed_query(self, text: str) -> list[float]:
        return [float(x) for x in embed_queries(self.embedder, [text])[0]]
