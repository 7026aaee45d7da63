"""Store integrity: nothing a user can point retrievalkit at destroys or tears a history.

Real files, real locks, real kernel limits: an --output-dir colliding with the store or
an input, FIFOs and devices given as sets or stores, a symlink planted in the output
folder, a JSON Lines append cut short by a file-size limit (as on a full disk), stores
locked by another process past the timeout, and pins racing prunes in one SQLite file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import resource
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import attrs
import pytest
from child_env import child_environment

from retrievalkit.errors import StoreError
from retrievalkit.model.records import ResultRecord
from retrievalkit.stores.sqlite import SQLiteStore

EVAL = ["eval", "--set", "demo", "--retriever", "bm25-demo", "-q"]


def _cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, file_limit: int | None = None
) -> subprocess.CompletedProcess[str]:
    environment = child_environment()
    environment.update(NO_COLOR="1", COLUMNS="200", **(env or {}))

    def limit() -> None:
        if file_limit is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))

    return subprocess.run(
        [sys.executable, "-m", "retrievalkit", *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        preexec_fn=limit,  # only resource limits, set between fork and exec
    )


def _one_error(completed: subprocess.CompletedProcess[str], code: int, *words: str) -> str:
    assert completed.returncode == code, (completed.returncode, completed.stderr)
    lines = [line for line in completed.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("retrievalkit: error: "), completed.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


@pytest.mark.parametrize(
    ("store", "collides_with"),
    [
        ("jsonl:///out/summary.json", "summary.json"),
        ("jsonl:///out/per_question.jsonl", "per_question.jsonl"),
        ("sqlite:///out/report.md", "report.md"),
    ],
)
def test_a_store_inside_the_output_files_is_refused_before_any_work(
    tmp_path: Path, store: str, collides_with: str
) -> None:
    (tmp_path / "out").mkdir()
    first = _cli(*EVAL, "--store", store, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    history = (tmp_path / "out" / collides_with).read_bytes()
    completed = _cli(*EVAL, "--store", store, "--output-dir", "out", cwd=tmp_path)
    _one_error(completed, 2, "--output-dir", collides_with)
    assert (tmp_path / "out" / collides_with).read_bytes() == history
    assert completed.stdout == ""  # refused before the evaluation printed anything


def test_an_input_file_inside_the_output_files_is_refused(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    row = {"id": "q1", "question": "library card?", "expected": ["doc-card"]}
    golden = tmp_path / "out" / "per_question.jsonl"
    golden.write_text(json.dumps(row) + "\n", encoding="utf-8")
    args = ["eval", "--set", "out/per_question.jsonl", "--retriever", "bm25-demo"]
    completed = _cli(*args, "--store", "memory:", "--output-dir", "out", cwd=tmp_path)
    _one_error(completed, 2, "--output-dir", "--set")
    assert json.loads(golden.read_text(encoding="utf-8")) == row


@pytest.mark.parametrize(
    "args",
    [
        ["eval", "--set", "fifo.jsonl", "--retriever", "bm25-demo", "--store", "memory:"],
        ["eval", "--set", "fifo.toml", "--retriever", "bm25-demo", "--store", "memory:"],
        ["eval", "--config", "fifo.toml", *EVAL[1:], "--store", "memory:"],
        [*EVAL, "--store", "jsonl:///fifo.jsonl"],
        [*EVAL, "--store", "sqlite:///fifo.jsonl"],
        ["history", "--set", "demo", "--retriever", "x", "--store", "sqlite:////dev/zero"],
        ["history", "--set", "demo", "--retriever", "x", "--store", "jsonl:////dev/null"],
        ["validate", "--set", "/dev/stdin"],
    ],
    ids=[
        "set-jsonl",
        "set-toml",
        "config",
        "store-jsonl",
        "store-sqlite",
        "dev-zero",
        "dev-null",
        "stdin",
    ],
)
def test_fifos_and_devices_are_refused_not_read(tmp_path: Path, args: list[str]) -> None:
    for name in ("fifo.jsonl", "fifo.toml"):
        os.mkfifo(tmp_path / name)
    completed = _cli(*args, cwd=tmp_path)  # a FIFO read would block until the timeout
    _one_error(completed, 2, "not a regular file")


def test_the_output_folder_never_writes_through_a_symlink(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me\n", encoding="utf-8")
    (tmp_path / "out").mkdir()
    for name in ("summary.json", "report.md"):
        (tmp_path / "out" / name).symlink_to(outside)
    completed = _cli(*EVAL, "--store", "memory:", "--output-dir", "out", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert outside.read_text(encoding="utf-8") == "keep me\n"
    assert not (tmp_path / "out" / "report.md").is_symlink()
    assert (tmp_path / "out" / "report.md").read_text(encoding="utf-8").startswith("# ")


def test_a_failed_append_is_cut_back_and_leaves_no_torn_line(tmp_path: Path) -> None:
    store = tmp_path / "runs.jsonl"
    first = _cli(*EVAL, "--store", "jsonl:///runs.jsonl", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    before = store.read_bytes()
    # The kernel refuses to grow any file past this size: the next run's line is cut
    # short mid-write exactly as on a full disk.
    cut = _cli(*EVAL, "--store", "jsonl:///runs.jsonl", cwd=tmp_path, file_limit=len(before) + 500)
    _one_error(cut, 3, "runs.jsonl", "nothing was saved")
    assert store.read_bytes() == before
    history = _cli("history", "--set", "demo", "--retriever", "bm25-demo", "--store",
                   "jsonl:///runs.jsonl", "--format", "json", cwd=tmp_path)  # fmt: skip
    assert history.returncode == 0 and history.stderr == "", history.stderr
    assert len(json.loads(history.stdout)) == 1
    again = _cli(*EVAL, "--store", "jsonl:///runs.jsonl", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert len(store.read_text(encoding="utf-8").splitlines()) == 2


def test_a_locked_sqlite_store_is_exit_3_before_the_evaluation(tmp_path: Path) -> None:
    url = "sqlite:///runs.sqlite3"
    assert _cli(*EVAL, "--store", url, cwd=tmp_path).returncode == 0
    holder = sqlite3.connect(tmp_path / "runs.sqlite3", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's long write transaction
    try:
        locked = _cli(*EVAL, "--store", url, cwd=tmp_path, env={"RETRIEVALKIT_STORE_TIMEOUT": "1"})
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    _one_error(locked, 3, "runs.sqlite3", "lock")
    assert locked.stdout == ""  # detected before any question was asked
    assert len(SQLiteStore(tmp_path / "runs.sqlite3").all_runs()) == 1


def test_a_locked_jsonl_store_is_exit_3_before_the_evaluation(tmp_path: Path) -> None:
    assert _cli(*EVAL, "--store", "jsonl:///runs.jsonl", cwd=tmp_path).returncode == 0
    with open(tmp_path / "runs.jsonl", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        locked = _cli(*EVAL, "--store", "jsonl:///runs.jsonl", cwd=tmp_path,
                      env={"RETRIEVALKIT_STORE_TIMEOUT": "1"})  # fmt: skip
    _one_error(locked, 3, "runs.jsonl", "lock")
    assert locked.stdout == ""
    assert len((tmp_path / "runs.jsonl").read_text(encoding="utf-8").splitlines()) == 1


def test_pins_racing_prunes_never_leave_a_dangling_pin(tmp_path: Path) -> None:
    """Each round saves a run, then one connection pins it while another deletes it."""
    path = tmp_path / "race.sqlite3"
    first = _cli(*EVAL, "--store", f"sqlite:///{path.name}", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    template = SQLiteStore(path).all_runs()[0]
    pinner, pruner, saver = SQLiteStore(path), SQLiteStore(path), SQLiteStore(path)
    outcomes = {"pinned": 0, "deleted": 0}
    for round_number in range(150):
        record = attrs.evolve(template, run_id=f"20260101T000000Z-{round_number:08x}")
        saver.save(record)
        start = threading.Barrier(2)

        def pin(record: ResultRecord = record, start: threading.Barrier = start) -> None:
            start.wait()
            with contextlib.suppress(StoreError):  # deleted first: refused, as it should be
                pinner.pin(record)
                outcomes["pinned"] += 1

        def prune(run_id: str = record.run_id, start: threading.Barrier = start) -> None:
            start.wait()
            with contextlib.suppress(StoreError):  # pinned first: refused, as it should be
                outcomes["deleted"] += pruner.delete([run_id])

        threads = [threading.Thread(target=pin), threading.Thread(target=prune)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    # Whichever side the scheduler lets in first, exactly one of the two wins each round.
    assert outcomes["pinned"] + outcomes["deleted"] == 150
    # Both orders, forced rather than left to thread timing: a pinned run refuses deletion,
    # a deleted run refuses a pin.
    pinned_first = attrs.evolve(template, run_id="20260101T000000Z-pinned-first")
    saver.save(pinned_first)
    pinner.pin(pinned_first)
    with pytest.raises(StoreError):
        pruner.delete([pinned_first.run_id])
    deleted_first = attrs.evolve(template, run_id="20260101T000000Z-deleted-first")
    saver.save(deleted_first)
    assert pruner.delete([deleted_first.run_id]) == 1
    with pytest.raises(StoreError):
        pinner.pin(deleted_first)
    check = sqlite3.connect(path)
    dangling = check.execute(
        "SELECT count(*) FROM pins WHERE run_id NOT IN (SELECT run_id FROM runs)"
    ).fetchone()[0]
    assert dangling == 0
    stored = {row[0] for row in check.execute("SELECT run_id FROM runs")}
    assert pinned_first.run_id in stored and deleted_first.run_id not in stored


PROBE_CHILD = """\
import json, sys
for line in sys.stdin:
    request = json.loads(line)
    with open("asked.txt", "a", encoding="utf-8") as handle:
        handle.write(request["question"] + "\\n")
    print(json.dumps({"id": request["id"], "hits": []}), flush=True)
"""


def test_a_locked_store_stops_compare_before_any_retriever_is_asked(tmp_path: Path) -> None:
    (tmp_path / "child.py").write_text(PROBE_CHILD, encoding="utf-8")
    argv = json.dumps([sys.executable, "child.py"])
    (tmp_path / "retrievalkit.toml").write_text(
        f'[retrievers.probe]\nplugin = "command"\ncommand = {argv}\n', encoding="utf-8"
    )
    url = "jsonl:///runs.jsonl"
    assert _cli(*EVAL, "--store", url, cwd=tmp_path).returncode == 0
    compare = ("compare", "--set", "demo", "--retriever", "bm25-demo", "--retriever", "probe")
    with open(tmp_path / "runs.jsonl", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # another process's save in progress
        locked = _cli(
            *compare, "--store", url, cwd=tmp_path, env={"RETRIEVALKIT_STORE_TIMEOUT": "1"}
        )
    _one_error(locked, 3, "runs.jsonl", "lock")
    assert not (tmp_path / "asked.txt").exists()  # no question was asked
    assert len((tmp_path / "runs.jsonl").read_text(encoding="utf-8").splitlines()) == 1
    # The same comparison with the lock gone asks every question and saves both runs.
    done = _cli(*compare, "--store", url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert len((tmp_path / "asked.txt").read_text(encoding="utf-8").splitlines()) == 75
    assert len((tmp_path / "runs.jsonl").read_text(encoding="utf-8").splitlines()) == 3
