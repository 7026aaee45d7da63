"""Real test collections on the live node: graded Cranfield through the CLI, SciFact batched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from retrievalkit_elasticsearch.retriever import create_elasticsearch_bm25
from support import assert_matches_trec_eval, evaluate, index_corpus, shared_data, write_config

from retrievalkit.formats.golden_sets import load_beir


@pytest.fixture(scope="module")
def cranfield_index(es_url: str, index_names: Any) -> str:
    name: str = index_names("cranfield")
    done = index_corpus(es_url, shared_data() / "cranfield" / "corpus.jsonl", name)
    assert "indexed 1400 of 1400 documents" in done.stdout
    return name


def test_cranfield_through_the_cli_equals_trec_eval(
    tmp_path: Path, es_url: str, cranfield_index: str
) -> None:
    """Graded judgments (codes 1-4, -1 read as 0): every metric as trec_eval computes it."""
    write_config(tmp_path, {"cran": {"url": es_url, "index": cranfield_index}})
    summary, per_question = evaluate(
        tmp_path, str(shared_data() / "cranfield"), "cran", "--no-save", "--k", "1,5,10,20"
    )
    assert len(per_question) == 225 and summary["errored"] == 0
    assert assert_matches_trec_eval(per_question, (1, 3, 5, 10, 20)) == 225
    ndcg, ap = summary["metrics"]["ndcg@10"]["mean"], summary["metrics"]["ap@20"]["mean"]
    print(f"Cranfield, standard analyzer: nDCG@10 {ndcg:.4f}, AP@20 {ap:.4f}")
    assert 0.25 <= ndcg <= 0.45  # a simple stemmed BM25 gets 0.338 on these raw codes


@pytest.mark.parametrize("collection", ["scifact", "cranfield"])
def test_msearch_equals_one_at_a_time_on_a_collection(
    es_url: str, request: pytest.FixtureRequest, collection: str
) -> None:
    index = request.getfixturevalue(
        "scifact_standard_index" if collection == "scifact" else "cranfield_index"
    )
    questions = [q.question for q in load_beir(shared_data() / collection).questions]
    retriever = create_elasticsearch_bm25(url=es_url, index=index, batch_size=50)
    batched = retriever.retrieve_many(questions, 100)
    single = [retriever.retrieve(question, 100) for question in questions]
    assert not any(isinstance(answer, BaseException) for answer in batched)
    assert [list(ranking) for ranking in batched] == single  # type: ignore[arg-type]
    assert sum(1 for ranking in single if len(ranking) == 100) > len(questions) * 0.9
