"""Field-weighted bm25: each field scored by BM25 on its own, the weighted scores added."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from retrievalkit.errors import InputError
from retrievalkit.retrievers.bm25 import BM25Retriever, create_bm25

WORDS = [f"w{n}" for n in range(25)]
WEIGHTS = {"title": 4.0, "description": 2.0, "filename": 3.0}


def lucene_bm25(field_texts: list[list[str]], query: list[str], k1: float, b: float) -> list[float]:
    """Lucene's BM25 (no k1 + 1 factor, idf ln(1 + (N - n + 0.5) / (n + 0.5))), by hand."""
    count = len(field_texts)
    average = sum(map(len, field_texts)) / count
    scores = [0.0] * count
    for term in set(query):
        having = sum(term in text for text in field_texts)
        if not having:
            continue
        idf = math.log(1 + (count - having + 0.5) / (having + 0.5))
        for index, text in enumerate(field_texts):
            tf = text.count(term)
            if tf:
                norm = k1 * (1 - b + b * len(text) / average)
                scores[index] += idf * tf / (tf + norm)
    return scores


@pytest.mark.parametrize("seed", range(4))
def test_the_score_is_the_weighted_sum_of_per_field_bm25(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    documents = []
    for number in range(40):
        documents.append(
            {
                "_id": f"d{number}",
                "title": " ".join(rng.choices(WORDS, k=rng.randint(1, 5))),
                "text": "ignored when fields are given",
                "description": " ".join(rng.choices(WORDS, k=rng.randint(3, 20))),
                "filename": " ".join(rng.choices(WORDS, k=rng.randint(1, 3))),
            }
        )
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in documents), encoding="utf-8")
    retriever = BM25Retriever(corpus, stemmer=None, stopwords=None, fields=WEIGHTS)
    for _ in range(10):
        query = rng.sample(WORDS, 3)
        expected = [0.0] * len(documents)
        for field, weight in WEIGHTS.items():
            texts = [d[field].split() for d in documents]
            for index, score in enumerate(lucene_bm25(texts, query, 0.9, 0.4)):
                expected[index] += weight * score
        got = dict(retriever.retrieve_scored(" ".join(query), len(documents)))
        for index, document in enumerate(documents):
            assert got.get(document["_id"], 0.0) == pytest.approx(expected[index], rel=1e-5)


def test_fields_are_checked(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "d1", "title": "a title", "text": "some text"}\n', encoding="utf-8")
    with pytest.raises(InputError, match="no document of the corpus has a 'filename' field"):
        create_bm25(str(corpus), fields={"title": 4, "filename": 3})
    with pytest.raises(InputError, match="must be a number > 0") as raised:
        create_bm25(str(corpus), fields={"title": 0})
    assert raised.value.field == "fields.title"
    # title and text are fields like any other.
    ranked = create_bm25(str(corpus), fields={"title": 1, "text": 1}).retrieve("title", 5)
    assert ranked == ["d1"]
