"""The JSON Lines store's lock, checked step by step with real processes instead of by chance.

A writer in another process is started while this test holds the runs file's lock; the
test waits until that writer is provably waiting for the lock (blocked on it in the
kernel, or retrying it), checks that nothing was written, lets the lock go and checks
that exactly one whole line arrived. The save-versus-prune race is forced the same way:
the waiting writer is stopped (SIGSTOP), a prune rewrites the file under it, and only
then does the writer continue; its run must land in the new file, not the replaced one.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs
import pytest

from retrievalkit.demo import DemoSetProvider
from retrievalkit.formats.config import Config
from retrievalkit.metrics.scoring import ScoringOptions, score_run
from retrievalkit.model.records import ResultRecord
from retrievalkit.pipeline.engine.evaluator import evaluate_questions
from retrievalkit.pipeline.engine.record import build_record
from retrievalkit.plugins.resolution import resolve_retriever
from retrievalkit.stores.jsonl import JSONLStore
from retrievalkit.stores.serialization import dump_record

#: A writer in its own process. It reports each call of fcntl.flock (observed through
#: sys.setprofile, not replaced) so the test knows when it has reached the lock.
WRITER = """
import fcntl, sys
from pathlib import Path
from retrievalkit.stores.jsonl import JSONLStore
from retrievalkit.stores.serialization import load_record

store_path, record_path, marks_path = sys.argv[1:4]
record = load_record(Path(record_path).read_text("utf-8"), where=record_path)
marks = open(marks_path, "a", buffering=1)

def watch(frame, event, arg):
    if event == "c_call" and arg is fcntl.flock:
        marks.write("flock\\n")

sys.setprofile(watch)
JSONLStore(Path(store_path)).save(record)
sys.setprofile(None)
marks.write("saved\\n")
"""

PATIENCE = 120.0  # seconds for a child process to get somewhere on a loaded machine


@pytest.fixture(scope="module")
def record() -> ResultRecord:
    """One real run: the demo set through the bm25-demo plugin, scored and recorded."""
    golden = DemoSetProvider().load("demo")
    resolved = resolve_retriever("bm25-demo", Config())
    options = ScoringOptions(ks=(1, 3), resamples=100)
    retrievals = evaluate_questions(resolved.retriever, golden.questions, depth=3)
    scores = score_run(golden.questions, retrievals, options)
    return build_record(
        golden, resolved.name, resolved.plugin, resolved.options, scores, options, overfetch=3
    )


@contextmanager
def held_lock(path: Path) -> Iterator[None]:
    """Hold the exclusive lock every writer of the runs file takes."""
    with open(path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def start_writer(
    tmp_path: Path, store: Path, record: ResultRecord
) -> tuple[subprocess.Popen[str], Path]:
    record_path = tmp_path / f"{record.run_id}.json"
    record_path.write_text(dump_record(record), encoding="utf-8")
    marks = tmp_path / f"{record.run_id}.marks"
    marks.touch()
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(store), str(record_path), str(marks)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return child, marks


def _blocked_in_kernel(pid: int) -> bool:
    """Whether ``pid`` waits in flock(2): /proc/locks lists a waiter as ``N: -> FLOCK ... PID``."""
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields and str(pid) in fields:
            return True
    return False


def wait_until_waiting(child: subprocess.Popen[str], marks: Path) -> None:
    """Return once the writer waits for the lock; fail if it got past it or never came."""
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        seen = marks.read_text().split()
        if "saved" in seen or child.poll() is not None:
            _, errors = child.communicate()
            pytest.fail(f"the save went ahead while another process held the lock: {errors}")
        attempts = seen.count("flock")
        if attempts >= 2 or (attempts == 1 and _blocked_in_kernel(child.pid)):
            return  # blocked in the kernel, or tried once and is trying again
        time.sleep(0.01)
    child.kill()
    pytest.fail("the writer never reached the lock")


def wait_for_state(pid: int, state: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        # /proc/PID/stat: "PID (COMM) STATE ..."; COMM may hold spaces, so split after ')'.
        if Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == state:
            return
        time.sleep(0.01)
    pytest.fail(f"process {pid} never reached state {state}")


def finish(child: subprocess.Popen[str]) -> None:
    _, errors = child.communicate(timeout=PATIENCE)
    assert child.returncode == 0, errors


def run_ids(path: Path) -> list[str]:
    return [json.loads(line)["run_id"] for line in path.read_bytes().splitlines()]


def test_a_save_waits_for_the_lock_and_then_appends_exactly_one_line(
    tmp_path: Path, record: ResultRecord
) -> None:
    path = tmp_path / "runs.jsonl"
    store = JSONLStore(path)
    store.save(attrs.evolve(record, run_id="first"))
    before = path.read_bytes()

    with held_lock(path):
        child, marks = start_writer(tmp_path, path, attrs.evolve(record, run_id="second"))
        wait_until_waiting(child, marks)
        assert path.read_bytes() == before  # nothing written while the lock is held
    finish(child)

    after = path.read_bytes()
    assert after.startswith(before) and after.endswith(b"\n")
    assert after[len(before) :].count(b"\n") == 1  # exactly one new line: the whole run
    assert run_ids(path) == ["first", "second"]
    assert [run.run_id for run in store.all_runs()] == ["second", "first"]


def test_a_save_that_waited_through_a_prune_lands_in_the_new_file(
    tmp_path: Path, record: ResultRecord
) -> None:
    path = tmp_path / "runs.jsonl"
    store = JSONLStore(path)
    for run_id in ("old", "kept"):
        store.save(attrs.evolve(record, run_id=run_id))
    replaced_inode = path.stat().st_ino

    with held_lock(path):
        # The writer opens the file as it is now, then waits for the lock on it.
        child, marks = start_writer(tmp_path, path, attrs.evolve(record, run_id="new"))
        wait_until_waiting(child, marks)
        os.kill(child.pid, signal.SIGSTOP)
        wait_for_state(child.pid, "T")
    try:
        assert store.delete(["old"]) == 1  # the prune rewrites the file while the writer waits
    finally:
        os.kill(child.pid, signal.SIGCONT)
    finish(child)

    assert path.stat().st_ino != replaced_inode  # the prune did replace the file
    assert run_ids(path) == ["kept", "new"]
    assert [run.run_id for run in JSONLStore(path).all_runs()] == ["new", "kept"]
