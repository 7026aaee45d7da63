"""The bundled demo set against a real index: the CLI's numbers, chunk ids, batching, no hits."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from retrievalkit_elasticsearch.retriever import SearchFailed, create_elasticsearch_bm25
from support import (
    assert_matches_trec_eval,
    cli,
    evaluate,
    mean_of,
    write_config,
)

from retrievalkit.demo import DemoSetProvider
from retrievalkit.testing import check_retriever

KS = (1, 3, 5, 10)


@pytest.fixture(scope="module")
def demo_run(
    tmp_path_factory: pytest.TempPathFactory, es_url: str, demo_index: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``retrievalkit eval --set demo`` through the CLI, once for the module."""
    directory = tmp_path_factory.mktemp("demo-eval")
    write_config(directory, {"es": {"url": es_url, "index": demo_index, "doc_id_separator": "#"}})
    return evaluate(directory, "demo", "es", "--no-save")


def raw_hits(es: Any, index: str, question: str, size: int) -> list[str]:
    """What the node itself ranks for the plugin's default query."""
    body = {
        "query": {
            "multi_match": {"query": question, "type": "best_fields", "fields": ["title", "text"]}
        },
        "size": size,
        "_source": False,
    }
    return [hit["_id"] for hit in es.search(index=index, body=body)["hits"]["hits"]]


def test_demo_through_the_cli_equals_trec_eval(demo_run: Any) -> None:
    summary, per_question = demo_run
    assert len(per_question) == 75
    assert summary["errored"] == 0
    assert assert_matches_trec_eval(per_question, KS) == 72  # 3 questions have no answer
    for metric in ("hit@1", "hit@3", "ndcg@10", "recall@10", "rr", "ap@10"):
        assert summary["metrics"][metric]["mean"] == pytest.approx(
            mean_of(per_question, metric), abs=1e-12
        ), metric
    numbers = {m: round(summary["metrics"][m]["mean"], 4) for m in ("hit@1", "hit@3", "ndcg@10")}
    print(f"demo on Elasticsearch (standard analyzer, BM25 defaults): {numbers}")
    assert summary["manifest"]["extra"]["elasticsearch.index"]
    assert summary["manifest"]["plugin"] == "elasticsearch-bm25"


def test_rankings_are_the_nodes_with_chunks_collapsed(
    demo_run: Any, es: Any, demo_index: str
) -> None:
    """Each question's ranking is the node's, chunk ids cut at '#', first occurrence kept."""
    _, per_question = demo_run
    collapsed_somewhere = 0
    for line in per_question:
        hits = raw_hits(es, demo_index, line["question"], 30)
        documents = [doc_id.partition("#")[0] for doc_id in hits]
        assert line["ranking"] == list(dict.fromkeys(documents))[:10], line["question_id"]
        assert not any("#" in doc_id for doc_id in line["ranking"])
        if len(set(documents[:10])) < 10 <= len(hits):
            collapsed_somewhere += 1  # chunks of one document took two of the top 10 hits
    assert collapsed_somewhere > 0, "the demo corpus should make chunk ids collapse"


def test_a_chunked_index_returns_documents(es_url: str, demo_index: str) -> None:
    retriever = create_elasticsearch_bm25(url=es_url, index=demo_index, doc_id_separator="#")
    question = "When is the library open on public holidays?"
    ids = retriever.retrieve(question, 30)
    assert "doc-opening-hours" in ids and not any("#" in doc_id for doc_id in ids)
    assert len(ids) > len(set(ids)), "one id per hit: chunks of a document repeat it"
    scored = retriever.retrieve_scored(question, 30)
    assert [doc for doc, _ in scored] == list(dict.fromkeys(ids))
    assert all(a[1] >= b[1] for a, b in itertools.pairwise(scored))
    unchunked = create_elasticsearch_bm25(url=es_url, index=demo_index)
    assert any("#" in doc_id for doc_id in unchunked.retrieve(question, 30))


def test_msearch_and_one_at_a_time_give_identical_rankings(es_url: str, demo_index: str) -> None:
    questions = [q.question for q in DemoSetProvider().load("demo").questions]
    retriever = create_elasticsearch_bm25(
        url=es_url, index=demo_index, doc_id_separator="#", batch_size=7
    )
    batched = retriever.retrieve_many(questions, 30)
    single = [retriever.retrieve(question, 30) for question in questions]
    assert len(batched) == len(questions)
    assert [list(ranking) for ranking in batched] == single  # type: ignore[arg-type]


def test_the_retriever_keeps_retrievalkits_contract(es_url: str, demo_index: str) -> None:
    check_retriever(
        "elasticsearch-bm25",
        probe_questions=["How do I get a library card?", "wifi password"],
        url=es_url,
        index=demo_index,
        doc_id_separator="#",
    )


def test_questions_without_hits(tmp_path: Path, es_url: str, demo_index: str) -> None:
    retriever = create_elasticsearch_bm25(url=es_url, index=demo_index, doc_id_separator="#")
    assert retriever.retrieve("zqxjkv vbnmwq", 10) == []
    assert retriever.retrieve_scored("zqxjkv", 10) == []
    assert retriever.retrieve_many(["zqxjkv", "wifi"], 10)[0] == []

    golden = tmp_path / "golden.jsonl"
    rows = [
        {"id": "nothing", "question": "zqxjkv vbnmwq", "expected": []},
        {"id": "missed", "question": "zqxjkv", "expected": ["doc-wifi"]},
        {"id": "found", "question": "wifi password", "expected": ["doc-wifi"]},
    ]
    golden.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    write_config(tmp_path, {"es": {"url": es_url, "index": demo_index, "doc_id_separator": "#"}})
    summary, per_question = evaluate(tmp_path, str(golden), "es", "--no-save")
    by_id = {line["question_id"]: line for line in per_question}
    assert summary["errored"] == 0
    assert by_id["nothing"]["ranking"] == [] and by_id["nothing"]["scores"]["hit@1"] == 1.0
    assert by_id["missed"]["ranking"] == [] and by_id["missed"]["scores"]["hit@10"] == 0.0
    assert by_id["missed"]["scores"]["rr"] == 0.0
    assert by_id["found"]["scores"]["hit@10"] == 1.0


def test_a_rejected_search_is_that_questions_error_only(
    tmp_path: Path, es_url: str, demo_index: str
) -> None:
    """query_string rejects unbalanced syntax: that sub-search fails, the others answer."""
    template = {"query": {"query_string": {"query": "{{question}}", "fields": ["title", "text"]}}}
    retriever = create_elasticsearch_bm25(
        url=es_url, index=demo_index, doc_id_separator="#", query_template=json.dumps(template)
    )
    answers = retriever.retrieve_many(["wifi password", "opening (hours", "printing prices"], 10)
    assert isinstance(answers[1], SearchFailed)
    assert "parse" in str(answers[1]).lower()
    assert answers[0] and answers[2] and not isinstance(answers[0], BaseException)
    with pytest.raises(SearchFailed):
        retriever.retrieve("opening (hours", 10)

    golden = tmp_path / "golden.jsonl"
    rows = [
        {"id": "fine", "question": "wifi password", "expected": ["doc-wifi"]},
        {"id": "broken", "question": "opening (hours", "expected": ["doc-opening-hours"]},
    ]
    golden.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    write_config(
        tmp_path,
        {
            "es": {
                "url": es_url,
                "index": demo_index,
                "doc_id_separator": "#",
                "query_template": json.dumps(template),
            }
        },
    )
    summary, per_question = evaluate(
        tmp_path, str(golden), "es", "--no-save", "--max-error-rate", "0.5"
    )
    by_id = {line["question_id"]: line for line in per_question}
    assert summary["errored"] == 1
    assert by_id["broken"]["error"].startswith("SearchFailed")
    assert by_id["fine"]["error"] is None and by_id["fine"]["scores"]["hit@1"] == 1.0

    failed = cli("eval", "--set", str(golden), "--retriever", "es", "--no-save", "-q", cwd=tmp_path)
    assert failed.returncode == 3, failed.stderr
    assert "1 of 2 questions errored" in failed.stderr
