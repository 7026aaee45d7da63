"""A demo collection built once by ``retrievalkit qdrant index`` in a folder of its own."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import CORPUS, run_cli


@pytest.fixture(scope="session")
def demo_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Qdrant's local folder holding ``demo``: the demo corpus embedded by wordllama."""
    folder = tmp_path_factory.mktemp("qdrant") / "store"
    code, out, err = run_cli(
        "qdrant", "index", "--corpus", str(CORPUS), "--collection", "demo",
        "--path", str(folder), "--embedder", "wordllama", "--m", "16", "--ef-construct", "100",
        "--cache-dir", "",
    )  # fmt: skip
    assert code == 0, err
    assert "indexed 55 documents into demo" in out
    assert "wordllama/l2_supercat_256 (256 dimensions, Cosine), HNSW m=16 ef_construct=100" in out
    return folder
