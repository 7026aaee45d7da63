"""The llamaindex retriever against LlamaIndex's real VectorStoreIndex, BM25 and fusion."""

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
from llama_index.core import VectorStoreIndex
from llama_index.core.llms import MockLLM
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import TextNode
from llama_index.retrievers.bm25 import BM25Retriever
from retrievalkit.plugin_api import InputError, PluginError, create_embedder, embed_queries
from retrievalkit.testing import check_retriever

from retrievalkit_llamaindex import (
    LlamaIndexRetriever,
    RetrievalkitEmbedding,
    StagedLlamaIndexRetriever,
    create_llamaindex,
    wrap,
)

REPO = Path(__file__).resolve().parents[3]
DOCS = REPO / "docs" / "llamaindex.md"
QUESTION = "How do I renew a library card?"


def demo_corpus() -> Path:
    return Path(rk.__file__).parent / "demo" / "corpus.jsonl"


@pytest.fixture(scope="module")
def wordllama() -> Any:
    return create_embedder("wordllama")


@pytest.fixture(scope="module")
def nodes() -> list[TextNode]:
    """The demo corpus as nodes whose id sits in metadata, kept out of the embedded text."""
    records = [json.loads(line) for line in demo_corpus().read_text().splitlines() if line]
    return [
        TextNode(
            text=f"{r['title']}\n{r['text']}" if r.get("title") else r["text"],
            metadata={"doc_id": r["_id"]},
            excluded_embed_metadata_keys=["doc_id"],
            excluded_llm_metadata_keys=["doc_id"],
        )
        for r in records
    ]


@pytest.fixture(scope="module")
def index(nodes: list[TextNode], wordllama: Any) -> VectorStoreIndex:
    return VectorStoreIndex(nodes, embed_model=RetrievalkitEmbedding(wordllama))


def fusion(index: VectorStoreIndex, nodes: list[TextNode]) -> QueryFusionRetriever:
    return QueryFusionRetriever(
        [index.as_retriever(), BM25Retriever.from_defaults(nodes=nodes)],
        mode="reciprocal_rerank", num_queries=1, llm=MockLLM(), use_async=False,
    )  # fmt: skip


def test_a_vector_index_ranks_as_the_built_in_dense_retriever(index: VectorStoreIndex) -> None:
    adapter = LlamaIndexRetriever(
        index.as_retriever(), id_field="metadata.doc_id", doc_id_separator="#"
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
    through_llamaindex = rk.evaluate(golden, adapter, name="llamaindex-dense", git_commit=None)
    through_built_in = rk.evaluate(golden, built_in, name="dense", git_commit=None)
    assert "ndcg@10" in through_built_in.metrics
    for metric, value in through_built_in.metrics.items():
        assert through_llamaindex.metrics[metric].mean == value.mean, metric


def test_the_limit_reaches_similarity_top_k_on_a_copy(
    index: VectorStoreIndex, nodes: list[TextNode]
) -> None:
    bm25 = BM25Retriever.from_defaults(nodes=nodes)  # similarity_top_k = 2 as built
    adapter = LlamaIndexRetriever(bm25, id_field="metadata.doc_id", doc_id_separator="#")
    direct = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=12).retrieve(QUESTION)
    expected = [n.metadata["doc_id"].split("#")[0] for n in direct]
    assert adapter.retrieve(QUESTION, 12) == expected
    assert len(expected) == 12
    assert bm25.similarity_top_k == 2  # the team's object is not changed
    # Deeper than the corpus: capped at its size, as bm25s needs.
    assert len(adapter.retrieve(QUESTION, 100)) == len(nodes)
    as_built = LlamaIndexRetriever(bm25, id_field="metadata.doc_id", set_top_k=False)
    assert len(as_built.retrieve(QUESTION, 12)) == 2
    check_retriever(lambda: adapter, probe_questions=[QUESTION, "opening hours"])
    dense = LlamaIndexRetriever(index.as_retriever(), id_field="metadata.doc_id")
    check_retriever(lambda: dense, probe_questions=[QUESTION])


def test_a_fusion_reports_its_parts_and_the_fused_answer(
    index: VectorStoreIndex, nodes: list[TextNode]
) -> None:
    fused = fusion(index, nodes)
    adapter = wrap(fused, id_field="metadata.doc_id")
    assert isinstance(adapter, StagedLlamaIndexRetriever)
    stages = adapter.retrieve_stages(QUESTION, 6)
    assert list(stages) == ["VectorIndexRetriever", "BM25Retriever", "fusion"]
    vector, bm25 = fused._retrievers
    assert stages["VectorIndexRetriever"] == LlamaIndexRetriever(
        vector, id_field="metadata.doc_id"
    ).retrieve(QUESTION, 6)
    assert stages["BM25Retriever"] == LlamaIndexRetriever(
        bm25, id_field="metadata.doc_id"
    ).retrieve(QUESTION, 6)
    assert stages["fusion"] == adapter.retrieve(QUESTION, 6)
    assert set(stages["fusion"]) <= set(stages["VectorIndexRetriever"]) | set(
        stages["BM25Retriever"]
    )
    assert fused.similarity_top_k == 2 and vector.similarity_top_k == 2  # unchanged
    # A retriever that fuses nothing has no stages: its ranking is the answer.
    assert not hasattr(wrap(index.as_retriever()), "retrieve_stages")


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
    assert run.record.manifest.plugin == "llamaindex"
    assert run.metrics["ndcg@10"].mean > 0.3
    assert run.record.stages is not None
    assert run.record.stages.order == ("VectorIndexRetriever", "BM25Retriever", "fusion")
    assert run.record.stages.metrics["fusion"]["ndcg@10"].mean == run.metrics["ndcg@10"].mean
    # Found by its entry point; fusion's top k depends on k, as approximate search does.
    retriever = check_retriever(
        "llamaindex", factory="my_rag:build_retriever", doc_id_separator="#",
        probe_questions=[QUESTION], approximate=True,
    )  # fmt: skip
    stages = retriever.retrieve_stages(QUESTION, 10)
    assert list(stages) == ["VectorIndexRetriever", "BM25Retriever", "fusion"]
    assert stages["fusion"] == retriever.retrieve(QUESTION, 10)


def test_the_embedding_is_the_embedder_s_vectors(wordllama: Any) -> None:
    texts = ["library card", "opening hours on Sunday", "late fees", "e-books"]
    embedding = RetrievalkitEmbedding(wordllama, embed_batch_size=3)
    assert np.array_equal(
        np.asarray(embedding.get_text_embedding_batch(texts), dtype=np.float32),
        wordllama.embed(texts),
    )
    assert np.array_equal(
        np.asarray(embedding.get_query_embedding(texts[1]), dtype=np.float32),
        embed_queries(wordllama, [texts[1]])[0],
    )
    assert embedding.model_name == wordllama.model_id
    assert RetrievalkitEmbedding("wordllama").embedder.model_id == wordllama.model_id


def test_bad_options_and_factories_say_what_went_wrong(
    index: VectorStoreIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    retriever = index.as_retriever()
    with pytest.raises(InputError, match=re.escape("'node.ref_doc_id' or 'metadata.doc_id'")):
        LlamaIndexRetriever(retriever, id_field="metadata.")
    with pytest.raises(PluginError, match=re.escape("no metadata.missing")):
        LlamaIndexRetriever(retriever, id_field="metadata.missing").retrieve("library card", 3)
    # The default id_field, over nodes built without a source document.
    with pytest.raises(
        PluginError, match=re.escape("no node.ref_doc_id (stopped at 'ref_doc_id')")
    ):
        LlamaIndexRetriever(retriever).retrieve("library card", 3)
    with pytest.raises(InputError, match="set_top_k"):
        LlamaIndexRetriever(retriever, set_top_k="yes")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="as_retriever"):
        LlamaIndexRetriever(index)
    with pytest.raises(InputError, match="needs the option 'factory'"):
        create_llamaindex()
    with pytest.raises(InputError, match="module:function"):
        create_llamaindex("not-a-reference")
    with pytest.raises(InputError, match="cannot import no_such_module_rk"):
        create_llamaindex("no_such_module_rk:build")
    (tmp_path / "team_rk.py").write_text(
        "def broken():\n    raise FileNotFoundError('corpus.jsonl')\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError, match=re.escape("team_rk:broken failed while building the "
                                                    "retriever: FileNotFoundError")):  # fmt: skip
        create_llamaindex("team_rk:broken")
