"""The chroma retriever and ``retrievalkit chroma index``: the real chromadb, on disk."""

from __future__ import annotations

import functools
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import chromadb
import numpy as np
import pytest
from chromadb.config import Settings
from retrievalkit_chroma.retriever import create_chroma
from support import CORPUS, DEMO, run_cli, write_config

import retrievalkit as rk
from retrievalkit.plugin_api import InputError, RetrievalkitError, create_embedder, read_corpus
from retrievalkit.testing import check_retriever

MODEL = "wordllama/l2_supercat_256"


@pytest.fixture(autouse=True)
def no_chroma_embedding_function(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chroma's default embedding function downloads a model: any use of it fails a test."""
    from chromadb.utils.embedding_functions import onnx_mini_lm_l6_v2

    def refuse(*_: Any, **__: Any) -> None:
        raise AssertionError("Chroma's default embedding function was used")

    monkeypatch.setattr(onnx_mini_lm_l6_v2.ONNXMiniLM_L6_V2, "__call__", refuse)
    monkeypatch.setattr(
        onnx_mini_lm_l6_v2.ONNXMiniLM_L6_V2, "_download_model_if_not_exists", refuse
    )


def client(folder: Path) -> Any:
    return chromadb.PersistentClient(
        path=str(folder), settings=Settings(anonymized_telemetry=False)
    )


@pytest.fixture
def folder(demo_folder: Path, tmp_path: Path) -> Path:
    """A copy of the demo database, the test's own."""
    copy = tmp_path / "db"
    shutil.copytree(demo_folder, copy)
    return copy


@pytest.fixture
def exact(folder: Path) -> Iterator[Any]:
    retriever = create_chroma(
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
    collection = client(folder).get_collection("demo", embedding_function=None)
    metadata = collection.metadata
    assert metadata["retrievalkit:kind"] == "retrievalkit-chroma"
    assert (metadata["retrievalkit:model_id"], metadata["retrievalkit:dimensions"]) == (MODEL, 256)
    assert (metadata["hnsw:space"], metadata["hnsw:M"], metadata["hnsw:construction_ef"]) == (
        "cosine", 16, 100,
    )  # fmt: skip
    assert metadata["hnsw:search_ef"] == 100 and metadata["retrievalkit:documents"] == 55
    documents = list(read_corpus(CORPUS))
    stored = collection.get(include=["embeddings", "metadatas"])
    assert sorted(stored["ids"]) == sorted(d.id for d in documents)
    vectors = create_embedder("wordllama").embed([f"{d.title}\n{d.text}" for d in documents])
    for doc_id, vector, record in zip(
        stored["ids"], stored["embeddings"], stored["metadatas"], strict=True
    ):
        position = record["position"]
        assert documents[position].id == doc_id
        # Chroma scales cosine vectors to unit length again: equal to the last bit or so.
        assert np.allclose(np.asarray(vector, dtype=np.float32), vectors[position], atol=1e-7)
    names = [getattr(item, "name", item) for item in client(folder).list_collections()]
    assert names == ["demo"]  # the temporary build name is gone


def test_exact_search_ranks_as_the_built_in_dense_retriever(exact: Any) -> None:
    built_in = dense()
    questions = [question.question for question in rk.load_set("demo").questions]
    for question in questions:
        assert exact.retrieve(question, 30) == built_in.retrieve(question, 30)
        ours, theirs = exact.retrieve_scored(question, 30), built_in.retrieve_scored(question, 30)
        assert [score for _, score in ours] == pytest.approx([s for _, s in theirs], abs=1e-6)
    assert exact.retrieve_many(questions, 10) == [exact.retrieve(q, 10) for q in questions]


def test_hnsw_finds_what_exact_search_finds_on_the_demo(folder: Path, exact: Any) -> None:
    hnsw = create_chroma(path=str(folder), collection="demo", embedder="wordllama",
                         doc_id_separator="#")  # fmt: skip
    questions = [question.question for question in rk.load_set("demo").questions]
    found = hnsw.retrieve_many(questions, 10)
    overlap = [
        len(set(got) & set(exact.retrieve(q, 10))) / len(set(got))
        for q, got in zip(questions, found, strict=True)
    ]
    assert all(found) and min(overlap) >= 0.8, overlap
    best: dict[str, float] = {}
    for doc_id, score in exact.retrieve_scored(questions[0], 55):
        best.setdefault(doc_id, score)  # a document's best chunk comes first
    seen: set[str] = set()
    for doc_id, score in hnsw.retrieve_scored(questions[0], 5):
        if doc_id not in seen:  # 1 - cosine distance is the cosine exact search computes
            assert score == pytest.approx(best[doc_id], abs=1e-5)
            seen.add(doc_id)


def test_eval_scores_as_dense_and_records_the_model_in_the_manifest(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # dense-demo's embedding cache goes here
    common = {"plugin": "chroma", "path": str(folder), "collection": "demo",
              "embedder": "wordllama", "doc_id_separator": "#"}  # fmt: skip
    config = write_config(tmp_path, **{"c-exact": {**common, "search": "exact"}})
    run = rk.evaluate("demo", "c-exact", config=config, git_commit=None)
    reference = rk.evaluate("demo", "dense-demo", git_commit=None)
    assert "ndcg@10" in run.metrics and set(run.metrics) == set(reference.metrics)
    for metric in run.metrics:
        assert run.metrics[metric].mean == reference.metrics[metric].mean, metric
    manifest = run.record.manifest
    assert (manifest.embedding_backend, manifest.embedding_model_id) == ("chroma", MODEL)
    extra = manifest.extra
    assert extra["chroma.collection"] == "demo" and extra["chroma.path"] == str(folder)
    assert (extra["chroma.hnsw:M"], extra["chroma.hnsw:construction_ef"]) == ("16", "100")
    assert extra["chroma.search"] == "exact" and extra["chroma.hnsw:space"] == "cosine"
    assert extra["chroma.search_used"] == "exact: every stored vector ranked in NumPy"


def test_fidelity_of_hnsw_against_exact_search(folder: Path, tmp_path: Path) -> None:
    common = {"plugin": "chroma", "path": str(folder), "collection": "demo",
              "embedder": "wordllama", "doc_id_separator": "#"}  # fmt: skip
    write_config(tmp_path, **{"c-hnsw": common, "c-exact": {**common, "search": "exact"}})
    code, out, err = run_cli(
        "fidelity", "--set", "demo", "--retriever", "c-hnsw", "--reference", "c-exact",
        "--k", "10", "--format", "json", cwd=tmp_path,
    )  # fmt: skip
    assert code == 0, err
    overlap = json.loads(out)["overall"]["overlap@10"]
    # 55 documents and ef_search 100: the graph is searched whole, recall@10 is 1.
    assert overlap["mean"] == 1.0 and overlap["n"] == 75


@pytest.mark.parametrize("search", ["exact", "hnsw"])
def test_the_retriever_keeps_retrievalkits_retriever_contract(folder: Path, search: str) -> None:
    retriever = check_retriever(
        "chroma",
        probe_questions=["How do I get a library card?"],
        approximate=search == "hnsw",
        path=str(folder),
        collection="demo",
        embedder="wordllama",
        search=search,
    )
    assert retriever.identifier == f"chroma:demo:{search}"


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"collection": "nothing_here"}, "has no Chroma collection nothing_here"),
        (
            {"embedder_options": {"dimensions": 128}},
            f"holds vectors of {MODEL} (256 dimensions), but the embedder is "
            "wordllama/l2_supercat_256-d128 (128)",
        ),
        ({"search": "fuzzy"}, "field 'search': must be 'hnsw' or 'exact'"),
        ({"path": None}, "needs the option 'path'"),
        ({"corpus": str(CORPUS)}, "corpus applies only with ephemeral = true"),
        ({"collection": "x"}, "expected a collection name"),
        ({"ephemeral": True, "corpus": str(CORPUS), "space": "manhattan"}, "hnsw:space"),
    ],
)
def test_configuration_errors_name_the_option(
    folder: Path, options: dict[str, Any], says: str
) -> None:
    settings = {"path": str(folder), "collection": "demo", "embedder": "wordllama", **options}
    with pytest.raises(RetrievalkitError) as raised:
        create_chroma(**settings)
    assert raised.value.exit_code == 2 and says in str(raised.value)


def test_a_collection_chroma_index_did_not_build_is_refused(folder: Path) -> None:
    client(folder).create_collection("theirs", embedding_function=None)
    with pytest.raises(InputError, match="was not built by 'retrievalkit chroma index'"):
        create_chroma(path=str(folder), collection="theirs", embedder="wordllama")
    code, _, err = run_cli("chroma", "drop", "--collection", "theirs", "--path", str(folder))
    assert code == 2 and "it is left alone" in err, err
    client(folder).get_collection("theirs", embedding_function=None)  # still there


def test_index_refuses_an_existing_collection_recreates_and_drops(folder: Path) -> None:
    common = ["chroma", "index", "--corpus", str(CORPUS), "--collection", "demo", "--path",
              str(folder), "--embedder", "wordllama", "--cache-dir", ""]  # fmt: skip
    code, _, err = run_cli(*common)
    assert code == 2 and "already exists" in err and "--recreate" in err
    code, out, err = run_cli(
        *common, "--recreate", "--space", "ip", "--m", "8", "--construction-ef", "32",
        "--search-ef", "12",
    )  # fmt: skip
    assert code == 0, err
    assert "hnsw:space=ip hnsw:M=8 hnsw:construction_ef=32 hnsw:search_ef=12" in out
    rebuilt = create_chroma(path=str(folder), collection="demo", embedder="wordllama")
    assert rebuilt.describe()["chroma.hnsw:space"] == "ip"
    assert rebuilt.retrieve("How do I get a library card?", 3)
    code, _, err = run_cli(*common, "--recreate", "--m", "1")
    assert code == 2 and "--m" in err and "from 2 to 128" in err
    code, out, err = run_cli("chroma", "drop", "--collection", "demo", "--path", str(folder))
    assert code == 0 and f"dropped demo in {folder}" in out, err
    code, _, err = run_cli("chroma", "drop", "--collection", "demo", "--path", str(folder))
    assert code == 2 and "has no Chroma collection demo" in err
    code, _, err = run_cli("chroma", "drop", "--collection", "demo", "--path",
                           str(folder / "absent"))  # fmt: skip
    assert code == 2 and "is not a folder" in err


def _ephemeral(folder: Path) -> dict[str, Any]:
    return {"path": str(folder), "collection": "kb_eval_tmp", "embedder": "wordllama",
            "ephemeral": True, "corpus": str(CORPUS), "cache_dir": "",
            "doc_id_separator": "#"}  # fmt: skip


def test_an_ephemeral_collection_lives_for_one_run(tmp_path: Path) -> None:
    run = rk.evaluate(DEMO / "golden.jsonl", "chroma", options=_ephemeral(tmp_path),
                      git_commit=None)  # fmt: skip
    assert run.record.manifest.extra["chroma.ephemeral"] == "true"
    assert run.metrics["hit@10"].mean is not None and run.metrics["hit@10"].mean > 0.5
    assert [getattr(c, "name", c) for c in client(tmp_path).list_collections()] == []
    first = create_chroma(**_ephemeral(tmp_path))
    with pytest.raises(InputError, match="already exists") as caught:
        create_chroma(**_ephemeral(tmp_path))
    assert "chroma drop --collection kb_eval_tmp" in str(caught.value)
    first.close()
    first.close()
    assert [getattr(c, "name", c) for c in client(tmp_path).list_collections()] == []


def test_an_ephemeral_collection_is_deleted_when_the_process_dies_of_an_error(
    tmp_path: Path,
) -> None:
    import subprocess
    import sys
    import textwrap

    program = textwrap.dedent(
        f"""
        from retrievalkit_chroma.retriever import create_chroma
        retriever = create_chroma(**{_ephemeral(tmp_path)!r})
        retriever.retrieve("library card", 3)
        print("built", flush=True)
        raise RuntimeError("the run broke")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=False, timeout=300
    )
    assert done.returncode == 1 and "built" in done.stdout and "the run broke" in done.stderr
    assert "could not delete" not in done.stderr, done.stderr
    assert [getattr(c, "name", c) for c in client(tmp_path).list_collections()] == []
