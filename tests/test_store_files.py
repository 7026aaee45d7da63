"""The store files byte by byte: what a prune keeps, odd lines, file modes, the pins file."""

from __future__ import annotations

import fcntl
import hashlib
import json
import locale
import os
import re
import resource
import signal
import socket
import sqlite3
import stat
import struct
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
from immutable_files import immutable

from retrievalkit.demo import DemoSetProvider
from retrievalkit.errors import InputError, StoreBusyError, StoreError
from retrievalkit.formats.config import Config
from retrievalkit.formats.text_files import not_a_regular_file
from retrievalkit.metrics.scoring import ScoringOptions, score_run
from retrievalkit.model.records import ResultRecord
from retrievalkit.pipeline.engine.evaluator import evaluate_questions
from retrievalkit.pipeline.engine.record import build_record
from retrievalkit.plugins.resolution import resolve_retriever
from retrievalkit.stores import (
    check_parent,
    jsonl,
    lock_timeout,
    open_store,
    pinned_run_id,
    read_only_reason,
    serialization,
)
from retrievalkit.stores.columns import encode_columns
from retrievalkit.stores.jsonl import JSONLStore, column_file_name
from retrievalkit.stores.memory import MemoryStore
from retrievalkit.stores.serialization import (
    dump_columns,
    dump_record,
    dump_summary,
    load_record,
    load_summary,
)
from retrievalkit.stores.sqlite import SQLiteStore


@pytest.fixture(scope="module")
def record() -> ResultRecord:
    golden = DemoSetProvider().load("demo")
    resolved = resolve_retriever("bm25-demo", Config())
    options = ScoringOptions(ks=(1, 3), resamples=100)
    scores = score_run(
        golden.questions, evaluate_questions(resolved.retriever, golden.questions, depth=3), options
    )
    return build_record(
        golden, resolved.name, resolved.plugin, resolved.options, scores, options, overfetch=3
    )


def line(record: ResultRecord, run_id: str) -> bytes:
    """A run's line as a JSON Lines store writes it: its summary."""
    return dump_summary(attrs.evolve(record, run_id=run_id)).encode("utf-8")


def test_a_prune_ends_the_file_with_a_newline_when_the_last_kept_line_had_none(
    tmp_path: Path, record: ResultRecord
) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_bytes(line(record, "old") + b"\n" + line(record, "last"))  # no final newline
    assert JSONLStore(path).delete(["old"]) == 1
    assert path.read_bytes() == line(record, "last") + b"\n"


@pytest.mark.parametrize("scheme", ["jsonl", "sqlite", "memory"])
def test_deleting_nothing_deletes_nothing(
    tmp_path: Path, record: ResultRecord, scheme: str
) -> None:
    url = {
        "jsonl": f"jsonl:///{tmp_path}/runs.jsonl",
        "sqlite": f"sqlite:///{tmp_path}/runs.sqlite3",
        "memory": f"memory:{uuid.uuid4().hex}",
    }[scheme]
    store = open_store(url)
    store.save(record)
    assert store.delete([]) == 0  # type: ignore[attr-defined]
    assert [run.run_id for run in store.all_runs()] == [record.run_id]


def test_a_save_after_a_one_byte_torn_line_starts_a_new_line(
    tmp_path: Path, record: ResultRecord
) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_bytes(b"{")
    JSONLStore(path).save(attrs.evolve(record, run_id="next"))
    assert path.read_bytes() == b"{\n" + line(record, "next") + b"\n"


def test_blank_lines_and_broken_bytes_are_skipped_not_fatal(
    tmp_path: Path, record: ResultRecord, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "runs.jsonl"
    torn = line(record, "torn")[:-40] + "é".encode()[:1]  # cut inside a two-byte character
    path.write_bytes(line(record, "first") + b"\n\n" + torn + b"\n" + line(record, "last") + b"\n")
    assert [run.run_id for run in JSONLStore(path).all_runs()] == ["last", "first"]
    assert "line 3: incomplete or corrupt run skipped" in caplog.text


def test_a_prune_keeps_lines_that_are_not_runs(tmp_path: Path, record: ResultRecord) -> None:
    path = tmp_path / "runs.jsonl"
    foreign = [b"[1, 2]", b'{"run_id": 5}', b'"text"', b'{"run_id": ["a", "list"]}']
    path.write_bytes(b"\n".join([line(record, "gone"), *foreign, line(record, "kept")]) + b"\n")
    assert JSONLStore(path).delete(["gone"]) == 1
    assert path.read_bytes() == b"\n".join([*foreign, line(record, "kept")]) + b"\n"


def test_a_prune_keeps_the_file_mode_and_a_new_pins_file_is_readable_by_all(
    tmp_path: Path, record: ResultRecord
) -> None:
    path = tmp_path / "runs.jsonl"
    store = JSONLStore(path)
    for run_id in ("a", "b"):
        store.save(attrs.evolve(record, run_id=run_id))
    os.chmod(path, 0o600)
    store.delete(["a"])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    store.pin(attrs.evolve(record, run_id="b"))
    assert stat.S_IMODE(store.pins_path.stat().st_mode) == 0o644


def test_the_temporary_file_of_a_prune_sits_beside_the_store(
    tmp_path: Path, record: ResultRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With the system's temporary folder on another file system, a temporary file made
    # there could not be renamed over the store: it must be made beside the store.
    elsewhere = Path("/dev/shm")
    assert elsewhere.is_dir() and elsewhere.stat().st_dev != tmp_path.stat().st_dev
    monkeypatch.setattr(tempfile, "tempdir", str(elsewhere))
    path = tmp_path / "runs.jsonl"
    store = JSONLStore(path)
    for run_id in ("a", "b"):
        store.save(attrs.evolve(record, run_id=run_id))
    assert store.delete(["a"]) == 1
    assert [run.run_id for run in store.all_runs()] == ["b"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.jsonl", "runs.jsonl.columns"]
    assert [p.name for p in store.columns_path.iterdir()] == [column_file_name("b")]


def test_the_pins_file_is_sorted_indented_and_keeps_non_ascii(
    tmp_path: Path, record: ResultRecord
) -> None:
    store = JSONLStore(tmp_path / "runs.jsonl")
    pinned = attrs.evolve(record, run_id="r1", set="démo-ü")
    store.save(pinned)
    store.pin(pinned)
    expected = {
        "pins": [{"grader": record.grader, "model": record.model, "run_id": "r1", "set": "démo-ü"}],
        "schema_version": 1,
    }
    text = store.pins_path.read_text(encoding="utf-8")
    assert text == json.dumps(expected, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def test_a_memory_store_pins_only_a_run_it_holds(record: ResultRecord) -> None:
    store = MemoryStore(f"memory:{uuid.uuid4().hex}")
    store.save(attrs.evolve(record, run_id="held"))
    with pytest.raises(StoreError, match="not stored"):
        store.pin(attrs.evolve(record, run_id="elsewhere"))
    assert MemoryStore().url == "memory:"


@pytest.mark.parametrize("kind", [JSONLStore, SQLiteStore])
def test_a_store_made_from_a_path_names_its_url(tmp_path: Path, kind: type) -> None:
    path = tmp_path / "runs.store"
    scheme = "jsonl" if kind is JSONLStore else "sqlite"
    assert kind(path).url == f"{scheme}:///{path}"
    url = f"{scheme}:///{path}"
    assert open_store(url).url == url


def _methods(data: object, found: list[object]) -> object:
    """`data` with every interval's `method` taken out, the methods collected in `found`."""
    if isinstance(data, dict):
        if "method" in data:
            found.append(data["method"])
        return {key: _methods(value, found) for key, value in data.items() if key != "method"}
    if isinstance(data, list):
        return [_methods(value, found) for value in data]
    return data


def test_a_record_without_a_schema_version_is_read_as_version_1(record: ResultRecord) -> None:
    data = json.loads(dump_record(record))
    del data["schema_version"]
    loaded = load_record(json.dumps(data), where="old.jsonl, line 1")
    # Schema 1 predates intervals chosen by kind: its intervals were percentile bootstraps,
    # and that is what the migrated record says; everything else is read as written.
    assert loaded.schema_version == record.schema_version
    old_methods: list[object] = []
    new_methods: list[object] = []
    assert _methods(json.loads(dump_record(loaded)), old_methods) == _methods(
        json.loads(dump_record(record)), new_methods
    )
    assert len(old_methods) == len(new_methods) > 0
    assert {method for method in old_methods if method is not None} == {"percentile"}


# --- what each store does at its edges: odd files, locks, failed writes, damaged files ----


@contextmanager
def unix_socket(path: Path) -> Iterator[None]:
    """A Unix socket file at ``path`` (bound by a name relative to its folder: short)."""
    listener = socket.socket(socket.AF_UNIX)
    here = os.getcwd()
    os.chdir(path.parent)
    try:
        listener.bind(path.name)
    finally:
        os.chdir(here)
    try:
        yield
    finally:
        listener.close()


def test_not_a_regular_file_says_what_the_path_is(tmp_path: Path) -> None:
    regular = tmp_path / "runs.jsonl"
    regular.write_bytes(b"")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert not_a_regular_file(regular) is None
    assert not_a_regular_file(tmp_path / "absent") is None
    assert not_a_regular_file(regular / "below-a-file") is None
    assert not_a_regular_file(tmp_path) == "a folder"
    assert not_a_regular_file(fifo) == "a FIFO (named pipe), not a regular file"
    with unix_socket(tmp_path / "s.sock"):
        assert not_a_regular_file(tmp_path / "s.sock") == "a device or socket, not a regular file"


@pytest.mark.parametrize("scheme", ["jsonl", "sqlite"])
def test_a_store_url_naming_a_socket_is_refused_when_opened(tmp_path: Path, scheme: str) -> None:
    with (
        unix_socket(tmp_path / "s.sock"),
        pytest.raises(InputError, match="names a device or socket, not a regular file"),
    ):
        open_store(f"{scheme}:///{tmp_path / 's.sock'}")


def test_the_default_store_folder_is_created_with_its_parents(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "runs.sqlite3"
    check_parent(path, "sqlite:///x", create=True)
    check_parent(path, "sqlite:///x", create=True)  # already there: fine
    assert path.parent.is_dir()


@pytest.mark.parametrize("scheme", ["jsonl", "sqlite"])
def test_a_file_in_the_way_of_the_store_folder_is_named(tmp_path: Path, scheme: str) -> None:
    (tmp_path / "blocker").write_bytes(b"")
    url = f"{scheme}:///{tmp_path / 'blocker' / 'sub' / 'runs.db'}"
    with pytest.raises(InputError, match=rf"blocker in store '{re.escape(url)}' is a file, not"):
        open_store(url)


@pytest.mark.parametrize("scheme", ["jsonl", "sqlite"])
def test_a_missing_store_folder_names_the_url(tmp_path: Path, scheme: str) -> None:
    url = f"{scheme}:///{tmp_path / 'absent' / 'runs.db'}"
    with pytest.raises(InputError, match=rf"of store '{re.escape(url)}' does not exist"):
        open_store(url)


@pytest.mark.parametrize("scheme", ["jsonl", "sqlite"])
def test_a_store_keeps_its_url_as_written(tmp_path: Path, scheme: str) -> None:
    url = f"{scheme}:///{tmp_path}//runs.{scheme}"  # a path written with a doubled slash
    store = open_store(url)
    assert store.url == url
    assert store.path == tmp_path / f"runs.{scheme}"  # type: ignore[attr-defined]


def test_a_colon_in_a_store_path_is_part_of_the_path(tmp_path: Path) -> None:
    store = open_store(f"jsonl:///{tmp_path / 'a:b.jsonl'}")
    assert isinstance(store, JSONLStore) and store.path == tmp_path / "a:b.jsonl"


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("runs.sqlite3", "has no scheme"),
        (":runs.sqlite3", "has no scheme"),
        ("sqlite:///a\x00b", r"^field '--store': store URL .* holds a NUL byte"),
        # The built-in stores in order, with any a store plugin installed here adds.
        (
            "nosuch:///x",
            # A scheme is RFC 3986's: letters, digits, "+", "-", "." (mlflow+file, ...).
            r"unknown store scheme 'nosuch' .*\(installed: ([a-z][a-z0-9+.-]*, )*jsonl, memory, "
            r"([a-z][a-z0-9+.-]*, )*sqlite(, [a-z][a-z0-9+.-]*)*\)",
        ),
        ("sqlite:///", "is not of the form sqlite:///PATH"),
        ("sqlite:/runs.sqlite3", "is not of the form sqlite:///PATH"),
        ("jsonl:///" + "n" * 300 + ".jsonl", "names are limited to"),
    ],
)
def test_a_bad_store_url_says_what_is_wrong_with_it(url: str, problem: str) -> None:
    with pytest.raises(InputError, match=problem) as raised:
        open_store(url)
    assert raised.value.field == "--store"


def test_the_pinned_run_of_a_key_is_found_by_its_grader(record: ResultRecord) -> None:
    store = MemoryStore(f"memory:{uuid.uuid4().hex}")
    other = attrs.evolve(record, run_id="other-grader", grader="another_grader")
    store.save(other)
    store.pin(other)
    assert pinned_run_id(store, other.set, other.model, "another_grader") == "other-grader"
    assert pinned_run_id(store, other.set, other.model) is None


def test_a_short_write_is_continued_until_all_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A write may take fewer bytes than asked (a signal, a pipe, a network file system).
    real_write = os.write
    data = bytes(range(256)) * 5
    target = tmp_path / "runs.jsonl"
    descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        monkeypatch.setattr(os, "write", lambda fd, view: real_write(fd, bytes(view[:7])))
        jsonl._append(descriptor, data)
    finally:
        monkeypatch.undo()
        os.close(descriptor)
    assert target.read_bytes() == data


def test_a_column_file_index_is_canonical_json(tmp_path: Path, record: ResultRecord) -> None:
    store = JSONLStore(tmp_path / "runs.jsonl")
    store.save(attrs.evolve(record, run_id="r1"))
    content = store.column_path("r1").read_bytes()
    magic = b"RKJC1\n"
    assert content.startswith(magic)
    (size,) = struct.unpack(">I", content[len(magic) : len(magic) + 4])
    head = content[len(magic) + 4 : len(magic) + 4 + size]
    index = json.loads(head)
    assert head == json.dumps(index, sort_keys=True, separators=(",", ":")).encode()
    assert list(index) == ["columns", "run_id", "summary_sha256"] and index["run_id"] == "r1"


def test_column_file_names_are_the_safe_id_and_a_digest_of_it() -> None:
    # The names are part of the stored form: a store committed by one version is read
    # by the next, so they must not change.
    def digest(run_id: str) -> str:
        return hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:12]

    run_id = "20261130T120000Z-0a1b2c3d"
    assert column_file_name(run_id) == f"{run_id}-{digest(run_id)}.rkc"
    assert column_file_name("../../etc/passwd") == f"run-{digest('../../etc/passwd')}.rkc"
    assert column_file_name("Run-1").lower() != column_file_name("run-1").lower()


def test_runs_and_get_read_past_a_run_this_version_cannot_read(
    tmp_path: Path, record: ResultRecord
) -> None:
    # A newer retrievalkit saved another model's run in the same (committed) file: this
    # one still answers for its own runs, and reads no line of another key.
    path = tmp_path / "runs.jsonl"
    store = JSONLStore(path)
    store.save(attrs.evolve(record, run_id="mine"))
    newer = json.loads(line(record, "theirs"))
    newer.update(schema_version=99, model="their-retriever")
    with path.open("ab") as handle:
        handle.write(json.dumps(newer, sort_keys=True).encode() + b"\n")
    store.save(attrs.evolve(record, run_id="mine-too"))
    assert [run.run_id for run in store.runs(record.set, record.model)] == ["mine-too", "mine"]
    found = store.get("mine")
    assert found is not None and found.run_id == "mine"
    assert store.get("absent") is None
    with pytest.raises(StoreError, match=r"line 2: record schema 99 is newer"):
        store.all_runs()


def test_a_line_whose_key_cannot_be_read_is_reported_not_skipped(
    tmp_path: Path, record: ResultRecord
) -> None:
    path = tmp_path / "runs.jsonl"
    damaged = json.loads(line(record, "damaged"))
    del damaged["grader"]
    del damaged["digest"]  # as saved before runs carried one (with it: a damaged run)
    path.write_bytes(json.dumps(damaged).encode() + b"\n")
    with pytest.raises(StoreError, match=r"runs\.jsonl, line 1: stored record cannot be read"):
        JSONLStore(path).runs(record.set, record.model)


def test_get_names_a_line_that_is_not_a_run(tmp_path: Path, record: ResultRecord) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_bytes(line(record, "first") + b"\n[1, 2]\n")
    with pytest.raises(StoreError, match=r"runs\.jsonl, line 2: stored record has no valid"):
        JSONLStore(path).get("absent")


def test_a_waiting_writer_backs_off_from_10_ms_up_to_a_quarter_second(
    tmp_path: Path, record: ResultRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "runs.jsonl"
    store = JSONLStore(path)
    pauses: list[float] = []
    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        real_sleep(seconds)

    monkeypatch.setenv("RETRIEVALKIT_STORE_TIMEOUT", "0.7")
    with path.open("a+b") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX)
        monkeypatch.setattr(time, "sleep", sleep)
        with pytest.raises(StoreBusyError, match=r"held its lock for more than 0\.7 s"):
            store.save(record)
        monkeypatch.setattr(time, "sleep", real_sleep)
    assert pauses[:6] == pytest.approx([0.01, 0.02, 0.04, 0.08, 0.16, 0.25])
    assert max(pauses) == 0.25
    assert store.all_runs() == []


def _operations(record: ResultRecord) -> dict[str, Callable[[Any], object]]:
    return {
        "save to": lambda store: store.save(attrs.evolve(record, run_id="new")),
        "pin in": lambda store: store.pin(record),
        "unpin in": lambda store: store.unpin(record.set, record.model, record.grader),
        "delete from": lambda store: store.delete([record.run_id]),
        "write to": lambda store: store.check_can_write(),
    }


ACTIONS = ["save to", "pin in", "unpin in", "delete from", "write to"]


@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize("scheme", ["jsonl", "sqlite"])
def test_a_locked_store_names_what_could_not_be_done(
    tmp_path: Path, record: ResultRecord, monkeypatch: pytest.MonkeyPatch, scheme: str, action: str
) -> None:
    monkeypatch.setenv("RETRIEVALKIT_STORE_TIMEOUT", "0")
    path = tmp_path / f"runs.{scheme}"
    url = f"{scheme}:///{path}"
    store = open_store(url)
    store.save(record)
    store.pin(record)  # type: ignore[attr-defined]
    expected = rf"cannot {action} {re.escape(url)}: another process held its lock"
    if scheme == "jsonl":
        with path.open("a+b") as holder:
            fcntl.flock(holder, fcntl.LOCK_EX)
            with pytest.raises(StoreBusyError, match=expected):
                _operations(record)[action](store)
    else:
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StoreBusyError, match=expected):
                _operations(record)[action](store)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
    assert [run.run_id for run in store.all_runs()] == [record.run_id]
    assert store.pinned(record.set, record.model, record.grader) == record.run_id  # type: ignore[attr-defined]


@pytest.mark.parametrize("action", ACTIONS)
def test_a_read_only_sqlite_store_names_what_could_not_be_done(
    tmp_path: Path, record: ResultRecord, action: str
) -> None:
    path = tmp_path / "runs.sqlite3"
    url = f"sqlite:///{path}"
    writer = SQLiteStore(path, url=url)
    writer.save(record)
    writer.pin(record)
    writer.close()
    with immutable(path):
        store = open_store(url)
        with pytest.raises(
            StoreError, match=rf"cannot {action} {re.escape(url)}: the file .* is read-only"
        ):
            _operations(record)[action](store)
        assert [run.run_id for run in store.all_runs()] == [record.run_id]
        store.close()  # type: ignore[attr-defined]


def test_an_unreadable_read_only_sqlite_file_is_refused_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    path.write_bytes(b"not a database, " * 512)
    with (
        immutable(path),
        pytest.raises(StoreError, match=r"cannot open store .*not a database.*read-only"),
    ):
        SQLiteStore(path)


def test_a_read_only_jsonl_store_refuses_a_save_and_says_why(
    tmp_path: Path, record: ResultRecord
) -> None:
    path = tmp_path / "runs.jsonl"
    store = JSONLStore(path)
    store.save(record)
    before = path.read_bytes()
    with (
        immutable(path),
        pytest.raises(
            StoreBusyError, match=rf"\(the file {re.escape(str(path))} is read-only\); nothing was"
        ),
    ):
        store.save(attrs.evolve(record, run_id="refused"))
    assert path.read_bytes() == before
    assert [p.name for p in store.columns_path.iterdir()] == [column_file_name(record.run_id)]


def test_a_column_file_that_cannot_be_written_stops_the_save(
    tmp_path: Path, record: ResultRecord
) -> None:
    path = tmp_path / "runs.jsonl"
    store = JSONLStore(path)
    store.save(record)
    before = path.read_bytes()
    store.column_path("blocked").mkdir()  # something in the way of the run's column file
    with pytest.raises(StoreBusyError, match=r"cannot write jsonl:.*; nothing was saved"):
        store.save(attrs.evolve(record, run_id="blocked"))
    assert path.read_bytes() == before
    assert sorted(p.name for p in store.columns_path.iterdir()) == sorted(
        [column_file_name(record.run_id), column_file_name("blocked")]
    )


def test_a_pins_file_that_cannot_be_replaced_is_a_store_error_and_leaves_nothing(
    tmp_path: Path, record: ResultRecord
) -> None:
    store = JSONLStore(tmp_path / "runs.jsonl")
    store.save(record)
    store.pin(record)
    before = store.pins_path.read_bytes()
    with (
        immutable(store.pins_path),
        pytest.raises(StoreError, match=r"cannot write .*pins\.json: .*; nothing changed"),
    ):
        store.unpin(record.set, record.model, record.grader)
    assert store.pins_path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "runs.jsonl",
        "runs.jsonl.columns",
        "runs.jsonl.pins.json",
    ]


def test_a_temporary_file_is_hidden_and_named_after_what_it_replaces(
    tmp_path: Path, record: ResultRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A crash mid-write leaves a dot file that says what it was for, beside its target.
    store = JSONLStore(tmp_path / "runs.jsonl")
    store.save(record)
    seen: list[str] = []
    real_fsync = os.fsync

    def fsync(descriptor: int) -> None:
        seen.extend(p.name for p in tmp_path.iterdir() if p.name.startswith("."))
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", fsync)
    store.pin(record)
    monkeypatch.undo()
    assert seen and all(name.startswith(".runs.jsonl.pins.json.") for name in seen)


def test_a_failed_append_is_cut_back_in_process(tmp_path: Path, record: ResultRecord) -> None:
    path = tmp_path / "runs.jsonl"
    store = JSONLStore(path)
    for run_id in ("a", "b", "c"):
        store.save(attrs.evolve(record, run_id=run_id))
    before = path.read_bytes()
    grown = len(line(record, "cut")) // 2
    assert store.column_path("a").stat().st_size < len(before) + grown
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG, as on a full disk
    resource.setrlimit(resource.RLIMIT_FSIZE, (len(before) + grown, hard))
    try:
        with pytest.raises(StoreBusyError, match="nothing was saved"):
            store.save(attrs.evolve(record, run_id="cut"))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)
    assert path.read_bytes() == before
    assert not store.column_path("cut").exists()
    store.save(attrs.evolve(record, run_id="after"))
    assert [run.run_id for run in store.all_runs()] == ["after", "c", "b", "a"]


def _rewrite_column_file(store: JSONLStore, run_id: str, change: Callable[[dict], None]) -> None:
    content = store.column_path(run_id).read_bytes()
    (size,) = struct.unpack(">I", content[6:10])
    index = json.loads(content[10 : 10 + size])
    change(index)
    head = json.dumps(index).encode()
    rest = content[10 + size :]
    store.column_path(run_id).write_bytes(content[:6] + struct.pack(">I", len(head)) + head + rest)


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        ("short", "it is not a retrievalkit column file"),
        ("magic", "it is not a retrievalkit column file"),
        ("no columns", "it holds no column 'metric/rr'"),
        ("cut", "it is cut short"),
    ],
)
def test_a_damaged_column_file_says_what_is_wrong(
    tmp_path: Path, record: ResultRecord, damage: str, why: str
) -> None:
    store = JSONLStore(tmp_path / "runs.jsonl")
    store.save(attrs.evolve(record, run_id="damaged"))
    run = store.get("damaged")
    assert run is not None
    target = store.column_path("damaged")
    if damage == "short":
        target.write_bytes(target.read_bytes()[:8])
    elif damage == "magic":
        target.write_bytes(b"XKJC1\n" + target.read_bytes()[6:])
    elif damage == "no columns":
        _rewrite_column_file(store, "damaged", lambda index: index.pop("columns"))
    else:
        target.write_bytes(target.read_bytes()[:-1])
        with pytest.raises(StoreError, match=rf"of run damaged cannot be read: {why} \(the file"):
            encode_columns(run.outcomes)  # reads every column, the last one cut short
        return
    with pytest.raises(
        StoreError,
        match=rf"column 'metric/rr' of run damaged cannot be read: {re.escape(why)} "
        r"\(the file was changed outside retrievalkit\)",
    ):
        run.outcomes.values("rr")


@pytest.mark.parametrize("name", ["jsonl:///runs.jsonl", "sqlite:///runs.sqlite3"])
def test_a_run_gone_from_the_store_names_the_store(
    tmp_path: Path, record: ResultRecord, name: str
) -> None:
    scheme, _, file = name.partition(":///")
    url = f"{scheme}:///{tmp_path / file}"
    store = open_store(url)
    store.save(attrs.evolve(record, run_id="doomed"))
    run = store.get("doomed")
    assert run is not None
    store.delete(["doomed"])  # type: ignore[attr-defined]
    with pytest.raises(StoreError, match=rf"run doomed is no longer in {re.escape(url)} \("):
        run.outcomes.values("rr")


def test_damaged_sqlite_slices_name_the_row(tmp_path: Path, record: ResultRecord) -> None:
    path = tmp_path / "runs.sqlite3"
    store = SQLiteStore(path)
    store.save(record)
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE run_columns SET data = x'7b' WHERE name = 'summary/slices'")
    connection.close()
    run = store.get(record.run_id)
    assert run is not None
    with pytest.raises(StoreError, match=r"runs\.sqlite3 row 1: run .* its slices do not match"):
        dict(run.slices)


def test_the_pins_file_is_read_as_utf8_whatever_the_locale(
    tmp_path: Path, record: ResultRecord
) -> None:
    store = JSONLStore(tmp_path / "runs.jsonl")
    pinned = attrs.evolve(record, run_id="r1", set="démo-ü")
    store.save(pinned)
    store.pin(pinned)
    before = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")  # an ASCII locale, as on a bare server
    try:
        assert store.pinned("démo-ü", record.model, record.grader) == "r1"
    finally:
        locale.setlocale(locale.LC_CTYPE, before)


def test_a_save_waiting_while_the_runs_file_is_removed_writes_a_new_file(
    tmp_path: Path, record: ResultRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The file is removed (by hand, or a prune's rename) while a writer waits for its
    # lock: the run goes into the file now at the path, never into the unlinked one.
    path = tmp_path / "runs.jsonl"
    store = JSONLStore(path)
    store.save(attrs.evolve(record, run_id="first"))
    waiting = threading.Event()
    real_lock = jsonl._lock

    def lock(handle: Any, url: str, action: str) -> None:
        waiting.set()
        real_lock(handle, url, action)

    monkeypatch.setattr(jsonl, "_lock", lock)
    with path.open("a+b") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX)
        saver = threading.Thread(target=store.save, args=(attrs.evolve(record, run_id="later"),))
        saver.start()
        assert waiting.wait(30)
        path.unlink()
    saver.join(60)
    assert not saver.is_alive()
    assert [run.run_id for run in store.all_runs()] == ["later"]


def test_a_stored_summary_keeps_non_ascii_text_as_written(
    tmp_path: Path, record: ResultRecord
) -> None:
    path = tmp_path / "runs.jsonl"
    JSONLStore(path).save(attrs.evolve(record, run_id="r1", set="démo-ü"))
    assert '"set":"démo-ü"' in path.read_text(encoding="utf-8")


def _schema_1(record: ResultRecord) -> dict[str, Any]:
    data = json.loads(dump_record(record))
    data["schema_version"] = 1
    for value in data["metrics"].values():
        value.pop("method", None)
    return data


def test_a_schema_1_interval_method_is_percentile_only_where_there_was_an_interval(
    record: ResultRecord,
) -> None:
    data = _schema_1(record)
    name = next(iter(data["metrics"]))
    data["metrics"][name]["ci"] = None
    loaded = json.loads(dump_record(load_record(json.dumps(data), where="old, line 1")))
    assert loaded["metrics"][name]["method"] is None
    others = [value["method"] for key, value in loaded["metrics"].items() if key != name]
    assert others and set(others) == {"percentile"}


@pytest.mark.parametrize("slices", [{"difficulty": 5}, {"difficulty": {"hard": 5}}])
def test_damaged_slices_of_a_schema_1_record_are_a_store_error(
    record: ResultRecord, slices: dict[str, Any]
) -> None:
    data = _schema_1(record)
    data["slices"] = slices
    with pytest.raises(StoreError, match=r"^old, line 1: stored record cannot be read"):
        load_record(json.dumps(data), where="old, line 1")


def test_a_schema_2_record_without_items_loads(record: ResultRecord) -> None:
    data = json.loads(dump_record(record))
    data["schema_version"] = 2
    data.pop("items", None)
    loaded = load_record(json.dumps(data), where="old, line 1")
    assert loaded.run_id == record.run_id and loaded.outcomes == record.outcomes


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("", 60.0),
        ("5", 5.0),
        ("0", 0.0),
        ("2.5", 2.5),
        ("86399.5", 86399.5),
        ("86400", 60.0),
        ("-1", 60.0),
        ("1e9", 60.0),
        ("x", 60.0),
    ],
)
def test_the_lock_timeout_comes_from_the_environment_within_bounds(
    monkeypatch: pytest.MonkeyPatch, text: str, seconds: float
) -> None:
    monkeypatch.setenv("RETRIEVALKIT_STORE_TIMEOUT", text)
    assert lock_timeout() == seconds


def test_read_only_reason_names_the_file_or_the_folder(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    existing = folder / "runs.jsonl"
    existing.write_bytes(b"")
    absent = folder / "absent.jsonl"
    assert read_only_reason(existing) is None
    assert read_only_reason(absent) is None
    assert read_only_reason(tmp_path / "no-folder" / "runs.jsonl") is None
    with immutable(existing, folder):
        assert read_only_reason(existing) == f"the file {existing} is read-only"
        assert read_only_reason(absent) == f"the folder {folder} is read-only"


def test_a_stored_summary_is_strict_json_without_nan() -> None:
    with pytest.raises(ValueError, match="JSON compliant"):
        serialization._canonical({"mean": float("nan")})


@pytest.mark.parametrize(
    ("summary", "problem"),
    [
        ({"schema_version": 3}, "has no outcomes header"),
        ({"schema_version": 2, "outcomes": {}}, "has no outcomes header"),
    ],
)
def test_a_summary_without_an_outcomes_header_is_refused(
    summary: dict[str, Any], problem: str
) -> None:
    with pytest.raises(StoreError, match=rf"^here: stored summary {problem}"):
        load_summary(json.dumps(summary), lambda name: b"", where="here")


def test_a_summary_without_its_slices_is_refused_not_read_as_none(record: ResultRecord) -> None:
    data = json.loads(dump_summary(record))
    del data["slices"]
    del data["digest"]  # as saved before runs carried one (with it: a damaged run)
    with pytest.raises(StoreError, match=r"^here: stored record cannot be read"):
        load_summary(json.dumps(data), dump_columns(record).__getitem__, where="here")


def test_slices_kept_in_a_summary_are_read_from_it(record: ResultRecord) -> None:
    def elsewhere() -> bytes:
        raise AssertionError("slices kept in the summary are read from it")

    columns = dump_columns(record)
    loaded = load_summary(dump_summary(record), columns.__getitem__, where="x", slices=elsewhere)
    assert loaded == record and dict(loaded.slices) == dict(record.slices)


def test_a_sqlite_store_serves_any_thread(tmp_path: Path, record: ResultRecord) -> None:
    store = SQLiteStore(tmp_path / "runs.sqlite3")
    with ThreadPoolExecutor(1) as pool:
        pool.submit(store.save, attrs.evolve(record, run_id="elsewhere")).result()
        assert pool.submit(store.get, "elsewhere").result() is not None
    assert [run.run_id for run in store.all_runs()] == ["elsewhere"]


def test_a_record_of_a_removed_sqlite_store_does_not_create_it_again(
    tmp_path: Path, record: ResultRecord
) -> None:
    path = tmp_path / "runs.sqlite3"
    store = SQLiteStore(path)
    store.save(record)
    run = store.get(record.run_id)
    assert run is not None
    store.close()
    for leftover in tmp_path.iterdir():
        leftover.unlink()
    with pytest.raises(StoreError, match="cannot read the column"):
        run.outcomes.values("rr")
    assert list(tmp_path.iterdir()) == []


def test_a_sqlite_store_locked_while_opening_is_busy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A file in rollback-journal mode (written by another SQLite program) held by an
    # exclusive lock: even reading its layout waits, then gives up with exit code 3.
    path = tmp_path / "runs.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("INSERT INTO t VALUES (1)")
    monkeypatch.setenv("RETRIEVALKIT_STORE_TIMEOUT", "0")
    try:
        with pytest.raises(StoreBusyError, match=rf"^cannot open sqlite:///{path}: another"):
            SQLiteStore(path)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@pytest.mark.parametrize(
    ("sql", "problem"),
    [
        ("UPDATE runs SET record = '{'", "stored record is not JSON"),
        (
            "UPDATE runs SET record = json_set(record, '$.pass_rate', 'high')",
            "run .* is damaged and cannot be trusted: its summary does not match",
        ),
        (
            "UPDATE runs SET record = json_remove(json_set(record, '$.pass_rate', 'high'),"
            " '$.digest')",
            "stored record cannot be read",
        ),
        (
            "UPDATE run_columns SET data = x'00' WHERE name = 'metric/rr'",
            "run .* is damaged and cannot be trusted: its outcome column 'metric/rr' does not",
        ),
    ],
)
def test_a_damaged_sqlite_row_names_the_store_and_row(
    tmp_path: Path, record: ResultRecord, sql: str, problem: str
) -> None:
    path = tmp_path / "runs.sqlite3"
    store = SQLiteStore(path)
    store.save(record)
    with sqlite3.connect(path) as connection:
        connection.execute(sql)
    connection.close()
    with pytest.raises(StoreError, match=rf"^sqlite:///{re.escape(str(path))} row 1: {problem}"):
        run = store.get(record.run_id)
        assert run is not None
        run.outcomes.values("rr")


def test_a_sqlite_store_waits_for_a_lock_as_long_as_it_is_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RETRIEVALKIT_STORE_TIMEOUT", "7")
    store = SQLiteStore(tmp_path / "runs.sqlite3")
    assert store._connection.execute("PRAGMA busy_timeout").fetchone() == (7000,)
