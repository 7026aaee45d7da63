"""A TF-IDF retriever on scipy.sparse: cosine similarity of tf-idf vectors, best first.

Weights follow the common smoothed form: ``idf(t) = ln((1 + N) / (1 + df(t))) + 1`` and,
with ``sublinear_tf``, ``tf = 1 + ln(count)``; document vectors are L2-normalised, so a
document's score is its cosine with the question (the question's own norm does not
change the order). Ties keep corpus order, so rankings are deterministic.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
from retrievalkit.errors import InputError
from retrievalkit.formats.corpus import CorpusDocument, read_corpus
from retrievalkit.retrievers import document_id_of
from scipy import sparse

from retrievalkit_example import CORPUS

STOPWORDS = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "my",
        "of",
        "on",
        "or",
        "should",
        "so",
        "that",
        "the",
        "their",
        "there",
        "this",
        "to",
        "up",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
    }
)
_WORD = re.compile(r"\w+")


def tokenize(text: str, *, stopwords: bool = True) -> list[str]:
    """Lower-cased word tokens, without the stopwords when asked."""
    words = _WORD.findall(text.lower())
    return [word for word in words if word not in STOPWORDS] if stopwords else words


class TfidfRetriever:
    """Ranks the documents of a corpus by tf-idf cosine similarity with the question."""

    def __init__(
        self,
        documents: Sequence[CorpusDocument],
        *,
        sublinear_tf: bool = True,
        stopwords: bool = True,
        doc_id_separator: str | None = None,
        identifier: str = "tfidf",
    ) -> None:
        if not documents:
            raise InputError("the corpus holds no documents", field="corpus")
        self.identifier = identifier
        self._stopwords = stopwords
        self._sublinear = sublinear_tf
        self._ids = [document_id_of(doc.id, doc_id_separator) for doc in documents]
        self._vocabulary: dict[str, int] = {}
        rows: list[int] = []
        columns: list[int] = []
        counts: list[float] = []
        for row, doc in enumerate(documents):
            text = f"{doc.title}\n{doc.text}" if doc.title else doc.text
            for term, count in Counter(tokenize(text, stopwords=stopwords)).items():
                rows.append(row)
                columns.append(self._vocabulary.setdefault(term, len(self._vocabulary)))
                counts.append(float(count))
        shape = (len(documents), max(len(self._vocabulary), 1))
        tf = sparse.csr_matrix((self._tf(np.array(counts)), (rows, columns)), shape=shape)
        document_frequency = np.bincount(np.array(columns, dtype=np.int64), minlength=shape[1])
        self._idf = np.log((1.0 + shape[0]) / (1.0 + document_frequency)) + 1.0
        weighted = sparse.csr_matrix(tf.multiply(self._idf.reshape(1, -1)))
        norms = np.sqrt(np.asarray(weighted.multiply(weighted).sum(axis=1)).ravel())
        norms[norms == 0.0] = 1.0
        # Column-major, so a question's few terms select their columns cheaply.
        self._matrix = sparse.csc_matrix(sparse.diags(1.0 / norms) @ weighted)

    def _tf(self, counts: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return 1.0 + np.log(counts) if self._sublinear else counts

    def scores(self, question: str) -> npt.NDArray[np.float64]:
        """The cosine score of every document, in corpus order."""
        terms = Counter(self._vocabulary[term] for term in self.known_terms(question))
        if not terms:
            return np.zeros(len(self._ids))
        columns = np.fromiter(terms.keys(), dtype=np.int64)
        weights = self._tf(np.fromiter(terms.values(), dtype=np.float64)) * self._idf[columns]
        return np.asarray(self._matrix[:, columns] @ weights, dtype=np.float64).ravel()

    def known_terms(self, question: str) -> list[str]:
        """The question's terms that occur in the corpus: the only ones that score."""
        return [
            term
            for term in tokenize(question, stopwords=self._stopwords)
            if term in self._vocabulary
        ]

    def scored(self, question: str, limit: int) -> list[tuple[str, float]]:
        """(document id, cosine score) of at most ``limit`` documents scoring above zero."""
        scores = self.scores(question)
        candidates = np.flatnonzero(scores > 0.0)
        order = candidates[np.lexsort((candidates, -scores[candidates]))][: max(limit, 0)]
        return [(self._ids[index], float(scores[index])) for index in order]

    def retrieve(self, question: str, limit: int) -> list[str]:
        """At most ``limit`` document ids with a score above zero, best first."""
        return [doc_id for doc_id, _ in self.scored(question, limit)]


def create_tfidf(
    corpus: str | None = None,
    *,
    sublinear_tf: bool = True,
    stopwords: bool = True,
    doc_id_separator: str | None = None,
) -> TfidfRetriever:
    """Factory of the ``tfidf`` plugin: TF-IDF over ``corpus`` (a BEIR ``corpus.jsonl``).

    Without ``corpus``, the bicycle maintenance guide this package ships is used, so
    ``retrievalkit eval --set bikes --retriever tfidf`` needs no configuration.
    """
    for name, value in (("sublinear_tf", sublinear_tf), ("stopwords", stopwords)):
        if not isinstance(value, bool):
            raise InputError(f"must be true or false, got {value!r}", field=name)
    if doc_id_separator is not None and not isinstance(doc_id_separator, str):
        raise InputError(f"must be a string, got {doc_id_separator!r}", field="doc_id_separator")
    path = Path(corpus) if corpus is not None else CORPUS
    return TfidfRetriever(
        list(read_corpus(path)),
        sublinear_tf=sublinear_tf,
        stopwords=stopwords,
        doc_id_separator=doc_id_separator,
        identifier="tfidf" if corpus is None else f"tfidf:{path.name}",
    )
