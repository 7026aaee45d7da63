"""A client killed mid-save and a server stopped mid-save: each run is whole or absent."""

from __future__ import annotations

import json
import os
import pickle
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from support import REPO, cli, copy_of, scalar, scored_run, script

from retrievalkit.stores.columns import columns_header

KILLS = 10
QUESTIONS = 3000
#: Enough questions that a stop one second into `eval` lands mid-run even on an idle machine,
#: where pgvector answers a pipelined batch in well under a millisecond a question.
QUESTIONS_MID_RUN = 12_000
SAVER = """
import pickle, sys
from retrievalkit.errors import RetrievalkitError, one_line
from retrievalkit.stores import open_store
url, path = sys.argv[1], sys.argv[2]
record = pickle.load(open(path, "rb"))
store = open_store(url)
print("saving", flush=True)
try:
    store.save(record)
except RetrievalkitError as error:
    print(f"retrievalkit: error: {one_line(str(error))}", file=sys.stderr)
    sys.exit(error.exit_code)
print("saved", flush=True)
"""


def start_saver(url: str, record_file: Path, application: str) -> subprocess.Popen[str]:
    separator = "&" if "?" in url else "?"
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            SAVER,
            f"{url}{separator}application_name={application}",
            str(record_file),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_until_gone(url: str, application: str) -> None:
    """Until the server has noticed the dead client and ended its backend."""
    deadline = time.monotonic() + 60
    while scalar(
        url, "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (application,)
    ):
        assert time.monotonic() < deadline, "the killed client's backend never ended"
        time.sleep(0.05)


def test_a_client_killed_mid_save_leaves_each_run_whole_or_absent(
    pg_url: str, store_url: str, schema: str, tmp_path: Path
) -> None:
    from retrievalkit.stores import open_store

    store = open_store(store_url)
    big = scored_run("killed", "model-a", QUESTIONS, resamples=5)
    store.save(copy_of(big, "timing"))  # creates the tables; also tells how long a save takes
    started = time.monotonic()
    store.save(copy_of(big, "timing-2"))
    seconds = time.monotonic() - started
    rng = random.Random(11)
    whole = absent = 0
    for attempt in range(KILLS):
        record = copy_of(big, f"kill-{attempt}")
        record_file = tmp_path / f"{attempt}.pickle"
        record_file.write_bytes(pickle.dumps(record))
        application = f"rk-kill-{attempt}"
        saver = start_saver(store_url, record_file, application)
        assert saver.stdout is not None
        assert saver.stdout.readline().strip() == "saving"
        time.sleep(rng.uniform(0.0, seconds * 1.2))
        saver.send_signal(signal.SIGKILL)
        saver.wait()
        wait_until_gone(pg_url, application)
        stored = scalar(
            pg_url,
            f"SELECT count(*) FROM {schema}.run_columns c JOIN {schema}.runs r"
            " ON r.seq = c.run_seq WHERE r.run_id = %s",
            (record.run_id,),
        )
        if stored:
            assert stored == len(columns_header(record.outcomes)["columns"])
            whole += 1
        else:
            assert (
                scalar(
                    pg_url,
                    f"SELECT count(*) FROM {schema}.runs WHERE run_id = %s",
                    (record.run_id,),
                )
                == 0
            )
            absent += 1
    orphans = scalar(
        pg_url,
        f"SELECT count(*) FROM {schema}.run_columns c LEFT JOIN {schema}.runs r"
        " ON r.seq = c.run_seq WHERE r.seq IS NULL",
    )
    assert orphans == 0
    assert absent > 0  # the kills did land mid-save
    print(f"SIGKILL mid-save: {KILLS} kills, {whole} runs whole, {absent} absent, 0 partial")


@pytest.fixture
def throwaway(pg_url: str) -> Iterator[str]:
    """A server of its own (RETRIEVALKIT_PG_THROWAWAY_PORT), for tests that stop it."""
    port = os.environ.get("RETRIEVALKIT_PG_THROWAWAY_PORT") or "55433"
    os.environ.setdefault("RETRIEVALKIT_PG_PASSWORD", os.environ.get("PGPASSWORD", ""))
    started = script("up", "--port", port)
    assert started.returncode == 0, started.stderr
    yield started.stdout.strip()
    stopped = script("down", "--port", port)
    assert stopped.returncode == 0, stopped.stderr


def test_a_server_stopped_mid_save_exits_3_and_keeps_nothing(
    throwaway: str, tmp_path: Path
) -> None:
    from retrievalkit.stores import open_store

    url = f"{throwaway}?schema=stopped"
    with psycopg.connect(throwaway, autocommit=True) as connection:
        connection.execute("DROP SCHEMA IF EXISTS stopped CASCADE")
    open_store(url)
    record = scored_run("stopped", "model-a", 3000, resamples=5)
    record_file = tmp_path / "run.pickle"
    record_file.write_bytes(pickle.dumps(record))
    # A save by columns takes milliseconds: rather than hoping to catch it mid-way, hold
    # the columns table against writes, so the save stops after its run row, inside its
    # transaction, until the server goes away under it.
    holder = psycopg.connect(throwaway)
    holder.execute("LOCK TABLE stopped.run_columns IN SHARE MODE")
    saver = start_saver(url, record_file, "rk-stopped")
    assert saver.stdout is not None
    assert saver.stdout.readline().strip() == "saving"
    deadline = time.monotonic() + 60
    while not scalar(
        throwaway,
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'rk-stopped'"
        " AND state = 'active' AND wait_event_type = 'Lock'",
    ):
        assert time.monotonic() < deadline and saver.poll() is None, "the save never started"
        time.sleep(0.01)
    assert scalar(
        throwaway,
        "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
        " WHERE a.application_name = 'rk-stopped' AND l.relation = 'stopped.runs'::regclass"
        " AND l.granted",
    ), "the save holds its run row"
    stopped = script("down", "--port", throwaway.rsplit(":", 1)[1].split("/")[0])
    holder.close()
    assert stopped.returncode == 0, stopped.stderr
    _, stderr = saver.communicate(timeout=120)
    assert saver.returncode == 3, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "lost the connection to PostgreSQL" in lines[0], stderr
    assert "whole or not at all" in lines[0]
    restarted = script("up", "--port", throwaway.rsplit(":", 1)[1].split("/")[0])
    assert restarted.returncode == 0, restarted.stderr
    assert scalar(throwaway, "SELECT count(*) FROM stopped.runs") == 0
    assert scalar(throwaway, "SELECT count(*) FROM stopped.run_columns") == 0


def test_a_server_stopped_mid_run_exits_3_and_saves_no_run(
    throwaway: str, store_url: str, tmp_path: Path
) -> None:
    """eval with the pgvector retriever on a server that stops halfway: exit 3, nothing kept."""
    from retrievalkit.stores import open_store

    demo = REPO / "retrievalkit" / "demo" / "corpus.jsonl"
    indexed = cli(
        "pg",
        "index",
        "--corpus",
        str(demo),
        "--table",
        "demo_vectors",
        "--recreate",
        "--url",
        throwaway,
        "--embedder",
        "wordllama",
    )
    assert indexed.returncode == 0, indexed.stderr
    ids = [json.loads(line)["_id"] for line in demo.read_text().splitlines()]
    golden = tmp_path / "many.jsonl"
    golden.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"q{n}",
                    "question": f"question number {n} about {ids[n % len(ids)]}",
                    "expected": [ids[n % len(ids)]],
                }
            )
            + "\n"
            for n in range(QUESTIONS_MID_RUN)
        )
    )
    (tmp_path / "retrievalkit.toml").write_text(
        f'[retrievers.pg]\nplugin = "pgvector"\nurl = "{throwaway}?application_name=rk-mid-run"\n'
        'table = "demo_vectors"\nembedder = "wordllama"\n'
    )
    running = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "retrievalkit",
            "eval",
            "--set",
            str(golden),
            "--retriever",
            "pg",
            "--store",
            store_url,
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    deadline = time.monotonic() + 120
    while not scalar(
        throwaway,
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'rk-mid-run'",
    ):
        assert time.monotonic() < deadline and running.poll() is None, "eval never connected"
        time.sleep(0.05)
    time.sleep(1.0)  # some questions answered, most not yet
    port = throwaway.rsplit(":", 1)[1].split("/")[0]
    stopped = script("down", "--port", port)
    assert stopped.returncode == 0, stopped.stderr
    _, stderr = running.communicate(timeout=600)
    assert running.returncode == 3, stderr[-3000:]
    assert "errored" in stderr and "PostgreSQL at 127.0.0.1" in stderr, stderr[-3000:]
    assert open_store(store_url).all_runs() == []
    restarted = script("up", "--port", port)
    assert restarted.returncode == 0, restarted.stderr


def test_a_store_opened_before_a_server_restart_saves_after_it(throwaway: str) -> None:
    """A long evaluation can outlive the store's connection: the save reconnects first."""
    from retrievalkit.stores import open_store

    url = f"{throwaway}?schema=restarted"
    with psycopg.connect(throwaway, autocommit=True) as connection:
        connection.execute("DROP SCHEMA IF EXISTS restarted CASCADE")
    store = open_store(url)
    port = throwaway.rsplit(":", 1)[1].split("/")[0]
    assert script("down", "--port", port).returncode == 0
    assert script("up", "--port", port).returncode == 0
    record = copy_of(scored_run("restarted", "model-a", 20), "after-restart")
    store.save(record)
    assert [run.run_id for run in open_store(url).runs("restarted", "model-a")] == [record.run_id]
