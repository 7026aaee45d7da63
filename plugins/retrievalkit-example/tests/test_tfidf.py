"""The TF-IDF retriever's numbers, checked by hand on a corpus small enough to follow."""

from __future__ import annotations

import math

import pytest
from retrievalkit.errors import InputError
from retrievalkit.formats.corpus import CorpusDocument

from retrievalkit_example.tfidf import TfidfRetriever, create_tfidf, tokenize

DOCUMENTS = [
    CorpusDocument("d1", "", "chain chain lube"),
    CorpusDocument("d2", "", "chain brake"),
    CorpusDocument("d3", "", "brake pads"),
]


def idf(document_frequency: int, documents: int = 3) -> float:
    return math.log((1 + documents) / (1 + document_frequency)) + 1


def test_scores_are_cosines_of_smoothed_tfidf_vectors() -> None:
    retriever = TfidfRetriever(DOCUMENTS, sublinear_tf=False)
    # d1 = (chain: 2 * idf(2), lube: 1 * idf(1)); the question "chain" = (chain: idf(2)).
    d1 = (2 * idf(2), idf(1))
    d2 = (idf(2), idf(2))  # chain, brake
    expected_d1 = d1[0] / math.hypot(*d1)
    expected_d2 = d2[0] / math.hypot(*d2)
    scores = retriever.scores("chain")
    assert scores[0] == pytest.approx(expected_d1 * idf(2), rel=1e-12)
    assert scores[1] == pytest.approx(expected_d2 * idf(2), rel=1e-12)
    assert scores[2] == 0.0
    assert retriever.retrieve("chain", 10) == ["d1", "d2"]


def test_sublinear_tf_damps_repeated_terms() -> None:
    linear = TfidfRetriever(DOCUMENTS, sublinear_tf=False).scores("chain")
    damped = TfidfRetriever(DOCUMENTS, sublinear_tf=True).scores("chain")
    assert damped[0] < linear[0]


def test_limit_ties_and_unknown_words() -> None:
    retriever = TfidfRetriever(
        [CorpusDocument("a", "", "brake"), CorpusDocument("b", "", "brake")], stopwords=False
    )
    assert retriever.retrieve("brake", 10) == ["a", "b"], "equal scores keep corpus order"
    assert retriever.retrieve("brake", 1) == ["a"]
    assert retriever.retrieve("saddle", 10) == []
    assert retriever.retrieve("brake", 0) == []


def test_stopwords_alone_find_nothing() -> None:
    assert tokenize("How do I fix THE chain?") == ["fix", "chain"]
    assert TfidfRetriever(DOCUMENTS).retrieve("how do the", 5) == []


def test_chunk_ids_map_to_documents() -> None:
    chunks = [CorpusDocument("doc-1#0", "", "brake"), CorpusDocument("doc-1#1", "", "pads")]
    retriever = TfidfRetriever(chunks, doc_id_separator="#")
    assert retriever.retrieve("brake pads", 5) == ["doc-1", "doc-1"]


def test_bad_options_name_the_field() -> None:
    with pytest.raises(InputError, match="sublinear_tf"):
        create_tfidf(sublinear_tf="yes")  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"no such file|cannot open"):
        create_tfidf("does-not-exist.jsonl")
