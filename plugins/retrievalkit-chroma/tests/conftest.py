"""A demo collection built once by ``retrievalkit chroma index`` in a folder of its own."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import CORPUS, run_cli


@pytest.fixture(scope="session")
def demo_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Chroma database holding ``demo``: the demo corpus embedded by wordllama."""
    folder = tmp_path_factory.mktemp("chroma") / "db"
    code, out, err = run_cli(
        "chroma", "index", "--corpus", str(CORPUS), "--collection", "demo",
        "--path", str(folder), "--embedder", "wordllama", "--cache-dir", "",
    )  # fmt: skip
    assert code == 0, err
    assert "indexed 55 documents into demo" in out
    assert (
        "wordllama/l2_supercat_256 (256 dimensions), hnsw:space=cosine hnsw:M=16 "
        "hnsw:construction_ef=100 hnsw:search_ef=100" in out
    )
    return folder
