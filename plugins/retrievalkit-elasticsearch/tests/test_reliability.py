"""A real cluster failing under a run: node stopped, index deleted, credentials refused.

These tests start a third, throwaway node with the launcher (port
``RETRIEVALKIT_ES_THROWAWAY_PORT``, default 9202) with security on, so that Elasticsearch
itself checks the credentials (test_errors.py checks the messages against a stand-in
server) and so that stopping it harms no other test; the last test here stops it in
the middle of a run. A port that is already taken FAILS the module: it never stops a
node it did not start. Nothing here skips.

What a fault in the middle of a run must give: an error outcome for every question it
touched, exit code 3, one clear message naming what failed (the cluster's URL, the
index), and no run in the store, whose earlier runs stay as they were.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from support import DEMO_CORPUS, DEMO_SET, REPO, cli, write_config

from retrievalkit.stores import open_store

LAUNCHER = REPO / "scripts" / "elasticsearch.py"
PORT = int(os.environ.get("RETRIEVALKIT_ES_THROWAWAY_PORT") or 9202)
URL = f"http://127.0.0.1:{PORT}"
ADMIN = "rk-reliability"
PASSWORD = secrets.token_urlsafe(18)
PASSWORD_ENV = "RK_RELIABILITY_PASSWORD"
WRONG = "not-the-password-" + secrets.token_hex(4)
#: Bounds, not timings: how long a step may take before the test gives up and fails.
START_TIMEOUT = 240
RUN_TIMEOUT = 120
#: Searches the node must have answered before the fault is injected (the run is under way).
UNDER_WAY = 100
FAILED = re.compile(r"retriever '(?P<name>[^']+)' failed \((?P<errored>\d+) of (?P<total>\d+) ")


def launcher(*args: str) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "RETRIEVALKIT_ES_USER": ADMIN,
        "RETRIEVALKIT_ES_PASSWORD": PASSWORD,
    }
    return subprocess.run(
        [sys.executable, str(LAUNCHER), *args, "--port", str(PORT)],
        env=environment,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT + 60,
        check=False,
    )


def taken(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1.0)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def node() -> Iterator[Any]:
    """A secured throwaway node of our own, and an admin client for it; stopped at the end."""
    from elasticsearch import Elasticsearch

    if taken(PORT) or taken(PORT + 100):
        pytest.fail(
            f"port {PORT} or {PORT + 100} is taken; these tests start and STOP their own node "
            "there, so point RETRIEVALKIT_ES_THROWAWAY_PORT at a free port",
            pytrace=False,
        )
    try:
        started = launcher("up", "--security", "--timeout", str(START_TIMEOUT))
        if started.returncode != 0:
            pytest.fail(
                f"could not start a throwaway node on port {PORT}:\n{started.stderr[-3000:]}",
                pytrace=False,
            )
        client = Elasticsearch(URL, basic_auth=(ADMIN, PASSWORD), request_timeout=60)
        yield client
    finally:
        launcher("down")


@pytest.fixture(scope="module")
def workdir(node: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project folder: the demo corpus indexed twice, retrievers, a store with one run."""
    directory = tmp_path_factory.mktemp("reliability")
    for index in ("rk-reliability-demo", "rk-reliability-vanishing"):
        done = cli(
            "es", "index", "--corpus", str(DEMO_CORPUS), "--index", index, "--url", URL,
            "--username", ADMIN, "--password-env", PASSWORD_ENV,
            env={PASSWORD_ENV: PASSWORD},
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
    login = {"url": URL, "username": ADMIN, "password_env": PASSWORD_ENV, "max_retries": 1}
    demo = {**login, "index": "rk-reliability-demo", "doc_id_separator": "#"}
    write_config(
        directory,
        {
            "es": demo,
            # One question a request: a run of many questions takes long enough to be hit.
            "slow": {**demo, "batch_size": 1},
            "vanishing": {**demo, "index": "rk-reliability-vanishing", "batch_size": 5},
            "wrong-password": {**demo, "password_env": "RK_WRONG_PASSWORD"},
            "unknown-user": {**demo, "username": "rk-nobody"},
            "wrong-api-key": {
                "url": URL,
                "index": "rk-reliability-demo",
                "api_key_env": "RK_WRONG_API_KEY",
            },
            "no-credentials": {"url": URL, "index": "rk-reliability-demo"},
        },
    )
    many = directory / "many.jsonl"
    demo_lines = [json.loads(line) for line in DEMO_SET.read_text(encoding="utf-8").splitlines()]
    with many.open("w", encoding="utf-8") as out:
        for number in range(4000):
            source = demo_lines[number % len(demo_lines)]
            line = {"id": f"m{number:05d}", "question": source["question"]}
            out.write(json.dumps({**line, "expected": source["expected"]}) + "\n")
    first = evaluate(directory, "demo", "es")
    assert first.returncode == 0, first.stderr
    assert len(saved_runs(directory)) == 1
    return directory


def store_url(directory: Path) -> str:
    return f"sqlite:///{directory / 'runs.sqlite3'}"


def saved_runs(directory: Path) -> list[str]:
    return [record.run_id for record in open_store(store_url(directory)).all_runs()]


def environment(**extra: str) -> dict[str, str]:
    return {PASSWORD_ENV: PASSWORD, **extra}


def evaluate(directory: Path, set_name: str, retriever: str) -> subprocess.CompletedProcess[str]:
    return cli(
        "eval", "--set", set_name, "--retriever", retriever, "--store", store_url(directory),
        "--quiet", cwd=directory, env=environment(), timeout=RUN_TIMEOUT,
    )  # fmt: skip


def searches(client: Any, index: str) -> int:
    stats = client.indices.stats(index=index, metric="search")
    return int(stats["_all"]["primaries"]["search"]["query_total"])


def fault_mid_run(
    directory: Path, retriever: str, index: str, client: Any, fault: Callable[[], None]
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """Start ``eval`` of many questions, inject ``fault`` once it is under way, collect it."""
    before = searches(client, index)
    command = [
        sys.executable, "-m", "retrievalkit", "eval", "--set", "many.jsonl",
        "--retriever", retriever, "--store", store_url(directory), "--format", "json", "--quiet",
    ]  # fmt: skip
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", **environment()}
    with subprocess.Popen(
        command, cwd=directory, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as running:
        try:
            deadline = time.monotonic() + RUN_TIMEOUT
            while searches(client, index) - before < UNDER_WAY:
                assert running.poll() is None, "the run ended before the fault: make it longer"
                assert time.monotonic() < deadline, "the run never got under way"
                time.sleep(0.05)
            fault()
            stdout, stderr = running.communicate(timeout=RUN_TIMEOUT)
        finally:
            if running.poll() is None:
                running.kill()
                running.communicate()
    done = subprocess.CompletedProcess(command, running.returncode, stdout, stderr)
    report: dict[str, Any] = json.loads(stdout) if stdout.strip().startswith("{") else {}
    return done, report


def assert_stopped_mid_run(
    done: subprocess.CompletedProcess[str], report: Mapping[str, Any], directory: Path, run: str
) -> list[str]:
    """Exit 3, some questions answered and the rest errors, nothing saved; the errors."""
    assert done.returncode == 3, done.stderr[-3000:]
    found = FAILED.search(done.stderr)
    assert found, done.stderr
    errored, total = int(found["errored"]), int(found["total"])
    assert 0 < errored < total == 4000, "the fault must fall in the middle of the run"
    assert "the run was not saved and does not become a baseline" in done.stderr
    assert "Traceback" not in done.stderr
    assert report["errored"] == errored and report["saved_to"] is None
    assert "over the allowed error rate" in report["not_saved_reason"]
    assert saved_runs(directory) == [run], "the store must hold only the earlier run"
    return [str(item["error"]) for item in report["errors"]]


# --- credentials: Elasticsearch itself refuses them ----------------------------------------


def test_right_credentials_search_the_secured_node(workdir: Path) -> None:
    """The control: the same options with the right password evaluate and save."""
    assert saved_runs(workdir) and (workdir / "runs.sqlite3").is_file()


@pytest.mark.parametrize(
    ("retriever", "env", "named"),
    [
        (
            "wrong-password",
            {"RK_WRONG_PASSWORD": WRONG},
            [f"rejected the credentials of user '{ADMIN}' (password from $RK_WRONG_PASSWORD)"],
        ),
        ("unknown-user", {}, ["rejected the credentials of user 'rk-nobody'", PASSWORD_ENV]),
        (
            "wrong-api-key",
            {"RK_WRONG_API_KEY": "bm90OmEta2V5"},
            ["rejected the credentials of the API key in $RK_WRONG_API_KEY"],
        ),
        ("no-credentials", {}, ["requires credentials", "retrievers.no-credentials"]),
    ],
)
def test_refused_credentials_exit_2_naming_them(
    workdir: Path, retriever: str, env: dict[str, str], named: list[str]
) -> None:
    done = cli(
        "eval", "--set", "demo", "--retriever", retriever, "--store", store_url(workdir), "-q",
        cwd=workdir, env=environment(**env),
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    for text in named:
        assert text in done.stderr
    assert f"Elasticsearch at {URL}" in done.stderr and "401" in done.stderr
    assert WRONG not in done.stdout + done.stderr and PASSWORD not in done.stdout + done.stderr
    assert len(saved_runs(workdir)) == 1


# --- faults in the middle of a run -----------------------------------------------------------


def test_an_index_deleted_mid_run_exits_3_naming_it(workdir: Path, node: Any) -> None:
    run = saved_runs(workdir)[0]
    index = "rk-reliability-vanishing"

    def delete() -> None:
        node.indices.delete(index=index)

    done, report = fault_mid_run(workdir, "vanishing", index, node, delete)
    errors = assert_stopped_mid_run(done, report, workdir, run)
    assert f"no such index [{index}]" in done.stderr
    # Also the searches the deletion caught half-way (503, no shard available) name it.
    assert all(f"search of index '{index}'" in error for error in errors), sorted(set(errors))


def test_a_node_stopped_mid_run_exits_3_and_saves_nothing(workdir: Path, node: Any) -> None:
    """Runs last: it stops the throwaway node (the fixture's own `down` is then a no-op)."""
    run = saved_runs(workdir)[0]

    def stop() -> None:
        stopped = launcher("down")
        assert stopped.returncode == 0 and "stopped the node" in stopped.stderr, stopped.stderr

    done, report = fault_mid_run(workdir, "slow", "rk-reliability-demo", node, stop)
    errors = assert_stopped_mid_run(done, report, workdir, run)
    unreachable = f"cannot reach Elasticsearch at {URL} (search)"
    assert unreachable in done.stderr and "is the node running" in done.stderr
    assert sum(unreachable in error for error in errors) >= len(errors) // 2
    assert PASSWORD not in done.stdout + done.stderr
