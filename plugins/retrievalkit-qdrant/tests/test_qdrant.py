"""The qdrant retriever and ``retrievalkit qdrant index``: the real qdrant-client, on disk."""

from __future__ import annotations

import functools
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from qdrant_client import QdrantClient
from retrievalkit_qdrant.retriever import create_qdrant
from support import CORPUS, run_cli, write_config

import retrievalkit as rk
from retrievalkit.plugin_api import InputError, RetrievalkitError, create_embedder, read_corpus
from retrievalkit.testing import check_retriever

MODEL = "wordllama/l2_supercat_256"


@pytest.fixture
def folder(demo_folder: Path, tmp_path: Path) -> Path:
    """A copy of the demo collection's folder, the test's own (local mode locks a folder)."""
    copy = tmp_path / "store"
    shutil.copytree(demo_folder, copy)
    return copy


@pytest.fixture
def exact(folder: Path) -> Iterator[Any]:
    retriever = create_qdrant(
        path=str(folder), collection="demo", embedder="wordllama", search="exact",
        doc_id_separator="#",
    )  # fmt: skip
    yield retriever
    retriever.close()


@functools.cache
def dense() -> Any:
    """The built-in dense retriever over the demo corpus, checked by the contract kit once."""
    return check_retriever(
        "dense", corpus=str(CORPUS), doc_id_separator="#", cache_dir="",
        probe_questions=["library card"],
    )  # fmt: skip


def test_the_collection_holds_the_embedders_vectors_and_records_the_model(folder: Path) -> None:
    client = QdrantClient(path=str(folder))
    try:
        metadata = client.get_collection("demo").config.metadata
        points, _ = client.scroll("demo", limit=100, with_vectors=True, with_payload=True)
    finally:
        client.close()
    assert metadata is not None and metadata["kind"] == "retrievalkit-qdrant"
    assert (metadata["model_id"], metadata["dimensions"], metadata["distance"]) == (
        MODEL, 256, "Cosine",
    )  # fmt: skip
    assert (metadata["m"], metadata["ef_construct"], metadata["documents"]) == (16, 100, 55)
    assert metadata["complete"] is True
    documents = list(read_corpus(CORPUS))
    assert sorted(point.id for point in points) == list(range(len(documents)))
    by_id = {point.id: point for point in points}
    vectors = create_embedder("wordllama").embed([f"{d.title}\n{d.text}" for d in documents])
    for position, document in enumerate(documents):
        assert by_id[position].payload == {"doc_id": document.id}
        # Qdrant scales cosine vectors to unit length; wordllama's already are.
        assert np.allclose(by_id[position].vector, vectors[position], atol=1e-6)


def test_exact_search_ranks_as_the_built_in_dense_retriever(exact: Any) -> None:
    built_in = dense()
    golden = rk.load_set("demo")
    for question in golden.questions:
        assert exact.retrieve(question.question, 30) == built_in.retrieve(question.question, 30)
    questions = [question.question for question in golden.questions]
    assert exact.retrieve_many(questions, 10) == [exact.retrieve(q, 10) for q in questions]
    scored = exact.retrieve_scored(questions[0], 5)
    assert [score for _, score in scored] == sorted((s for _, s in scored), reverse=True)
    assert -1.0 <= scored[-1][1] <= scored[0][1] <= 1.0 + 1e-6


def test_eval_scores_as_dense_and_records_the_model_in_the_manifest(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # dense-demo's embedding cache goes here
    common = {"plugin": "qdrant", "path": str(folder), "collection": "demo",
              "embedder": "wordllama", "doc_id_separator": "#"}  # fmt: skip
    config = write_config(tmp_path, **{"q-exact": {**common, "search": "exact"}})
    run = rk.evaluate("demo", "q-exact", config=config, git_commit=None)
    reference = rk.evaluate("demo", "dense-demo", git_commit=None)
    assert "ndcg@10" in run.metrics and set(run.metrics) == set(reference.metrics)
    for metric in run.metrics:
        assert run.metrics[metric].mean == reference.metrics[metric].mean, metric
    manifest = run.record.manifest
    assert (manifest.embedding_backend, manifest.embedding_model_id) == ("qdrant", MODEL)
    extra = manifest.extra
    assert extra["qdrant.collection"] == "demo" and extra["qdrant.mode"] == "local"
    assert (extra["qdrant.m"], extra["qdrant.ef_construct"]) == ("16", "100")
    assert extra["qdrant.search"] == "exact" and extra["qdrant.location"] == str(folder)
    assert extra["qdrant.search_used"] == "exact (local mode builds no HNSW index)"


def test_fidelity_of_hnsw_against_exact_search(folder: Path, tmp_path: Path) -> None:
    common = {"plugin": "qdrant", "path": str(folder), "collection": "demo",
              "embedder": "wordllama", "doc_id_separator": "#"}  # fmt: skip
    write_config(
        tmp_path,
        **{"q-hnsw": {**common, "hnsw_ef": 8}, "q-exact": {**common, "search": "exact"}},
    )
    code, out, err = run_cli(
        "fidelity", "--set", "demo", "--retriever", "q-hnsw", "--reference", "q-exact",
        "--k", "10", "--format", "json", cwd=tmp_path,
    )  # fmt: skip
    assert code == 0, err
    overall = json.loads(out)["overall"]
    # Local mode searches every point whatever the search asks: HNSW recall is exactly 1.
    assert overall["overlap@10"]["mean"] == 1.0 and overall["overlap@10"]["n"] == 75


@pytest.mark.parametrize("search", ["exact", "hnsw"])
def test_the_retriever_keeps_retrievalkits_retriever_contract(folder: Path, search: str) -> None:
    retriever = check_retriever(
        "qdrant",
        probe_questions=["How do I get a library card?"],
        approximate=search == "hnsw",
        path=str(folder),
        collection="demo",
        embedder="wordllama",
        search=search,
    )
    assert retriever.identifier == f"qdrant:demo:{search}"
    retriever.close()


def test_an_in_memory_ephemeral_collection_keeps_the_contract_and_ranks_as_dense() -> None:
    retriever = check_retriever(
        "qdrant", probe_questions=["library card"], path=":memory:", collection="demo",
        embedder="wordllama", ephemeral=True, corpus=str(CORPUS), cache_dir="",
        doc_id_separator="#",
    )  # fmt: skip
    assert retriever.ephemeral and retriever.describe()["qdrant.mode"] == "memory"
    question = "Can I renew a book online?"
    assert retriever.retrieve(question, 10) == dense().retrieve(question, 10)
    retriever.close()


@pytest.mark.parametrize(
    ("options", "exit_code", "says"),
    [
        ({"collection": "nothing_here"}, 2, "has no Qdrant collection nothing_here"),
        (
            {"embedder_options": {"dimensions": 128}},
            2,
            f"holds vectors of {MODEL} (256 dimensions), but the embedder is "
            "wordllama/l2_supercat_256-d128 (128)",
        ),
        ({"search": "fuzzy"}, 2, "field 'search': must be 'hnsw' or 'exact'"),
        ({"hnsw_ef": 0}, 2, "field 'hnsw_ef': must be a whole number from 1 to 4096"),
        ({"api_key": "hunter2"}, 2, "secrets are not accepted"),
        ({"url": "http://127.0.0.1:9"}, 2, "give exactly one of 'path'"),
        ({"path": ":memory:"}, 2, "starts empty"),
        ({"corpus": str(CORPUS)}, 2, "corpus applies only with ephemeral = true"),
        ({"collection": "../escape"}, 2, "expected a collection name"),
    ],
)
def test_configuration_errors_name_the_option_with_their_exit_code(
    folder: Path, options: dict[str, Any], exit_code: int, says: str
) -> None:
    settings = {"path": str(folder), "collection": "demo", "embedder": "wordllama", **options}
    with pytest.raises(RetrievalkitError) as raised:
        create_qdrant(**settings)
    assert raised.value.exit_code == exit_code
    assert says in str(raised.value) and "hunter2" not in str(raised.value)
    # Nothing keeps the folder locked after a refusal.
    QdrantClient(path=str(folder)).close()


def test_a_collection_qdrant_index_did_not_build_is_refused(folder: Path) -> None:
    from qdrant_client import models

    client = QdrantClient(path=str(folder))
    client.create_collection("theirs", models.VectorParams(size=4, distance=models.Distance.DOT))
    client.close()
    with pytest.raises(InputError, match="was not built by 'retrievalkit qdrant index'"):
        create_qdrant(path=str(folder), collection="theirs", embedder="wordllama")
    code, _, err = run_cli("qdrant", "drop", "--collection", "theirs", "--path", str(folder))
    assert code == 2 and "it is left alone" in err, err
    client = QdrantClient(path=str(folder))
    assert client.collection_exists("theirs")
    client.close()


def test_an_unreachable_server_is_one_clear_line_and_exit_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RK_QDRANT_KEY", "s3cret-key-value")
    with pytest.raises(RetrievalkitError) as raised:
        create_qdrant(
            url="http://127.0.0.1:9", api_key_env="RK_QDRANT_KEY", collection="demo",
            embedder="wordllama", timeout=5,
        )  # fmt: skip
    message = str(raised.value)
    assert raised.value.exit_code == 3
    assert message.startswith("cannot reach Qdrant at http://127.0.0.1:9 while opening the")
    assert "Connection refused" in message and "s3cret" not in message
    write_config(
        tmp_path,
        remote={"plugin": "qdrant", "url": "http://127.0.0.1:9", "collection": "demo",
                "embedder": "wordllama", "api_key_env": "RK_QDRANT_KEY", "timeout": 5},
    )  # fmt: skip
    code, out, err = run_cli("eval", "--set", "demo", "--retriever", "remote", "--no-save",
                             cwd=tmp_path)  # fmt: skip
    assert code == 3, err
    assert err.count("\n") == 1 and "cannot reach Qdrant at http://127.0.0.1:9" in err
    assert "s3cret" not in err + out
    code, _, err = run_cli(
        "qdrant", "index", "--corpus", str(CORPUS), "--collection", "demo", "--url",
        "http://127.0.0.1:9", "--embedder", "wordllama", "--cache-dir", "", "--timeout", "5",
    )  # fmt: skip
    assert code == 3 and "cannot reach Qdrant at http://127.0.0.1:9" in err


def test_an_api_key_variable_that_is_not_set_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RK_QDRANT_MISSING", raising=False)
    with pytest.raises(InputError, match="RK_QDRANT_MISSING") as raised:
        create_qdrant(
            url="https://qdrant.example.com", api_key_env="RK_QDRANT_MISSING",
            collection="demo", embedder="wordllama",
        )  # fmt: skip
    assert raised.value.field == "api-key-env"


def test_index_refuses_an_existing_collection_recreates_and_drops(folder: Path) -> None:
    common = ["qdrant", "index", "--corpus", str(CORPUS), "--collection", "demo", "--path",
              str(folder), "--embedder", "wordllama", "--cache-dir", ""]  # fmt: skip
    code, _, err = run_cli(*common)
    assert code == 2 and "already exists" in err and "--recreate" in err
    code, out, err = run_cli(*common, "--recreate", "--m", "8", "--ef-construct", "32")
    assert code == 0, err
    assert "HNSW m=8 ef_construct=32" in out
    code, _, err = run_cli(*common, "--recreate", "--m", "1")
    assert code == 2 and "--m" in err and "from 2 to 128" in err
    code, _, err = run_cli("qdrant", "drop", "--collection", "demo", "--path", str(folder),
                           "--url", "x")  # fmt: skip
    assert code == 2 and "not allowed with argument" in err
    code, out, err = run_cli("qdrant", "drop", "--collection", "demo", "--path", str(folder))
    assert code == 0, err
    assert f"dropped demo in {folder}" in out
    code, _, err = run_cli("qdrant", "drop", "--collection", "demo", "--path", str(folder))
    assert code == 2 and "has no Qdrant collection demo" in err
    with pytest.raises(InputError, match="has no Qdrant collection demo"):
        create_qdrant(path=str(folder), collection="demo", embedder="wordllama")


def test_a_collection_whose_build_broke_off_is_refused_as_incomplete(folder: Path) -> None:
    client = QdrantClient(path=str(folder))
    client.update_collection("demo", metadata={"complete": False})  # as a killed build leaves it
    client.close()
    with pytest.raises(InputError, match="is incomplete") as raised:
        create_qdrant(path=str(folder), collection="demo", embedder="wordllama")
    assert "--recreate --collection demo" in str(raised.value)
