"""The ``dense``, ``rerank-api`` and ``cross-encoder`` rerankers with all-MiniLM-L6-v2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import retrievalkit as rk
from retrievalkit.errors import InputError, PluginError
from retrievalkit.plugins.resolution import ResolvedRetriever
from retrievalkit.rerankers.cross_encoder import create_cross_encoder
from retrievalkit.rerankers.dense import DenseReranker
from retrievalkit.rerankers.rerank_api import create_rerank_api
from retrievalkit.retrievers.bm25 import BM25Retriever
from retrievalkit.retrievers.dense import DenseRetriever
from retrievalkit.retrievers.rerank import RerankRetriever

CANDIDATES = 20


@pytest.fixture(scope="module")
def bm25(small_scifact: Path) -> ResolvedRetriever:
    retriever = BM25Retriever(small_scifact / "corpus.jsonl")
    return ResolvedRetriever("bm25", "bm25", {}, retriever)


@pytest.fixture(scope="module")
def dense_reranker(small_scifact: Path, minilm: Any, embedding_cache: Path) -> DenseReranker:
    return DenseReranker(small_scifact / "corpus.jsonl", minilm, cache_dir=embedding_cache)


@pytest.fixture(scope="module")
def questions(small_scifact: Path) -> list[str]:
    return [question.question for question in rk.load_set(small_scifact).questions[:8]]


def test_dense_rescoring_keeps_the_dense_order_of_the_candidates(
    small_scifact: Path, minilm: Any, embedding_cache: Path, bm25: Any, dense_reranker: Any,
    questions: list[str],
) -> None:  # fmt: skip
    dense = DenseRetriever(small_scifact / "corpus.jsonl", minilm, cache_dir=embedding_cache)
    reranked = RerankRetriever(bm25, dense_reranker, candidates=CANDIDATES)
    for question in questions:
        pool = bm25.retriever.retrieve(question, CANDIDATES)
        everything = dense.retrieve(question, 10_000)
        expected = [doc for doc in everything if doc in set(pool)]
        assert reranked.retrieve(question, CANDIDATES) == expected
        assert set(pool) == set(expected)


@pytest.mark.parametrize("format, path", [("cohere", "/v1/rerank"), ("jina", "/v1/rerank"),
                                          ("tei", "/rerank")])  # fmt: skip
def test_rerank_api_orders_as_the_dense_reranker_over_the_same_model(
    server: Any, small_scifact: Path, bm25: Any, dense_reranker: Any, questions: list[str],
    format: str, path: str,
) -> None:  # fmt: skip
    api = create_rerank_api(
        str(small_scifact / "corpus.jsonl"), url=server.url + path, model="minilm",
        format=format, batch_size=7, backoff=0.0,
    )  # fmt: skip
    through_api = RerankRetriever(bm25, api, candidates=CANDIDATES)
    through_dense = RerankRetriever(bm25, dense_reranker, candidates=CANDIDATES)
    for question in questions[:3]:
        assert through_api.retrieve(question, 10) == through_dense.retrieve(question, 10)
    sizes = [len(r["body"].get("documents") or r["body"]["texts"]) for r in server.requests]
    assert sizes[:3] == [7, 7, 6]
    if format == "tei":
        assert "model" not in server.requests[0]["body"]
    else:
        assert server.requests[0]["body"]["top_n"] == 7
        assert ("return_documents" in server.requests[0]["body"]) == (format == "jina")


def test_rerank_api_faults(server: Any, small_scifact: Path, questions: list[str]) -> None:
    api = create_rerank_api(
        str(small_scifact / "corpus.jsonl"), url=server.url + "/v1/rerank", model="minilm",
        retries=2, backoff=0.0,
    )  # fmt: skip
    candidates = [json.loads(line)["_id"] for line in
                  (small_scifact / "corpus.jsonl").read_text().splitlines()[:5]]  # fmt: skip
    server.faults.extend(["429", "503"])
    assert len(api.rerank(questions[0], candidates)) == 5
    assert [r["fault"] for r in server.requests] == ["429", "503", None]
    server.faults.extend(["503"] * 3)
    with pytest.raises(PluginError, match="gave up after 3 attempts"):
        api.rerank(questions[0], candidates)
    for fault, message in (("malformed", "not valid JSON"), ("short", "did not return 5 results")):
        server.faults.append(fault)
        with pytest.raises(PluginError, match=message):
            api.rerank(questions[0], candidates)
    server.faults.append("slow:3")
    slow = create_rerank_api(
        str(small_scifact / "corpus.jsonl"), url=server.url + "/v1/rerank", model="minilm",
        deadline=0.5,
    )  # fmt: skip
    with pytest.raises(PluginError, match="no answer within"):
        slow.rerank(questions[0], candidates)
    with pytest.raises(InputError, match="format"):
        create_rerank_api(str(small_scifact / "corpus.jsonl"), url=server.url, format="xml")


@pytest.fixture(scope="module")
def chunked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Documents of two and three chunks: only one chunk of each is about the question."""
    records = [
        ("a#0", "Bananas are yellow fruit grown in the tropics."),
        ("a#1", "Insulin resistance raises the risk of type 2 diabetes."),
        ("b#0", "Type 2 diabetes and insulin: a review of resistance mechanisms."),
        ("b#1", "The weather in Lisbon is mild in winter."),
        ("b#2", "Chess openings have names such as the Sicilian."),
        ("c#0", "Violins have four strings."),
    ]
    folder = tmp_path_factory.mktemp("chunked")
    lines = [json.dumps({"_id": i, "title": "", "text": t}) for i, t in records]
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder / "corpus.jsonl"


def test_chunks_are_scored_then_collapsed_to_their_best(
    chunked: Path, minilm: Any, server: Any
) -> None:
    question = "Does insulin resistance cause type 2 diabetes?"
    reranker = DenseReranker(chunked, minilm, doc_id_separator="#", cache_dir=None)
    texts = {json.loads(line)["_id"]: json.loads(line)["text"] for line in chunked.open()}
    query = minilm.embed_queries([question])[0]
    chunk_scores = {i: float(minilm.embed([t])[0] @ query) for i, t in texts.items()}
    scored = dict(reranker.rerank(question, ["c", "a", "b", "zzz-unknown"]))
    assert set(scored) == {"a", "b", "c"}
    for doc in ("a", "b", "c"):
        best = max(v for k, v in chunk_scores.items() if k.startswith(doc + "#"))
        assert scored[doc] == pytest.approx(best, abs=1e-5)
    # Scored as a whole (a concatenation), 'a' would lose its best chunk's evidence.
    assert scored["a"] > float(minilm.embed([texts["a#0"] + " " + texts["a#1"]])[0] @ query)
    api = create_rerank_api(str(chunked), url=server.url + "/rerank", format="tei",
                            doc_id_separator="#")  # fmt: skip
    assert sorted(api.rerank(question, ["c", "a", "b"]), key=lambda p: -p[1])[0][0] == (
        max(scored, key=scored.__getitem__)
    )
    # A chunk id as a candidate is scored on its own.
    assert dict(reranker.rerank(question, ["b#1"]))["b#1"] == pytest.approx(
        chunk_scores["b#1"], abs=1e-5
    )


@pytest.fixture(scope="module")
def cross_encoder_folder(minilm_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CrossEncoder made of MiniLM's BERT layers and a seeded, untrained scoring head.

    Only for plumbing: its scores mean nothing about relevance (no cross-encoder ships
    in a wheel); quality figures need a trained model.
    """
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(7)
    model = AutoModelForSequenceClassification.from_pretrained(
        str(minilm_folder), num_labels=1, local_files_only=True
    )
    folder = tmp_path_factory.mktemp("minilm-cross-encoder")
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(str(minilm_folder), local_files_only=True).save_pretrained(folder)
    return folder


def test_cross_encoder_scores_pairs_as_the_model_does(
    cross_encoder_folder: Path, chunked: Path
) -> None:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    question = "Does insulin resistance cause type 2 diabetes?"
    reranker = create_cross_encoder(
        str(chunked), model=str(cross_encoder_folder), doc_id_separator="#", batch_size=2
    )
    texts = {json.loads(line)["_id"]: json.loads(line)["text"] for line in chunked.open()}
    tokenizer = AutoTokenizer.from_pretrained(str(cross_encoder_folder))
    model = AutoModelForSequenceClassification.from_pretrained(str(cross_encoder_folder))
    model.eval()
    with torch.no_grad():
        encoded = tokenizer([question] * len(texts), list(texts.values()), padding=True,
                            truncation=True, return_tensors="pt")  # fmt: skip
        logits = model(**encoded).logits[:, 0].numpy()
    # CrossEncoder applies a sigmoid to a one-label model's logit by default.
    expected = dict(zip(texts, 1 / (1 + np.exp(-logits)), strict=True))
    scored = dict(reranker.rerank(question, ["a", "b", "c"]))
    for doc in ("a", "b", "c"):
        best = max(v for k, v in expected.items() if k.startswith(doc + "#"))
        assert scored[doc] == pytest.approx(float(best), abs=1e-4)
    assert len(set(expected.values())) == len(expected)  # a head that tells pairs apart


def test_cross_encoder_not_on_disk(tmp_path: Path, chunked: Path) -> None:
    with pytest.raises(InputError, match="not on this machine") as caught:
        create_cross_encoder(str(chunked), model="org/no-such-cross-encoder",
                             cache_folder=str(tmp_path))  # fmt: skip
    assert str(tmp_path) in str(caught.value)
