"""Stores keep outcomes by column: summaries read alone, each column loaded on first use.

Real SQLite files and JSON Lines files on disk. Column loads are counted by wrapping the
loader every stored record is built with (`retrievalkit.stores.columns.decode_columns`),
so a test can prove that history, listing and baseline choice read no outcome column at
all, and that a record read from a store is still the run it was (or a clear StoreError)
when the store was closed, the run pruned, or another run saved under its id.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import subprocess
import sys
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
from immutable_files import immutable

from retrievalkit.cli.main import main
from retrievalkit.demo import DemoSetProvider
from retrievalkit.errors import StoreBusyError, StoreError
from retrievalkit.formats.config import Config
from retrievalkit.formats.convert import to_json
from retrievalkit.metrics.definitions import DEFAULT_KS
from retrievalkit.metrics.scoring import ScoringOptions, score_run
from retrievalkit.model.outcomes import QUESTION_TEXTS, Outcomes
from retrievalkit.model.records import SCHEMA_VERSION, ResultRecord
from retrievalkit.pipeline.engine.evaluator import evaluate_questions
from retrievalkit.pipeline.engine.record import build_record
from retrievalkit.pipeline.gating.baselines import RunBrief, baseline_status, choose_baseline
from retrievalkit.pipeline.gating.history import build_history
from retrievalkit.plugins.resolution import resolve_retriever
from retrievalkit.stores import ResultStore, open_store, serialization
from retrievalkit.stores.columns import columns_header
from retrievalkit.stores.jsonl import JSONLStore
from retrievalkit.stores.serialization import load_record
from retrievalkit.stores.sqlite import LAYOUT, SQLiteStore

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def record() -> ResultRecord:
    """A real run: the demo set through bm25-demo, scored at the default cut-offs."""
    golden = DemoSetProvider().load("demo")
    resolved = resolve_retriever("bm25-demo", Config())
    options = ScoringOptions(ks=DEFAULT_KS, resamples=100)
    retrievals = evaluate_questions(resolved.retriever, golden.questions, depth=30)
    scores = score_run(golden.questions, retrievals, options)
    return build_record(
        golden, resolved.name, resolved.plugin, resolved.options, scores, options, overfetch=3
    )


@pytest.fixture(scope="module")
def other(record: ResultRecord) -> ResultRecord:
    """Another run of the same key with different outcomes (its rankings reversed)."""
    golden = DemoSetProvider().load("demo")
    resolved = resolve_retriever("bm25-demo", Config())
    options = ScoringOptions(ks=DEFAULT_KS, resamples=100)
    retrievals = [
        attrs.evolve(found, ranking=tuple(reversed(found.ranking)))
        for found in evaluate_questions(resolved.retriever, golden.questions, depth=30)
    ]
    scores = score_run(golden.questions, retrievals, options)
    made = build_record(
        golden, resolved.name, resolved.plugin, resolved.options, scores, options, overfetch=3
    )
    assert not np.array_equal(made.outcomes.values("rr"), record.outcomes.values("rr"))
    return made


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the outcome columns any stored record loads, in order."""
    seen: list[str] = []
    original = serialization.decode_columns

    def counting(header: Any, load: Any, **options: Any) -> Outcomes:
        def counted(name: str) -> bytes:
            seen.append(name)
            return bytes(load(name))

        return original(header, counted, **options)

    monkeypatch.setattr(serialization, "decode_columns", counting)
    load_slices = serialization._load_slices

    def slices(*arguments: Any) -> Any:
        seen.append("slices")  # a store that keeps them apart reads them on first use
        return load_slices(*arguments)

    monkeypatch.setattr(serialization, "_load_slices", slices)
    return seen


def url_of(kind: str, tmp_path: Path) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.sqlite3'}"
    if kind == "jsonl":
        return f"jsonl:///{tmp_path / 'runs.jsonl'}"
    return f"memory:{uuid.uuid4().hex}"


def saved_runs(store: ResultStore, record: ResultRecord, count: int) -> list[str]:
    run_ids = [f"20261130T1200{index:02d}Z-{index:08x}" for index in range(count)]
    for run_id in run_ids:
        store.save(attrs.evolve(record, run_id=run_id))
    store.save(attrs.evolve(record, run_id="elsewhere", model="another-retriever"))
    return run_ids


@pytest.mark.parametrize("kind", ["sqlite", "jsonl", "memory"])
def test_history_listing_and_baseline_choice_load_no_column(
    tmp_path: Path, kind: str, record: ResultRecord, loads: list[str]
) -> None:
    store = open_store(url_of(kind, tmp_path))
    run_ids = saved_runs(store, record, 6)
    runs = store.runs(record.set, record.model)
    history = build_history(
        runs, set_name=record.set, retriever=record.model, store=store.url, pinned=None, limit=10
    )
    assert [entry.run_id for entry in history.entries] == run_ids[::-1]
    assert {entry.questions for entry in history.entries} == {len(record.outcomes)}
    assert {entry.errored for entry in history.entries} == {record.errored}
    assert choose_baseline(store, record.set, record.model).record.run_id == run_ids[-1]  # type: ignore[union-attr]
    store.pin(runs[2])  # type: ignore[attr-defined]
    status = baseline_status(store, "pin", record.set, record.model)
    assert status.pinned is not None and status.pinned.run_id == run_ids[3]
    assert [run.run_id for run in store.all_runs()][1:] == run_ids[::-1]
    brief = RunBrief.of(store.get(run_ids[0]))  # type: ignore[arg-type]
    assert brief.questions == len(record.outcomes)
    assert loads == []  # not one outcome column was read

    # A comparison reads the columns it gates, and only those.
    gated = store.get(run_ids[0])
    assert gated is not None
    assert np.array_equal(gated.outcomes.values("hit@1"), record.outcomes.values("hit@1"))
    assert loads == ["metric/hit@1"]
    assert to_json(gated) == to_json(attrs.evolve(record, run_id=run_ids[0]))
    # Every column once (question texts aside: a record's JSON has none); SQLite keeps the
    # slices apart too, read once when first used.
    columns = len(set(columns_header(record.outcomes)["columns"]) - {QUESTION_TEXTS})
    assert QUESTION_TEXTS not in loads
    assert len(loads) == len(set(loads)) == columns + (kind == "sqlite")


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_the_history_command_loads_no_column(
    tmp_path: Path,
    kind: str,
    record: ResultRecord,
    loads: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = url_of(kind, tmp_path)
    run_ids = saved_runs(open_store(url), record, 4)
    common = ["--set", record.set, "--retriever", record.model, "--store", url]
    assert main(["baseline", "pin", run_ids[1], "--store", url]) == 0
    assert main(["baseline", "show", *common]) == 0
    capsys.readouterr()
    assert main(["history", *common, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["run_id"] for row in rows] == run_ids[::-1]
    assert main(["history", *common, "--prune", "--keep", "2"]) == 0
    assert [run.run_id for run in open_store(url).runs(record.set, record.model)] == [
        run_ids[3],
        run_ids[2],
        run_ids[1],  # pinned: kept whatever its age
    ]
    assert loads == []


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_a_record_loads_after_its_store_is_closed_and_from_many_threads(
    tmp_path: Path, kind: str, record: ResultRecord
) -> None:
    store = open_store(url_of(kind, tmp_path))
    saved_runs(store, record, 3)
    runs = store.runs(record.set, record.model)
    if isinstance(store, SQLiteStore):
        store.close()
    del store
    names = record.outcomes.metric_names

    def read(index: int) -> bool:
        run = runs[index % len(runs)]
        name = names[index % len(names)]
        return np.array_equal(
            run.outcomes.values(name), record.outcomes.values(name), equal_nan=True
        )

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert all(pool.map(read, range(4 * len(names))))
    assert all(list(run.outcomes) == list(record.outcomes) for run in runs)


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_a_run_pruned_or_replaced_under_a_lazy_record_is_a_store_error(
    tmp_path: Path, kind: str, record: ResultRecord, other: ResultRecord
) -> None:
    url = url_of(kind, tmp_path)
    reader, writer = open_store(url), open_store(url)
    reader.save(attrs.evolve(record, run_id="doomed"))
    reader.save(attrs.evolve(record, run_id="kept"))
    doomed, kept = reader.get("doomed"), reader.get("kept")
    assert doomed is not None and kept is not None
    assert writer.delete(["doomed"]) == 1  # type: ignore[attr-defined]
    with pytest.raises(StoreError, match=r"run doomed is no longer in .*deleted or pruned"):
        doomed.outcomes.values("rr")
    # Another run saved under the same id: the old record still refuses, never reads it.
    writer.save(attrs.evolve(other, run_id="doomed"))
    with pytest.raises(StoreError, match="run doomed is no longer in"):
        doomed.outcomes.values("rr")
    fresh = reader.get("doomed")
    assert fresh is not None
    assert np.array_equal(fresh.outcomes.values("rr"), other.outcomes.values("rr"), equal_nan=True)
    assert np.array_equal(kept.outcomes.values("rr"), record.outcomes.values("rr"), equal_nan=True)


def test_a_column_removed_outside_retrievalkit_names_the_run_and_column(
    tmp_path: Path, record: ResultRecord
) -> None:
    path = tmp_path / "runs.sqlite3"
    store = SQLiteStore(path)
    store.save(attrs.evolve(record, run_id="damaged"))
    with sqlite3.connect(path) as connection:
        connection.execute("DELETE FROM run_columns WHERE name = 'metric/rr'")
    connection.close()
    run = store.get("damaged")
    assert run is not None and run.errored == record.errored
    with pytest.raises(StoreError, match="column 'metric/rr' of run damaged is missing"):
        run.outcomes.values("rr")


def test_a_damaged_column_file_names_itself(tmp_path: Path, record: ResultRecord) -> None:
    store = JSONLStore(tmp_path / "runs.jsonl")
    store.save(attrs.evolve(record, run_id="damaged"))
    run = store.get("damaged")
    assert run is not None
    store.column_path("damaged").write_bytes(b"not columns")
    with pytest.raises(StoreError, match=r"damaged-.*rkc: column 'metric/rr' of run damaged"):
        run.outcomes.values("rr")


def test_a_json_lines_run_is_a_summary_line_and_a_column_file(
    tmp_path: Path, record: ResultRecord
) -> None:
    store = JSONLStore(tmp_path / "runs.jsonl")
    store.save(record)
    [line] = (tmp_path / "runs.jsonl").read_text(encoding="utf-8").splitlines()
    data = json.loads(line)
    assert data["schema_version"] == SCHEMA_VERSION
    assert data["outcomes"] == columns_header(record.outcomes) and "items" not in data
    ranked = {
        doc for index in range(len(record.outcomes)) for doc in record.outcomes.ranking(index)
    }
    assert ranked and not any(doc in line for doc in ranked)
    assert [path.name for path in store.columns_path.iterdir()] == [
        store.column_path(record.run_id).name
    ]


def test_old_json_lines_files_keep_loading_beside_new_runs(
    tmp_path: Path, record: ResultRecord, loads: list[str]
) -> None:
    path = tmp_path / "runs.jsonl"
    old = (FIXTURES / "schema_v1_runs.jsonl").read_bytes()
    path.write_bytes(old)
    store = JSONLStore(path)
    store.save(record)
    assert path.read_bytes().startswith(old)  # appended to, never rewritten
    expected = [load_record(line, where="fixture") for line in old.decode().splitlines()]
    newest, *olds = store.all_runs()
    assert [run.run_id for run in olds] == [run.run_id for run in reversed(expected)]
    assert [to_json(run) for run in olds] == [to_json(run) for run in reversed(expected)]
    assert newest.run_id == record.run_id and loads == []
    assert to_json(newest) == to_json(record)


# --- SQLite: migration of a file written before the column layout ---------------------------

#: The layout retrievalkit 0.1 wrote: each run's whole record JSON in ``runs.record``.
OLD_LAYOUT = """
CREATE TABLE runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL UNIQUE,
    set_name TEXT NOT NULL,
    model TEXT NOT NULL,
    grader TEXT NOT NULL,
    created_at TEXT NOT NULL,
    schema_version INTEGER NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX runs_by_key ON runs (set_name, model, grader, seq);
CREATE TABLE pins (
    set_name TEXT NOT NULL,
    model TEXT NOT NULL,
    grader TEXT NOT NULL,
    run_id TEXT NOT NULL,
    PRIMARY KEY (set_name, model, grader)
);
"""


def old_lines() -> list[str]:
    """Schema 1 and schema 2 runs of one key, as retrievalkit 0.1 stored them."""
    lines = (FIXTURES / "schema_v1_runs.jsonl").read_text(encoding="utf-8").splitlines()
    for line in (FIXTURES / "schema_v2_runs.jsonl").read_text(encoding="utf-8").splitlines():
        data = json.loads(line)
        data["run_id"] += "-v2"
        lines.append(json.dumps(data, sort_keys=True, ensure_ascii=False))
    return lines


def old_store(path: Path, lines: list[str]) -> None:
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.executescript(OLD_LAYOUT)
        for line in lines:
            data = json.loads(line)
            connection.execute(
                "INSERT INTO runs (run_id, set_name, model, grader, created_at, schema_version,"
                " record) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (data["run_id"], data["set"], data["model"], data["grader"],
                 data["manifest"]["created_at"], data.get("schema_version", 1), line),
            )  # fmt: skip
        connection.execute(
            "INSERT INTO pins VALUES ('support', 'es-bm25', 'retrieval_hit_rate', ?)",
            (json.loads(lines[0])["run_id"],),
        )
    connection.close()


def snapshot(path: Path) -> tuple[int, list[tuple[Any, ...]], list[str]]:
    """The layout version, the runs rows and the tables of a store file."""
    with sqlite3.connect(path) as connection:
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        rows = connection.execute("SELECT * FROM runs ORDER BY seq").fetchall()
        tables = [
            row[0]
            for row in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            )
        ]
    connection.close()
    return version, rows, tables


def test_an_old_sqlite_store_is_migrated_on_open(
    tmp_path: Path, loads: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "runs.sqlite3"
    lines = old_lines()
    old_store(path, lines)
    expected = [to_json(load_record(line, where="fixture")) for line in lines]
    with caplog.at_level(logging.INFO, logger="retrievalkit.stores.sqlite"):
        store = SQLiteStore(path)
    assert caplog.messages == [f"migrated 4 runs of sqlite:///{path} to summaries and columns"]
    with sqlite3.connect(path) as connection:  # the inline outcomes' space was given back
        assert connection.execute("PRAGMA freelist_count").fetchone() == (0,)
    connection.close()
    version, rows, tables = snapshot(path)
    assert version == LAYOUT and "run_columns" in tables
    assert {row[6] for row in rows} == {SCHEMA_VERSION}
    for row in rows:
        summary = json.loads(row[7])
        assert isinstance(summary["outcomes"], dict) and "items" not in summary
    runs = store.runs("support", "es-bm25")
    assert [run.run_id for run in runs] == [json.loads(line)["run_id"] for line in lines][::-1]
    assert store.pinned("support", "es-bm25") == json.loads(lines[0])["run_id"]
    assert loads == []
    assert [to_json(run) for run in reversed(runs)] == expected
    # Opening it again finds it migrated, and leaves it alone.
    SQLiteStore(path)
    assert snapshot(path) == (version, rows, tables)


def test_an_old_sqlite_store_held_by_another_writer_is_busy_and_left_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "runs.sqlite3"
    old_store(path, old_lines())
    before = snapshot(path)
    monkeypatch.setenv("RETRIEVALKIT_STORE_TIMEOUT", "0.2")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreBusyError, match=rf"^cannot open sqlite:///{path}: another"):
            SQLiteStore(path)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert snapshot(path) == before


@pytest.mark.parametrize("folder_too", [False, True], ids=["file", "file-and-folder"])
def test_a_read_only_old_sqlite_store_is_read_without_migrating(
    tmp_path: Path, folder_too: bool, record: ResultRecord
) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "runs.sqlite3"
    lines = old_lines()
    old_store(path, lines)
    before = snapshot(path)
    expected = [to_json(load_record(line, where="fixture")) for line in lines]
    with immutable(path, *([folder] if folder_too else [])):
        store = open_store(f"sqlite:///{path}")
        assert isinstance(store, SQLiteStore) and store.read_only is not None
        runs = store.all_runs()
        assert [to_json(run) for run in reversed(runs)] == expected
        with ThreadPoolExecutor(1) as pool:  # its one connection serves any thread
            elsewhere = pool.submit(store.all_runs).result()
        assert [to_json(run) for run in reversed(elsewhere)] == expected
        with pytest.raises(StoreError, match="read-only; nothing was changed"):
            store.save(record)
        with pytest.raises(StoreError, match="read-only"):
            store.check_can_write()
    assert snapshot(path) == before


def test_a_run_that_cannot_be_read_is_left_as_it_was_and_names_itself(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "runs.sqlite3"
    lines = old_lines()
    broken = json.loads(lines[1])
    broken["pass_rate"] = "high"
    lines[1] = json.dumps(broken, sort_keys=True)
    old_store(path, lines)
    with caplog.at_level(logging.INFO, logger="retrievalkit.stores.sqlite"):
        store = SQLiteStore(path)
    url = f"sqlite:///{path}"
    assert f"{url} row 2 was not migrated: {url} row 2: stored record cannot be read" in caplog.text
    assert f"migrated 3 runs of {url} to summaries and columns" in caplog.messages
    version, rows, _ = snapshot(path)
    assert version == LAYOUT
    assert [row[6] for row in rows] == [3, 1, 3, 3]  # the broken row kept its schema and text
    assert rows[1][7] == lines[1]
    with pytest.raises(StoreError, match="row 2: stored record cannot be read"):
        store.runs("support", "es-bm25")
    assert store.get(json.loads(lines[0])["run_id"]) is not None


def test_a_migration_killed_midway_leaves_the_old_store_or_the_new_one(tmp_path: Path) -> None:
    """SIGKILL at several moments of a migration: the file is always all old or all new.

    The last child is left to finish (however loaded the machine), so that one outcome
    is known to be the new layout."""
    lines = old_lines()
    script = (
        "import sys\nfrom pathlib import Path\nfrom retrievalkit.stores.sqlite import SQLiteStore\n"
        "print('opening', flush=True)\nSQLiteStore(Path(sys.argv[1]))\nprint('done', flush=True)\n"
    )
    outcomes = set()
    for attempt, delay in enumerate((0.05, 0.2, 0.4, 0.8, None)):
        path = tmp_path / f"runs-{attempt}.sqlite3"
        many = [
            json.dumps({**json.loads(line), "run_id": f"{json.loads(line)['run_id']}-{n}"})
            for n in range(40)
            for line in lines
        ]
        old_store(path, many)
        child = subprocess.Popen(
            [sys.executable, "-c", script, str(path)], stdout=subprocess.PIPE, text=True
        )
        assert child.stdout is not None and child.stdout.readline() == "opening\n"
        try:
            child.wait(timeout=delay if delay is not None else 240)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        if delay is None:
            assert child.returncode == 0
        version, rows, _ = snapshot(path)
        schemas = {row[6] for row in rows}
        assert len(rows) == len(many)
        assert (version, schemas) in [(0, {1, 2}), (LAYOUT, {SCHEMA_VERSION})], (version, schemas)
        outcomes.add(version)
        assert len(SQLiteStore(path).all_runs()) == len(many)  # and it migrates now
    assert LAYOUT in outcomes


def test_processes_opening_an_old_sqlite_store_at_once_migrate_it_once(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    lines = old_lines()
    old_store(path, lines)
    script = (
        "import sys\nfrom pathlib import Path\nfrom retrievalkit.stores.sqlite import SQLiteStore\n"
        "print(len(SQLiteStore(Path(sys.argv[1])).all_runs()))\n"
    )
    children = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(path)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    counts = [child.communicate(timeout=120)[0].strip() for child in children]
    assert [child.returncode for child in children] == [0] * 4
    assert counts == [str(len(lines))] * 4
    with sqlite3.connect(path) as connection:
        per_run = connection.execute("SELECT count(*) FROM run_columns GROUP BY run_seq").fetchall()
    connection.close()
    assert len(per_run) == len(lines)
    assert {count - 1 for (count,) in per_run} == {  # the outcome columns and the slices
        len(columns_header(SQLiteStore(path).all_runs()[0].outcomes)["columns"])
    }


def test_sqlite_slices_are_read_on_first_use_and_read_as_the_saved_ones(
    tmp_path: Path, record: ResultRecord, loads: list[str]
) -> None:
    import pickle

    store = SQLiteStore(tmp_path / "runs.sqlite3")
    store.save(record)
    [run] = store.runs(record.set, record.model)
    assert run.metrics == record.metrics and loads == []
    assert run.slices == record.slices and dict(run.slices) == dict(record.slices)
    assert loads == ["slices"]
    assert run == record and hash(run.slices) == hash(record.slices)
    assert pickle.loads(pickle.dumps(run)).slices == record.slices
    [again] = store.runs(record.set, record.model)
    assert store.delete([record.run_id]) == 1
    with pytest.raises(StoreError, match="column 'summary/slices' cannot be loaded"):
        again.slices["form"]


def test_a_store_another_process_migrated_while_this_one_waited_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "runs.sqlite3"
    old_store(path, old_lines())
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    waiting = threading.Event()
    real_transaction = SQLiteStore._transaction

    def transaction(self: SQLiteStore, action: str) -> Any:
        waiting.set()
        return real_transaction(self, action)

    monkeypatch.setattr(SQLiteStore, "_transaction", transaction)
    opened: list[SQLiteStore] = []
    with caplog.at_level(logging.INFO, logger="retrievalkit.stores.sqlite"):
        opener = threading.Thread(target=lambda: opened.append(SQLiteStore(path)))
        opener.start()
        try:
            assert waiting.wait(30)
            holder.execute(f"PRAGMA user_version = {LAYOUT}")  # as if it had migrated
        finally:
            holder.execute("COMMIT")
            holder.close()
        opener.join(60)
    assert opened and not opener.is_alive()
    assert not any("migrated" in message for message in caplog.messages)
