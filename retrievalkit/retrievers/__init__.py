"""The retriever contract and the built-in retrievers."""

from retrievalkit.retrievers.contract import (
    BatchRetriever,
    EvaluatableRetriever,
    ScoredRetriever,
    document_id_of,
)

__all__ = ["BatchRetriever", "EvaluatableRetriever", "ScoredRetriever", "document_id_of"]
