"""Rerankers: plugins that rescore a first stage's candidates (the ``rerank`` retriever's parts)."""
