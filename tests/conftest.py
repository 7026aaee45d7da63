"""Shared fixtures: where the real test collections live."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def shared_data() -> Path:
    """The read-only IR collections beside the repository (``../shared/data``)."""
    for candidate in (REPO.parent / "shared" / "data", REPO / "shared" / "data"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("../shared/data with the IR test collections is missing")


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return shared_data()
