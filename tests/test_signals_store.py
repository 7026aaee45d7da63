"""What retrievalkit says under SIGINT, SIGTERM and SIGHUP is what the store holds.

Real ``retrievalkit eval`` (saving to SQLite) and ``history --prune`` processes get one
stop signal each, at a seeded random moment from the instant the program's handlers are
in place (read from ``/proc/PID/status``: before that, the interpreter has not run one
line of retrievalkit) to past the end of the command. Whatever the moment, which only
decides which of the few possible outcomes a round sees, each round checks the same
things, none of them timing:

- the process exits with 128 + the signal's number, or with 0 when it had finished
  before the signal came; never a negative code (killed by the signal unhandled);
- with 128 + n, the last line says "interrupted" and what the store holds: "nothing was
  saved" (or "nothing was deleted") and the store is as it was, or "run ID was saved
  whole" ("M runs were deleted") and the store holds exactly that;
- every signal is seen (the rounds spread over the whole command, so each outcome
  above is reached by some round of a run of this file, but no round needs one).
- with 0, the output says what was saved (the run id, the pruned count), and it is so;
- the store reads whole, every run intact.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import attrs
import pytest
from child_env import child_environment

from retrievalkit.api import evaluate, load_set
from retrievalkit.stores import INTACT, open_store, verify_store

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: The handlers retrievalkit installs first: SIGTERM and SIGHUP (SIGINT is Python's own).
READY = (1 << (signal.SIGTERM - 1)) | (1 << (signal.SIGHUP - 1))
RUNS = 8
KEEP = 3


def _caught(pid: int) -> int:
    try:
        text = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
    except OSError:
        return -1
    found = re.search(r"^SigCgt:\s*([0-9a-f]+)$", text, re.MULTILINE)
    return int(found.group(1), 16) if found else -1


def _signalled(command: list[str], cwd: Path, signum: int, delay: float) -> tuple[int, str, str]:
    """Run ``command``; once its handlers are in place, wait ``delay`` s and send ``signum``."""
    child = subprocess.Popen(
        command, cwd=cwd, env=child_environment(NO_COLOR="1"), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while child.poll() is None and _caught(child.pid) & READY != READY:
        assert time.monotonic() < deadline, "the handlers were never installed"
        time.sleep(0.0005)
    time.sleep(delay)
    if child.poll() is None:
        child.send_signal(signum)
    out, err = child.communicate(timeout=120)
    return child.returncode, out, err


def _rounds(count: int, seed: int, longest: float) -> list[tuple[signal.Signals, float]]:
    rng = random.Random(seed)
    return [(rng.choice(SIGNALS), rng.uniform(0, longest)) for _ in range(count)]


def _stored(path: Path) -> list[str]:
    if not path.exists():
        return []
    with sqlite3.connect(path) as connection:
        names = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        ids = (
            [row[0] for row in connection.execute("SELECT run_id FROM runs")]
            if "runs" in names
            else []
        )
    connection.close()
    return ids


def _intact(path: Path) -> None:
    if path.exists():
        checks = verify_store(open_store(f"sqlite:////{str(path).lstrip('/')}"))
        assert {check.state for check in checks} <= {INTACT}, checks


def _last_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines, "nothing said"
    return lines[-1]


EVAL_ROUNDS = _rounds(30, seed=4, longest=2.5)


@pytest.mark.parametrize(("signum", "delay"), EVAL_ROUNDS)
def test_what_eval_says_under_a_signal_is_what_the_store_holds(
    signum: signal.Signals, delay: float, tmp_path: Path
) -> None:
    store = tmp_path / "runs.sqlite3"
    code, out, err = _signalled(
        [sys.executable, "-m", "retrievalkit", "eval", "--set", "demo", "--retriever",
         "bm25-demo", "--store", "sqlite:///runs.sqlite3", "--format", "json"],
        tmp_path, signum, delay,
    )  # fmt: skip
    stored = _stored(store)
    assert code >= 0, f"killed by signal {-code}: {err}"
    assert "Traceback" not in err, err
    if code == 0:  # done before the signal came
        document = json.loads(out)
        assert document["saved_to"] == "sqlite:///runs.sqlite3"
        assert stored == [document["run_id"]]
    else:
        assert code == 128 + signum, (code, err)
        last = _last_line(err)
        assert "interrupted" in last, last
        saved = re.search(r"run (\S+) was saved whole to sqlite:///runs\.sqlite3", last)
        if saved:
            assert stored == [saved.group(1)], (last, stored)
        else:
            assert last.endswith("nothing was saved"), last
            assert stored == [], (last, stored)
    _intact(store)


@pytest.fixture(scope="module")
def full_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite store holding RUNS runs of demo × bm25-demo."""
    folder = tmp_path_factory.mktemp("prune-template")
    record = evaluate(load_set("demo"), "bm25-demo", resamples=200).record
    store = open_store(f"sqlite:////{str(folder / 'runs.sqlite3').lstrip('/')}")
    for number in range(RUNS):
        created = f"2026-01-0{number + 1}T00:00:00Z"
        store.save(
            attrs.evolve(
                record,
                run_id=f"run-{number}",
                manifest=attrs.evolve(record.manifest, created_at=created),
            )
        )
    store.close()  # type: ignore[attr-defined]
    return folder / "runs.sqlite3"


PRUNE_ROUNDS = _rounds(24, seed=9, longest=1.2)


@pytest.mark.parametrize(("signum", "delay"), PRUNE_ROUNDS)
def test_what_prune_says_under_a_signal_is_what_the_store_holds(
    signum: signal.Signals, delay: float, full_store: Path, tmp_path: Path
) -> None:
    store = tmp_path / "runs.sqlite3"
    shutil.copyfile(full_store, store)
    code, _out, err = _signalled(
        [sys.executable, "-m", "retrievalkit", "history", "--set", "demo", "--retriever",
         "bm25-demo", "--store", "sqlite:///runs.sqlite3", "--prune", "--keep", str(KEEP),
         "--format", "json"],
        tmp_path, signum, delay,
    )  # fmt: skip
    stored = _stored(store)
    assert code >= 0, f"killed by signal {-code}: {err}"
    assert "Traceback" not in err, err
    if code == 0:
        assert f"pruned {RUNS - KEEP} runs" in err, err
        assert len(stored) == KEEP
    else:
        assert code == 128 + signum, (code, err)
        last = _last_line(err)
        assert "interrupted" in last, last
        deleted = re.search(r"(\d+) runs were deleted from", last)
        if deleted:
            assert len(stored) == RUNS - int(deleted.group(1)), (last, stored)
        else:
            # (stopped before the command began pruning, it is "nothing was saved")
            assert last.endswith(
                ("nothing was deleted from sqlite:///runs.sqlite3", "nothing was deleted",
                 "nothing was saved")
            ), last  # fmt: skip
            assert len(stored) == RUNS, (last, stored)
    _intact(store)


# --- the same promises at chosen moments, in this process, with real signals ----------------

MOMENTS = ("before the save", "inside the save", "after the save")


@pytest.mark.parametrize("signum", SIGNALS)
@pytest.mark.parametrize("moment", MOMENTS)
def test_a_signal_at_each_moment_of_eval_is_reported_truly(
    moment: str,
    signum: signal.Signals,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The signal is sent to this process by a store (or a report) wrapped for the test,
    at exactly one moment: the gate's reading of the baseline, the save, the report."""
    from retrievalkit.cli import main as cli
    from retrievalkit.cli.commands import evaluate as command
    from retrievalkit.stores.sqlite import SQLiteStore

    def send() -> None:
        os.kill(os.getpid(), signum)

    if moment == "before the save":
        runs = SQLiteStore.runs
        monkeypatch.setattr(SQLiteStore, "runs", lambda self, *a: (send(), runs(self, *a))[1])
    elif moment == "inside the save":
        save = SQLiteStore.save
        monkeypatch.setattr(SQLiteStore, "save", lambda self, r: (save(self, r), send())[0])
    else:
        report = command.emit_report
        monkeypatch.setattr(command, "emit_report", lambda *a, **k: (send(), report(*a, **k)))
    monkeypatch.chdir(tmp_path)
    code = cli.main(["eval", "--set", "demo", "--retriever", "bm25-demo", "--store",
                     "sqlite:///runs.sqlite3", "-q"])  # fmt: skip
    err = capfd.readouterr().err
    stored = _stored(tmp_path / "runs.sqlite3")
    assert code == 128 + signum, err
    last = _last_line(err)
    if moment == "before the save":
        assert last == "retrievalkit: interrupted; nothing was saved" and stored == [], last
    else:
        assert len(stored) == 1 and f"run {stored[0]} was saved whole to" in last, (last, stored)
    _intact(tmp_path / "runs.sqlite3")


@pytest.mark.parametrize("signum", SIGNALS)
@pytest.mark.parametrize("moment", MOMENTS)
def test_a_signal_at_each_moment_of_a_prune_is_reported_truly(
    moment: str,
    signum: signal.Signals,
    full_store: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    from retrievalkit.cli import main as cli
    from retrievalkit.render import history as rendering
    from retrievalkit.stores.sqlite import SQLiteStore

    def send() -> None:
        os.kill(os.getpid(), signum)

    if moment == "before the save":
        runs = SQLiteStore.runs
        monkeypatch.setattr(SQLiteStore, "runs", lambda self, *a: (send(), runs(self, *a))[1])
    elif moment == "inside the save":
        delete = SQLiteStore.delete
        monkeypatch.setattr(SQLiteStore, "delete", lambda self, i: (delete(self, i), send())[0])
    else:
        line = rendering.prune_line
        monkeypatch.setattr(rendering, "prune_line", lambda h: (send(), line(h))[1])
    shutil.copyfile(full_store, tmp_path / "runs.sqlite3")
    monkeypatch.chdir(tmp_path)
    code = cli.main(["history", "--set", "demo", "--retriever", "bm25-demo", "--store",
                     "sqlite:///runs.sqlite3", "--prune", "--keep", str(KEEP)])  # fmt: skip
    err = capfd.readouterr().err
    stored = _stored(tmp_path / "runs.sqlite3")
    assert code == 128 + signum, err
    last = _last_line(err)
    if moment == "before the save":
        assert last.endswith("nothing was deleted from sqlite:///runs.sqlite3"), last
        assert len(stored) == RUNS
    else:
        assert f"{RUNS - KEEP} runs were deleted from sqlite:///runs.sqlite3" in last, last
        assert len(stored) == KEEP
    _intact(tmp_path / "runs.sqlite3")
