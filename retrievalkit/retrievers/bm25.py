"""The embedded BM25 retriever (bm25s with Snowball stemming) over a BEIR-style corpus."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from retrievalkit.errors import InputError
from retrievalkit.formats.corpus import read_corpus
from retrievalkit.retrievers.contract import document_id_of


class BM25Retriever:
    """Okapi BM25 (Lucene's idf) over title and text joined, built in memory at start.

    Ties are broken by corpus order, so rankings are deterministic. Documents that
    share no term with the question are never returned.
    """

    def __init__(
        self,
        corpus: str | Path,
        *,
        k1: float = 0.9,
        b: float = 0.4,
        stemmer: str | None = "english",
        stopwords: str | None = "en",
        doc_id_separator: str | None = None,
        max_doc_words: int | None = None,
        identifier: str = "bm25",
    ) -> None:
        import bm25s

        for name, value in (("k1", k1), ("b", b)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise InputError(f"must be a number >= 0, got {value!r}", field=name)
        self.identifier = identifier
        self._separator = doc_id_separator
        documents = list(read_corpus(Path(corpus)))
        if not documents:
            raise InputError("the corpus holds no documents", source=str(corpus))
        self._ids = [document_id_of(doc.id, doc_id_separator) for doc in documents]
        self._stemmer = _stemmer(stemmer)
        self._stopwords: str | list[str] = stopwords or []
        texts = [f"{doc.title}\n{doc.text}" if doc.title else doc.text for doc in documents]
        if max_doc_words is not None:
            # A deliberately degraded index (e.g. to show what `retrievalkit fidelity` finds).
            texts = [" ".join(text.split()[:max_doc_words]) for text in texts]
        tokens = bm25s.tokenize(
            texts, stopwords=self._stopwords, stemmer=self._stemmer, show_progress=False
        )
        self._index = bm25s.BM25(k1=k1, b=b, method="lucene")
        self._index.index(tokens, show_progress=False)

    def retrieve(self, question: str, limit: int) -> list[str]:
        return [doc_id for doc_id, _ in self.retrieve_scored(question, limit)]

    def retrieve_scored(self, question: str, limit: int) -> list[tuple[str, float]]:
        """(document id, BM25 score) pairs, best first."""
        import bm25s
        import numpy as np

        tokens = bm25s.tokenize(
            [question],
            stopwords=self._stopwords,
            stemmer=self._stemmer,
            show_progress=False,
            return_ids=False,
        )[0]
        if not tokens or limit <= 0:
            return []
        scores = self._index.get_scores(tokens)
        candidates = np.flatnonzero(scores > 0)
        # Highest score first; equal scores in corpus order.
        order = candidates[np.lexsort((candidates, -scores[candidates]))][:limit]
        return [(self._ids[index], float(scores[index])) for index in order]


def _stemmer(language: str | None) -> Any:
    if not language:
        return None
    import Stemmer

    try:
        return Stemmer.Stemmer(language).stemWords
    except KeyError:
        raise InputError(
            f"unknown stemmer language {language!r}",
            field="stemmer",
            hint="use a Snowball language such as 'english', or none",
        ) from None


def create_bm25(
    corpus: str | None = None,
    *,
    k1: float = 0.9,
    b: float = 0.4,
    stemmer: str | None = "english",
    stopwords: str | None = "en",
    doc_id_separator: str | None = None,
    max_doc_words: int | None = None,
) -> BM25Retriever:
    """Factory of the ``bm25`` plugin: BM25 over the ``corpus`` (a BEIR corpus.jsonl).

    Options: ``k1`` (0.9) and ``b`` (0.4); ``stemmer`` (a Snowball language, or "" for
    none); ``stopwords`` ("en", or "" for none); ``doc_id_separator`` to collapse chunk
    ids such as ``doc-7#3``; ``max_doc_words`` to index only each document's first words.
    """
    if corpus is None:
        raise InputError(
            "the bm25 retriever needs the option 'corpus'",
            field="corpus",
            hint='set corpus = "path/to/corpus.jsonl" in a [retrievers.NAME] block with '
            'plugin = "bm25"',
        )
    return BM25Retriever(
        corpus,
        k1=k1,
        b=b,
        stemmer=stemmer,
        stopwords=stopwords,
        doc_id_separator=doc_id_separator,
        max_doc_words=max_doc_words,
    )


def create_bm25_demo() -> BM25Retriever:
    """Factory of the ``bm25-demo`` plugin: BM25 over the bundled demo corpus (chunks by '#')."""
    from retrievalkit.demo import DEMO_CORPUS

    return BM25Retriever(DEMO_CORPUS, doc_id_separator="#", identifier="bm25-demo")
