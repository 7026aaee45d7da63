"""A paper's table: BM25 on SciFact the way the BEIR paper ran Elasticsearch.

BEIR (Thakur et al. 2021, Table 2) reports nDCG@10 = 0.665 for BM25 on the 300 SciFact
test queries: ``title`` and ``text`` analysed with Elasticsearch's ``english`` analyzer,
a ``multi_match`` of type ``best_fields`` with ``tie_breaker`` 0.5, default BM25 (k1 1.2,
b 0.75), one shard. BEIR's own evaluate_bm25.py on Elasticsearch 7.17 gives 0.6906 with
that configuration (beir-cellar/beir#143), 0.026 above the paper's table, and so does this
plugin on 9.5.3: the configuration is reproduced, the table value is not, so the test pins
what the configuration gives. Measured variants on the same index: best_fields without
tie_breaker 0.6705, most_fields 0.6697, text field only 0.6684 (docs/elasticsearch.md).
A node without the ``english`` analyzer (the integ-test distribution lacks
analysis-common) FAILS these tests, never skips them.

The same query over the ``standard`` analyzer (no stemming, no stopwords) is recorded
too: the difference is what English analysis is worth on this collection.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support import assert_matches_trec_eval, evaluate, index_corpus, shared_data, write_config

#: BEIR's own evaluate_bm25.py on Elasticsearch 7.17.10 (beir-cellar/beir#143): 0.69064.
BEIR_CODE_ON_MODERN_ES = 0.6906
KS = ("--k", "1,3,5,10,100")


def beir_retriever(es_url: str, index: str) -> dict[str, Any]:
    return {
        "url": es_url,
        "index": index,
        "fields": ["title", "text"],
        "query_type": "best_fields",
        "tie_breaker": 0.5,
    }


def run_scifact(directory: Path, es_url: str, index: str) -> tuple[dict[str, Any], list[Any]]:
    write_config(directory, {"scifact": beir_retriever(es_url, index)})
    summary, per_question = evaluate(
        directory, str(shared_data() / "scifact"), "scifact", "--no-save", *KS
    )
    assert len(per_question) == 300 and summary["errored"] == 0
    assert assert_matches_trec_eval(per_question, (1, 3, 5, 10, 100)) == 300
    return summary, per_question


@pytest.fixture(scope="module")
def scifact_english_index(es: Any, es_url: str, index_names: Any) -> str:
    try:
        es.indices.analyze(analyzer="english", text="running")
    except Exception as error:
        pytest.fail(
            f"the node at {es_url} has no 'english' analyzer ({error}), so the BEIR setup "
            "cannot be reproduced there: the integ-test distribution lacks the analysis-common "
            "module; start the node with scripts/elasticsearch.py (which adds an english "
            "analyzer) or use a full Elasticsearch",
            pytrace=False,
        )
    name: str = index_names("scifact-english")
    index_corpus(es_url, shared_data() / "scifact" / "corpus.jsonl", name, "--analyzer", "english")
    return name


@pytest.fixture(scope="module")
def scifact_english(
    tmp_path_factory: pytest.TempPathFactory, es_url: str, scifact_english_index: str
) -> dict[str, Any]:
    summary, _ = run_scifact(tmp_path_factory.mktemp("scifact-en"), es_url, scifact_english_index)
    ndcg = summary["metrics"]["ndcg@10"]["mean"]
    recall = summary["metrics"]["recall@100"]["mean"]
    print(f"SciFact, english analyzer (BEIR setup): nDCG@10 {ndcg:.4f}, R@100 {recall:.4f}")
    return dict(summary)


def test_scifact_english_equals_beirs_own_code_on_modern_elasticsearch(
    scifact_english: dict[str, Any],
) -> None:
    """The configuration is BEIR's: its own script gives the same number on ES 7.17."""
    ndcg = scifact_english["metrics"]["ndcg@10"]["mean"]
    assert ndcg == pytest.approx(BEIR_CODE_ON_MODERN_ES, abs=0.002)


def test_scifact_standard_analyzer_is_recorded(
    tmp_path: Path, es_url: str, scifact_standard_index: str
) -> None:
    summary, _ = run_scifact(tmp_path, es_url, scifact_standard_index)
    ndcg = summary["metrics"]["ndcg@10"]["mean"]
    recall = summary["metrics"]["recall@100"]["mean"]
    print(f"SciFact, standard analyzer: nDCG@10 {ndcg:.4f}, R@100 {recall:.4f}")
    # Without stemming BM25 loses a little (bm25s without a stemmer: 0.657); far below
    # would mean a broken setup, far above a leak.
    assert 0.60 <= ndcg <= 0.70
    assert 0.80 <= recall <= 0.95
