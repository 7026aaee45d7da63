"""Every result store keeps whole records by key, newest first, on real SQLite and real files."""

from __future__ import annotations

import json
import logging
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from retrievalkit.demo import DemoSetProvider
from retrievalkit.errors import InputError, StoreError
from retrievalkit.formats.config import Config
from retrievalkit.formats.convert import to_json
from retrievalkit.metrics.scoring import ScoringOptions, score_run
from retrievalkit.model.records import GRADER, SCHEMA_VERSION, ResultRecord
from retrievalkit.pipeline.engine.evaluator import evaluate_questions
from retrievalkit.pipeline.engine.record import build_record
from retrievalkit.plugins.resolution import resolve_retriever
from retrievalkit.stores import DEFAULT_STORE_URL, ResultStore, open_store
from retrievalkit.stores.jsonl import JSONLStore
from retrievalkit.stores.sqlite import SQLiteStore


@pytest.fixture(scope="session")
def demo_record() -> ResultRecord:
    """One real run: the demo set through the bm25-demo plugin, scored and recorded."""
    golden = DemoSetProvider().load("demo")
    resolved = resolve_retriever("bm25-demo", Config())
    options = ScoringOptions(ks=(1, 3, 5, 10), resamples=200)
    retrievals = evaluate_questions(resolved.retriever, golden.questions, depth=10)
    scores = score_run(golden.questions, retrievals, options)
    return build_record(
        golden,
        resolved.name,
        resolved.plugin,
        resolved.options,
        scores,
        options,
        overfetch=3,
        git_commit=None,
    )


def variant(
    record: ResultRecord,
    run_id: str,
    *,
    set_name: str | None = None,
    model: str | None = None,
    grader: str | None = None,
) -> ResultRecord:
    return attrs.evolve(
        record,
        run_id=run_id,
        set=set_name or record.set,
        model=model or record.model,
        grader=grader or record.grader,
    )


STORE_KINDS = ("sqlite", "jsonl", "memory")


def store_url(kind: str, tmp_path: Path) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.sqlite3'}"  # four slashes: an absolute path
    if kind == "jsonl":
        return f"jsonl:///{tmp_path / 'runs.jsonl'}"
    return f"memory:{uuid.uuid4().hex}"


@pytest.fixture(params=STORE_KINDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_url(request.param, tmp_path)


@pytest.fixture
def store(url: str) -> Iterator[ResultStore]:
    yield open_store(url)


def test_open_store_gives_a_result_store(store: ResultStore, url: str) -> None:
    assert isinstance(store, ResultStore)
    assert store.url == url
    assert store.all_runs() == []


def test_a_record_survives_a_round_trip(
    store: ResultStore, url: str, demo_record: ResultRecord
) -> None:
    store.save(demo_record)
    loaded = store.get(demo_record.run_id)
    assert loaded == demo_record
    assert loaded is not None and to_json(loaded) == to_json(demo_record)
    reopened = open_store(url)
    assert reopened.get(demo_record.run_id) == demo_record
    assert reopened.runs(demo_record.set, demo_record.model) == [demo_record]
    assert store.get("no-such-run") is None


def test_runs_are_newest_first(store: ResultStore, demo_record: ResultRecord) -> None:
    # Saved in an order that differs from the ids' sort order: newest means last saved.
    saved = [variant(demo_record, run_id) for run_id in ("run-b", "run-c", "run-a")]
    for record in saved:
        store.save(record)
    newest_first = ["run-a", "run-c", "run-b"]
    assert [r.run_id for r in store.runs(demo_record.set, demo_record.model, GRADER)] == (
        newest_first
    )
    assert [r.run_id for r in store.all_runs()] == newest_first


def test_keys_are_separated_by_set_model_and_grader(
    store: ResultStore, demo_record: ResultRecord
) -> None:
    records = [
        variant(demo_record, "r1"),
        variant(demo_record, "r2", set_name="other-set"),
        variant(demo_record, "r3", model="other-model"),
        variant(demo_record, "r4", grader="another_grader"),
        variant(demo_record, "r5"),
    ]
    for record in records:
        store.save(record)
    assert [r.run_id for r in store.runs("demo", "bm25-demo")] == ["r5", "r1"]
    assert [r.run_id for r in store.runs("demo", "bm25-demo", GRADER)] == ["r5", "r1"]
    assert [r.run_id for r in store.runs("other-set", "bm25-demo")] == ["r2"]
    assert [r.run_id for r in store.runs("demo", "other-model")] == ["r3"]
    assert [r.run_id for r in store.runs("demo", "bm25-demo", "another_grader")] == ["r4"]
    assert store.runs("demo", "nobody") == []
    assert len(store.all_runs()) == 5


def test_a_duplicate_run_id_is_refused(store: ResultStore, demo_record: ResultRecord) -> None:
    store.save(demo_record)
    with pytest.raises(StoreError, match=demo_record.run_id):
        store.save(variant(demo_record, demo_record.run_id, model="other-model"))
    assert store.all_runs() == [demo_record]


def test_memory_stores_of_one_name_are_shared() -> None:
    name = f"memory:{uuid.uuid4().hex}"
    assert open_store(name) is open_store(name)
    assert open_store(name) is not open_store(f"memory:{uuid.uuid4().hex}")


def test_sqlite_is_in_wal_mode(tmp_path: Path, demo_record: ResultRecord) -> None:
    path = tmp_path / "runs.sqlite3"
    open_store(f"sqlite:///{path}").save(demo_record)
    connection = sqlite3.connect(path)
    try:
        (mode,) = connection.execute("PRAGMA journal_mode").fetchone()
        rows = connection.execute("SELECT run_id, set_name, model, grader FROM runs").fetchall()
    finally:
        connection.close()
    assert mode == "wal"
    assert rows == [(demo_record.run_id, "demo", "bm25-demo", GRADER)]


def _keys_sorted(value: object) -> bool:
    if isinstance(value, dict):
        return list(value) == sorted(value) and all(_keys_sorted(v) for v in value.values())
    if isinstance(value, list):
        return all(_keys_sorted(v) for v in value)
    return True


def test_jsonl_lines_have_sorted_keys(tmp_path: Path, demo_record: ResultRecord) -> None:
    path = tmp_path / "runs.jsonl"
    store = open_store(f"jsonl:///{path}")
    store.save(demo_record)
    store.save(variant(demo_record, "second"))
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2
    for line in lines:
        assert _keys_sorted(json.loads(line, object_pairs_hook=dict))
        assert line == json.dumps(
            json.loads(line), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )


def test_jsonl_skips_a_torn_last_line_and_appends_on_a_new_line(
    tmp_path: Path, demo_record: ResultRecord, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "runs.jsonl"
    store = open_store(f"jsonl:///{path}")
    store.save(demo_record)
    whole = to_json(variant(demo_record, "torn"))
    with path.open("a", encoding="utf-8") as handle:
        handle.write(whole[: len(whole) // 2])  # a writer killed mid-append

    with caplog.at_level(logging.WARNING, logger="retrievalkit.stores.jsonl"):
        assert store.all_runs() == [demo_record]
    assert any("line 2" in message for message in caplog.messages)

    after = variant(demo_record, "after")
    store.save(after)
    lines = path.read_text(encoding="utf-8").split("\n")
    assert len(lines) == 4 and lines[-1] == ""
    assert json.loads(lines[2])["run_id"] == "after"
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="retrievalkit.stores.jsonl"):
        assert [r.run_id for r in store.all_runs()] == ["after", demo_record.run_id]
        assert store.get("after") == after
    assert caplog.messages


@pytest.mark.parametrize("scheme", ["sqlite", "jsonl"])
def test_a_store_in_a_missing_folder_is_an_input_error(tmp_path: Path, scheme: str) -> None:
    url = f"{scheme}:///{tmp_path / 'absent' / 'runs.db'}"
    with pytest.raises(InputError, match="does not exist") as raised:
        open_store(url)
    assert "--store" in str(raised.value)
    assert not (tmp_path / "absent").exists()


def test_relative_paths_are_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, demo_record: ResultRecord
) -> None:
    monkeypatch.chdir(tmp_path)
    open_store("jsonl:///runs.jsonl").save(demo_record)
    assert (tmp_path / "runs.jsonl").is_file()
    # Only the default store creates its folder.
    default = open_store(DEFAULT_STORE_URL)
    assert isinstance(default, SQLiteStore)
    assert (tmp_path / ".retrievalkit" / "results.sqlite3").is_file()
    with pytest.raises(InputError):
        open_store("sqlite:///elsewhere/results.sqlite3")


@pytest.mark.parametrize(
    "url", ["nosuch:///x", "nosuch:", "no-scheme-here", "sqlite://x", "jsonl:"]
)
def test_bad_store_urls_are_input_errors(url: str, tmp_path: Path) -> None:
    with pytest.raises(InputError) as raised:
        open_store(url)
    assert "--store" in str(raised.value)
    assert raised.value.exit_code == 2


def test_a_jsonl_store_that_names_a_folder(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="folder"):
        JSONLStore.from_url(f"jsonl:///{tmp_path}")


def newer(record: ResultRecord) -> str:
    data = json.loads(to_json(record))
    data["schema_version"] = SCHEMA_VERSION + 1
    return json.dumps(data, sort_keys=True)


def test_a_newer_schema_in_jsonl_is_a_store_error(
    tmp_path: Path, demo_record: ResultRecord
) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_text(newer(demo_record) + "\n", encoding="utf-8")
    store = open_store(f"jsonl:///{path}")
    with pytest.raises(StoreError, match="newer than this retrievalkit") as raised:
        store.all_runs()
    assert "line 1" in str(raised.value)


def test_a_newer_schema_in_sqlite_is_a_store_error(
    tmp_path: Path, demo_record: ResultRecord
) -> None:
    path = tmp_path / "runs.sqlite3"
    store = open_store(f"sqlite:///{path}")
    connection = sqlite3.connect(path)
    with connection:
        connection.execute(
            "INSERT INTO runs (run_id, set_name, model, grader, created_at, schema_version,"
            " record) VALUES (?, ?, ?, ?, ?, ?, ?)",
            ("future", "demo", "bm25-demo", GRADER, "2099-01-01T00:00:00Z", 2, newer(demo_record)),
        )
    connection.close()
    with pytest.raises(StoreError, match="newer than this retrievalkit"):
        store.runs("demo", "bm25-demo")


def test_a_corrupt_stored_record_is_a_store_error(
    tmp_path: Path, demo_record: ResultRecord
) -> None:
    data = json.loads(to_json(demo_record))
    data["pass_rate"] = "high"
    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps(data) + "\n", encoding="utf-8")
    with pytest.raises(StoreError, match="cannot be read"):
        open_store(f"jsonl:///{path}").all_runs()
