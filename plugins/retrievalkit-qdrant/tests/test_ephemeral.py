"""Ephemeral Qdrant collections: built when the retriever is created, deleted when it ends."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from qdrant_client import QdrantClient
from retrievalkit_qdrant.retriever import create_qdrant
from support import CORPUS, DEMO

import retrievalkit as rk
from retrievalkit.plugin_api import InputError


def _exists(folder: Path, name: str) -> bool:
    client = QdrantClient(path=str(folder))
    try:
        return client.collection_exists(name)
    finally:
        client.close()


def _options(folder: Path) -> dict[str, object]:
    return {"path": str(folder), "collection": "kb_eval_tmp", "embedder": "wordllama",
            "ephemeral": True, "corpus": str(CORPUS), "cache_dir": "",
            "doc_id_separator": "#"}  # fmt: skip


def test_the_collection_is_built_for_the_run_and_deleted_after_it(tmp_path: Path) -> None:
    run = rk.evaluate(DEMO / "golden.jsonl", "qdrant", options=_options(tmp_path), git_commit=None)
    assert run.record.manifest.extra["qdrant.ephemeral"] == "true"
    assert run.metrics["hit@10"].mean is not None and run.metrics["hit@10"].mean > 0.5
    assert not _exists(tmp_path, "kb_eval_tmp")


def test_close_deletes_once_and_an_existing_collection_is_refused(tmp_path: Path) -> None:
    first = create_qdrant(**_options(tmp_path))  # type: ignore[arg-type]
    with pytest.raises(InputError, match="already exists") as caught:
        create_qdrant(**_options(tmp_path))  # type: ignore[arg-type]
    assert caught.value.field == "collection" and "qdrant drop --collection" in str(caught.value)
    assert first.retrieve("How do I get a library card?", 5)
    first.close()
    first.close()  # nothing left to delete: no error
    assert not _exists(tmp_path, "kb_eval_tmp")


def test_the_collection_is_deleted_when_the_process_dies_of_an_error(tmp_path: Path) -> None:
    program = textwrap.dedent(
        f"""
        from retrievalkit_qdrant.retriever import create_qdrant
        retriever = create_qdrant(**{_options(tmp_path)!r})
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
    assert not _exists(tmp_path, "kb_eval_tmp")
