"""The retriever contract and the built-in retrievers."""

from retrievalkit.retrievers.contract import (
    BatchRetriever,
    EvaluatableRetriever,
    document_id_of,
)

__all__ = ["BatchRetriever", "EvaluatableRetriever", "document_id_of"]
