"""The embedded dense and hybrid retrievers, their embedding cache, and the manifest's model."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
from conftest import RunCli

from retrievalkit.demo import DEMO_CORPUS
from retrievalkit.embedders import create_embedder, embed_queries
from retrievalkit.errors import InputError, PluginError
from retrievalkit.formats.corpus import read_corpus
from retrievalkit.plugins.resolution import ResolvedRetriever
from retrievalkit.retrievers.bm25 import BM25Retriever
from retrievalkit.retrievers.dense import DenseRetriever, create_dense
from retrievalkit.retrievers.hybrid import build_hybrid, create_hybrid
from retrievalkit.testing import check_retriever

PROBES = ["How do I renew a library card?", "Can I print documents at the library?"]


class CountingEmbedder:
    """A real embedder, with every call's size written down."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dimensions = inner.dimensions
        self.similarity = inner.similarity
        self.calls: list[int] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(len(texts))
        result: np.ndarray = self.inner.embed(texts)
        return result


@pytest.fixture(scope="module")
def wordllama() -> Any:
    return create_embedder("wordllama")


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """The demo corpus, copied so a test may change it."""
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(DEMO_CORPUS.read_bytes())
    return path


# --- contract ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["dense-demo", "hybrid-demo"])
def test_demo_retrievers_keep_the_retriever_contract(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the embedding cache goes to ./.retrievalkit/embeddings
    retriever = check_retriever(name, probe_questions=PROBES)
    assert retriever.embedding_backend == "embedded"
    assert retriever.embedding_model_id == "wordllama/l2_supercat_256"
    assert list((tmp_path / ".retrievalkit" / "embeddings").glob("*.npy"))


@pytest.mark.parametrize("similarity", ["cosine", "dot_product", "max_inner_product", "l2_norm"])
def test_dense_keeps_the_contract_for_every_similarity(
    similarity: str, corpus: Path, tmp_path: Path, wordllama: Any
) -> None:
    embedder = CountingEmbedder(wordllama)
    embedder.similarity = similarity

    def factory() -> DenseRetriever:
        return DenseRetriever(corpus, embedder, cache_dir=tmp_path / "cache")

    check_retriever(factory, probe_questions=PROBES)


# --- exact search ---------------------------------------------------------------------------


def test_dense_ranking_is_exact_cosine(corpus: Path, tmp_path: Path, wordllama: Any) -> None:
    retriever = DenseRetriever(corpus, wordllama, cache_dir=tmp_path / "cache")
    documents = list(read_corpus(corpus))
    texts = [f"{d.title}\n{d.text}" if d.title else d.text for d in documents]
    matrix = wordllama.embed(texts).astype(np.float64)
    question = "Is there a quiet room where I can study?"
    query = wordllama.embed([question])[0].astype(np.float64)
    cosine = matrix @ query / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(query))
    expected = [documents[index].id for index in np.argsort(-cosine, kind="stable")[:10]]
    got = retriever.retrieve_scored(question, 10)
    assert [doc for doc, _ in got] == expected
    np.testing.assert_allclose([score for _, score in got], np.sort(cosine)[::-1][:10], rtol=1e-5)


@pytest.fixture(scope="module")
def scifact_dense(
    data_dir: Path, tmp_path_factory: pytest.TempPathFactory, wordllama: Any
) -> tuple[Path, Any, list[str]]:
    """SciFact's corpus, its WordLlama vectors cached once, and its 300 test questions."""
    import retrievalkit as rk

    cache = tmp_path_factory.mktemp("scifact-embeddings")
    corpus = data_dir / "scifact" / "corpus.jsonl"
    DenseRetriever(corpus, wordllama, cache_dir=cache, progress=False)
    questions = [question.question for question in rk.load_set(data_dir / "scifact").questions]
    return corpus, cache, questions


@pytest.mark.parametrize("similarity", ["cosine", "dot_product", "l2_norm"])
def test_a_batched_search_ranks_each_question_as_it_ranks_it_alone(
    similarity: str, scifact_dense: tuple[Path, Any, list[str]], wordllama: Any
) -> None:
    # BLAS rounds a float32 product differently with the batch's shape and a row's place
    # in it (by up to 3e-5 on these vectors); no ranking or score may follow it.
    corpus, cache, questions = scifact_dense
    embedder = CountingEmbedder(wordllama)
    embedder.similarity = similarity
    retriever = DenseRetriever(corpus, embedder, cache_dir=cache)
    vectors = embed_queries(wordllama, questions)
    whole = retriever.search(vectors, 20)
    backwards = retriever.search(vectors[::-1], 20)[::-1]
    pieces = [
        found
        for first in range(0, 300, 7)
        for found in retriever.search(vectors[first : first + 7], 20)
    ]
    alone = [retriever.search(vectors[index : index + 1], 20)[0] for index in range(0, 300, 10)]
    assert whole == backwards == pieces
    assert alone == whole[::10]
    # The ids alone (what retrieve_many returns) are the ids of the pairs, in pieces too.
    ranked = [[doc for doc, _ in found] for found in whole]
    assert retriever.search_ids(vectors, 20) == ranked
    assert retriever.search_ids(vectors[5:12], 20) == ranked[5:12]
    # And the ranking is the exact one: float64 scores rounded to float32, ties in corpus order.
    matrix = np.asarray(retriever._matrix, dtype=np.float64)
    ids = retriever._ids
    for index in range(0, 300, 25):
        query = vectors[index].astype(np.float64)
        if similarity == "cosine":
            exact = matrix @ query / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(query))
        elif similarity == "dot_product":
            exact = matrix @ query
        else:
            exact = -np.linalg.norm(matrix - query, axis=1)
        rounded = exact.astype(np.float32)
        order = np.lexsort((np.arange(len(ids)), -rounded))[:20]
        assert [doc for doc, _ in whole[index]] == [ids[i] for i in order], index
        np.testing.assert_allclose([s for _, s in whole[index]], exact[order], rtol=1e-6, atol=1e-6)


def test_equal_documents_keep_corpus_order_in_a_batch(tmp_path: Path, wordllama: Any) -> None:
    texts = ["quiet study room", "printing and copying", "quiet study room"]
    texts += ["quiet study room", "opening hours"]
    lines = [json.dumps({"_id": f"d{i}", "title": "", "text": t}) for i, t in enumerate(texts)]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    retriever = DenseRetriever(corpus, wordllama, cache_dir=None)
    questions = ["a quiet room to study", "print a document", "when do you open"]
    for found in retriever.retrieve_many(questions * 3, 5)[:1]:
        assert found[:3] == ["d0", "d2", "d3"]
    assert retriever.retrieve_many(questions, 5) == [retriever.retrieve(q, 5) for q in questions]


def test_a_cut_inside_many_equal_scores_keeps_corpus_order(tmp_path: Path, wordllama: Any) -> None:
    # 30 copies of one text tie at the cut of a top 10: more than the rescored slack, so
    # those questions take the whole-neighbourhood path.
    texts = ["printing and copying", "opening hours"] + ["quiet study room"] * 30
    texts += ["children's story time", "lost library card"]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(
            json.dumps({"_id": f"d{i}", "title": "", "text": t}) + "\n" for i, t in enumerate(texts)
        ),
        encoding="utf-8",
    )
    retriever = DenseRetriever(corpus, wordllama, cache_dir=None)
    questions = ["a quiet room to study", "print a document", "quiet study room"]
    many = retriever.retrieve_many(questions * 4, 10)
    assert many[0] == [f"d{i}" for i in range(2, 12)]
    assert many[:3] == [retriever.retrieve(question, 10) for question in questions]
    assert many[:3] == many[3:6] == many[9:12]


def test_dense_collapses_chunk_ids_with_a_separator(corpus: Path, tmp_path: Path) -> None:
    retriever = create_dense(str(corpus), cache_dir=str(tmp_path), doc_id_separator="#")
    ids = retriever.retrieve("renew my library card", 55)
    assert ids and not any("#" in doc for doc in ids)
    raw = create_dense(str(corpus), cache_dir=str(tmp_path)).retrieve("renew", 55)
    assert any("#" in doc for doc in raw)


# --- the embedding cache --------------------------------------------------------------------


def test_cache_is_reused_bit_identical_and_keyed_by_corpus_and_model(
    corpus: Path, tmp_path: Path, wordllama: Any
) -> None:
    cache = tmp_path / "cache"
    first = CountingEmbedder(wordllama)
    built = DenseRetriever(corpus, first, cache_dir=cache, batch_size=16)
    documents = len(list(read_corpus(corpus)))
    assert sum(first.calls) == documents
    assert max(first.calls) <= 16  # batched: no call holds more than batch_size documents
    files = sorted(cache.glob("*.npy"))
    assert len(files) == 1
    stored = np.load(files[0])
    fresh = wordllama.embed([f"{d.title}\n{d.text}" for d in read_corpus(corpus)])
    assert stored.tobytes() == fresh.tobytes()

    again = CountingEmbedder(wordllama)
    reread = DenseRetriever(corpus, again, cache_dir=cache)
    assert again.calls == []  # read from the cache, nothing embedded
    assert reread.retrieve(PROBES[0], 10) == built.retrieve(PROBES[0], 10)

    # Another model: another key.
    small = CountingEmbedder(create_embedder("wordllama", {"dimensions": 64}))
    DenseRetriever(corpus, small, cache_dir=cache)
    assert sum(small.calls) == documents
    # A changed corpus: another key.
    with corpus.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"_id": "new", "title": "", "text": "chess club"}) + "\n")
    changed = CountingEmbedder(wordllama)
    DenseRetriever(corpus, changed, cache_dir=cache)
    assert sum(changed.calls) == documents + 1
    assert len(list(cache.glob("*.npy"))) == 3
    assert not list(cache.glob(".*"))  # no temporary file left behind


def test_a_damaged_cache_file_is_embedded_again(
    corpus: Path, tmp_path: Path, wordllama: Any
) -> None:
    cache = tmp_path / "cache"
    DenseRetriever(corpus, wordllama, cache_dir=cache)
    (path,) = cache.glob("*.npy")
    path.write_bytes(path.read_bytes()[:200])
    counting = CountingEmbedder(wordllama)
    DenseRetriever(corpus, counting, cache_dir=cache)
    assert sum(counting.calls) == len(list(read_corpus(corpus)))
    assert np.load(path).shape == (len(list(read_corpus(corpus))), 256)


def test_without_a_cache_dir_nothing_is_written(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    create_dense(str(corpus), cache_dir="").retrieve("study room", 3)
    assert not (tmp_path / ".retrievalkit").exists()


def test_an_embedder_that_breaks_its_dimensions_is_named(corpus: Path, tmp_path: Path) -> None:
    class Liar:
        model_id = "test/liar"
        dimensions = 8
        similarity = "cosine"

        def embed(self, texts: Sequence[str]) -> np.ndarray:
            return np.ones((len(texts), 4), dtype=np.float32)

    with pytest.raises(PluginError) as caught:
        DenseRetriever(corpus, Liar(), cache_dir=tmp_path)
    assert "test/liar" in str(caught.value)
    assert "8 dimensions" in str(caught.value)
    assert not list(tmp_path.glob("*.npy")) and not list(tmp_path.glob(".*"))


def test_dense_option_errors_name_the_option(corpus: Path) -> None:
    with pytest.raises(InputError) as missing:
        create_dense()
    assert missing.value.field == "corpus"
    with pytest.raises(InputError) as batch:
        create_dense(str(corpus), batch_size=0, cache_dir="")
    assert batch.value.field == "batch_size"
    with pytest.raises(InputError) as embedder:
        create_dense(str(corpus), embedder="nope", cache_dir="")
    assert embedder.value.field == "embedder"


# --- hybrid ---------------------------------------------------------------------------------


def _legs(corpus: Path, tmp_path: Path, wordllama: Any) -> tuple[Any, Any]:
    lexical = BM25Retriever(corpus)
    dense = DenseRetriever(corpus, wordllama, cache_dir=tmp_path / "cache")
    return (
        ResolvedRetriever("bm25", "bm25", {}, lexical),
        ResolvedRetriever("dense", "dense", {}, dense),
    )


def test_hybrid_rrf_is_reciprocal_rank_fusion_of_its_legs(
    corpus: Path, tmp_path: Path, wordllama: Any
) -> None:
    lexical, dense = _legs(corpus, tmp_path, wordllama)
    hybrid = build_hybrid(lexical, dense, k=60, depth=20)
    question = "Can I bring my dog into the building?"
    totals: dict[str, float] = {}
    for leg in (lexical, dense):
        for rank, doc in enumerate(dict.fromkeys(leg.retriever.retrieve(question, 20)), 1):
            totals[doc] = totals.get(doc, 0.0) + 1 / (60 + rank)
    got = hybrid.retrieve_scored(question, 10)
    assert [score for _, score in got] == sorted(totals.values(), reverse=True)[:10]
    assert {doc for doc, _ in got} <= set(totals)


def test_weighted_hybrid_at_the_extremes_follows_one_leg(
    corpus: Path, tmp_path: Path, wordllama: Any
) -> None:
    lexical, dense = _legs(corpus, tmp_path, wordllama)
    question = "wifi password for laptops"
    dense_only = build_hybrid(lexical, dense, method="weighted", alpha=1.0, depth=30)
    lexical_only = build_hybrid(lexical, dense, method="weighted", alpha=0.0, depth=30)
    assert dense_only.retrieve(question, 5) == dense.retriever.retrieve(question, 5)
    assert lexical_only.retrieve(question, 3) == lexical.retriever.retrieve(question, 3)


def test_hybrid_option_errors(corpus: Path) -> None:
    with pytest.raises(InputError) as method:
        create_hybrid(str(corpus), method="max")
    assert method.value.field == "method"
    with pytest.raises(InputError) as alpha:
        create_hybrid(str(corpus), alpha=1.5)
    assert alpha.value.field == "alpha"
    with pytest.raises(InputError) as both:
        create_hybrid(str(corpus), lexical="a", dense="b")
    assert both.value.field == "corpus"
    with pytest.raises(InputError) as neither:
        create_hybrid(lexical="a")
    assert neither.value.field == "dense"


def test_hybrid_of_configured_retrievers(cli: RunCli, tmp_path: Path, corpus: Path) -> None:
    (tmp_path / "retrievalkit.toml").write_text(
        textwrap.dedent(
            f"""
            [retrievers.words]
            plugin = "bm25"
            corpus = "{corpus}"
            doc_id_separator = "#"

            [retrievers.vectors]
            plugin = "dense"
            corpus = "{corpus}"
            doc_id_separator = "#"
            embedder_options = {{ dimensions = 128 }}

            [retrievers.both]
            plugin = "hybrid"
            lexical = "words"
            dense = "vectors"
            method = "weighted"
            alpha = 0.3
            """
        ),
        encoding="utf-8",
    )
    done = cli("eval", "--set", "demo", "--retriever", "both", "--format", "json", "--no-save")
    assert done.returncode == 0, done.stderr
    manifest = json.loads(done.stdout)["manifest"]
    assert manifest["embedding_backend"] == "embedded"
    assert manifest["embedding_model_id"] == "wordllama/l2_supercat_256-d128"


# --- the manifest and history -------------------------------------------------------------------


def test_the_manifest_names_the_embedding_model_or_none(cli: RunCli) -> None:
    manifests = {}
    for name in ("bm25-demo", "dense-demo", "hybrid-demo"):
        done = cli("eval", "--set", "demo", "--retriever", name, "--format", "json", "--no-save")
        assert done.returncode == 0, done.stderr
        manifests[name] = json.loads(done.stdout)["manifest"]
    assert manifests["bm25-demo"]["embedding_backend"] is None
    assert manifests["bm25-demo"]["embedding_model_id"] is None
    for name in ("dense-demo", "hybrid-demo"):
        assert manifests[name]["embedding_backend"] == "embedded"
        assert manifests[name]["embedding_model_id"] == "wordllama/l2_supercat_256"


def test_history_shows_an_embedding_model_change() -> None:
    import datetime as dt

    from retrievalkit.pipeline.gating.history import build_history
    from retrievalkit.render.history import history_rows
    from retrievalkit.testing.stores import _sample_record

    moment = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    older = _sample_record("s", "vec", moment)
    older = attrs.evolve(
        older,
        manifest=attrs.evolve(
            older.manifest, embedding_backend="elasticsearch", embedding_model_id="model-a"
        ),
    )
    newer = attrs.evolve(
        older,
        run_id="later",
        manifest=attrs.evolve(older.manifest, embedding_model_id="model-b"),
    )
    history = build_history(
        [newer, older], set_name="s", retriever="vec", store="memory:", pinned=None, limit=5
    )
    (change,) = history.entries[0].changes
    assert (change.field, change.before, change.after) == (
        "embedding_model_id",
        "model-a",
        "model-b",
    )
    rendered = json.dumps(history_rows(history))
    assert "model-a" in rendered and "model-b" in rendered


def test_records_without_embedding_fields_still_load() -> None:
    import datetime as dt

    from retrievalkit.formats.convert import structure, unstructure
    from retrievalkit.model.records import ResultRecord
    from retrievalkit.testing.stores import _sample_record

    record = _sample_record("s", "m", dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc))
    data = unstructure(record)
    del data["manifest"]["embedding_backend"], data["manifest"]["embedding_model_id"]
    loaded = structure(data, ResultRecord)
    assert loaded.manifest.embedding_backend is None
    assert loaded.manifest.embedding_model_id is None


def test_dense_demo_without_the_dense_extra_exits_2_with_the_install_line(
    cli: RunCli, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    (site / "wordllama").mkdir(parents=True)
    (site / "wordllama" / "__init__.py").write_text(
        "raise ImportError(\"No module named 'wordllama'\")\n", encoding="utf-8"
    )
    done = cli("eval", "--set", "demo", "--retriever", "dense-demo", "--no-save", sites=[site])
    assert done.returncode == 2, done.stderr
    assert "pip install 'retrievalkit-eval[dense]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_fusion_and_rerank_name_the_embedding_of_their_parts(cli: RunCli, tmp_path: Path) -> None:
    corpus = DEMO_CORPUS.as_posix()
    (tmp_path / "retrievalkit.toml").write_text(
        textwrap.dedent(
            f"""
            [retrievers.fused]
            plugin = "fusion"
            retrievers = ["bm25-demo", "dense-demo"]

            [retrievers.reranked]
            plugin = "rerank"
            first_stage = "dense-demo"
            reranker = "tfidf-cosine"
            reranker_options = {{ corpus = "{corpus}" }}

            [retrievers.lexical-only]
            plugin = "rerank"
            first_stage = "bm25-demo"
            reranker = "tfidf-cosine"
            reranker_options = {{ corpus = "{corpus}" }}
            """
        ),
        encoding="utf-8",
    )
    found = {}
    for name in ("fused", "reranked", "lexical-only"):
        done = cli("eval", "--set", "demo", "--retriever", name, "--format", "json", "--no-save")
        assert done.returncode == 0, done.stderr
        manifest = json.loads(done.stdout)["manifest"]
        found[name] = (manifest["embedding_backend"], manifest["embedding_model_id"])
    assert found["fused"] == ("embedded", "wordllama/l2_supercat_256")
    assert found["reranked"] == ("embedded", "wordllama/l2_supercat_256")
    assert found["lexical-only"] == (None, None)


def test_an_unwritable_cache_dir_is_named(corpus: Path, tmp_path: Path, wordllama: Any) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        DenseRetriever(corpus, wordllama, cache_dir=blocker / "embeddings")
    assert caught.value.field == "cache_dir"
    assert str(blocker) in str(caught.value)
