"""The built-in field-weighted ``bm25`` against Elasticsearch's ``multi_match`` on SciFact.

Both score ``title^4``, ``description^2`` and ``filename^3`` (SciFact's text as the
description, a file name made from the title's first words and the document id), each
field with its own BM25 statistics, summed: ``multi_match`` of type ``most_fields`` on
the node, ``fields = { title = 4, description = 2, filename = 3 }`` in retrievalkit,
both with k1 1.2, b 0.75 and no stemming or stopwords. The texts and queries are
written as the words both tokenizers agree on (runs of two or more word characters,
lowercased: the standard analyzer would also keep one-letter words and "3.5" whole, which
bm25s drops or splits), so what is compared is the scoring. What still differs is
Lucene's: it stores each document's field length in one byte (lossy above a few dozen
tokens), so near-ties can swap. The agreement numbers are printed and reported in
docs/configuration.md.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from support import shared_data

WEIGHTS = {"title": 4, "description": 2, "filename": 3}
DEPTH = 10


def words(text: str) -> str:
    """The text as the words bm25s and the standard analyzer both make of it."""
    return " ".join(re.findall(r"\w\w+", text.lower()))


def file_name(document: dict[str, Any]) -> str:
    words = re.findall(r"[a-z0-9]+", (document.get("title") or "").lower())[:3]
    return "-".join([*words, str(document["_id"])]) + "-pdf"


@pytest.fixture(scope="module")
def fielded_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = shared_data() / "scifact" / "corpus.jsonl"
    target = tmp_path_factory.mktemp("fielded") / "corpus.jsonl"
    with source.open(encoding="utf-8") as lines, target.open("w", encoding="utf-8") as out:
        for line in lines:
            document = json.loads(line)
            out.write(
                json.dumps(
                    {
                        "_id": document["_id"],
                        "title": words(document.get("title") or ""),
                        "text": "",
                        "description": words(document.get("text") or ""),
                        "filename": file_name(document),
                    }
                )
                + "\n"
            )
    return target


@pytest.fixture(scope="module")
def fielded_index(es: Any, index_names: Any, fielded_corpus: Path) -> str:
    from elasticsearch import helpers

    name: str = index_names("scifact-fields")
    es.indices.create(
        index=name,
        settings={"number_of_shards": 1, "number_of_replicas": 0},
        mappings={
            "properties": {field: {"type": "text", "analyzer": "standard"} for field in WEIGHTS}
        },
    )
    with fielded_corpus.open(encoding="utf-8") as lines:
        documents = [json.loads(line) for line in lines]
    helpers.bulk(
        es,
        (
            {"_index": name, "_id": d["_id"], **{field: d[field] for field in WEIGHTS}}
            for d in documents
        ),
        refresh=True,
    )
    return name


def queries() -> list[tuple[str, str]]:
    data = shared_data() / "scifact"
    judged = {
        line.split("\t")[0]
        for line in (data / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]
    }
    found = []
    with (data / "queries.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            query = json.loads(line)
            if query["_id"] in judged:
                found.append((query["_id"], words(query["text"])))
    return found


def ndcg_at_10(rankings: dict[str, list[str]]) -> float:
    import pytrec_eval

    qrels: dict[str, dict[str, int]] = {}
    data = shared_data() / "scifact" / "qrels" / "test.tsv"
    for line in data.read_text(encoding="utf-8").splitlines()[1:]:
        query, document, grade = line.split("\t")
        qrels.setdefault(query, {})[document] = int(grade)
    run = {
        query: {doc: float(DEPTH - rank) for rank, doc in enumerate(ranking)}
        for query, ranking in rankings.items()
        if ranking
    }
    values = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run)
    return sum(values.get(q, {}).get("ndcg_cut_10", 0.0) for q in qrels) / len(qrels)


def test_field_weighted_bm25_agrees_with_multi_match(
    es: Any, fielded_index: str, fielded_corpus: Path
) -> None:
    from retrievalkit.retrievers.bm25 import create_bm25

    ours = create_bm25(
        str(fielded_corpus), k1=1.2, b=0.75, stemmer="", stopwords="", fields=WEIGHTS
    )
    fields = [f"{field}^{weight}" for field, weight in WEIGHTS.items()]
    mine: dict[str, list[str]] = {}
    theirs: dict[str, list[str]] = {}
    for query_id, text in queries():
        mine[query_id] = ours.retrieve(text, DEPTH)
        found = es.search(
            index=fielded_index,
            query={"multi_match": {"query": text, "fields": fields, "type": "most_fields"}},
            size=DEPTH,
            source=False,
        )
        theirs[query_id] = [hit["_id"] for hit in found["hits"]["hits"]]
    overlap = sum(len(set(mine[q]) & set(theirs[q])) / DEPTH for q in mine) / len(mine)
    top1 = sum(mine[q][:1] == theirs[q][:1] for q in mine) / len(mine)
    same = sum(mine[q] == theirs[q] for q in mine) / len(mine)
    ndcg_mine, ndcg_theirs = ndcg_at_10(mine), ndcg_at_10(theirs)
    print(
        f"SciFact, title^4 description^2 filename^3 over {len(mine)} queries: overlap@10 "
        f"{overlap:.4f}, same top 1 {top1:.4f}, same top 10 in order {same:.4f}; nDCG@10 "
        f"bm25 {ndcg_mine:.4f}, Elasticsearch {ndcg_theirs:.4f}"
    )
    assert len(mine) == 300
    assert overlap >= 0.95
    assert top1 >= 0.95
    assert abs(ndcg_mine - ndcg_theirs) <= 0.01
