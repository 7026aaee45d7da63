"""--executor ray: a real two-worker Ray head on loopback; its runs equal the local runs.

The head is started once for the session (`ray start --head --block`, no dashboard, its
own process group, its own token and temporary directory) and stopped by its process
group at the end. Skipped as a whole without the [ray] extra (`nox -s ray` installs it).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import pytest

import retrievalkit as rk
from retrievalkit.errors import EvaluationError, InputError

if TYPE_CHECKING:
    from conftest import RunCli

#: What the head and this process share: loopback only (Ray would otherwise replace
#: 127.0.0.1 with the machine's address, where this head does not listen), a token of
#: this session, no usage report. Ray reads them when it is imported, so they are set
#: before it is.
RAY_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_AUTH_MODE": "token",
    "RAY_AUTH_TOKEN": secrets.token_hex(32),
    "RAY_USAGE_STATS_ENABLED": "0",
}
os.environ.update(RAY_ENV)
ray = pytest.importorskip("ray", reason="the [ray] extra is not installed (nox -s ray)")

DEMO = Path(rk.__file__).parent / "demo"
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
FAST = {"resamples": 200, "git_commit": None, "now": NOW}
START_SECONDS = 240
START_ATTEMPTS = 3


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for each in sockets:
        each.bind(("127.0.0.1", 0))
    ports = [each.getsockname()[1] for each in sockets]
    for each in sockets:
        each.close()
    return ports


def _start_head(temp: str) -> tuple[subprocess.Popen[bytes], str, Path]:
    """`ray start --head --block` on 127.0.0.1 in a process group of its own."""
    gcs, grpc, listen, runtime, metrics = _free_ports(5)
    ray_cli = Path(sys.executable).with_name("ray")
    log = Path(temp) / "start.log"
    with log.open("w") as output:
        head = subprocess.Popen(
            [
                str(ray_cli), "start", "--head", "--block",
                "--node-ip-address", "127.0.0.1", "--port", str(gcs),
                "--num-cpus", "2", "--include-dashboard=false", "--disable-usage-stats",
                # Fixed agent ports: the raylet then does not wait on the agents' port
                # files, which a loaded machine writes too late for its fixed timeout.
                "--dashboard-agent-grpc-port", str(grpc),
                "--dashboard-agent-listen-port", str(listen),
                "--runtime-env-agent-port", str(runtime),
                "--metrics-export-port", str(metrics),
                "--temp-dir", temp,
            ],
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    return head, f"127.0.0.1:{gcs}", log


@pytest.fixture(scope="session")
def ray_address() -> Iterator[str]:
    """A Ray head on 127.0.0.1 with two CPUs (two workers), for the whole session.

    Ray gives its node a fixed 30 s to register; a loaded machine can miss that, so a
    start that failed is tried again (three times in all) before the session fails.
    """
    saved = os.environ.pop("RAY_ADDRESS", None)
    temps: list[str] = []
    head = None
    try:
        for attempt in range(START_ATTEMPTS):
            temps.append(tempfile.mkdtemp(prefix="rk-ray-", dir="/tmp"))
            head, address, log = _start_head(temps[-1])
            deadline = time.monotonic() + START_SECONDS
            while "Ray runtime started" not in log.read_text(errors="replace"):
                if head.poll() is not None or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            else:
                break
            _stop(head)
            if attempt == START_ATTEMPTS - 1:
                pytest.fail(f"the Ray head did not start: {log.read_text(errors='replace')}")
        yield address
    finally:
        if ray.is_initialized():
            ray.shutdown()
        if head is not None:
            _stop(head)
        for temp in temps:
            shutil.rmtree(temp, ignore_errors=True)
        if saved is not None:
            os.environ["RAY_ADDRESS"] = saved


def _stop(head: subprocess.Popen[bytes]) -> None:
    """End the head's process group (the raylet, the GCS, the workers it started): its
    id is the head's, which started it (start_new_session)."""
    for sign, wait in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(head.pid, sign)
        except ProcessLookupError:
            break
        try:
            head.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        time.sleep(1.0)  # the group may outlive its leader for a moment
    with contextlib.suppress(ProcessLookupError):
        os.killpg(head.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        head.wait(timeout=5)


def _config(tmp_path: Path, extra: str = "") -> rk.Config:
    corpus = DEMO / "corpus.jsonl"
    text = f"""
[retrievers.stemmed]
plugin = "bm25"
corpus = "{corpus}"

[retrievers.plain]
plugin = "bm25"
corpus = "{corpus}"
stemmer = ""

[retrievers.both]
plugin = "fusion"
retrievers = ["stemmed", "plain"]
{extra}
"""
    path = tmp_path / "retrievalkit.toml"
    path.write_text(text, encoding="utf-8")
    return rk.load_config(path)


def _same(local: rk.Run, remote: rk.Run) -> None:
    """Everything but the timing: rankings, errors, every metric and interval, stages,
    the manifest (plugin, options, their hash, what the retriever describes) but its
    machine record, which a run on Ray workers has none of (its questions were timed on
    the cluster's machines)."""
    a, b = local.record, remote.record
    assert [o.question_id for o in a.outcomes] == [o.question_id for o in b.outcomes]
    assert [o.ranking for o in a.outcomes] == [o.ranking for o in b.outcomes]
    assert [o.error for o in a.outcomes] == [o.error for o in b.outcomes]
    assert [o.scores for o in a.outcomes] == [o.scores for o in b.outcomes]
    assert a.metrics == b.metrics
    assert a.slices == b.slices
    assert a.stages == b.stages
    assert a.manifest.machine is not None
    assert b.manifest.machine is None
    assert attrs.evolve(a.manifest, machine=None) == b.manifest
    assert local.warnings == remote.warnings


def test_a_staged_run_on_two_workers_equals_the_local_run(tmp_path: Path, ray_address: str) -> None:
    config = _config(tmp_path)
    golden = rk.load_set(DEMO / "golden.jsonl")
    seen: list[int] = []
    local = rk.evaluate(golden, "both", config=config, **FAST)
    remote = rk.evaluate(
        golden,
        "both",
        config=config,
        executor="ray",
        ray_address=ray_address,
        progress=seen.append,
        **FAST,
    )
    _same(local, remote)
    assert remote.record.stages is not None
    assert sum(seen) == len(golden.questions)


class _Picky:
    """Raises on every question with a 'd' in it (quoting the question), answers the rest."""

    identifier = "picky"

    def retrieve(self, question: str, limit: int) -> list[str]:
        if "d" in question:
            raise LookupError(f"no index for {question!r}")
        return ["doc-1", "doc-2"][:limit]


class _Failing:
    identifier = "failing"

    def retrieve(self, question: str, limit: int) -> list[str]:
        raise ConnectionError("index offline")


def test_errors_of_a_retriever_on_a_worker_are_the_local_errors(ray_address: str) -> None:
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    golden = rk.load_set(DEMO / "golden.jsonl")
    local = rk.evaluate(golden, _Picky(), max_error_rate=None, **FAST)
    remote = rk.evaluate(
        golden, _Picky(), max_error_rate=None, executor="ray", ray_address=ray_address, **FAST
    )
    assert 0 < local.errored < len(golden.questions)
    _same(local, remote)
    with pytest.raises(rk.RunFailed, match="failed on every question"):
        rk.evaluate(golden, _Failing(), executor="ray", ray_address=ray_address, **FAST)


class _Exits:
    """A retriever whose process ends when it is asked: the worker dies with it."""

    identifier = "exits"

    def retrieve(self, question: str, limit: int) -> list[str]:
        os._exit(3)


def test_a_worker_that_dies_fails_the_run_with_one_message(ray_address: str) -> None:
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    golden = rk.load_set(DEMO / "golden.jsonl")
    with pytest.raises(EvaluationError, match="a Ray worker died") as raised:
        rk.evaluate(golden, _Exits(), executor="ray", ray_address=ray_address, **FAST)
    assert "\n" not in str(raised.value)


def test_an_unreachable_address_is_one_line_and_exit_code_3(cli: RunCli) -> None:
    (port,) = _free_ports(1)
    result = cli(
        "eval", "--set", str(DEMO / "golden.jsonl"), "--retriever", "bm25-demo",
        "--no-save", "--executor", "ray", "--ray-address", f"127.0.0.1:{port}",
    )  # fmt: skip
    assert result.returncode == 3, result.stderr
    assert f"could not reach the Ray cluster at 127.0.0.1:{port}" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_an_address_without_the_ray_executor_is_refused() -> None:
    with pytest.raises(InputError, match="--ray-address"):
        rk.evaluate(DEMO / "golden.jsonl", "bm25-demo", ray_address="127.0.0.1:1")


SWEEP = """
[sweeps.rrf]
retriever = "both"
grid = { k = [1, 60], "stemmed.k1" = [0.9, 2.0] }
"""


def test_a_sweep_on_two_workers_picks_and_scores_as_the_local_sweep(
    tmp_path: Path, ray_address: str
) -> None:
    config = _config(tmp_path, SWEEP)
    golden = rk.load_set(DEMO / "golden.jsonl")
    local = rk.sweep(golden, "rrf", config=config, resamples=200)
    remote = rk.sweep(
        golden, "rrf", config=config, resamples=200, executor="ray", ray_address=ray_address
    )
    assert [c.options for c in local.configurations] == [c.options for c in remote.configurations]
    assert [c.metrics for c in local.configurations] == [c.metrics for c in remote.configurations]
    assert local.configured.metrics == remote.configured.metrics
    assert local.winner.options == remote.winner.options
    assert local.winner.tuning == remote.winner.tuning
    assert local.winner.confirmation == remote.winner.confirmation
    # Each worker shares the first stages of the configurations it asks, as one process
    # does; a stage asked on another worker is asked again there.
    assert 0 < remote.reused_answers <= local.reused_answers


def test_eval_on_the_command_line_prints_the_local_metrics(
    cli: RunCli, tmp_path: Path, ray_address: str
) -> None:
    _config(tmp_path)
    common = ("eval", "--set", str(DEMO / "golden.jsonl"), "--retriever", "stemmed",
              "--no-save", "--format", "json", "--resamples", "200")  # fmt: skip
    local = cli(*common)
    remote = cli(*common, "--executor", "ray", "--ray-address", ray_address)
    assert local.returncode == 0, local.stderr
    assert remote.returncode == 0, remote.stderr
    import json

    mine, theirs = json.loads(local.stdout), json.loads(remote.stdout)
    assert mine["metrics"] == theirs["metrics"]


def test_compare_and_sweep_on_the_command_line_print_the_local_results(
    cli: RunCli, tmp_path: Path, ray_address: str
) -> None:
    import json

    _config(tmp_path, SWEEP)
    golden = str(DEMO / "golden.jsonl")
    ray_flags = ("--executor", "ray", "--ray-address", ray_address)
    compare = ("compare", "--set", golden, "--retriever", "stemmed", "--retriever", "plain",
               "--no-save", "--format", "json", "--resamples", "200")  # fmt: skip
    sweep = ("sweep", "rrf", "--set", golden, "--format", "json", "--resamples", "200")
    for command in (compare, sweep):
        local, remote = cli(*command), cli(*command, *ray_flags)
        assert local.returncode == 0, local.stderr
        assert remote.returncode == 0, remote.stderr
        mine, theirs = json.loads(local.stdout), json.loads(remote.stdout)
        if command is compare:
            # Everything but the latency ratios, which are timing.
            untimed = [
                [{k: v for k, v in pair.items() if k != "latency"} for pair in pairs]
                for pairs in (mine["pairs"], theirs["pairs"])
            ]
            assert untimed[0] == untimed[1]
            assert all("latency" in pair for pair in mine["pairs"])
        else:
            assert mine["winner"] == theirs["winner"]
            assert [c["metrics"] for c in mine["configurations"]] == [
                c["metrics"] for c in theirs["configurations"]
            ]


SECRET = "s3cr3t-token-4d9e"


class _Leaky:
    """Quotes its credential in its error, as a careless client might."""

    identifier = "leaky"

    def retrieve(self, question: str, limit: int) -> list[str]:
        raise PermissionError(f"denied for key {SECRET}")


def test_a_secret_in_an_error_on_a_worker_never_reaches_the_run(ray_address: str) -> None:
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    golden = rk.load_set(DEMO / "golden.jsonl")
    options = {"api_key": SECRET}
    local = rk.evaluate(golden, _Leaky(), options=options, max_error_rate=None, **FAST)
    remote = rk.evaluate(
        golden, _Leaky(), options=options, max_error_rate=None,
        executor="ray", ray_address=ray_address, **FAST,
    )  # fmt: skip
    _same(local, remote)
    assert all(SECRET not in (o.error or "") for o in remote.outcomes)
    assert SECRET not in repr(remote.record.manifest)
