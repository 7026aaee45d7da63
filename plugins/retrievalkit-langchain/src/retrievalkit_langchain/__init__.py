"""retrievalkit-langchain: measure a LangChain retriever with retrievalkit.

``plugin = "langchain"`` with ``factory = "my_rag.retrievers:build"`` evaluates whatever
``BaseRetriever`` the team's own function builds (a vector-store retriever, BM25, an
ensemble...), its inner retrievers reported as stages. `RetrievalkitEmbeddings` puts any
retrievalkit embedder behind LangChain's ``Embeddings`` interface.
"""

from retrievalkit_langchain.embeddings import RetrievalkitEmbeddings
from retrievalkit_langchain.retriever import (
    LangChainRetriever,
    StagedLangChainRetriever,
    create_langchain,
    wrap,
)

__all__ = [
    "LangChainRetriever",
    "RetrievalkitEmbeddings",
    "StagedLangChainRetriever",
    "create_langchain",
    "wrap",
]
