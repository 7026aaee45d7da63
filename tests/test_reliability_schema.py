"""Stored records carry a schema version: older ones open (migrated), newer ones are refused.

``tests/fixtures/schema_v1_runs.jsonl`` holds two runs written by retrievalkit with
record schema 1, committed as they were written. Whoever changes the stored form of a
record bumps SCHEMA_VERSION, adds a step to ``MIGRATIONS`` and keeps this fixture: these
tests then prove that stores written today keep opening.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest import RunCli

from retrievalkit.errors import StoreError
from retrievalkit.model.values import SCHEMA_VERSION, QuestionForm
from retrievalkit.stores import serialization
from retrievalkit.stores.jsonl import JSONLStore
from retrievalkit.stores.serialization import load_record
from retrievalkit.stores.sqlite import SQLiteStore

FIXTURE = Path(__file__).parent / "fixtures" / "schema_v1_runs.jsonl"
NEWEST, OLDEST = "20261129T120100Z-00000001", "20261129T120000Z-00000000"


def fixture_lines() -> list[str]:
    return FIXTURE.read_text(encoding="utf-8").splitlines()


def sqlite_from_fixture(path: Path) -> None:
    """A SQLite store holding the fixture's runs, as the store of today writes them."""
    SQLiteStore(path)  # creates the tables
    with sqlite3.connect(path) as connection:
        for line in fixture_lines():
            data = json.loads(line)
            connection.execute(
                "INSERT INTO runs (run_id, set_name, model, grader, created_at, schema_version,"
                " record) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (data["run_id"], data["set"], data["model"], data["grader"],
                 data["manifest"]["created_at"], data["schema_version"], line),
            )  # fmt: skip
    connection.close()


def test_the_fixture_is_of_schema_1() -> None:
    assert [json.loads(line)["schema_version"] for line in fixture_lines()] == [1, 1]


@pytest.mark.parametrize("scheme", ["jsonl", "sqlite"])
def test_a_store_of_schema_1_opens(tmp_path: Path, scheme: str) -> None:
    if scheme == "jsonl":
        shutil.copy(FIXTURE, tmp_path / "runs.jsonl")
        store: JSONLStore | SQLiteStore = JSONLStore(tmp_path / "runs.jsonl")
    else:
        sqlite_from_fixture(tmp_path / "runs.sqlite3")
        store = SQLiteStore(tmp_path / "runs.sqlite3")
    newest, oldest = store.runs("support", "es-bm25")
    assert (newest.run_id, oldest.run_id) == (NEWEST, OLDEST)
    assert newest.schema_version == SCHEMA_VERSION
    assert oldest.pass_rate == pytest.approx(2 / 3) and oldest.mean_score == 1.0
    assert newest.errored == 1
    assert newest.outcomes[1].error == "TimeoutError: no answer within 30 s (--timeout)"
    assert oldest.outcomes[1].judgments == {"doc-7": 2, "doc-9": 0}
    assert oldest.outcomes[0].form is QuestionForm.MATCH
    assert oldest.metrics["recall@3"].n == 2  # the no-answer question is left out
    assert oldest.slices["topic"]["travel"]["hit@1"].n == 2
    assert oldest.manifest.retriever_options["password"] == "***"
    # Schema 1 stored percentile bootstrap intervals; the upgrade says so.
    assert oldest.metrics["hit@1"].method == "percentile"
    assert oldest.slices["topic"]["travel"]["hit@1"].method == "percentile"
    assert all(
        (value.method == "percentile") == (value.ci is not None)
        for value in oldest.metrics.values()
    )


@pytest.mark.parametrize("scheme", ["jsonl", "sqlite"])
def test_history_and_show_read_a_store_of_schema_1(
    cli: RunCli, tmp_path: Path, scheme: str
) -> None:
    if scheme == "jsonl":
        shutil.copy(FIXTURE, tmp_path / "runs.jsonl")
        url = "jsonl:///runs.jsonl"
    else:
        sqlite_from_fixture(tmp_path / "runs.sqlite3")
        url = "sqlite:///runs.sqlite3"
    done = cli("history", "--set", "support", "--retriever", "es-bm25", "--store", url,
               "--format", "json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [row["run_id"] for row in json.loads(done.stdout)] == [NEWEST, OLDEST]
    shown = cli("show", OLDEST, "--store", url, "--format", "json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["run_id"] == OLDEST


def newer_line() -> str:
    data = json.loads(fixture_lines()[1])
    data["schema_version"] = SCHEMA_VERSION + 1
    data["a_field_from_the_future"] = {"x": 1}
    return json.dumps(data, sort_keys=True)


@pytest.mark.parametrize("scheme", ["jsonl", "sqlite"])
def test_a_newer_record_is_a_clear_error(cli: RunCli, tmp_path: Path, scheme: str) -> None:
    if scheme == "jsonl":
        text = fixture_lines()[0] + "\n" + newer_line() + "\n"
        (tmp_path / "runs.jsonl").write_text(text, encoding="utf-8")
        url, place = "jsonl:///runs.jsonl", "runs.jsonl, line 2"
    else:
        sqlite_from_fixture(tmp_path / "runs.sqlite3")
        with sqlite3.connect(tmp_path / "runs.sqlite3") as connection:
            connection.execute(
                "UPDATE runs SET record = ?, schema_version = ? WHERE run_id = ?",
                (newer_line(), SCHEMA_VERSION + 1, NEWEST),
            )
        connection.close()
        url, place = "sqlite:///runs.sqlite3", "sqlite:///runs.sqlite3 row 2"
    done = cli("history", "--set", "support", "--retriever", "es-bm25", "--store", url)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    [message] = done.stderr.splitlines()
    assert place in message
    assert f"record schema {SCHEMA_VERSION + 1} is newer than this retrievalkit" in message
    assert "upgrade retrievalkit" in message


def test_older_records_go_through_the_migration_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def one_to_two(data: dict[str, Any]) -> dict[str, Any]:
        calls.append(data["schema_version"])
        data["manifest"] = {**data["manifest"], "extra": {"migrated": "from 1"}}
        return data

    monkeypatch.setattr(serialization, "SCHEMA_VERSION", 2)
    monkeypatch.setitem(serialization.MIGRATIONS, 1, one_to_two)
    record = load_record(fixture_lines()[0], where="fixture, line 1")
    assert calls == [1]
    assert record.schema_version == 2
    assert record.manifest.extra == {"migrated": "from 1"}
    assert record.run_id == OLDEST


def test_a_missing_migration_step_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serialization, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    monkeypatch.setitem(serialization.MIGRATIONS, 1, lambda data: data)
    missing = f"no migration from record schema {SCHEMA_VERSION} to {SCHEMA_VERSION + 1}"
    with pytest.raises(StoreError, match=f"^fixture, line 1: {missing}"):
        load_record(fixture_lines()[0], where="fixture, line 1")


@pytest.mark.parametrize("version", [0, -1, "1", True, None, 1.5])
def test_an_invalid_schema_version_is_refused(version: object) -> None:
    data = json.loads(fixture_lines()[0])
    data["schema_version"] = version
    with pytest.raises(StoreError, match="no valid schema_version"):
        load_record(json.dumps(data), where="fixture, line 1")
