"""The live PostgreSQL server every test here runs against, and a fresh schema per test.

The server is the one at ``RETRIEVALKIT_PG_URL`` (default
``postgresql://retrievalkit@127.0.0.1:5433/retrievalkit``), its password in
``PGPASSWORD`` as for any libpq client. When it does not answer, every test FAILS with
instructions: these tests never pass by skipping. Each test's runs live in a schema of
their own, dropped at the end.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from support import DEFAULT_URL

from retrievalkit.testing import deliver_stop_signals

# The Ctrl-C and hang-up tests need the signals delivered, however the suite was started.
deliver_stop_signals()

START_HINT = (
    "start one with `python3 scripts/postgres.py up --port 5433` (or run `nox -s postgres`, "
    "which starts it), set RETRIEVALKIT_PG_URL to the URL it prints and PGPASSWORD to "
    "$RETRIEVALKIT_PG_PASSWORD (default retrievalkit)"
)


@pytest.fixture(scope="session")
def pg_url() -> str:
    """The server's URL; fails (never skips) when the server does not answer."""
    import psycopg

    url = os.environ.get("RETRIEVALKIT_PG_URL") or DEFAULT_URL
    try:
        with psycopg.connect(url, connect_timeout=10) as connection:
            connection.execute("SELECT 1")
    except psycopg.Error as error:
        pytest.fail(f"no PostgreSQL answers at {url} ({error}); {START_HINT}", pytrace=False)
    return url


@pytest.fixture
def schema(pg_url: str) -> Iterator[str]:
    """A fresh schema name, dropped with everything in it when the test ends."""
    import psycopg

    name = f"rk_test_{uuid.uuid4().hex[:10]}"
    yield name
    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture
def store_url(pg_url: str, schema: str) -> str:
    """A store URL for the test's own schema."""
    separator = "&" if "?" in pg_url else "?"
    return f"{pg_url}{separator}schema={schema}"
