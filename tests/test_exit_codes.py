"""Exit codes hold for any failure: a plugin's exception or exit is exit 3 (or 2), its
KeyboardInterrupt an interrupted run (130).

The hostile retriever (tests/fixtures/rk_hostile) raises, exits or interrupts while it
starts or while it answers, with a message holding a secret. Seeded cases cross what it
does with when it does it; every one must end with one line naming what failed, an exit
code of retrievalkit's (never 1, never the plugin's own), no traceback and no secret. An
exception or exit() while answering is that question's error outcome (here over the
allowed error rate, so exit 3); a KeyboardInterrupt, wherever it is raised, interrupts
the run: exit 130, nothing saved.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest
from child_env import child_environment
from hostile import lay_out

from retrievalkit.cli.main import main

SECRET = "sekrit-value-4711"
KINDS = (
    "RuntimeError", "TypeError", "ValueError", "KeyError", "AttributeError", "MemoryError",
    "RecursionError", "OSError", "ZeroDivisionError", "AssertionError", "UnicodeError",
    "NotImplementedError", "LookupError", "BufferError",
)  # fmt: skip
EXIT_CODES = (0, 1, 2, 3, 7, 130, 255, -1, None)


def _cases(count: int, seed: int) -> list[dict[str, object]]:
    rng = random.Random(seed)
    cases: list[dict[str, object]] = []
    for _ in range(count):
        act = rng.choice(("raise", "exit", "interrupt"))
        case: dict[str, object] = {
            "act": act,
            "when": rng.choice(("create", "retrieve", "second")),
            "text": rng.choice(("", f"token {SECRET}", f"{SECRET}\nsecond line", "plain")),
        }
        if act == "raise":
            case["kind"] = rng.choice(KINDS)
        if act == "exit":
            case["code"] = rng.choice(EXIT_CODES)
        cases.append(case)
    return cases


CASES = _cases(36, seed=26)


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return lay_out(tmp_path_factory.mktemp("hostile-site"))


def _project(folder: Path, case: dict[str, object]) -> None:
    (folder / "golden.jsonl").write_text(
        '{"id": "q1", "question": "first", "expected": ["d1"]}\n'
        '{"id": "q2", "question": "second", "expected": ["d2"]}\n',
        encoding="utf-8",
    )
    options = ['plugin = "hostile"', f'api_key = "{SECRET}"', f'act = "{case["act"]}"']
    when = case["when"]
    options.append(f'when = "{"retrieve" if when == "second" else when}"')
    if when == "second":
        options.append('question = "second"')
    text = str(case["text"]).replace("\n", "\\n")
    options.append(f'text = "{text}"')
    if "kind" in case:
        options.append(f'kind = "{case["kind"]}"')
    if case.get("code") is not None:
        options.append(f"code = {case['code']}")
    (folder / "retrievalkit.toml").write_text(
        "[retrievers.h]\n" + "\n".join(options) + "\n", encoding="utf-8"
    )


def _expected_codes(case: dict[str, object]) -> set[int]:
    if case["act"] == "interrupt":
        return {130}
    if case["act"] == "raise" and case["when"] == "create" and case["kind"] != "MemoryError":
        return {2, 3}  # a plugin that cannot start: its options or its backend
    return {3}


@pytest.mark.parametrize("case", CASES, ids=[f"case{n}" for n in range(len(CASES))])
def test_a_plugin_failure_ends_with_one_line_and_an_exit_code_of_retrievalkit(
    case: dict[str, object],
    hostile_site: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    _project(tmp_path, case)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(hostile_site))
    code = main(
        ["eval", "--set", "golden.jsonl", "--retriever", "h", "--format", "json",
         "--store", "sqlite:///runs.sqlite3"]
    )  # fmt: skip
    out, err = capfd.readouterr()
    assert code in _expected_codes(case), (case, err)
    assert "Traceback" not in err
    assert SECRET not in out + err
    last = [line for line in err.splitlines() if line.strip()][-1]
    if case["act"] == "interrupt":
        assert last.startswith("retrievalkit: interrupted (KeyboardInterrupt raised without a "
                               "signal"), last  # fmt: skip
        assert last.endswith("nothing was saved"), last
    else:
        assert last.startswith("retrievalkit: error: "), err
    if case["act"] == "exit" and case["when"] == "create":
        assert "exit(" in last and "plugin" in last, last
    elif case["act"] == "exit":  # the question's error outcome, over the allowed rate
        assert "the retriever called exit(" in last and "questions errored" in last, last
    if case.get("kind") == "MemoryError" and case["when"] != "create":
        assert "MemoryError" in last or "out of memory" in last, last
    assert not Path("runs.sqlite3").exists() or _stored_runs("runs.sqlite3") == 0


def _stored_runs(path: str) -> int:
    import sqlite3

    with sqlite3.connect(path) as connection:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        if "runs" not in tables:
            return 0
        return int(connection.execute("SELECT count(*) FROM runs").fetchone()[0])


def _cli(folder: Path, site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = child_environment(site)
    env.update(NO_COLOR="1")
    return subprocess.run(
        [sys.executable, "-m", "retrievalkit", *args],
        cwd=folder, env=env, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("code", [0, 1, 42])
def test_a_plugin_exit_never_becomes_the_process_exit_code(
    code: int, hostile_site: Path, tmp_path: Path
) -> None:
    _project(tmp_path, {"act": "exit", "when": "retrieve", "text": SECRET, "code": code})
    done = _cli(tmp_path, hostile_site, "eval", "--set", "golden.jsonl", "--retriever", "h",
                "--no-save")  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr and SECRET not in done.stdout + done.stderr
    assert f"exit({code})" in done.stderr


def test_verbose_shows_the_traceback_scrubbed(hostile_site: Path, tmp_path: Path) -> None:
    _project(tmp_path, {"act": "exit", "when": "create", "text": f"bye {SECRET}"})
    done = _cli(tmp_path, hostile_site, "eval", "--set", "golden.jsonl", "--retriever", "h",
                "--no-save", "-v")  # fmt: skip
    assert done.returncode == 3
    assert "Traceback" in done.stderr and "rk_hostile.py" in done.stderr
    assert SECRET not in done.stderr


def test_an_uncaught_os_error_names_the_file_and_is_exit_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    import errno

    from retrievalkit.cli import main as cli

    def full(_args: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device", "out/report.md")

    monkeypatch.setattr(cli, "_run_builtin", lambda _module, args: full(args))
    code = main(["show", "anything"])
    err = capfd.readouterr().err
    assert code == 3 and "disk full writing out/report.md" in err and "Traceback" not in err
