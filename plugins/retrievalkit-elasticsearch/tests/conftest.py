"""The live node every test here runs against, and the indices the tests share.

The node is the one at ``RETRIEVALKIT_ES_URL`` (default ``http://127.0.0.1:9200``).
When it does not answer, every test FAILS with instructions: these tests never pass by
skipping. Indices are created under a per-session prefix and deleted at the end.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from support import DEMO_CORPUS, index_corpus, shared_data

from retrievalkit.testing import deliver_stop_signals

# The Ctrl-C and hang-up tests need the signals delivered, however the suite was started.
deliver_stop_signals()

DEFAULT_URL = "http://127.0.0.1:9200"
START_HINT = (
    "start one with `python3 scripts/elasticsearch.py up --port 9200` (or run `nox -s "
    "integration`, which starts it) and set RETRIEVALKIT_ES_URL=http://127.0.0.1:9200"
)


@pytest.fixture(scope="session")
def es_url() -> str:
    return (os.environ.get("RETRIEVALKIT_ES_URL") or DEFAULT_URL).rstrip("/")


@pytest.fixture(scope="session")
def es(es_url: str) -> Any:
    """A client for the live node; fails (never skips) when the node is not there."""
    from elasticsearch import Elasticsearch

    client = Elasticsearch(es_url, request_timeout=60)
    try:
        health = client.cluster.health(wait_for_status="yellow", timeout="30s")
    except Exception as error:
        pytest.fail(
            f"no Elasticsearch node answers at {es_url} ({type(error).__name__}: {error}); "
            + START_HINT,
            pytrace=False,
        )
    if health.get("status") not in ("green", "yellow"):
        pytest.fail(f"Elasticsearch at {es_url} is {health.get('status')}", pytrace=False)
    return client


@pytest.fixture(scope="session")
def index_names(es: Any) -> Iterator[Any]:
    """``index_names("demo")`` -> a fresh index name, deleted when the session ends."""
    prefix = f"rk-test-{uuid.uuid4().hex[:8]}"
    created: list[str] = []

    def make(label: str) -> str:
        name = f"{prefix}-{label}"
        created.append(name)
        return name

    yield make
    for name in created:
        es.options(ignore_status=404).indices.delete(index=name)


@pytest.fixture(scope="session")
def demo_index(es_url: str, index_names: Any) -> str:
    """The bundled demo corpus (chunk ids ``doc#N``), standard analyzer, default BM25."""
    name: str = index_names("demo")
    index_corpus(es_url, DEMO_CORPUS, name)
    return name


@pytest.fixture(scope="session")
def scifact_standard_index(es_url: str, index_names: Any) -> str:
    """SciFact (5,183 documents) with the standard analyzer and default BM25."""
    name: str = index_names("scifact-standard")
    index_corpus(es_url, shared_data() / "scifact" / "corpus.jsonl", name)
    return name
