"""A two-worker Ray head on 127.0.0.1 for the benchmarks, started and stopped by its process group.

The same start as tests/ray's fixture: no dashboard, fixed agent ports (the raylet then
does not wait on port files a loaded machine writes late), a token of this process, and
three tries, since Ray gives a new node a fixed 30 s to register. The environment is set
before Ray is imported, which reads it then.
"""

from __future__ import annotations

import contextlib
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

RAY_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_AUTH_MODE": "token",
    "RAY_AUTH_TOKEN": secrets.token_hex(32),
    "RAY_USAGE_STATS_ENABLED": "0",
}
# Before anything imports Ray, which reads them then.
os.environ.update(RAY_ENV)


def _free_ports(count: int) -> list[int]:
    held = [socket.socket() for _ in range(count)]
    for each in held:
        each.bind(("127.0.0.1", 0))
    ports = [each.getsockname()[1] for each in held]
    for each in held:
        each.close()
    return ports


def _stop(head: subprocess.Popen[bytes]) -> None:
    for sign in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(head.pid, sign)
        with contextlib.suppress(subprocess.TimeoutExpired):
            head.wait(timeout=20)
            time.sleep(1.0)


@contextlib.contextmanager
def ray_head(cpus: int = 2, attempts: int = 3, wait: float = 240.0) -> Iterator[str]:
    """The address of a running head with ``cpus`` CPUs (one worker each)."""
    os.environ.pop("RAY_ADDRESS", None)
    ray_cli = Path(sys.executable).with_name("ray")
    for attempt in range(attempts):
        temp = tempfile.mkdtemp(prefix="rk-ray-", dir="/tmp")
        gcs, grpc, listen, runtime, metrics = _free_ports(5)
        log = Path(temp) / "start.log"
        with log.open("w") as output:
            head = subprocess.Popen(
                [str(ray_cli), "start", "--head", "--block", "--node-ip-address", "127.0.0.1",
                 "--port", str(gcs), "--num-cpus", str(cpus), "--include-dashboard=false",
                 "--disable-usage-stats", "--dashboard-agent-grpc-port", str(grpc),
                 "--dashboard-agent-listen-port", str(listen),
                 "--runtime-env-agent-port", str(runtime), "--metrics-export-port", str(metrics),
                 "--temp-dir", temp],
                stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + wait
        started = False
        while head.poll() is None and time.monotonic() < deadline:
            if "Ray runtime started" in log.read_text(errors="replace"):
                started = True
                break
            time.sleep(0.5)
        if started:
            try:
                yield f"127.0.0.1:{gcs}"
            finally:
                _stop(head)
                shutil.rmtree(temp, ignore_errors=True)
            return
        text = log.read_text(errors="replace")
        _stop(head)
        shutil.rmtree(temp, ignore_errors=True)
        if attempt == attempts - 1:
            raise RuntimeError(f"the Ray head did not start: {text[-2000:]}")
