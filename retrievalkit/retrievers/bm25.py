"""The embedded BM25 retriever (bm25s with Snowball stemming) over a BEIR-style corpus."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from retrievalkit.errors import InputError
from retrievalkit.formats.corpus import read_corpus
from retrievalkit.retrievers.contract import document_id_of


class BM25Retriever:
    """Okapi BM25 (Lucene's idf) over title and text joined, built in memory at start.

    With ``fields`` (field name -> weight, e.g. ``{"title": 4, "description": 2,
    "filename": 3}``), each field is a BM25 index of its own (its own document lengths,
    average length and idf) and a document's score is the weighted sum of its field
    scores: Elasticsearch's ``multi_match`` of type ``most_fields`` with those boosts.
    A per-field sum rather than BM25F, because that is what the keyword engines people
    compare against compute for boosted fields, so a weight means the same in both;
    BM25F would saturate term frequency once over the weighted fields instead.

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
        fields: Mapping[str, float] | None = None,
    ) -> None:
        import bm25s

        for name, value in (("k1", k1), ("b", b)):
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not 0 <= value < math.inf
            ):
                raise InputError(f"must be a number >= 0, got {value!r}", field=name)
        if b > 1:
            raise InputError(
                f"must be at most 1 (the share of length normalisation), got {b!r}", field="b"
            )
        if max_doc_words is not None and (
            isinstance(max_doc_words, bool)
            or not isinstance(max_doc_words, int)
            or max_doc_words < 1
        ):
            raise InputError(
                f"must be a whole number >= 1, got {max_doc_words!r}", field="max_doc_words"
            )
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
        self._fields: list[tuple[float, Any]] = []
        for name, weight in _checked_fields(fields, documents, corpus).items():
            field_tokens = bm25s.tokenize(
                [doc.field(name) or "" for doc in documents],
                stopwords=self._stopwords,
                stemmer=self._stemmer,
                show_progress=False,
            )
            index = bm25s.BM25(k1=k1, b=b, method="lucene")
            index.index(field_tokens, show_progress=False)
            self._fields.append((weight, index))

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
        if self._fields:
            scores = sum(weight * index.get_scores(tokens) for weight, index in self._fields)
        else:
            scores = self._index.get_scores(tokens)
        candidates = np.flatnonzero(scores > 0)
        # Highest score first; equal scores in corpus order.
        order = candidates[np.lexsort((candidates, -scores[candidates]))][:limit]
        return [(self._ids[index], float(scores[index])) for index in order]


def _checked_fields(
    fields: Mapping[str, float] | None, documents: list[Any], corpus: str | Path
) -> dict[str, float]:
    """``fields`` as name -> weight, each a number > 0 that some document carries."""
    if fields is None:
        return {}
    if not isinstance(fields, Mapping) or not fields:
        raise InputError(
            "must be a table of field name = weight",
            field="fields",
            hint="e.g. fields = { title = 4, description = 2, filename = 3 }",
        )
    checked: dict[str, float] = {}
    for name, weight in fields.items():
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight <= 0:
            raise InputError(f"must be a number > 0, got {weight!r}", field=f"fields.{name}")
        if not any(doc.field(name) for doc in documents):
            raise InputError(
                f"no document of the corpus has a '{name}' field",
                source=str(corpus),
                field=f"fields.{name}",
                hint="fields name string fields of the corpus lines, such as title or text",
            )
        checked[str(name)] = float(weight)
    return checked


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
    fields: Mapping[str, float] | None = None,
) -> BM25Retriever:
    """Factory of the ``bm25`` plugin: BM25 over the ``corpus`` (a BEIR corpus.jsonl).

    Options: ``k1`` (0.9, at least 0) and ``b`` (0.4, from 0 to 1); ``stemmer`` (a
    Snowball language, or "" for none); ``stopwords`` ("en", or "" for none);
    ``doc_id_separator`` to collapse chunk ids such as ``doc-7#3``; ``max_doc_words`` to
    index only each document's first words (at least 1);
    ``fields`` (field name -> weight, e.g. ``{ title = 4, description = 2, filename = 3 }``)
    to score each field on its own and add the weighted field scores.
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
        fields=fields,
    )


def create_bm25_demo() -> BM25Retriever:
    """Factory of the ``bm25-demo`` plugin: BM25 over the bundled demo corpus (chunks by '#')."""
    from retrievalkit.demo import DEMO_CORPUS

    return BM25Retriever(DEMO_CORPUS, doc_id_separator="#", identifier="bm25-demo")
