"""Stores under SIGKILL and under concurrent writers, with real processes and real files.

Writer processes save copies of a real record (each with its own run id) into a
``sqlite://`` and a ``jsonl://`` store and print an acknowledgement after each save
returns. The crash test kills them with SIGKILL at random moments, many times; the
concurrency test lets several of them write into one store at once. Afterwards every
store opens, holds only whole runs, has every acknowledged run, and ``history`` works.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from retrievalkit.metrics.scoring import ScoringOptions, score_run
from retrievalkit.model.records import ResultRecord
from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet
from retrievalkit.pipeline.engine.evaluator import Retrieval
from retrievalkit.pipeline.engine.record import build_record
from retrievalkit.stores.jsonl import JSONLStore
from retrievalkit.stores.serialization import dump_record
from retrievalkit.stores.sqlite import SQLiteStore

KILLS = 60
LANES = 3  # writers alive at once in the crash test

WRITER = """\
import sys
from pathlib import Path

import attrs

from retrievalkit.stores.jsonl import JSONLStore
from retrievalkit.stores.serialization import load_record
from retrievalkit.stores.sqlite import SQLiteStore

template_file, prefix, count, sqlite_path, jsonl_path = sys.argv[1:]
template = load_record(Path(template_file).read_text(encoding="utf-8"), where=template_file)
stores = []
if sqlite_path != "-":
    stores.append(SQLiteStore(Path(sqlite_path)))
if jsonl_path != "-":
    stores.append(JSONLStore(Path(jsonl_path)))
print("ready", flush=True)
sys.stdin.readline()  # wait for "go", so that writers start together
number = 0
while int(count) == 0 or number < int(count):
    for store in stores:
        run_id = f"{prefix}-{number:05d}"
        print("attempt", store.url, run_id, flush=True)
        store.save(attrs.evolve(template, run_id=run_id))
        print("saved", store.url, run_id, flush=True)
    number += 1
"""


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ResultRecord, Path]]:
    """A real record of a 60-question run (about 40 kB of JSON), and its file for writers."""
    questions = [
        GoldenQuestion(id=f"q{n}", question=f"question {n}", expected=[f"d{n}", f"e{n}"])
        for n in range(60)
    ]
    golden = GoldenQuestionSet(name="crash", questions=questions)
    retrievals = [Retrieval((f"x{n}", f"d{n}") if n % 3 else (f"e{n}",), 1.5) for n in range(60)]
    scoring = ScoringOptions(ks=(1, 3, 5, 10), resamples=200)
    scores = score_run(golden.questions, retrievals, scoring)
    record = build_record(
        golden, "crash-retriever", "none", {}, scores, scoring, overfetch=3, git_commit=None
    )
    root = tmp_path_factory.mktemp("writer")
    (root / "template.json").write_text(dump_record(record), encoding="utf-8")
    (root / "writer.py").write_text(WRITER, encoding="utf-8")
    yield record, root


def start_writer(
    root: Path, prefix: str, count: int, sqlite: Path | None, jsonl: Path | None
) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, str(root / "writer.py"), str(root / "template.json"), prefix,
         str(count), str(sqlite or "-"), str(jsonl or "-")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    ready = process.stdout.readline()
    assert ready == "ready\n", ready + process.communicate()[1]
    return process


def go(process: subprocess.Popen[str]) -> None:
    assert process.stdin is not None
    process.stdin.write("go\n")
    process.stdin.flush()


@attrs.define
class Ledger:
    """What the writers said: run ids attempted and acknowledged, per store."""

    attempted: dict[str, set[str]] = attrs.field(factory=dict)
    saved: dict[str, set[str]] = attrs.field(factory=dict)
    died_mid_save: int = 0

    def read(self, output: str) -> None:
        last = ""
        for line in output.splitlines():
            parts = line.split()
            if len(parts) != 3:
                continue  # a line cut by the kill
            kind, url, run_id = parts
            book = self.attempted if kind == "attempt" else self.saved
            book.setdefault(url, set()).add(run_id)
            last = kind
        self.died_mid_save += last == "attempt"


def same_run(record: ResultRecord, template: ResultRecord) -> bool:
    return attrs.evolve(record, run_id=template.run_id) == template


def history(directory: Path, url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "retrievalkit", "history", "--set", "crash", "--retriever",
         "crash-retriever", "--store", url, "--format", "json", "--limit", "100000"],
        cwd=directory, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip


def check_store(
    directory: Path, url: str, stored: list[ResultRecord], ledger: Ledger, template: ResultRecord
) -> None:
    ids = [record.run_id for record in stored]
    assert len(ids) == len(set(ids)), "a run is stored twice"
    assert all(same_run(record, template) for record in stored), "a stored run is not whole"
    assert ledger.saved.get(url, set()) <= set(ids), "an acknowledged run was lost"
    assert set(ids) <= ledger.attempted.get(url, set()), "a run nobody saved appeared"
    done = history(directory, url)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert len(json.loads(done.stdout)) == len(ids)


def test_sigkill_at_random_moments_loses_nothing_acknowledged(
    template: tuple[ResultRecord, Path], tmp_path: Path
) -> None:
    record, root = template
    sqlite, jsonl = tmp_path / "runs.sqlite3", tmp_path / "runs.jsonl"
    sqlite_url, jsonl_url = SQLiteStore(sqlite).url, JSONLStore(jsonl).url
    rng = random.Random(20261129)
    ledger = Ledger()
    kills = 0
    for wave in range(KILLS // LANES):
        writers = [start_writer(root, f"w{wave}-{lane}", 0, sqlite, jsonl) for lane in range(LANES)]
        for writer in writers:
            go(writer)
        for writer in writers:
            # A random moment: before the first save, inside a save, or between two.
            time.sleep(rng.uniform(0.0, 0.12))
            writer.send_signal(signal.SIGKILL)
        for writer in writers:
            output, _ = writer.communicate(timeout=120)
            assert writer.returncode == -signal.SIGKILL
            ledger.read(output)
            kills += 1
    assert kills >= 50
    assert sum(len(ids) for ids in ledger.saved.values()) > 0, "no save ever completed"

    check_store(tmp_path, sqlite_url, SQLiteStore(sqlite).all_runs(), ledger, record)
    lines = jsonl.read_bytes().split(b"\n")
    torn = [line for line in lines if line.strip() and not _is_json(line)]
    check_store(tmp_path, jsonl_url, JSONLStore(jsonl).all_runs(), ledger, record)
    print(
        f"\n{kills} SIGKILLs ({ledger.died_mid_save} in the middle of a save), "
        f"{len(ledger.saved.get(sqlite_url, ()))} + {len(ledger.saved.get(jsonl_url, ()))} "
        f"acknowledged runs kept, {len(torn)} torn jsonl lines skipped"
    )
    # The next append after all that lands on a line of its own.
    JSONLStore(jsonl).save(attrs.evolve(record, run_id="after-the-kills"))
    assert JSONLStore(jsonl).get("after-the-kills") is not None
    assert jsonl.read_bytes().endswith(b"\n")


def _is_json(line: bytes) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def test_a_torn_last_line_is_reported_skipped_and_never_glued_onto(
    template: tuple[ResultRecord, Path], tmp_path: Path
) -> None:
    record, _ = template
    path = tmp_path / "runs.jsonl"
    store = JSONLStore(path)
    store.save(attrs.evolve(record, run_id="first"))
    whole = dump_record(attrs.evolve(record, run_id="torn")).encode("utf-8")
    with path.open("ab") as handle:
        handle.write(whole[: len(whole) // 2])  # a writer killed in the middle of its line
    done = history(tmp_path, store.url)
    assert done.returncode == 0, done.stderr
    assert [row["run_id"] for row in json.loads(done.stdout)] == ["first"]
    assert "line 2: incomplete or corrupt run skipped" in done.stderr
    assert "Traceback" not in done.stderr
    store.save(attrs.evolve(record, run_id="third"))
    lines = path.read_bytes().split(b"\n")
    assert len(lines) == 4 and lines[-1] == b""  # first, torn, third, and the final newline
    assert json.loads(lines[2])["run_id"] == "third"  # a summary; its columns beside the file
    assert [run.run_id for run in store.all_runs()] == ["third", "first"]


def test_concurrent_writers_lose_nothing_and_never_interleave(
    template: tuple[ResultRecord, Path], tmp_path: Path
) -> None:
    record, root = template
    sqlite, jsonl = tmp_path / "shared.sqlite3", tmp_path / "shared.jsonl"
    writers = [start_writer(root, f"sqlite{n}", 50, sqlite, None) for n in range(4)]
    writers += [start_writer(root, f"jsonl{n}", 50, None, jsonl) for n in range(2)]
    for writer in writers:  # all open their store first, then all write at once
        go(writer)
    for writer in writers:
        _, errors = writer.communicate(timeout=300)
        assert writer.returncode == 0, errors

    stored = SQLiteStore(sqlite).all_runs()
    assert len(stored) == 200
    assert {run.run_id for run in stored} == {
        f"sqlite{n}-{i:05d}" for n in range(4) for i in range(50)
    }
    assert all(same_run(run, record) for run in stored)

    lines = jsonl.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 101
    assert all(json.loads(line)["run_id"] for line in lines[:-1])
    runs = list(reversed(JSONLStore(jsonl).all_runs()))  # in the file's order, read whole
    assert {run.run_id for run in runs} == {
        f"jsonl{n}-{i:05d}" for n in range(2) for i in range(50)
    }
    assert all(same_run(run, record) for run in runs)
    for name in ("jsonl0", "jsonl1"):  # each writer's runs stay in its own order
        own = [run.run_id for run in runs if run.run_id.startswith(name)]
        assert own == sorted(own)
    for url in (SQLiteStore(sqlite).url, JSONLStore(jsonl).url):
        done = history(tmp_path, url)
        assert done.returncode == 0 and len(json.loads(done.stdout)) in (200, 100), done.stderr
