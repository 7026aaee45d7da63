"""retrievalkit-haystack: measure a Haystack pipeline or retriever component with retrievalkit.

``plugin = "haystack"`` with ``factory = "my_rag.pipelines:build"`` evaluates whatever the
team's own function builds: a ``haystack.Pipeline`` (the documents of ``output``, e.g.
``joiner.documents``, are its answer, and every component's documents are its stages) or
a single retriever component (its ``run(query=...)``). Components in
`retrievalkit_haystack.embedders` put any retrievalkit embedder inside a pipeline.
"""

from retrievalkit_haystack.retriever import HaystackRetriever, create_haystack

__all__ = ["HaystackRetriever", "create_haystack"]
