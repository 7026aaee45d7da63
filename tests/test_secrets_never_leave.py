"""Secrets never leave retrievalkit: not in a record, a report, a store, a log line or a message.

A retriever (tests/fixtures/rk_faulty) is configured with a password, a token, a client
secret, a URL with a password in it and an API key read through ``api_key_env``; on one
question it raises an exception that quotes all of them, as careless client libraries
do. Every output of the run, every store file and every stream is then searched for
every secret value. The options hash must still follow each secret.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from child_env import child_environment, child_pythonpath
from stored_text import stored_text

from retrievalkit.redaction import options_hash, redact_options, secret_values

SECRETS = {
    "password": "pw-S3CRET-hunter2",
    "token": "tok-S3CRET-91bc",
    "client_secret": "cs-S3CRET-5d2e",
    "url_password": "url-S3CRET-c0ffee",
    "api_key": "env-S3CRET-a1b2c3",
}

CONFIG = f"""\
[retrievers.vault]
plugin = "faulty-secretive"
api_key_env = "RK_TEST_API_KEY"
password = "{SECRETS["password"]}"
token = "{SECRETS["token"]}"
client_secret = "{SECRETS["client_secret"]}"
url = "http://elastic:{SECRETS["url_password"]}@localhost:9200"

[retrievers.gone]
plugin = "faulty-unreachable"
password = "{SECRETS["password"]}"
"""


def write_set(directory: Path) -> None:
    lines = [
        json.dumps(
            {
                "id": f"q{n}",
                "question": ("boom " if n == 2 else "") + f"question about d{n}",
                "expected": [f"d{n}"],
            }
        )
        for n in range(1, 6)
    ]
    (directory / "golden.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def run(
    directory: Path, site: Path, *args: str, api_key: str = SECRETS["api_key"]
) -> subprocess.CompletedProcess[str]:
    env = child_environment()
    env.update(
        PYTHONPATH=child_pythonpath(site), NO_COLOR="1", COLUMNS="200", RK_TEST_API_KEY=api_key
    )
    return subprocess.run(
        [sys.executable, "-m", "retrievalkit", *args],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def leaks(text: str | bytes) -> list[str]:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return [name for name, value in SECRETS.items() if value.encode("utf-8") in data]


def test_no_secret_reaches_any_output(faulty_site: Path, tmp_path: Path) -> None:
    write_set(tmp_path)
    (tmp_path / "retrievalkit.toml").write_text(CONFIG, encoding="utf-8")
    common = ("--set", "golden.jsonl", "--retriever", "vault", "--max-error-rate", "0.5")
    streams: dict[str, str] = {}
    for name, extra in {
        "sqlite-json": ("--store", "sqlite:///runs.sqlite3", "--output-dir", "out1",
                        "--format", "json"),
        "jsonl-table": ("--store", "jsonl:///runs.jsonl", "--output-dir", "out2"),
        "markdown-verbose": ("--store", "jsonl:///runs.jsonl", "--format", "markdown", "-v"),
        "failing": ("--store", "jsonl:///runs.jsonl", "--max-error-rate", "0"),
    }.items():  # fmt: skip
        done = run(tmp_path, faulty_site, "eval", *common, *extra)
        assert done.returncode == (3 if name == "failing" else 0), done.stderr
        streams[f"{name} stdout"], streams[f"{name} stderr"] = done.stdout, done.stderr
    # The error outcome is there, with its reason, only scrubbed.
    summary = json.loads((tmp_path / "out1" / "summary.json").read_text(encoding="utf-8"))
    [error] = summary["errors"]
    assert error["question_id"] == "q2" and error["error"].startswith("PermissionError: login")
    assert "password=***" in error["error"] and "http://elastic:***@localhost" in error["error"]
    options = summary["manifest"]["retriever_options"]
    assert options["password"] == options["token"] == options["client_secret"] == "***"
    assert options["api_key_env"] == "RK_TEST_API_KEY"
    assert options["url"] == "http://elastic:***@localhost:9200"
    run_id = summary["run_id"]
    for name, args in {
        "show": ("show", run_id, "--store", "sqlite:///runs.sqlite3"),
        "show-json": ("show", run_id, "--store", "sqlite:///runs.sqlite3", "--format", "json"),
        "history": ("history", "--set", "golden", "--retriever", "vault", "--store",
                    "jsonl:///runs.jsonl", "-v"),
        "unreachable": ("eval", "--set", "golden.jsonl", "--retriever", "gone", "--store",
                        "memory:"),
    }.items():  # fmt: skip
        done = run(tmp_path, faulty_site, *args)
        streams[f"{name} stdout"], streams[f"{name} stderr"] = done.stdout, done.stderr
        assert done.returncode == (3 if name == "unreachable" else 0), done.stderr
    assert "could not start: ConnectionError" in streams["unreachable stderr"]
    assert "Traceback" not in "".join(streams.values())

    files = [
        path for path in tmp_path.rglob("*") if path.is_file() and path.name != "retrievalkit.toml"
    ]
    names = {path.name for path in files}
    assert {"summary.json", "per_question.jsonl", "report.md", "runs.jsonl"} <= names
    assert any(name.startswith("runs.sqlite3") for name in names)
    written = stored_text(tmp_path)
    found = {place: leaks(text) for place, text in written.items()}
    # Every run was read back whole, outcome columns decoded, not only scanned as bytes:
    # the scrubbed error text, compressed in the stores, is among what was searched.
    runs = [text for place, text in written.items() if " run " in place]
    assert len(runs) >= 2
    assert all("PermissionError: login" in text for text in runs)
    found.update({name: leaks(text) for name, text in streams.items()})
    assert {place: names for place, names in found.items() if names} == {}
    # The scan can find them: the config file itself holds four of the five.
    assert len(leaks((tmp_path / "retrievalkit.toml").read_bytes())) == 4


def summary_hash(directory: Path, site: Path, config: str, api_key: str) -> str:
    (directory / "retrievalkit.toml").write_text(config, encoding="utf-8")
    done = run(
        directory, site, "eval", "--set", "golden.jsonl", "--retriever", "vault", "--store",
        "memory:", "--max-error-rate", "0.5", "--format", "json", "--no-save", api_key=api_key,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    value: str = json.loads(done.stdout)["manifest"]["retriever_options_hash"]
    return value


def test_the_options_hash_follows_every_secret(faulty_site: Path, tmp_path: Path) -> None:
    write_set(tmp_path)
    base = summary_hash(tmp_path, faulty_site, CONFIG, SECRETS["api_key"])
    assert summary_hash(tmp_path, faulty_site, CONFIG, SECRETS["api_key"]) == base
    assert summary_hash(tmp_path, faulty_site, CONFIG, "another-key") != base
    other_password = CONFIG.replace(SECRETS["password"], "pw-S3CRET-other")
    assert summary_hash(tmp_path, faulty_site, other_password, SECRETS["api_key"]) != base


@pytest.mark.parametrize(
    "name",
    ["password", "db_password", "api_key", "apiKey", "token", "access_token", "client_secret",
     "aws_secret", "credentials", "Authorization", "private_key"],
)  # fmt: skip
def test_secret_looking_names_are_redacted(name: str) -> None:
    assert redact_options({name: "s3cret", "index": "kb"}) == {name: "***", "index": "kb"}
    assert secret_values({name: "s3cret"}) == ["s3cret"]


def test_nested_options_and_env_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RK_SECRET_FOR_TEST", "from-the-environment")
    options = {
        "api_key_env": "RK_SECRET_FOR_TEST",
        "headers": {"Authorization": "Bearer abc"},
        "parts": [{"password": "inner"}, "plain"],
        "url": "https://user:p%40ss@host/path",
    }
    assert redact_options(options) == {
        "api_key_env": "RK_SECRET_FOR_TEST",
        "headers": {"Authorization": "***"},
        "parts": [{"password": "***"}, "plain"],
        "url": "https://user:***@host/path",
    }
    assert set(secret_values(options)) == {
        "from-the-environment", "Bearer abc", "inner", "p%40ss", "p@ss",
    }  # fmt: skip
    before = options_hash(options)
    monkeypatch.setenv("RK_SECRET_FOR_TEST", "changed")
    assert options_hash(options) != before


def test_log_lines_are_scrubbed_of_remembered_secrets_and_url_passwords() -> None:
    import io
    import logging

    from retrievalkit.redaction import RedactingFilter, remember

    remember(["log-S3CRET-77"])
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("retrievalkit.test.redaction")
    logger.addHandler(handler)
    try:
        logger.warning("opened %s with %s", "https://svc:pa55word@db.example/x", "log-S3CRET-77")
    finally:
        logger.removeHandler(handler)
    assert stream.getvalue() == "opened https://svc:***@db.example/x with ***\n"
