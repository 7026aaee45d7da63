"""Every stored run carries a content digest, checked when it is read: hand edits are named.

A run is saved with the SHA-256 of its summary's canonical JSON and of each outcome
column (and of the slices, where SQLite keeps them apart). Seeded edits change one thing
of a stored run, the way a person or a tool would: a leaf of the summary JSON (a metric's
mean, a count, a manifest field, the key, the outcomes header), one byte of one outcome
column or of the slices (question ids, rankings, metric values: the question rows), a
column of the SQLite row itself (set, retriever, created_at), by raw SQL in SQLite and by
editing the line or the column file of a JSON Lines store. Every edit must be found when
the run is read whole and by `history --verify` (that run damaged, the other intact), and
through the command line `show`, `history` and `eval --fail-on-regression` must end with
exit code 3 naming the run. A run saved without a digest still reads ("no digest").
"""

from __future__ import annotations

import json
import random
import sqlite3
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
from child_env import child_environment

from retrievalkit.api import evaluate, load_set
from retrievalkit.errors import StoreError
from retrievalkit.model.records import ResultRecord
from retrievalkit.stores import DAMAGED, INTACT, NO_DIGEST, open_store, read_whole, verify_store
from retrievalkit.stores import jsonl as jsonl_store
from retrievalkit.stores.consistency import UntrustedRun
from retrievalkit.stores.jsonl import JSONLStore
from retrievalkit.stores.memory import MemoryStore
from retrievalkit.stores.serialization import dump_columns, dump_summary, load_summary

BACKENDS = ("sqlite", "jsonl")
#: What an edit changes: a leaf of the summary, a byte of a column (or the slices), a row field.
KINDS = ("summary", "column", "row")
ROW_FIELDS = ("set_name", "model", "grader", "created_at", "run_id")


@pytest.fixture(scope="module")
def records() -> tuple[ResultRecord, ResultRecord]:
    record = evaluate(load_set("demo"), "bm25-demo").record
    return attrs.evolve(record, run_id="run-edited"), attrs.evolve(record, run_id="run-kept")


def _url(folder: Path, backend: str) -> str:
    name = "runs.sqlite3" if backend == "sqlite" else "runs.jsonl"
    return f"{backend}:////{str(folder / name).lstrip('/')}"


def _leaves(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(data, dict):
        return [leaf for key in sorted(data) for leaf in _leaves(data[key], (*path, key))]
    if isinstance(data, list):
        return [leaf for index, item in enumerate(data) for leaf in _leaves(item, (*path, index))]
    return [path]


def _changed(value: Any, rng: random.Random) -> Any:
    """Another value of the same kind, as a hand edit would leave it."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + rng.choice((-2, -1, 1, 7))
    if isinstance(value, float):
        return round(value + rng.choice((-0.25, -0.01, 0.013, 0.5)), 6)
    if isinstance(value, str):
        return value + rng.choice(("x", " ", "0")) if value else "edited"
    return rng.choice((0, "edited", False))


def _edit_summary(text: str, rng: random.Random, within: str | None) -> tuple[str, str]:
    data = json.loads(text)
    leaves = [leaf for leaf in _leaves(data) if leaf and leaf[0] != "digest"]
    if within is not None:
        leaves = [leaf for leaf in leaves if leaf[0] == within] or leaves
    leaf = rng.choice(leaves)
    holder = data
    for key in leaf[:-1]:
        holder = holder[key]
    holder[leaf[-1]] = _changed(holder[leaf[-1]], rng)
    return json.dumps(data, separators=(", ", ": ")), "/".join(map(str, leaf))


def _flip(data: bytes, rng: random.Random) -> bytes:
    position = rng.randrange(len(data))
    return (
        data[:position] + bytes([data[position] ^ (1 << rng.randrange(8))]) + data[position + 1 :]
    )


def _edit_sqlite(path: Path, kind: str, rng: random.Random) -> str:
    with sqlite3.connect(path) as connection:
        (seq,) = connection.execute("SELECT seq FROM runs WHERE run_id = 'run-edited'").fetchone()
        if kind == "summary":
            (text,) = connection.execute("SELECT record FROM runs WHERE seq = ?", (seq,)).fetchone()
            edited, what = _edit_summary(text, rng, rng.choice((None, "metrics", "outcomes")))
            connection.execute("UPDATE runs SET record = ? WHERE seq = ?", (edited, seq))
        elif kind == "column":
            names = [
                row[0]
                for row in connection.execute(
                    "SELECT name FROM run_columns WHERE run_seq = ? ORDER BY name", (seq,)
                )
            ]
            what = rng.choice(names)
            (data,) = connection.execute(
                "SELECT data FROM run_columns WHERE run_seq = ? AND name = ?", (seq, what)
            ).fetchone()
            connection.execute(
                "UPDATE run_columns SET data = ? WHERE run_seq = ? AND name = ?",
                (_flip(bytes(data), rng), seq, what),
            )
        else:
            what = rng.choice(ROW_FIELDS)
            (value,) = connection.execute(
                f"SELECT {what} FROM runs WHERE seq = ?", (seq,)
            ).fetchone()
            connection.execute(
                f"UPDATE runs SET {what} = ? WHERE seq = ?", (_changed(value, rng), seq)
            )
    connection.close()
    return what


def _edit_jsonl(path: Path, kind: str, rng: random.Random) -> str:
    lines = path.read_text(encoding="utf-8").splitlines()
    index = next(n for n, line in enumerate(lines) if '"run-edited"' in line)
    if kind in ("summary", "row"):  # a JSON Lines store has no row apart from its line
        within = "manifest" if kind == "row" else rng.choice((None, "metrics", "slices"))
        lines[index], what = _edit_summary(lines[index], rng, within)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return what
    column_file = JSONLStore(path).column_path("run-edited")
    content = column_file.read_bytes()
    head = len(b"RKJC1\n") + 4
    (size,) = struct.unpack(">I", content[head - 4 : head])
    places = json.loads(content[head : head + size])["columns"]
    what = rng.choice(sorted(places))
    offset, length = places[what]
    start = head + size + offset
    column = _flip(content[start : start + length], rng)
    column_file.write_bytes(content[:start] + column + content[start + length :])
    return what


def _cases(count: int, seed: int) -> list[tuple[str, str, int]]:
    rng = random.Random(seed)
    return [(rng.choice(BACKENDS), rng.choice(KINDS), rng.randrange(2**32)) for _ in range(count)]


CASES = _cases(80, seed=42)


def _saved(folder: Path, backend: str, records: tuple[ResultRecord, ...]) -> str:
    url = _url(folder, backend)
    store = open_store(url)
    for record in records:
        store.save(record)
    return url


def _read_whole(url: str, run_id: str) -> None:
    record = open_store(url).get(run_id)
    assert record is not None
    read_whole(record)


def _read_all(url: str) -> None:
    for record in open_store(url).all_runs():
        read_whole(record)


@pytest.mark.parametrize(("backend", "kind", "seed"), CASES)
def test_every_hand_edit_of_a_stored_run_is_found_and_names_the_run(
    backend: str, kind: str, seed: int, records: tuple[ResultRecord, ResultRecord], tmp_path: Path
) -> None:
    url = _saved(tmp_path, backend, records)
    store_path = tmp_path / ("runs.sqlite3" if backend == "sqlite" else "runs.jsonl")
    rng = random.Random(seed)
    edit = _edit_sqlite if backend == "sqlite" else _edit_jsonl
    what = edit(store_path, kind, rng)
    # Read whole, the edited run is refused with its id; the other still reads.
    with pytest.raises(StoreError) as raised:
        _read_all(url)
    assert "run-edited" in str(raised.value), (what, raised.value)
    _read_whole(url, "run-kept") if kind == "column" else None
    checks = verify_store(open_store(url))
    states = {check.run_id: check.state for check in checks}
    damaged = [check for check in checks if check.state == DAMAGED]
    assert len(damaged) == 1, (what, checks)
    assert "run-edited" in damaged[0].run_id + damaged[0].detail, (what, damaged)
    assert states.get("run-kept") == INTACT, (what, checks)
    if kind == "summary" or (kind == "row" and backend == "sqlite"):
        # What history and the baseline choice read: the summary, and the row beside it.
        with pytest.raises(UntrustedRun, match=r"run-edited|row 1"):
            open_store(url).all_runs()


def _without_digest(record: ResultRecord, columns: object = None) -> str:
    """A summary as retrievalkit wrote it before runs carried a digest."""
    data = json.loads(dump_summary(record))
    del data["digest"]
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def test_a_run_saved_without_a_digest_still_reads_and_says_so(
    records: tuple[ResultRecord, ResultRecord], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _saved(tmp_path, "sqlite", records)
    with sqlite3.connect(tmp_path / "runs.sqlite3") as connection:
        connection.execute(
            "UPDATE runs SET record = json_remove(record, '$.digest') WHERE run_id = 'run-kept'"
        )
    connection.close()
    _read_whole(url, "run-kept")
    states = {check.run_id: check.state for check in verify_store(open_store(url))}
    assert states == {"run-kept": NO_DIGEST, "run-edited": INTACT}
    jsonl = tmp_path / "old.jsonl"
    store = JSONLStore(jsonl)
    with monkeypatch.context() as patch:
        patch.setattr(jsonl_store, "dump_summary", _without_digest)
        store.save(records[0])
    assert "digest" not in json.loads(jsonl.read_text(encoding="utf-8"))
    assert [check.state for check in verify_store(store)] == [NO_DIGEST]
    assert store.get("run-edited") == records[0]


def test_the_memory_store_checks_digests_too(records: tuple[ResultRecord, ResultRecord]) -> None:
    store = MemoryStore("memory:digests")
    for record in records:
        store.save(record)
    assert [check.state for check in verify_store(store)] == [INTACT, INTACT]
    summary = json.loads(dump_summary(records[0]))
    summary["metrics"]["hit@1"]["mean"] = 0.999
    columns = dump_columns(records[0])
    with pytest.raises(UntrustedRun, match="run-edited is damaged"):
        load_summary(json.dumps(summary), columns.__getitem__, where="here")


def test_a_torn_jsonl_line_is_reported_by_verify(
    records: tuple[ResultRecord, ResultRecord], tmp_path: Path
) -> None:
    url = _saved(tmp_path, "jsonl", records)
    path = tmp_path / "runs.jsonl"
    with open(path, "ab") as handle:
        handle.write(b'{"run_id": "torn", "met')
    checks = verify_store(open_store(url))
    assert [check.state for check in checks] == [DAMAGED, INTACT, INTACT]
    assert "line 3" in checks[0].where


def _cli(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "retrievalkit", *args],
        cwd=folder, env=child_environment(NO_COLOR="1"), capture_output=True, text=True,
        check=False, timeout=180,
    )  # fmt: skip


CLI_CASES = _cases(6, seed=5)


@pytest.mark.parametrize(("backend", "kind", "seed"), CLI_CASES)
def test_the_command_line_names_a_damaged_run_with_exit_code_3(
    backend: str, kind: str, seed: int, records: tuple[ResultRecord, ResultRecord], tmp_path: Path
) -> None:
    url = _saved(tmp_path, backend, records)
    store_path = tmp_path / ("runs.sqlite3" if backend == "sqlite" else "runs.jsonl")
    edit = _edit_sqlite if backend == "sqlite" else _edit_jsonl
    what = edit(store_path, kind, random.Random(seed))
    verify = _cli(tmp_path, "history", "--verify", "--store", url)
    assert verify.returncode == 3, (what, verify.stderr)
    assert "1 damaged" in verify.stderr and "run-kept  ok" in verify.stdout, verify.stdout
    assert "run-edited" in verify.stdout or "row 1" in verify.stdout
    as_json = json.loads(_cli(tmp_path, "history", "--verify", "--store", url, "--format",
                              "json").stdout)  # fmt: skip
    assert sorted(row["state"] for row in as_json["runs"]) == [DAMAGED, INTACT]
    renamed = kind == "row" and what == "run_id"
    commands = [
        ["eval", "--set", "demo", "--retriever", "bm25-demo", "--fail-on-regression",
         "--no-save", *(() if renamed else ("--baseline", "run-edited"))],
    ]  # fmt: skip
    if not renamed:
        commands.append(["show", "run-edited", "--format", "json"])
    if not (kind == "row" and what in ("set_name", "model", "grader")):
        # (a row moved to another key is no longer in this history; --verify finds it)
        commands.append(["history", "--set", "demo", "--retriever", "bm25-demo"])
    for command in commands:
        done = _cli(tmp_path, *command, "--store", url)
        if kind == "column" and command[0] == "history":
            assert done.returncode == 0, done.stderr  # history reads summaries only
            continue
        if (
            command[0] == "eval"
            and kind == "column"
            and what not in ("metric/hit@1", "metric/hit@3")
            and not what.startswith(("question_ids", "errors", "summary/"))
        ):
            assert done.returncode in (0, 3), done.stderr  # only the gated columns are read
            continue
        assert done.returncode == 3, (command, what, done.stderr)
        assert "damaged" in done.stderr or "cannot" in done.stderr, done.stderr
        assert "run-edited" in done.stderr or "row 1" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def test_verify_of_an_intact_store_is_exit_0(
    records: tuple[ResultRecord, ResultRecord], tmp_path: Path
) -> None:
    url = _saved(tmp_path, "sqlite", records)
    done = _cli(tmp_path, "history", "--verify", "--store", url)
    assert done.returncode == 0, done.stderr
    assert "2 intact, 0 with no digest, 0 damaged" in done.stderr
    partial = _cli(tmp_path, "history", "--verify", "--set", "nope", "--store", url)
    assert partial.returncode == 0 and "0 runs checked" in partial.stderr, partial.stderr


@pytest.mark.parametrize("seed", range(4))
def test_serve_names_a_damaged_run_instead_of_showing_it(
    seed: int, records: tuple[ResultRecord, ResultRecord], tmp_path: Path
) -> None:
    from starlette.testclient import TestClient

    from retrievalkit.api import Thresholds
    from retrievalkit.formats.config import Config
    from retrievalkit.serve.app import create_app
    from retrievalkit.serve.judging_queue import LabelsFile
    from retrievalkit.serve.views import Site

    url = _saved(tmp_path, "sqlite", records)
    what = _edit_sqlite(tmp_path / "runs.sqlite3", "summary", random.Random(seed))
    site = Site(
        store=open_store(url),
        config=Config(),
        labels=LabelsFile(tmp_path / "labels.tsv"),
        thresholds=Thresholds(),
    )
    app = create_app(site, host="127.0.0.1", port=9, token=None)
    with TestClient(app, base_url="http://127.0.0.1:9") as client:
        page = client.get("/history", params={"set": "demo", "retriever": "bm25-demo"})
    assert page.status_code >= 400, (what, page.status_code)
    assert "run-edited is damaged and cannot be trusted" in page.text, (what, page.text[-800:])
