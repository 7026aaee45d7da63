"""retrievalkit-example: a complete third-party retrievalkit plugin, written as a template.

It plugs into all four entry-point groups: a question set read from a CSV file
(``retrievalkit.question_sets``), a TF-IDF retriever on scipy.sparse
(``retrievalkit.retrievers``), a one-file-per-run store (``retrievalkit.stores``) and a
``tfidf-explain`` command (``retrievalkit.commands``).
"""

from pathlib import Path

__version__ = "0.1.0"

#: The bicycle maintenance guide this package ships: a corpus and a golden set over it.
DATA = Path(__file__).parent / "data"
CORPUS = DATA / "corpus.jsonl"

__all__ = ["CORPUS", "DATA", "__version__"]
