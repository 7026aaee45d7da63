"""The store files byte by byte: what a prune keeps, odd lines, file modes, the pins file."""

from __future__ import annotations

import json
import os
import stat
import tempfile
import uuid
from pathlib import Path

import attrs
import pytest

from retrievalkit.config import Config
from retrievalkit.demo import DemoSetProvider
from retrievalkit.errors import StoreError
from retrievalkit.evaluator import evaluate_questions
from retrievalkit.model import ResultRecord
from retrievalkit.record import build_record
from retrievalkit.resolve import resolve_retriever
from retrievalkit.scoring import ScoringOptions, score_run
from retrievalkit.stores import open_store
from retrievalkit.stores.jsonl import JSONLStore, column_file_name
from retrievalkit.stores.memory import MemoryStore
from retrievalkit.stores.serialization import dump_record, dump_summary, load_record
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
    foreign = [b"[1, 2]", b'{"run_id": 5}', b'"text"']
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
