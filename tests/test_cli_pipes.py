"""The exit code is decided by the run, not by whoever reads stdout.

``retrievalkit eval ... | head -1`` closes the pipe after one line. Every outcome (0
done, 1 regression with --fail-on-regression, 3 evaluation failed) must keep its exit
code, print no traceback and say nothing about the pipe; here the reading end of a real
pipe is closed before the command writes anything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from child_env import child_environment, child_pythonpath

SET = "".join(
    json.dumps({"id": f"q{n}", "question": f"what about d{n}", "expected": [f"d{n}"]}) + "\n"
    for n in range(1, 7)
)
CONFIG = """\
[retrievers.steady]
plugin = "faulty-raise"
fail_on = "never-asked"

[retrievers.flaky]
plugin = "faulty-raise"
fail_on = "{fail_on}"
"""


def _env(site: Path) -> dict[str, str]:
    env = child_environment()
    env.update(NO_COLOR="1", COLUMNS="120", PYTHONPATH=child_pythonpath(site))
    return env


def _closed_pipe(args: list[str], cwd: Path, site: Path) -> tuple[int, str]:
    """Run with stdout on a pipe whose reader is already gone; (exit code, stderr)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will ever read: the first write fails with EPIPE
    try:
        completed = subprocess.run(
            [sys.executable, "-m", "retrievalkit", *args],
            cwd=cwd,
            env=_env(site),
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        os.close(write_end)
    return completed.returncode, completed.stderr


def _open_pipe(args: list[str], cwd: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "retrievalkit", *args],
        cwd=cwd,
        env=_env(site),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _stored(store: Path) -> int:
    if not store.exists():
        return 0
    return sum(1 for line in store.read_text(encoding="utf-8").splitlines() if line.strip())


@pytest.mark.parametrize("fmt", ["table", "json", "markdown"])
def test_a_closed_pipe_changes_no_exit_code(faulty_site: Path, tmp_path: Path, fmt: str) -> None:
    (tmp_path / "s.jsonl").write_text(SET, encoding="utf-8")
    (tmp_path / "retrievalkit.toml").write_text(
        CONFIG.format(fail_on="never-asked"), encoding="utf-8"
    )
    store = tmp_path / "runs.jsonl"
    common = ["eval", "--set", "s.jsonl", "--store", "jsonl:///runs.jsonl", "--format", fmt]

    # 0: a clean first run, saved although nobody read a byte of its report.
    code, stderr = _closed_pipe([*common, "--retriever", "steady"], tmp_path, faulty_site)
    assert (code, _stored(store)) == (0, 1), stderr
    assert "Traceback" not in stderr and "Broken pipe" not in stderr, stderr

    # 1: flaky's baseline answers everything; then d1 errors (allowed by --max-error-rate),
    # so hit@1 drops: a regression, saved, exit code 1.
    baseline = _open_pipe([*common, "--retriever", "flaky"], tmp_path, faulty_site)
    assert baseline.returncode == 0, baseline.stderr
    (tmp_path / "retrievalkit.toml").write_text(CONFIG.format(fail_on="d1"), encoding="utf-8")
    flaky = ["--retriever", "flaky", "--max-error-rate", "0.5", "--fail-on-regression"]
    code, stderr = _closed_pipe([*common, *flaky], tmp_path, faulty_site)
    assert (code, _stored(store)) == (1, 3), stderr
    assert "Traceback" not in stderr, stderr

    # 3: every question errors; nothing is saved, the report's pipe is closed.
    (tmp_path / "retrievalkit.toml").write_text(CONFIG.format(fail_on="what"), encoding="utf-8")
    before = _stored(store)
    code, stderr = _closed_pipe([*common, "--retriever", "flaky"], tmp_path, faulty_site)
    assert code == 3, stderr
    assert _stored(store) == before
    assert "Traceback" not in stderr, stderr
    assert stderr.strip().splitlines()[-1].startswith("retrievalkit: error: "), stderr


def test_the_same_runs_with_a_reader_give_the_same_codes(faulty_site: Path, tmp_path: Path) -> None:
    """The control: what the closed pipe must not change."""
    (tmp_path / "s.jsonl").write_text(SET, encoding="utf-8")
    (tmp_path / "retrievalkit.toml").write_text(CONFIG.format(fail_on="what"), encoding="utf-8")
    common = ["eval", "--set", "s.jsonl", "--store", "jsonl:///runs.jsonl", "-q"]
    assert _open_pipe([*common, "--retriever", "steady"], tmp_path, faulty_site).returncode == 0
    assert _open_pipe([*common, "--retriever", "flaky"], tmp_path, faulty_site).returncode == 3
