"""Any retrievalkit embedder plugin as a LlamaIndex ``BaseEmbedding``.

`RetrievalkitEmbedding` embeds nodes with ``embed`` and questions with ``embed_queries``
(a query prefix or another tower where the model has one), ``embed_batch_size`` texts per
call. A LlamaIndex ``VectorStoreIndex`` built with it ranks as retrievalkit's own ``dense``
retriever does with the same embedder, so a difference in the numbers is a difference in
the retriever. Pass it as ``embed_model`` (or set ``Settings.embed_model``): LlamaIndex's
default would be OpenAI's, over the network.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr
from retrievalkit.plugin_api import Embedder, create_embedder, embed_queries


class RetrievalkitEmbedding(BaseEmbedding):
    """LlamaIndex's embedding interface over a retrievalkit embedder (a name or an object)."""

    _embedder: Any = PrivateAttr()

    def __init__(
        self,
        embedder: str | Embedder = "wordllama",
        embedder_options: Mapping[str, Any] | None = None,
        embed_batch_size: int = 256,
        **kwargs: Any,
    ) -> None:
        resolved = (
            create_embedder(embedder, embedder_options) if isinstance(embedder, str) else embedder
        )
        super().__init__(
            model_name=str(resolved.model_id), embed_batch_size=embed_batch_size, **kwargs
        )
        self._embedder = resolved

    @classmethod
    def class_name(cls) -> str:
        return "RetrievalkitEmbedding"

    @property
    def embedder(self) -> Embedder:
        """The retrievalkit embedder behind it."""
        found: Embedder = self._embedder
        return found

    def _get_query_embedding(self, query: str) -> list[float]:
        return [float(x) for x in embed_queries(self._embedder, [query])[0]]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embedding(text)

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = self._embedder.embed(list(texts)).tolist()
        return vectors
