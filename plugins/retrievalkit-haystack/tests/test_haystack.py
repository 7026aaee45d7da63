"""The haystack retriever against Haystack's real in-memory store, retrievers and joiner."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import retrievalkit as rk
from haystack import Document, Pipeline
from haystack.components.retrievers.in_memory import (
    InMemoryBM25Retriever,
    InMemoryEmbeddingRetriever,
)
from haystack.document_stores.in_memory import InMemoryDocumentStore
from retrievalkit.plugin_api import InputError, PluginError, create_embedder
from retrievalkit.testing import check_retriever

from retrievalkit_haystack import HaystackRetriever, create_haystack
from retrievalkit_haystack.embedders import RetrievalkitDocumentEmbedder, RetrievalkitTextEmbedder

REPO = Path(__file__).resolve().parents[3]
DOCS = REPO / "docs" / "haystack.md"


def demo_corpus() -> Path:
    import retrievalkit

    return Path(retrievalkit.__file__).parent / "demo" / "corpus.jsonl"


@pytest.fixture(scope="module")
def wordllama() -> Any:
    return create_embedder("wordllama")


@pytest.fixture(scope="module")
def store(wordllama: Any) -> InMemoryDocumentStore:
    """The demo corpus in Haystack's store, embedded by retrievalkit's wordllama."""
    import json

    records = [json.loads(line) for line in demo_corpus().read_text().splitlines() if line]
    documents = [
        Document(
            content=f"{r['title']}\n{r['text']}" if r.get("title") else r["text"],
            meta={"doc_id": r["_id"]},
        )
        for r in records
    ]
    store = InMemoryDocumentStore(embedding_similarity_function="cosine")
    store.write_documents(RetrievalkitDocumentEmbedder(wordllama).run(documents)["documents"])
    return store


def embedding_pipeline(store: InMemoryDocumentStore, embedder: Any) -> Pipeline:
    pipeline = Pipeline()
    pipeline.add_component("text_embedder", RetrievalkitTextEmbedder(embedder))
    pipeline.add_component("embedding", InMemoryEmbeddingRetriever(store))
    pipeline.connect("text_embedder.embedding", "embedding.query_embedding")
    return pipeline


def test_an_embedding_pipeline_ranks_as_the_built_in_dense_retriever(
    store: InMemoryDocumentStore, wordllama: Any, tmp_path: Path
) -> None:
    adapter = HaystackRetriever(
        embedding_pipeline(store, wordllama), id_field="meta.doc_id", doc_id_separator="#"
    )
    # The built-in dense retriever by its plugin name, with the same embedder.
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
    through_haystack = rk.evaluate(golden, adapter, name="haystack-dense", git_commit=None)
    through_built_in = rk.evaluate(golden, built_in, name="dense", git_commit=None)
    assert "ndcg@10" in through_built_in.metrics
    for metric, value in through_built_in.metrics.items():
        assert through_haystack.metrics[metric].mean == value.mean, metric


def test_the_documented_pipeline_runs_with_its_stages(
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
    run = rk.evaluate("demo", "rag-pipeline", config=tmp_path / "retrievalkit.toml",
                      git_commit=None)  # fmt: skip
    assert run.record.manifest.plugin == "haystack"
    assert run.metrics["ndcg@10"].mean > 0.3
    retriever = create_haystack(
        "my_rag:build_pipeline", output="joiner.documents", id_field="meta.doc_id",
        doc_id_separator="#",
    )  # fmt: skip
    question = rk.load_set("demo").questions[0].question
    stages = retriever.retrieve_stages(question, 10)
    assert list(stages) == ["bm25.documents", "embedding.documents", "joiner.documents"]
    assert stages["joiner.documents"] == retriever.retrieve(question, 10)
    # RRF of the two lists: whatever the joiner returns came from one of them.
    assert set(stages["joiner.documents"]) <= set(stages["bm25.documents"]) | set(
        stages["embedding.documents"]
    )


def test_a_component_alone_gets_the_question_and_the_limit(store: InMemoryDocumentStore) -> None:
    component = InMemoryBM25Retriever(store)
    adapter = HaystackRetriever(component, id_field="meta.doc_id", doc_id_separator="#")
    question = "How do I renew a library card?"
    direct = component.run(query=question, top_k=5)["documents"]
    expected = [d.meta["doc_id"].split("#")[0] for d in direct]
    assert adapter.retrieve(question, 5) == expected
    assert len(adapter.retrieve(question, 2)) <= 2
    check_retriever(lambda: adapter, probe_questions=[question])


def test_bad_options_name_the_option(store: InMemoryDocumentStore, wordllama: Any) -> None:
    pipeline = embedding_pipeline(store, wordllama)
    with pytest.raises(InputError, match=re.escape("no open input nowhere.query")):
        HaystackRetriever(pipeline, inputs=["nowhere.query"])
    with pytest.raises(InputError, match=re.escape("embedding.documents")):
        HaystackRetriever(pipeline, output="text_embedder.embedding")
    with pytest.raises(InputError, match=re.escape("'id' or 'meta.doc_id'")):
        HaystackRetriever(pipeline, id_field="meta.")
    with pytest.raises(PluginError, match=re.escape("no meta.missing")):
        HaystackRetriever(pipeline, id_field="meta.missing").retrieve("library card", 3)
    with pytest.raises(InputError, match="module:function"):
        create_haystack("not-a-reference")
    with pytest.raises(InputError, match="cannot import no_such_module_rk"):
        create_haystack("no_such_module_rk:build")
    with pytest.raises(InputError, match="needs the option 'factory'"):
        create_haystack()
