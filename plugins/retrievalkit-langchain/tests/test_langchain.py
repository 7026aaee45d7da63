"""The langchain retriever against LangChain's real in-memory vector store, BM25 and ensemble."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import retrievalkit as rk
from langchain_classic.retrievers import EnsembleRetriever
from langchain_community.retrievers import BM25Retriever
from langchain_core.documents import Document
from langchain_core.vectorstores import InMemoryVectorStore
from retrievalkit.plugin_api import InputError, PluginError, create_embedder, embed_queries
from retrievalkit.testing import check_retriever

from retrievalkit_langchain import (
    LangChainRetriever,
    RetrievalkitEmbeddings,
    StagedLangChainRetriever,
    create_langchain,
    wrap,
)

REPO = Path(__file__).resolve().parents[3]
DOCS = REPO / "docs" / "langchain.md"
QUESTION = "How do I renew a library card?"


def demo_corpus() -> Path:
    return Path(rk.__file__).parent / "demo" / "corpus.jsonl"


@pytest.fixture(scope="module")
def wordllama() -> Any:
    return create_embedder("wordllama")


@pytest.fixture(scope="module")
def documents() -> list[Document]:
    records = [json.loads(line) for line in demo_corpus().read_text().splitlines() if line]
    return [
        Document(
            page_content=f"{r['title']}\n{r['text']}" if r.get("title") else r["text"],
            metadata={"doc_id": r["_id"]},
        )
        for r in records
    ]


@pytest.fixture(scope="module")
def store(documents: list[Document], wordllama: Any) -> InMemoryVectorStore:
    store = InMemoryVectorStore(RetrievalkitEmbeddings(wordllama))
    store.add_documents(documents)
    return store


def test_a_vector_store_retriever_ranks_as_the_built_in_dense_retriever(
    store: InMemoryVectorStore,
) -> None:
    adapter = LangChainRetriever(
        store.as_retriever(), id_field="metadata.doc_id", doc_id_separator="#"
    )
    built_in = check_retriever(
        "dense", corpus=str(demo_corpus()), doc_id_separator="#", cache_dir="",
        probe_questions=["library card"],
    )  # fmt: skip
    golden = rk.load_set("demo")
    for question in golden.questions:
        # The built-in collapses chunks too: compare distinct documents, best first.
        expected = list(dict.fromkeys(built_in.retrieve(question.question, 40)))[:10]
        got = list(dict.fromkeys(adapter.retrieve(question.question, 40)))[:10]
        assert got == expected, question.id
    through_langchain = rk.evaluate(golden, adapter, name="langchain-dense", git_commit=None)
    through_built_in = rk.evaluate(golden, built_in, name="dense", git_commit=None)
    assert "ndcg@10" in through_built_in.metrics
    for metric, value in through_built_in.metrics.items():
        assert through_langchain.metrics[metric].mean == value.mean, metric


def test_the_limit_reaches_k_on_a_copy_and_batches_answer_as_single_calls(
    documents: list[Document],
) -> None:
    bm25 = BM25Retriever.from_documents(documents)  # k = 4 as built
    adapter = LangChainRetriever(bm25, id_field="metadata.doc_id", doc_id_separator="#")
    direct = BM25Retriever.from_documents(documents, k=12).invoke(QUESTION)
    expected = [d.metadata["doc_id"].split("#")[0] for d in direct]
    assert adapter.retrieve(QUESTION, 12) == expected
    assert len(expected) == 12
    assert bm25.k == 4  # the team's object is not changed
    as_built = LangChainRetriever(bm25, id_field="metadata.doc_id", set_k=False)
    assert len(as_built.retrieve(QUESTION, 12)) == 4
    check_retriever(lambda: adapter, probe_questions=[QUESTION, "opening hours"])
    questions = [QUESTION, "opening hours", "lost card"]
    assert adapter.retrieve_many(questions, 7) == [adapter.retrieve(q, 7) for q in questions]


def test_an_ensemble_reports_its_parts_and_the_fusion(
    documents: list[Document], store: InMemoryVectorStore
) -> None:
    bm25 = BM25Retriever.from_documents(documents)
    dense = store.as_retriever()
    adapter = wrap(EnsembleRetriever(retrievers=[bm25, dense]), id_field="metadata.doc_id")
    assert isinstance(adapter, StagedLangChainRetriever)
    # A retriever that calls no other has no stages: its ranking is the answer.
    assert not hasattr(wrap(bm25), "retrieve_stages")
    stages = adapter.retrieve_stages(QUESTION, 6)
    assert list(stages) == ["BM25Retriever", "VectorStoreRetriever", "fusion"]
    ids = LangChainRetriever(bm25, id_field="metadata.doc_id")
    assert stages["BM25Retriever"] == ids.retrieve(QUESTION, 6)
    assert stages["VectorStoreRetriever"] == LangChainRetriever(
        dense, id_field="metadata.doc_id"
    ).retrieve(QUESTION, 6)
    assert stages["fusion"] == adapter.retrieve(QUESTION, 6)
    assert set(stages["fusion"]) <= set(stages["BM25Retriever"]) | set(
        stages["VectorStoreRetriever"]
    )
    batched = adapter.retrieve_many_stages([QUESTION, "opening hours"], 6)
    assert batched[0] == stages
    assert batched[1] == adapter.retrieve_stages("opening hours", 6)
    # A nested ensemble's parts under its name, the outer fusion last.
    named = bm25.with_config(run_name="bm25")
    outer = EnsembleRetriever(retrievers=[EnsembleRetriever(retrievers=[named, dense]), bm25])
    nested = StagedLangChainRetriever(outer, id_field="metadata.doc_id").retrieve_stages(
        QUESTION, 5
    )
    assert list(nested) == [
        "EnsembleRetriever.bm25",
        "EnsembleRetriever.VectorStoreRetriever",
        "EnsembleRetriever.fusion",
        "BM25Retriever",
        "fusion",
    ]


def test_a_compression_retriever_reports_its_base_and_the_rerank(
    documents: list[Document], wordllama: Any
) -> None:
    from langchain_classic.retrievers import ContextualCompressionRetriever
    from langchain_classic.retrievers.document_compressors import EmbeddingsFilter

    bm25 = BM25Retriever.from_documents(documents)
    # Keeps every document and orders them by embedding similarity: a bi-encoder rerank.
    reorder = EmbeddingsFilter(
        embeddings=RetrievalkitEmbeddings(wordllama), k=None, similarity_threshold=-1.0
    )
    compression = ContextualCompressionRetriever(base_compressor=reorder, base_retriever=bm25)
    adapter = wrap(compression, id_field="metadata.doc_id")
    stages = adapter.retrieve_stages(QUESTION, 8)
    assert list(stages) == ["BM25Retriever", "rerank"]
    # The limit reached the base retriever through the compression retriever.
    assert stages["BM25Retriever"] == wrap(bm25, id_field="metadata.doc_id").retrieve(QUESTION, 8)
    assert sorted(stages["rerank"]) == sorted(stages["BM25Retriever"])
    assert stages["rerank"] != stages["BM25Retriever"]


def test_the_documented_retriever_runs_with_its_stages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = DOCS.read_text(encoding="utf-8")
    python = re.search(r"```python\n(.*?)```", text, re.S)
    toml = re.search(r"```toml\n(.*?)```", text, re.S)
    assert python and toml
    (tmp_path / "my_rag.py").write_text(python.group(1), encoding="utf-8")
    (tmp_path / "retrievalkit.toml").write_text(toml.group(1), encoding="utf-8")
    shutil.copyfile(demo_corpus(), tmp_path / "corpus.jsonl")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    sys.modules.pop("my_rag", None)
    run = rk.evaluate("demo", "rag-retriever", config=tmp_path / "retrievalkit.toml",
                      git_commit=None)  # fmt: skip
    assert run.record.manifest.plugin == "langchain"
    assert run.metrics["ndcg@10"].mean > 0.3
    assert run.record.stages is not None
    assert run.record.stages.order == ("BM25Retriever", "VectorStoreRetriever", "fusion")
    assert run.record.stages.metrics["fusion"]["ndcg@10"].mean == run.metrics["ndcg@10"].mean
    # Found by its entry point; fusion's top k depends on k, as approximate search does.
    retriever = check_retriever(
        "langchain", factory="my_rag:build_retriever", id_field="metadata.doc_id",
        doc_id_separator="#", probe_questions=[QUESTION], approximate=True,
    )  # fmt: skip
    stages = retriever.retrieve_stages(QUESTION, 10)
    assert list(stages) == ["BM25Retriever", "VectorStoreRetriever", "fusion"]
    assert stages["fusion"] == retriever.retrieve(QUESTION, 10)


def test_the_embeddings_are_the_embedder_s_vectors(wordllama: Any) -> None:
    texts = ["library card", "opening hours on Sunday", "late fees", "e-books"]
    embeddings = RetrievalkitEmbeddings(wordllama, batch_size=3)
    assert np.array_equal(
        np.asarray(embeddings.embed_documents(texts), dtype=np.float32), wordllama.embed(texts)
    )
    assert np.array_equal(
        np.asarray(embeddings.embed_query(texts[1]), dtype=np.float32),
        embed_queries(wordllama, [texts[1]])[0],
    )
    assert RetrievalkitEmbeddings("wordllama").model_id == wordllama.model_id
    with pytest.raises(InputError, match="batch_size"):
        RetrievalkitEmbeddings(wordllama, batch_size=0)


def test_bad_options_and_factories_say_what_went_wrong(
    store: InMemoryVectorStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    retriever = store.as_retriever()
    with pytest.raises(InputError, match=re.escape("'id' or 'metadata.doc_id'")):
        LangChainRetriever(retriever, id_field="metadata.")
    with pytest.raises(PluginError, match=re.escape("no metadata.missing")):
        LangChainRetriever(retriever, id_field="metadata.missing").retrieve("library card", 3)
    # The default id_field, over documents that keep their id elsewhere.
    elsewhere = BM25Retriever.from_documents([Document("a card", metadata={"source": "d1"})])
    with pytest.raises(PluginError, match=re.escape("no metadata.doc_id (stopped at 'doc_id')")):
        LangChainRetriever(elsewhere).retrieve("card", 3)
    assert LangChainRetriever(elsewhere, id_field="metadata.source").retrieve("card", 3) == ["d1"]
    with pytest.raises(InputError, match="max_concurrency"):
        LangChainRetriever(retriever, max_concurrency=0)
    with pytest.raises(InputError, match="needs the option 'factory'"):
        create_langchain()
    with pytest.raises(InputError, match="module:function"):
        create_langchain("not-a-reference")
    with pytest.raises(InputError, match="cannot import no_such_module_rk"):
        create_langchain("no_such_module_rk:build")
    (tmp_path / "team_rk.py").write_text(
        "def broken():\n    raise FileNotFoundError('corpus.jsonl')\n"
        "def wrong():\n    return 'a string'\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError, match=re.escape("team_rk:broken failed while building the "
                                                    "retriever: FileNotFoundError")):  # fmt: skip
        create_langchain("team_rk:broken")
    with pytest.raises(InputError, match="returned str, not a LangChain retriever"):
        create_langchain("team_rk:wrong")
