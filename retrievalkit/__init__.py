"""retrievalkit: measure the retrieval step of search and RAG systems."""

__version__ = "0.1.0"

__all__ = ["__version__"]
