"""A store written in the first table layout opens, upgraded, with every run intact.

The upgrade goes through every later layout, including the rewrite of each run's
per-question rows as a summary and outcome columns (layout 4).
"""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
from retrievalkit_postgres.schema import LATEST, MIGRATIONS
from support import copy_of, scalar, scored_run

from retrievalkit.formats.convert import to_json
from retrievalkit.model.values import SCHEMA_VERSION
from retrievalkit.stores import open_store
from retrievalkit.stores.serialization import load_record

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def load_fixture(pg_url: str, schema: str) -> list[str]:
    text = (FIXTURES / "store-v1.sql").read_text().replace("__SCHEMA__", schema)
    with psycopg.connect(pg_url) as connection:
        connection.execute(text)
    # The runs as retrievalkit reads them today (a field added since gets its default).
    lines = (FIXTURES / "store-v1.jsonl").read_text().splitlines()
    return [to_json(load_record(line, where="store-v1.jsonl")) for line in lines]


def test_a_layout_1_store_is_upgraded_and_reads_back_every_run(
    pg_url: str, store_url: str, schema: str
) -> None:
    expected = load_fixture(pg_url, schema)
    assert scalar(pg_url, f"SELECT max(version) FROM {schema}.schema_version") == 1
    store = open_store(store_url)
    versions = scalar(
        pg_url, f"SELECT array_agg(version ORDER BY version) FROM {schema}.schema_version"
    )
    assert versions == [step.version for step in MIGRATIONS] and versions[-1] == LATEST
    runs = store.all_runs()
    assert [to_json(run) for run in reversed(runs)] == expected
    # Rewritten as summaries and columns (layout 4); the per-question rows are gone.
    assert scalar(pg_url, "SELECT to_regclass(%s)", (f"{schema}.run_questions",)) is None
    assert scalar(pg_url, f"SELECT count(DISTINCT run_seq) FROM {schema}.run_columns") == len(
        expected
    )
    assert scalar(pg_url, f"SELECT array_agg(DISTINCT record_schema) FROM {schema}.runs") == [
        SCHEMA_VERSION
    ]
    for line in expected:
        data = json.loads(line)
        questions, errored = (
            scalar(
                pg_url, f"SELECT {column} FROM {schema}.runs WHERE run_id = %s", (data["run_id"],)
            )
            for column in ("questions", "errored")
        )
        assert questions == len(data["outcomes"])
        assert errored == sum(1 for outcome in data["outcomes"] if outcome["error"])
    first = json.loads(expected[0])
    assert store.pinned(first["set"], first["model"]) == first["run_id"]  # type: ignore[attr-defined]
    # New runs go in after the old ones, newest first.
    newer = copy_of(scored_run("fixture", "model-a", 5), "after-upgrade")
    store.save(newer)
    assert [run.run_id for run in store.runs("fixture", "model-a")] == [
        newer.run_id,
        first["run_id"],
    ]


def test_two_processes_opening_an_old_store_at_once_upgrade_it_once(
    pg_url: str, store_url: str, schema: str
) -> None:
    import multiprocessing

    load_fixture(pg_url, schema)
    with multiprocessing.get_context("fork").Pool(4) as pool:
        counts = pool.map(_open_and_count, [store_url] * 4)
    assert counts == [2, 2, 2, 2]
    assert scalar(pg_url, f"SELECT count(*) FROM {schema}.schema_version") == LATEST


def _open_and_count(url: str) -> int:
    return len(open_store(url).all_runs())
