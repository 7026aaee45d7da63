"""A team's own query: a template with ``{{question}}``, a filter, and ids from a field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from retrievalkit_elasticsearch.retriever import create_elasticsearch_bm25
from support import evaluate, write_config

DOCUMENTS = [
    {"doc_key": "kb-1", "lang": "en", "body": "How to reset your password from the login page"},
    {"doc_key": "kb-2", "lang": "de", "body": "Password reset: Passwort zurücksetzen reset reset"},
    {"doc_key": "kb-3", "lang": "en", "body": 'The "reset" button and the back\\slash key'},
    {"doc_key": "kb-4", "lang": "en", "body": "Opening hours of the help desk"},
    {"doc_key": "kb-5", "lang": "fr", "body": "Réinitialiser le mot de passe (password reset)"},
]
TEMPLATE = {
    "query": {
        "bool": {
            "should": [
                {"match": {"body": {"query": "{{question}}"}}},
                {"match_phrase": {"body": {"query": "{{ question }}", "boost": 2}}},
            ]
        }
    },
    "size": 3,  # the evaluator's limit wins
}
FILTER = {"term": {"lang": "en"}}
QUESTIONS = [
    "reset password",
    'what does the "reset" button do with back\\slash?',
    "help desk opening hours\nand more",
]


@pytest.fixture(scope="module")
def kb_index(es: Any, index_names: Any) -> str:
    """Documents whose ids live in a field (``doc_key``), with a keyword ``lang`` to filter on."""
    name: str = index_names("kb")
    es.indices.create(
        index=name,
        settings={"number_of_shards": 1, "number_of_replicas": 0},
        mappings={
            "properties": {
                "doc_key": {"type": "keyword"},
                "lang": {"type": "keyword"},
                "body": {"type": "text", "analyzer": "standard"},
            }
        },
    )
    for number, document in enumerate(DOCUMENTS):
        es.index(index=name, id=f"internal-{number}", document=document)
    es.indices.refresh(index=name)
    return name


def expected_ranking(es: Any, index: str, question: str) -> list[str]:
    """The same query written by hand, for comparison."""
    body = {
        "query": {
            "bool": {
                "must": [
                    {
                        "bool": {
                            "should": [
                                {"match": {"body": {"query": question}}},
                                {"match_phrase": {"body": {"query": question, "boost": 2}}},
                            ]
                        }
                    }
                ],
                "filter": [FILTER],
            }
        },
        "size": 30,
    }
    return [hit["_source"]["doc_key"] for hit in es.search(index=index, body=body)["hits"]["hits"]]


@pytest.mark.parametrize("as_text", [True, False], ids=["json-string", "toml-table"])
def test_template_with_filter_is_the_hand_written_query(
    es: Any, es_url: str, kb_index: str, as_text: bool
) -> None:
    retriever = create_elasticsearch_bm25(
        url=es_url,
        index=kb_index,
        id_field="doc_key",
        query_template=json.dumps(TEMPLATE) if as_text else TEMPLATE,
        filter=json.dumps(FILTER) if as_text else FILTER,
    )
    for question in QUESTIONS:
        ranking = retriever.retrieve(question, 30)
        assert ranking == expected_ranking(es, kb_index, question), question
        assert ranking and not {"kb-2", "kb-5"} & set(ranking)  # filtered out
    assert retriever.retrieve_many(QUESTIONS, 30) == [
        retriever.retrieve(question, 30) for question in QUESTIONS
    ]


def test_quotes_and_backslashes_stay_inside_the_question(es_url: str, kb_index: str) -> None:
    """A question cannot break out of its JSON string, whatever it contains."""
    retriever = create_elasticsearch_bm25(
        url=es_url, index=kb_index, id_field="doc_key", query_template=TEMPLATE
    )
    hostile = 'x"}}, "match_all": {}, "y": {"z": "\\'
    assert retriever.retrieve(hostile, 30) == []  # a literal question with no matching words
    assert retriever.retrieve('"reset" back\\slash', 30)[0] == "kb-3"


def test_template_and_filter_through_the_cli(
    tmp_path: Path, es: Any, es_url: str, kb_index: str
) -> None:
    golden = tmp_path / "kb.jsonl"
    rows = [
        {"id": "q1", "question": QUESTIONS[0], "expected": ["kb-1"]},
        {"id": "q2", "question": QUESTIONS[1], "expected": ["kb-3"]},
        {"id": "q3", "question": "Passwort zurücksetzen", "expected": []},
    ]
    golden.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    write_config(
        tmp_path,
        {
            "kb": {
                "url": es_url,
                "index": kb_index,
                "id_field": "doc_key",
                "query_template": json.dumps(TEMPLATE),
                "filter": FILTER,
            }
        },
    )
    summary, per_question = evaluate(tmp_path, str(golden), "kb", "--no-save")
    by_id = {line["question_id"]: line for line in per_question}
    assert summary["errored"] == 0
    assert by_id["q1"]["ranking"] == expected_ranking(es, kb_index, QUESTIONS[0])[:10]
    assert by_id["q1"]["scores"]["hit@1"] == 1.0
    assert by_id["q2"]["scores"]["hit@1"] == 1.0
    # Only the German document matches, and the filter removes it: nothing, as expected.
    assert by_id["q3"]["ranking"] == [] and by_id["q3"]["scores"]["hit@1"] == 1.0
    assert summary["manifest"]["retriever_options"]["filter"] == FILTER
