"""retrievalkit-llamaindex: measure a LlamaIndex retriever with retrievalkit.

``plugin = "llamaindex"`` with ``factory = "my_rag.retrievers:build"`` evaluates whatever
``BaseRetriever`` the team's own function builds (an index's ``as_retriever()``, BM25, a
``QueryFusionRetriever``...), a fusion's parts reported as stages.
`RetrievalkitEmbedding` puts any retrievalkit embedder behind LlamaIndex's
``BaseEmbedding`` interface.
"""

from retrievalkit_llamaindex.embeddings import RetrievalkitEmbedding
from retrievalkit_llamaindex.retriever import (
    LlamaIndexRetriever,
    StagedLlamaIndexRetriever,
    create_llamaindex,
    wrap,
)

__all__ = [
    "LlamaIndexRetriever",
    "RetrievalkitEmbedding",
    "StagedLlamaIndexRetriever",
    "create_llamaindex",
    "wrap",
]
