"""Parity with Elasticsearch's own ``_rank_eval``: same rankings, same ratings, same numbers.

``_rank_eval`` runs each query itself and reports per-query precision, recall, MRR and
DCG. Its hits are replayed through retrievalkit (the ``run`` retriever, via the CLI), so
both score the very same rankings against the very same ratings (retrievalkit's own
reading of the qrels: a negative grade is 0). Where ``_rank_eval`` defines a metric
differently, the test converts with the documented formula instead of hiding it:

* precision: ``_rank_eval`` divides by the hits returned (at most k); trec_eval and
  retrievalkit by k. So ``P_es = precision@k * k / min(k, hits)`` (0 without hits).
* recall@k and MRR (reciprocal rank of the first relevant hit within k, 0 if none):
  the same definitions; rating >= 1 is relevant in both.
* DCG: ``_rank_eval`` uses gain ``2^rating - 1``; trec_eval uses the grade itself. They
  agree on binary ratings, so DCG is compared on SciFact (binary): ``DCG_es = ndcg@k *
  IDCG(min(R, k))``. With ``normalize: true`` the ideal is cut at the number of hits
  returned rather than k: ``nDCG_es = ndcg@k * IDCG(min(R, k)) / IDCG(min(R, hits))``.
  Unrated hits add nothing in both (``unknown_doc_rating`` unset).

The reference node is ``RETRIEVALKIT_RANK_EVAL_URL`` (default ``http://127.0.0.1:9201``;
``nox -s es-up`` starts a 7.17 node there, the newest line whose rank-eval module is on
Maven Central). It is spoken to over plain HTTP: the elasticsearch-py client refuses a
server of another major. A node without ``_rank_eval`` FAILS this test, never skips it.
"""

from __future__ import annotations

import json
import math
import os
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from support import cli, evaluate, shared_data, write_config

from retrievalkit.formats.corpus import read_corpus
from retrievalkit.formats.golden_sets import load_beir

K = 10
DEFAULT_URL = "http://127.0.0.1:9201"


def call(url: str, method: str, path: str, body: Any = None, *, ndjson: bool = False) -> Any:
    """One JSON request; Elasticsearch's error document is returned, not raised."""
    data = None
    headers = {}
    if body is not None:
        data = body.encode() if ndjson else json.dumps(body).encode()
        headers["Content-Type"] = "application/x-ndjson" if ndjson else "application/json"
    request = urllib.request.Request(url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            return json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return json.loads(error.read() or b"null")


@pytest.fixture(scope="module")
def rank_eval_url() -> str:
    """The node with ``_rank_eval``; a missing node or module fails with instructions."""
    url = (os.environ.get("RETRIEVALKIT_RANK_EVAL_URL") or DEFAULT_URL).rstrip("/")
    try:
        health = call(url, "GET", "/_cluster/health")
    except (OSError, ValueError) as error:
        pytest.fail(
            f"no Elasticsearch node with _rank_eval answers at {url} ({error}); start one with "
            "`nox -s es-up` (a 7.17 node on port 9201) or set RETRIEVALKIT_RANK_EVAL_URL to a "
            "node that has the rank-eval module",
            pytrace=False,
        )
    answer = call(url, "POST", "/_rank_eval", {"requests": [], "metric": {"precision": {}}})
    reason = json.dumps(answer)
    if "no handler found" in reason or "Incorrect HTTP method" in reason:
        pytest.fail(
            f"the node at {url} (status {health.get('status')}) has no _rank_eval endpoint: the "
            "rank-eval module is missing (the integ-test distribution of 8.x/9.x lacks it); point "
            "RETRIEVALKIT_RANK_EVAL_URL at a node with it (`nox -s es-up` starts a 7.17 one)",
            pytrace=False,
        )
    return url


def bulk_lines(index: str, corpus: Path) -> Iterator[str]:
    for document in read_corpus(corpus):
        yield json.dumps({"index": {"_index": index, "_id": document.id}})
        yield json.dumps({"title": document.title, "text": document.text})


@pytest.fixture(scope="module")
def reference_index(rank_eval_url: str) -> Iterator[Any]:
    """``load(collection)`` -> an index of that corpus on the reference node (standard analyzer)."""
    created: list[str] = []

    def load(collection: str) -> str:
        index = f"rk-parity-{collection}-{os.getpid()}"
        call(rank_eval_url, "DELETE", f"/{index}")
        field = {"type": "text", "analyzer": "standard"}
        answer = call(
            rank_eval_url,
            "PUT",
            f"/{index}",
            {
                "settings": {"number_of_shards": 1, "number_of_replicas": 0},
                "mappings": {"properties": {"title": field, "text": field}},
            },
        )
        assert answer.get("acknowledged"), answer
        created.append(index)
        lines = list(bulk_lines(index, shared_data() / collection / "corpus.jsonl"))
        for start in range(0, len(lines), 2000):
            chunk = "\n".join(lines[start : start + 2000]) + "\n"
            loaded = call(rank_eval_url, "POST", "/_bulk", chunk, ndjson=True)
            assert not loaded.get("errors"), json.dumps(loaded)[:500]
        call(rank_eval_url, "POST", f"/{index}/_refresh")
        return index

    yield load
    for index in created:
        call(rank_eval_url, "DELETE", f"/{index}")


def rank_eval(
    url: str,
    index: str,
    questions: Mapping[str, str],
    ratings: Mapping[str, Mapping[str, int]],
    metric: Mapping[str, Any],
) -> dict[str, Any]:
    requests = [
        {
            "id": qid,
            "request": {
                "query": {
                    "multi_match": {
                        "query": text,
                        "type": "best_fields",
                        "fields": ["title", "text"],
                    }
                }
            },
            "ratings": [
                {"_index": index, "_id": doc_id, "rating": grade}
                for doc_id, grade in ratings[qid].items()
            ],
        }
        for qid, text in questions.items()
    ]
    answer = call(url, "POST", f"/{index}/_rank_eval", {"requests": requests, "metric": metric})
    assert "details" in answer and not answer.get("failures"), json.dumps(answer)[:1000]
    return dict(answer["details"])


def ideal_dcg(relevant: int) -> float:
    return sum(1.0 / math.log2(rank + 1) for rank in range(1, relevant + 1))


@pytest.mark.parametrize("collection", ["scifact", "cranfield"])
def test_retrievalkit_equals_rank_eval_for_every_query(
    tmp_path: Path, rank_eval_url: str, reference_index: Any, collection: str
) -> None:
    index = reference_index(collection)
    directory = shared_data() / collection
    # Retrievalkit's reading of the set: the questions and the ratings it scores against.
    golden = load_beir(directory)
    questions = {q.id: q.question for q in golden.questions}
    ratings = {q.id: q.judgments() for q in golden.questions}

    threshold = {"k": K, "relevant_rating_threshold": 1}
    metrics: dict[str, Mapping[str, Any]] = {
        "precision": {"precision": {**threshold, "ignore_unlabeled": False}},
        "recall": {"recall": threshold},
        "mrr": {"mean_reciprocal_rank": threshold},
        "dcg": {"dcg": {"k": K, "normalize": False}},
        "ndcg": {"dcg": {"k": K, "normalize": True}},
    }
    reference = {
        name: rank_eval(rank_eval_url, index, questions, ratings, metric)
        for name, metric in metrics.items()
    }
    hits = {qid: [h["hit"]["_id"] for h in d["hits"]] for qid, d in reference["recall"].items()}
    assert all(len(ranking) <= K for ranking in hits.values())

    # Replay exactly those rankings through retrievalkit's own CLI.
    run = tmp_path / "rank_eval.run"
    run.write_text(
        "".join(
            f"{qid} Q0 {doc_id} {rank} {K - rank + 1} rank_eval\n"
            for qid, ranking in hits.items()
            for rank, doc_id in enumerate(ranking, start=1)
        ),
        encoding="utf-8",
    )
    write_config(
        tmp_path, {"replay": {"plugin": "run", "path": str(run), "queries": str(directory)}}
    )
    summary, per_question = evaluate(tmp_path, str(directory), "replay", "--no-save", "--k", "10")
    assert summary["errored"] == 0

    binary = all(grade <= 1 for grades in ratings.values() for grade in grades.values())
    compared = 0
    for line in per_question:
        qid, ours = line["question_id"], line["scores"]
        assert line["ranking"] == hits[qid], qid
        relevant = sum(1 for grade in ratings[qid].values() if grade >= 1)
        if relevant == 0:
            continue  # retrievalkit leaves these undefined; _rank_eval reports 0
        returned = len(hits[qid])
        expected_precision = ours[f"precision@{K}"] * K / min(K, returned) if returned else 0.0
        checks = {
            "precision": expected_precision,
            "recall": ours[f"recall@{K}"],
            "mrr": ours["rr"],
        }
        if binary:
            dcg = ours[f"ndcg@{K}"] * ideal_dcg(min(relevant, K))
            checks["dcg"] = dcg
            cut = min(relevant, returned)
            checks["ndcg"] = dcg / ideal_dcg(cut) if cut else 0.0
        for name, value in checks.items():
            assert reference[name][qid]["metric_score"] == pytest.approx(value, abs=1e-9), (
                f"{name} of query {qid}: _rank_eval {reference[name][qid]['metric_score']}, "
                f"retrievalkit {value}"
            )
        compared += 1
    assert compared >= 200
    means = {name: round(summary["metrics"][name]["mean"], 4) for name in ("ndcg@10", "rr")}
    print(f"_rank_eval parity on {collection}: {compared} queries equal; retrievalkit {means}")


def test_a_client_of_another_major_is_named(tmp_path: Path, rank_eval_url: str) -> None:
    """The reference node is usually 7.17 while the client is 9.x: the error says so."""
    import importlib.metadata

    server = call(rank_eval_url, "GET", "/_nodes/_local?filter_path=nodes.*.version")
    server_major = {v["version"].split(".")[0] for v in server["nodes"].values()}
    client_major = importlib.metadata.version("elasticsearch").split(".")[0]
    write_config(tmp_path, {"es": {"url": rank_eval_url, "index": "no-such-index-rk"}})
    done = cli("eval", "--set", "demo", "--retriever", "es", "--no-save", "-q", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    if server_major == {client_major}:
        assert "has no index 'no-such-index-rk'" in done.stderr
    else:
        assert f"runs {min(server_major)}.x but the elasticsearch client is" in done.stderr
