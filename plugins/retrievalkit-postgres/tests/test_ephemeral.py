"""Ephemeral pgvector tables (built at start, dropped at the end) and ``pg drop``, live."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psycopg
import pytest
from retrievalkit_postgres.retriever import create_pgvector
from support import cli, scalar

import retrievalkit as rk
from retrievalkit.errors import InputError

DEMO = Path(rk.__file__).parent / "demo"


def _exists(url: str, table: str) -> bool:
    return bool(scalar(url, "SELECT to_regclass(%s) IS NOT NULL", (table,)))


def _name() -> str:
    return f"rk_eph_{secrets.token_hex(4)}"


def _options(url: str, table: str) -> dict[str, object]:
    return {
        "url": url,
        "table": table,
        "embedder": "wordllama",
        "ephemeral": True,
        "corpus": str(DEMO / "corpus.jsonl"),
    }


@pytest.fixture
def table(pg_url: str) -> object:
    name = _name()
    yield name
    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute(f'DROP TABLE IF EXISTS "{name}"')


def test_the_table_is_built_for_the_run_and_dropped_after_it(pg_url: str, table: str) -> None:
    run = rk.evaluate(
        DEMO / "golden.jsonl", "pgvector", options=_options(pg_url, table), git_commit=None
    )
    assert run.record.manifest.extra["pgvector.table"] == table
    assert run.metrics["hit@10"].mean is not None and run.metrics["hit@10"].mean > 0.5
    assert not _exists(pg_url, table)  # the retriever went with evaluate's return


def test_close_drops_the_table_once(pg_url: str, table: str) -> None:
    retriever = create_pgvector(**_options(pg_url, table))  # type: ignore[arg-type]
    assert _exists(pg_url, table) and retriever.ephemeral
    assert retriever.retrieve("How do I get a library card?", 5)
    retriever.close()
    assert not _exists(pg_url, table)
    retriever.close()  # nothing left to drop: no error


def test_an_existing_table_is_refused_and_kept(pg_url: str, table: str) -> None:
    first = create_pgvector(**_options(pg_url, table))  # type: ignore[arg-type]
    with pytest.raises(InputError, match="already exists") as caught:
        create_pgvector(**_options(pg_url, table))  # type: ignore[arg-type]
    assert caught.value.field == "table" and "pg drop --table" in str(caught.value)
    assert _exists(pg_url, table)
    first.close()


def test_corpus_without_ephemeral_is_refused(pg_url: str, table: str) -> None:
    options = {**_options(pg_url, table), "ephemeral": False}
    with pytest.raises(InputError, match="only with ephemeral") as caught:
        create_pgvector(**options)  # type: ignore[arg-type]
    assert caught.value.field == "corpus" and not _exists(pg_url, table)


def test_the_table_is_dropped_when_the_process_dies_of_an_error(pg_url: str, table: str) -> None:
    program = textwrap.dedent(
        f"""
        from retrievalkit_postgres.retriever import create_pgvector
        retriever = create_pgvector(**{_options(pg_url, table)!r})
        retriever.retrieve("library card", 3)
        print("built", flush=True)
        raise RuntimeError("the run broke")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=False, timeout=300
    )
    assert done.returncode == 1 and "built" in done.stdout and "the run broke" in done.stderr
    assert not _exists(pg_url, table)


def test_the_table_is_dropped_after_ctrl_c(pg_url: str, table: str, tmp_path: Path) -> None:
    questions = [json.loads(line) for line in (DEMO / "golden.jsonl").open()]
    with (tmp_path / "many.jsonl").open("w") as handle:
        for copy in range(400):  # long enough to be interrupted while asking
            for question in questions:
                handle.write(json.dumps({**question, "id": f"{question['id']}-{copy}"}) + "\n")
    options = _options(pg_url, table)
    (tmp_path / "retrievalkit.toml").write_text(
        '[retrievers.vectors]\nplugin = "pgvector"\n'
        + "".join(f"{key} = {json.dumps(value)}\n" for key, value in options.items())
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "retrievalkit", "eval", "--set", "many.jsonl",
         "--retriever", "vectors", "--no-save", "--quiet"],
        cwd=tmp_path, env={**os.environ, "NO_COLOR": "1"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while not _exists(pg_url, table):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the table was never built"
            time.sleep(0.2)
        time.sleep(1.0)  # asking by now
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr
    assert not _exists(pg_url, table)


def test_pg_drop_drops_what_pg_index_built_and_nothing_else(pg_url: str, table: str) -> None:
    built = cli(
        "pg", "index", "--corpus", str(DEMO / "corpus.jsonl"), "--table", table,
        "--url", pg_url, "--embedder", "wordllama",
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    dropped = cli("pg", "drop", "--table", table, "--url", pg_url)
    assert dropped.returncode == 0, dropped.stderr
    assert f"dropped {table}" in dropped.stdout and not _exists(pg_url, table)
    again = cli("pg", "drop", "--table", table, "--url", pg_url)
    assert again.returncode == 2 and f"no table {table}" in again.stderr
    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute(f'CREATE TABLE "{table}" (id text)')
    foreign = cli("pg", "drop", "--table", table, "--url", pg_url)
    assert foreign.returncode == 2 and "not built by" in foreign.stderr
    assert _exists(pg_url, table)
