"""The ``tfidf-cosine`` reranker: cosine similarity of TF-IDF vectors, an example of the contract.

Teams plug in their cross-encoder the same way; this one needs nothing but scipy.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from retrievalkit.formats.corpus import read_corpus
from retrievalkit.formats.ids import returned_id
from retrievalkit.retrievers.contract import document_id_of

_TOKEN = re.compile(r"\w\w+")


class TfidfCosineReranker:
    def __init__(
        self, corpus: str | Path, *, doc_id_separator: str | None = None, stemmer: str = "english"
    ) -> None:
        import Stemmer

        self._stem = Stemmer.Stemmer(stemmer).stemWords if stemmer else (lambda words: words)
        texts: dict[str, list[str]] = {}
        for document in read_corpus(Path(corpus)):
            doc_id = document_id_of(document.id, doc_id_separator)
            texts.setdefault(doc_id, []).append(f"{document.title} {document.text}")
        counts = {doc: Counter(self._tokens(" ".join(parts))) for doc, parts in texts.items()}
        frequency: Counter[str] = Counter()
        for terms in counts.values():
            frequency.update(terms.keys())
        total = len(counts)
        self._idf = {term: math.log((1 + total) / (1 + df)) + 1.0 for term, df in frequency.items()}
        self._vectors = {doc: self._weigh(terms) for doc, terms in counts.items()}

    def _tokens(self, text: str) -> list[str]:
        return list(self._stem(_TOKEN.findall(text.lower())))

    def _weigh(self, terms: Counter[str]) -> dict[str, float]:
        vector = {term: count * self._idf.get(term, 0.0) for term, count in terms.items()}
        norm = math.sqrt(sum(value * value for value in vector.values())) or 1.0
        return {term: value / norm for term, value in vector.items()}

    def rerank(self, question: str, candidates: Sequence[str]) -> list[tuple[str, float]]:
        query = self._weigh(Counter(self._tokens(question)))
        scored = []
        for doc in candidates:
            vector = self._vectors.get(doc)
            if vector is None:
                # "doc-7 " is doc-7, as the evaluator compares ids (formats/ids.py); it is
                # kept as returned, for the evaluator to count.
                vector = self._vectors.get(returned_id(doc))
            if vector is None:
                continue
            scored.append(
                (doc, sum(weight * vector.get(term, 0.0) for term, weight in query.items()))
            )
        return scored


def create_tfidf_reranker(
    corpus: str | None = None, *, doc_id_separator: str | None = None, stemmer: str = "english"
) -> TfidfCosineReranker:
    """Factory of the ``tfidf-cosine`` reranker: ``corpus`` is a BEIR corpus.jsonl."""
    from retrievalkit.errors import InputError

    if corpus is None:
        raise InputError("the tfidf-cosine reranker needs the option 'corpus'", field="corpus")
    return TfidfCosineReranker(corpus, doc_id_separator=doc_id_separator, stemmer=stemmer)
