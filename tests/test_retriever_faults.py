"""Retrievers built to fail, run through the real command line: errors, timeouts, Ctrl-C.

The retrievers come from tests/fixtures/rk_faulty, discovered as an installed plugin. A
question that a retriever fails on becomes an error outcome with its reason; the run
completes or stops (exit code 3, nothing saved) by ``--max-error-rate``; a hung
retriever is cut off by ``--timeout`` and does not keep the process alive; a real
SIGINT stops ``eval`` with exit code 130 and nothing in the store.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from child_env import child_environment
from conftest import RunCli

QUESTIONS = 10


def write_set(directory: Path) -> Path:
    """Ten questions "... about dN" expecting dN; q3 says "boom", q5 says "hang"."""
    lines = []
    for number in range(1, QUESTIONS + 1):
        word = {3: "boom ", 5: "hang "}.get(number, "")
        lines.append(
            json.dumps(
                {
                    "id": f"q{number}",
                    "question": f"{word}question about d{number}",
                    "expected": [f"d{number}"],
                }
            )
        )
    path = directory / "golden.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def stored_runs(cli: RunCli, url: str, site: Path, retriever: str) -> list[dict[str, object]]:
    done = cli(
        "history", "--set", "golden", "--retriever", retriever, "--store", url,
        "--format", "json", sites=[site],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, object]] = json.loads(done.stdout)
    return rows


def one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def test_errors_within_the_allowed_rate_complete_the_run_and_are_listed(
    cli: RunCli, faulty_site: Path, tmp_path: Path
) -> None:
    write_set(tmp_path)
    url = "sqlite:///runs.sqlite3"
    done = cli(
        "eval", "--set", "golden.jsonl", "--retriever", "faulty-raise", "--store", url,
        "--max-error-rate", "0.1", "--output-dir", "out", "--format", "json",
        sites=[faulty_site],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    summary = json.loads(done.stdout)
    assert summary["questions"] == QUESTIONS and summary["errored"] == 1
    [error] = summary["errors"]
    assert error["question_id"] == "q3"
    assert error["error"].startswith("ConnectionError: backend refused")
    assert summary["metrics"]["hit@1"]["mean"] == pytest.approx(0.9)  # the error is a miss
    assert summary["saved_to"] == url
    report = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "## Errors (1)" in report and "`q3`: ConnectionError" in report
    lines = (tmp_path / "out" / "per_question.jsonl").read_text(encoding="utf-8").splitlines()
    outcomes = {row["question_id"]: row for row in map(json.loads, lines)}
    assert len(outcomes) == QUESTIONS and outcomes["q3"]["error"].startswith("ConnectionError")
    [row] = stored_runs(cli, url, faulty_site, "faulty-raise")
    assert row["errored"] == 1 and row["questions"] == QUESTIONS


def test_errors_over_the_rate_stop_with_code_3_and_nothing_saved(
    cli: RunCli, faulty_site: Path, tmp_path: Path
) -> None:
    write_set(tmp_path)
    url = "jsonl:///runs.jsonl"
    done = cli(
        "eval", "--set", "golden.jsonl", "--retriever", "faulty-raise", "--store", url,
        "--max-error-rate", "0.05", sites=[faulty_site],
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    message = one_error_line(done.stderr)
    assert "1 of 10 questions errored" in message and "ConnectionError" in message
    assert "was not saved" in message
    assert "q3" in done.stdout and "backend refused" in done.stdout  # the report lists it
    assert stored_runs(cli, url, faulty_site, "faulty-raise") == []
    assert not (tmp_path / "runs.jsonl").exists() or not (tmp_path / "runs.jsonl").read_text()


@pytest.mark.parametrize(
    ("retriever", "reason"),
    [
        ("faulty-non-string", "returned a int (7) at rank 1; ids are strings"),
        ("faulty-too-many", "returned 35 ids for a limit of 30"),
    ],
)
def test_broken_results_are_error_outcomes(
    cli: RunCli, faulty_site: Path, tmp_path: Path, retriever: str, reason: str
) -> None:
    write_set(tmp_path)
    done = cli(
        "eval", "--set", "golden.jsonl", "--retriever", retriever, "--store",
        "sqlite:///runs.sqlite3", "--k", "1,3,10", "--format", "json", sites=[faulty_site],
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    message = one_error_line(done.stderr)
    assert "failed on every question" in message and reason in message
    summary = json.loads(done.stdout)
    assert summary["errored"] == QUESTIONS
    assert {error["error"] for error in summary["errors"]} == {f"ValueError: {reason}"}
    assert summary["saved_to"] is None and "over the allowed error rate" in str(
        summary["not_saved_reason"]
    )
    assert stored_runs(cli, "sqlite:///runs.sqlite3", faulty_site, retriever) == []


@pytest.mark.parametrize("concurrency", ["1", "3"])
def test_a_hung_retriever_is_cut_off_by_the_timeout(
    cli: RunCli, faulty_site: Path, tmp_path: Path, concurrency: str
) -> None:
    write_set(tmp_path)
    # The hung thread never ends; the process must end anyway (the fixture's subprocess
    # timeout is only a bound so that a regression fails instead of hanging the suite).
    done = cli(
        "eval", "--set", "golden.jsonl", "--retriever", "faulty-hang", "--store",
        "sqlite:///runs.sqlite3", "--timeout", "0.5", "--concurrency", concurrency,
        "--max-error-rate", "0.1", "--format", "json", sites=[faulty_site],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["errors"] == [
        {"question_id": "q5", "error": "TimeoutError: no answer within 0.5 s (--timeout)"}
    ]
    assert summary["metrics"]["hit@1"]["mean"] == pytest.approx(0.9)
    assert summary["saved_to"] == "sqlite:///runs.sqlite3"


def test_a_hung_batch_times_out_every_question_of_the_batch(
    cli: RunCli, faulty_site: Path, tmp_path: Path
) -> None:
    write_set(tmp_path)
    done = cli(
        "eval", "--set", "golden.jsonl", "--retriever", "faulty-batch-hang", "--store",
        "memory:", "--timeout", "0.05", "--format", "json", sites=[faulty_site],
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "TimeoutError" in one_error_line(done.stderr)
    assert json.loads(done.stdout)["errored"] == QUESTIONS


def test_a_timeout_can_come_from_the_config(cli: RunCli, faulty_site: Path, tmp_path: Path) -> None:
    write_set(tmp_path)
    (tmp_path / "retrievalkit.toml").write_text("[eval]\ntimeout = 0.25\n", encoding="utf-8")
    done = cli(
        "eval", "--set", "golden.jsonl", "--retriever", "faulty-hang", "--store", "memory:",
        "--max-error-rate", "0.5", "--format", "json", sites=[faulty_site],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["errors"][0]["error"].endswith("within 0.25 s (--timeout)")


SLOW = """\
[retrievers.slow]
plugin = "faulty-slow"
delay = 600
started_file = "started"
"""


def _run_count(tmp_path: Path, url: str) -> int:
    if url.startswith("sqlite"):
        path = tmp_path / "runs.sqlite3"
        if not path.exists():
            return 0
        with sqlite3.connect(path) as connection:
            tables = connection.execute("SELECT name FROM sqlite_master WHERE name = 'runs'")
            if tables.fetchone() is None:
                return 0
            return int(connection.execute("SELECT COUNT(*) FROM runs").fetchone()[0])
    path = tmp_path / "runs.jsonl"
    return len(path.read_text(encoding="utf-8").splitlines()) if path.exists() else 0


@pytest.mark.parametrize(
    ("url", "extra"),
    [
        ("sqlite:///runs.sqlite3", []),
        ("jsonl:///runs.jsonl", ["--timeout", "900"]),
        ("sqlite:///runs.sqlite3", ["--concurrency", "2"]),
    ],
    ids=["sqlite-plain", "jsonl-with-timeout", "sqlite-concurrent"],
)
def test_ctrl_c_during_eval_saves_nothing_and_says_so(
    faulty_site: Path, tmp_path: Path, url: str, extra: list[str]
) -> None:
    write_set(tmp_path)
    (tmp_path / "retrievalkit.toml").write_text(SLOW, encoding="utf-8")
    env = child_environment(faulty_site)
    env.update(NO_COLOR="1")
    process = subprocess.Popen(
        [sys.executable, "-m", "retrievalkit", "eval", "--set", "golden.jsonl",
         "--retriever", "slow", "--store", url, *extra],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        # Wait (bounded) until the retriever has been asked: the evaluation is under way.
        deadline = time.monotonic() + 120
        while not (tmp_path / "started").exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the slow retriever was never called"
            time.sleep(0.02)
        os.kill(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, stderr
    message = one_error_line(stderr)
    assert message == "retrievalkit: interrupted; nothing was saved"
    assert _run_count(tmp_path, url) == 0


def test_interrupts_are_held_back_while_saving() -> None:
    from retrievalkit.cli.interrupts import interrupts_deferred

    before = signal.getsignal(signal.SIGINT)
    # The command line runs with Python's default handler; install it for this test.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with interrupts_deferred() as deferred:
            os.kill(os.getpid(), signal.SIGINT)  # a real signal: no KeyboardInterrupt here
            time.sleep(0)
        assert deferred.received
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)
