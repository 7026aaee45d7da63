"""A full disk says "disk full", saves nothing, and what is written afterwards says so.

SQLite rolls a transaction back by itself when the disk fills (SQLITE_FULL); rolling it
back again used to replace that error with "cannot rollback - no transaction is
active". Seeded runs of random sizes are saved into stores that fill up: through
``PRAGMA max_page_count`` (SQLite's own limit, which fails a write exactly as a full disk
does) at random limits, and into real small tmpfs file systems (SQLite and JSON Lines),
one save after another until the disk is full. Every save either stores the run whole
or fails with "disk full", the store's URL and "nothing was saved"; after each failure
the store holds exactly the runs saved before, each intact. Through ``eval``, the report
files written after a failed save say the run was NOT saved and why, and when they cannot
be written either, the message says that too.
"""

from __future__ import annotations

import contextlib
import json
import random
import shutil
import string
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from child_env import child_environment
from run_records import run_record

from retrievalkit.errors import StoreBusyError
from retrievalkit.model.records import ResultRecord
from retrievalkit.model.values import QuestionOutcome
from retrievalkit.stores import INTACT, open_store, verify_store
from retrievalkit.stores.sqlite import SQLiteStore

METRICS = ("hit@1", "hit@3", "rr")


def _record(rng: random.Random, run_id: str) -> ResultRecord:
    """A run of a random number of questions, with random (incompressible) document ids."""
    count = rng.choice((1, 5, 40, 300, 1500, 4000))

    def doc() -> str:
        return "".join(rng.choices(string.ascii_letters + string.digits, k=rng.randint(4, 24)))

    outcomes = [
        QuestionOutcome(
            question_id=f"q{n}",
            ranking=tuple(doc() for _ in range(rng.randint(0, 10))),
            scores={name: float(rng.random() < 0.5) for name in METRICS},
            latency_ms=rng.random() * 100,
            judgments={doc(): 1},
        )
        for n in range(count)
    ]
    return run_record(outcomes, METRICS, run_id=run_id)


def _check_disk_full(error: StoreBusyError, url: str) -> None:
    text = str(error)
    assert "disk full" in text, text
    assert url in text and "nothing was saved" in text, text
    assert "cannot rollback" not in text and "no transaction" not in text, text
    assert error.exit_code == 3


@pytest.mark.parametrize("seed", range(40))
def test_a_sqlite_store_that_fills_up_says_disk_full_and_keeps_what_it_had(
    seed: int, tmp_path: Path
) -> None:
    rng = random.Random(seed)
    path = tmp_path / "runs.sqlite3"
    store = SQLiteStore(path)
    before = _record(rng, "before")
    store.save(before)
    (pages,) = store._connection.execute("PRAGMA page_count").fetchone()
    limit = pages + rng.choice((0, 1, 2, 5, 20, 80))
    store._connection.execute(f"PRAGMA max_page_count = {limit}")
    record = _record(rng, "candidate")
    try:
        store.save(record)
    except StoreBusyError as error:
        _check_disk_full(error, store.url)
        saved = False
    else:
        saved = True
    store.close()
    reopened = open_store(store.url)
    assert sorted(run.run_id for run in reopened.all_runs()) == sorted(
        ["before", "candidate"] if saved else ["before"]
    )
    assert {check.state for check in verify_store(reopened)} == {INTACT}
    if not saved:  # the limit lifted, the same run saves whole
        reopened.save(record)
        assert reopened.get("candidate") == record


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real file system of 512 KiB (tmpfs), mounted for the test and unmounted after."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"these tests mount a tmpfs (run as root): {done.stderr}"
    try:
        yield mount
    finally:
        # Lazily: a store a failed assertion left open must not keep the mount behind.
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.parametrize("backend", ["sqlite", "jsonl"])
@pytest.mark.parametrize("seed", range(3))
def test_saves_into_a_real_disk_until_it_is_full(backend: str, seed: int, small_disk: Path) -> None:
    rng = random.Random(1000 + seed)
    name = "runs.sqlite3" if backend == "sqlite" else "runs.jsonl"
    url = f"{backend}:////{str(small_disk / name).lstrip('/')}"
    saved: list[str] = []
    failures = 0
    for number in range(40):
        store = open_store(url)
        try:
            store.save(_record(rng, f"run-{number}"))
        except StoreBusyError as error:
            _check_disk_full(error, url)
            failures += 1
        else:
            saved.append(f"run-{number}")
        with contextlib.suppress(AttributeError):
            store.close()  # type: ignore[attr-defined]
        with contextlib.suppress(StoreBusyError):  # opening a full SQLite file may fail too
            reading = open_store(url)
            checks = verify_store(reading)
            with contextlib.suppress(AttributeError):
                reading.close()  # type: ignore[attr-defined]
            assert sorted(check.run_id for check in checks) == sorted(saved)
            assert {check.state for check in checks} <= {INTACT}
        if failures >= 4:
            break
    assert failures >= 1 and saved, (failures, saved)  # the disk did fill up


def _eval(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "retrievalkit", "eval", "--set", "demo", "--retriever",
         "bm25-demo", "-q", "--format", "json", *args],
        cwd=folder, env=child_environment(NO_COLOR="1"), capture_output=True, text=True,
        check=False, timeout=180,
    )  # fmt: skip


def _fill(folder: Path, leave: int) -> None:
    free = shutil.disk_usage(folder).free
    with open(folder / "filler", "wb") as filler, contextlib.suppress(OSError):
        filler.write(b"\0" * max(0, free - leave))


@pytest.mark.parametrize("backend", ["sqlite", "jsonl"])
def test_the_report_after_a_failed_save_says_what_was_not_saved(
    backend: str, small_disk: Path, tmp_path: Path
) -> None:
    name = "runs.sqlite3" if backend == "sqlite" else "runs.jsonl"
    url = f"{backend}:////{str(small_disk / name).lstrip('/')}"
    first = _eval(tmp_path, "--store", url)
    assert first.returncode == 0, first.stderr
    # Room to open the store (SQLite's -shm file takes 32 KiB), not to save a run in it.
    _fill(small_disk, leave=48 * 1024 if backend == "sqlite" else 8 * 1024)
    out = tmp_path / "out"
    done = _eval(tmp_path, "--store", url, "--output-dir", str(out))
    assert done.returncode == 3, done.stderr
    assert "disk full" in done.stderr and "Traceback" not in done.stderr
    assert "cannot rollback" not in done.stderr
    assert f"the report in {out} says so" in done.stderr, done.stderr
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["saved_to"] is None
    assert "disk full" in summary["not_saved_reason"], summary["not_saved_reason"]
    assert "NOT saved" in (out / "report.md").read_text(encoding="utf-8")
    assert json.loads(done.stdout)["saved_to"] is None
    assert len(open_store(url).all_runs()) == 1  # the first run only
    # The report folder on the full disk too: the message says neither was written.
    done = _eval(tmp_path, "--store", url, "--output-dir", str(small_disk / "out"))
    assert done.returncode == 3, done.stderr
    assert "disk full" in done.stderr and "the report files were not written either" in (
        done.stderr
    ), done.stderr
    assert len(open_store(url).all_runs()) == 1
