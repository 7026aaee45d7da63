"""kNN on the real node: vectors indexed with the embedder in _meta, exact and HNSW search,
filters, hybrid fusion, the embedding model in the manifest, and the errors a user meets."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from retrievalkit_elasticsearch.vectors import (
    create_elasticsearch_hybrid,
    create_elasticsearch_knn,
)
from support import DEMO_CORPUS, cli, index_corpus, write_config

from retrievalkit.embedders import create_embedder
from retrievalkit.errors import InputError
from retrievalkit.formats.corpus import read_corpus
from retrievalkit.retrievers.dense import DenseRetriever
from retrievalkit.testing import check_retriever

PROBES = ["How do I renew a library card?", "Can I print documents at the library?"]
QUESTIONS = [
    "Is there a quiet room where I can study?",
    "How much does it cost to replace a lost card?",
    "Can I bring my dog into the building?",
    "wifi password for laptops",
    "who lived in my house a hundred years ago",
]


@pytest.fixture(scope="module")
def embedding_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("embeddings")


def _vector_index(es_url: str, name: str, cache: Path, *extra: str) -> str:
    index_corpus(
        es_url,
        DEMO_CORPUS,
        name,
        "--embedder",
        "wordllama",
        "--embedding-cache",
        str(cache),
        *extra,
    )
    return name


@pytest.fixture(scope="module")
def hnsw_index(es_url: str, index_names: Any, embedding_cache: Path) -> str:
    return _vector_index(
        es_url,
        index_names("knn-hnsw"),
        embedding_cache,
        "--hnsw-m",
        "8",
        "--hnsw-ef-construction",
        "40",
    )


@pytest.fixture(scope="module")
def flat_index(es_url: str, index_names: Any, embedding_cache: Path) -> str:
    return _vector_index(es_url, index_names("knn-flat"), embedding_cache, "--vector-index", "flat")


@pytest.fixture(scope="module")
def exact(embedding_cache: Path) -> DenseRetriever:
    """retrievalkit's own exact search over the same vectors: the reference."""
    return DenseRetriever(DEMO_CORPUS, create_embedder("wordllama"), cache_dir=embedding_cache)


# --- the index -------------------------------------------------------------------------------


def test_the_mapping_records_the_embedder_and_the_hnsw_setup(es: Any, hnsw_index: str) -> None:
    mapping = es.indices.get_mapping(index=hnsw_index)[hnsw_index]["mappings"]
    field = mapping["properties"]["embedding"]
    assert field["type"] == "dense_vector"
    assert field["dims"] == 256
    assert field["similarity"] == "cosine"
    assert field["index_options"] == {"type": "hnsw", "m": 8, "ef_construction": 40}
    meta = mapping["_meta"]["retrievalkit"]["embedding"]
    assert meta["model_id"] == "wordllama/l2_supercat_256"
    assert (meta["dimensions"], meta["similarity"], meta["embedder"]) == (
        256,
        "cosine",
        "wordllama",
    )


def test_a_flat_index_is_exact(es: Any, flat_index: str) -> None:
    mapping = es.indices.get_mapping(index=flat_index)[flat_index]["mappings"]
    assert mapping["properties"]["embedding"]["index_options"] == {"type": "flat"}


def test_stored_vectors_are_the_embedders_bits(es: Any, hnsw_index: str) -> None:
    documents = list(read_corpus(DEMO_CORPUS))
    expected = create_embedder("wordllama").embed(
        [f"{d.title}\n{d.text}" if d.title else d.text for d in documents[:5]]
    )
    for row, document in enumerate(documents[:5]):
        # Elasticsearch 9 leaves vectors out of _source unless asked.
        body = {"query": {"ids": {"values": [document.id]}}, "_source": {"exclude_vectors": False}}
        (hit,) = es.search(index=hnsw_index, body=body)["hits"]["hits"]
        stored = hit["_source"]["embedding"]
        assert np.asarray(stored, dtype=np.float32).tobytes() == expected[row].tobytes()


# --- search ----------------------------------------------------------------------------------


def test_flat_knn_ranks_as_retrievalkits_exact_search(
    es_url: str, flat_index: str, exact: DenseRetriever
) -> None:
    knn = create_elasticsearch_knn(url=es_url, index=flat_index)
    for question in QUESTIONS:
        assert knn.retrieve(question, 10) == exact.retrieve(question, 10), question
        ours = [score for _, score in exact.retrieve_scored(question, 3)]
        # Elasticsearch reports cosine as (1 + cosine) / 2.
        theirs = [2 * score - 1 for _, score in knn.retrieve_scored(question, 3)]
        np.testing.assert_allclose(theirs, ours, atol=1e-5)


@pytest.mark.parametrize("kind", ["hnsw", "flat"])
def test_knn_keeps_the_retriever_contract(
    kind: str, es_url: str, hnsw_index: str, flat_index: str
) -> None:
    index = hnsw_index if kind == "hnsw" else flat_index
    retriever = check_retriever(
        "elasticsearch-knn",
        probe_questions=PROBES,
        approximate=kind == "hnsw",
        url=es_url,
        index=index,
        doc_id_separator="#",
    )
    assert retriever.embedding_backend == "elasticsearch"
    assert retriever.embedding_model_id == "wordllama/l2_supercat_256"


def test_hnsw_on_a_small_corpus_finds_the_exact_neighbours(
    es_url: str, hnsw_index: str, exact: DenseRetriever
) -> None:
    knn = create_elasticsearch_knn(url=es_url, index=hnsw_index, num_candidates=55)
    found = [len(set(knn.retrieve(q, 10)) & set(exact.retrieve(q, 10))) for q in QUESTIONS]
    assert found == [10] * len(QUESTIONS)


def test_a_filter_restricts_the_neighbours(es_url: str, flat_index: str) -> None:
    allowed = [doc.id for doc in read_corpus(DEMO_CORPUS)][::3]
    knn = create_elasticsearch_knn(
        url=es_url, index=flat_index, filter={"ids": {"values": allowed}}
    )
    for question in QUESTIONS:
        ranking = knn.retrieve(question, 10)
        assert len(ranking) == 10
        assert set(ranking) <= set(allowed), question
    batch = knn.retrieve_many(QUESTIONS, 10)
    assert batch == [knn.retrieve(question, 10) for question in QUESTIONS]


def test_k_and_num_candidates_are_what_the_node_is_asked(es_url: str, hnsw_index: str) -> None:
    knn = create_elasticsearch_knn(url=es_url, index=hnsw_index, k=5, num_candidates=3)
    body = knn.body(np.zeros(256, dtype=np.float32), 10)
    assert body["knn"]["k"] == 5
    assert body["knn"]["num_candidates"] == 5  # raised to k, which Elasticsearch requires
    assert len(knn.retrieve(PROBES[0], 10)) == 5


# --- hybrid ----------------------------------------------------------------------------------


def test_hybrid_falls_back_to_retrievalkits_rrf_without_the_rrf_retriever(
    es_url: str, hnsw_index: str
) -> None:
    from retrievalkit_elasticsearch.retriever import create_elasticsearch_bm25

    hybrid = create_elasticsearch_hybrid(url=es_url, index=hnsw_index, depth=20)
    assert "retrievalkit" in hybrid.describe()["hybrid.fusion"]
    bm25 = create_elasticsearch_bm25(url=es_url, index=hnsw_index)
    knn = create_elasticsearch_knn(url=es_url, index=hnsw_index)
    for question in QUESTIONS[:3]:
        totals: dict[str, float] = {}
        for leg in (bm25, knn):
            for rank, doc in enumerate(dict.fromkeys(leg.retrieve(question, 20)), 1):
                totals[doc] = totals.get(doc, 0.0) + 1 / (60 + rank)
        got = hybrid.retrieve_scored(question, 10)
        assert [score for _, score in got] == sorted(totals.values(), reverse=True)[:10]
    check_retriever(lambda: hybrid, probe_questions=PROBES, approximate=True)


def test_asking_for_elasticsearch_fusion_on_a_node_without_it_says_so(
    es_url: str, hnsw_index: str
) -> None:
    with pytest.raises(InputError) as caught:
        create_elasticsearch_hybrid(url=es_url, index=hnsw_index, fusion="elasticsearch")
    assert caught.value.field == "fusion"
    assert "rrf" in str(caught.value)


# --- errors ------------------------------------------------------------------------------------


def test_an_index_without_vectors_is_refused_with_what_to_do(es_url: str, demo_index: str) -> None:
    with pytest.raises(InputError) as caught:
        create_elasticsearch_knn(url=es_url, index=demo_index)
    assert "has no vectors" in str(caught.value)
    assert "--embedder" in str(caught.value)


def test_an_embedder_of_another_size_is_refused(es_url: str, hnsw_index: str) -> None:
    with pytest.raises(InputError) as caught:
        create_elasticsearch_knn(url=es_url, index=hnsw_index, embedder_options={"dimensions": 64})
    message = str(caught.value)
    assert "64-dimension" in message and "256-dimension" in message
    assert caught.value.field == "embedder_options"


def test_index_without_the_dense_extra_exits_2_naming_the_extra(
    es_url: str, index_names: Any, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    (site / "wordllama").mkdir(parents=True)
    (site / "wordllama" / "__init__.py").write_text(
        "raise ImportError(\"No module named 'wordllama'\")\n", encoding="utf-8"
    )
    name = index_names("knn-no-extra")
    done = cli(
        "es", "index", "--corpus", str(DEMO_CORPUS), "--index", name, "--url", es_url,
        "--embedder", "wordllama", env={"PYTHONPATH": str(site)},
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "pip install 'retrievalkit-eval[dense]'" in done.stderr
    assert "Traceback" not in done.stderr


# --- the manifest ----------------------------------------------------------------------------


def test_history_shows_a_reembedded_index_with_unchanged_options(
    es_url: str, index_names: Any, embedding_cache: Path, tmp_path: Path
) -> None:
    """The model lives in the index: re-embedding it changes the run's manifest, not its
    options, and history says what changed."""
    name = _vector_index(es_url, index_names("knn-swap"), embedding_cache)
    write_config(
        tmp_path,
        {
            "vectors": {
                "plugin": "elasticsearch-knn",
                "url": es_url,
                "index": name,
                "doc_id_separator": "#",
            }
        },
    )
    store = f"jsonl:///{tmp_path}/runs.jsonl"
    first = cli("eval", "--set", "demo", "--retriever", "vectors", "--store", store, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    _vector_index(es_url, name, embedding_cache, "--recreate", "--embedder-option", "dimensions=64")
    second = cli("eval", "--set", "demo", "--retriever", "vectors", "--store", store, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    runs = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    manifests = [run["manifest"] for run in runs]
    assert [m["embedding_model_id"] for m in manifests] == [
        "wordllama/l2_supercat_256",
        "wordllama/l2_supercat_256-d64",
    ]
    assert {m["embedding_backend"] for m in manifests} == {"elasticsearch"}
    assert manifests[0]["retriever_options_hash"] == manifests[1]["retriever_options_hash"]
    history = cli(
        "history", "--set", "demo", "--retriever", "vectors", "--store", store, "--format", "json",
        cwd=tmp_path,
    )  # fmt: skip
    assert history.returncode == 0, history.stderr
    newest = json.loads(history.stdout)[0]
    assert "embedding_model_id" in json.dumps(newest["changes"])
    assert "wordllama/l2_supercat_256-d64" in json.dumps(newest["changes"])


def test_bm25_on_a_vector_index_records_no_embedding(
    es_url: str, hnsw_index: str, tmp_path: Path
) -> None:
    write_config(tmp_path, {"words": {"url": es_url, "index": hnsw_index}})
    done = cli(
        "eval", "--set", "demo", "--retriever", "words", "--format", "json", "--no-save",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    manifest = json.loads(done.stdout)["manifest"]
    assert manifest["embedding_backend"] is None and manifest["embedding_model_id"] is None


def test_configuring_hybrid_through_the_cli(es_url: str, hnsw_index: str, tmp_path: Path) -> None:
    (tmp_path / "retrievalkit.toml").write_text(
        textwrap.dedent(
            f"""
            [retrievers.both]
            plugin = "elasticsearch-hybrid"
            url = "{es_url}"
            index = "{hnsw_index}"
            method = "weighted"
            alpha = 0.7
            doc_id_separator = "#"
            """
        ),
        encoding="utf-8",
    )
    done = cli(
        "eval", "--set", "demo", "--retriever", "both", "--format", "json", "--no-save",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["manifest"]["embedding_backend"] == "elasticsearch"
    assert summary["manifest"]["extra"]["fusion.method"].startswith("combsum")
    assert summary["errored"] == 0


def test_fidelity_of_hnsw_against_flat_through_the_cli(
    es_url: str, hnsw_index: str, flat_index: str, tmp_path: Path
) -> None:
    """ANN recall@10 as `retrievalkit fidelity` reports it, against the two retrievers."""
    from retrievalkit.demo import DemoSetProvider

    write_config(
        tmp_path,
        {
            "approx": {
                "plugin": "elasticsearch-knn",
                "url": es_url,
                "index": hnsw_index,
                "num_candidates": 10,
            },
            "exact": {"plugin": "elasticsearch-knn", "url": es_url, "index": flat_index},
        },
    )
    done = cli(
        "fidelity", "--set", "demo", "--retriever", "approx", "--reference", "exact",
        "--k", "10", "--format", "json", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    reported = json.loads(done.stdout)["overall"]["overlap@10"]["mean"]
    approx = create_elasticsearch_knn(url=es_url, index=hnsw_index, num_candidates=10)
    exact = create_elasticsearch_knn(url=es_url, index=flat_index)
    overlaps = []
    for question in DemoSetProvider().load("demo").questions:
        top = list(dict.fromkeys(exact.retrieve(question.question, 10)))
        mine = set(dict.fromkeys(approx.retrieve(question.question, 10)))
        overlaps.append(len(mine & set(top)) / len(top))
    assert reported == pytest.approx(sum(overlaps) / len(overlaps), abs=1e-12)


# --- ephemeral kNN and hybrid indices ---------------------------------------------------------


def _ephemeral(es_url: str, index: str, cache: Path, **extra: Any) -> dict[str, Any]:
    return {"url": es_url, "index": index, "ephemeral": True, "corpus": str(DEMO_CORPUS),
            "embedder": "wordllama", "embedding_cache": str(cache), **extra}  # fmt: skip


def test_an_ephemeral_flat_knn_index_ranks_as_exact_search_and_is_deleted(
    es: Any, es_url: str, index_names: Any, embedding_cache: Path, exact: DenseRetriever
) -> None:
    index = index_names("eph-knn")
    options = _ephemeral(es_url, index, embedding_cache, vector_index="flat")
    knn = create_elasticsearch_knn(**options)
    assert knn.ephemeral and es.indices.exists(index=index)
    meta = es.indices.get_mapping(index=index)[index]["mappings"]["_meta"]["retrievalkit"]
    assert meta["embedding"]["embedder"] == "wordllama"
    assert meta["embedding"]["index_type"] == "flat"
    for question in QUESTIONS:
        assert knn.retrieve(question, 10) == exact.retrieve(question, 10), question
    knn.close()
    assert not es.indices.exists(index=index)


def test_an_ephemeral_hybrid_builds_one_index_for_both_legs_and_deletes_it(
    es: Any, es_url: str, index_names: Any, embedding_cache: Path, hnsw_index: str
) -> None:
    import retrievalkit as rk

    index = index_names("eph-hybrid")
    options = _ephemeral(es_url, index, embedding_cache, hnsw_m=8, hnsw_ef_construction=40,
                         depth=20, fusion="retrievalkit")  # fmt: skip
    built = create_elasticsearch_hybrid(**options)
    same = create_elasticsearch_hybrid(
        url=es_url, index=hnsw_index, depth=20, fusion="retrievalkit"
    )
    for question in QUESTIONS:
        assert built.retrieve(question, 10) == same.retrieve(question, 10), question
    built.close()
    assert not es.indices.exists(index=index)
    run = rk.evaluate(DEMO_CORPUS.parent / "golden.jsonl", "elasticsearch-hybrid",
                      options=options, git_commit=None)  # fmt: skip
    assert run.errored == 0 and run.metrics["hit@10"].mean is not None
    import gc

    gc.collect()
    assert not es.indices.exists(index=index), "the run's ephemeral index outlived it"


def test_an_ephemeral_knn_index_needs_an_embedder_and_a_corpus(
    es: Any, es_url: str, index_names: Any, embedding_cache: Path
) -> None:
    index = index_names("eph-knn-bad")
    options = _ephemeral(es_url, index, embedding_cache)
    del options["embedder"]
    with pytest.raises(InputError, match="needs the option 'embedder'") as caught:
        create_elasticsearch_knn(**options)
    assert caught.value.field == "embedder"
    with pytest.raises(InputError, match="corpus applies only with ephemeral"):
        create_elasticsearch_knn(url=es_url, index=index, corpus=str(DEMO_CORPUS))
    with pytest.raises(InputError) as kind:
        create_elasticsearch_knn(**_ephemeral(es_url, index, embedding_cache, vector_index="ivf"))
    assert kind.value.field == "vector_index"
    # A check that fails after the build (a filter Elasticsearch refuses) deletes the index.
    with pytest.raises(InputError):
        create_elasticsearch_knn(**_ephemeral(es_url, index, embedding_cache,
                                              filter={"no_such_query": {}}))  # fmt: skip
    assert not es.indices.exists(index=index)
