"""scripts/elasticsearch.py when a cluster's node cannot start: every node's log tail, all stopped.

The distribution here is a stand-in: its ``bin/elasticsearch`` writes a server log where
``-E path.logs=...`` says, as Elasticsearch does, then exits 1 for the second node only
(the others exit 0, as a daemonized node does, but nothing ever answers on their ports).
What is checked is the launcher's own handling: the failure named with its port, the
failed node's log first, the other nodes' logs too, and a non-zero exit. Real nodes
starting and forming a cluster are what test_cluster.py runs against.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from support import REPO

LAUNCHER = REPO / "scripts" / "elasticsearch.py"
#: Ports no test listens on: the stand-in nodes bind nothing.
FIRST_PORT = 9210
FAKE_ELASTICSEARCH = """#!/bin/sh
logs=""
port=""
for arg in "$@"; do
  case "$arg" in
    path.logs=*) logs="${arg#path.logs=}" ;;
    http.port=*) port="${arg#http.port=}" ;;
  esac
done
echo "[INFO ][o.e.n.Node] [retrievalkit-$port] starting" >> "$logs/retrievalkit-cluster.log"
echo "console: $*"
if [ "$port" = "FAILING" ]; then
  echo "[ERROR][o.e.b.Elasticsearch] [retrievalkit-$port] fatal exception: disk on fire" \\
    >> "$logs/retrievalkit-cluster.log"
  echo "console: node $port died"
  exit 1
fi
exit 0
"""


def load_launcher() -> ModuleType:
    # Not importable as `elasticsearch`: that name is the client's.
    spec = importlib.util.spec_from_file_location("rk_es_launcher", LAUNCHER)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture()
def home() -> Iterator[Path]:
    """A folder the node user can enter (pytest's tmp_path is private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="rk-launcher-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_a_node_that_fails_prints_every_nodes_log_tail_and_stops_the_rest(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    launcher = load_launcher()
    distribution = home / "7.99.0" / "elasticsearch-7.99.0"
    (distribution / "bin").mkdir(parents=True)
    (distribution / "config").mkdir()
    (distribution / "config" / "elasticsearch.yml").write_text("")
    failing = FIRST_PORT + 1
    script = distribution / "bin" / "elasticsearch"
    script.write_text(FAKE_ELASTICSEARCH.replace("FAILING", str(failing)))
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    for folder in [home, *distribution.relative_to(home).parents]:
        (home / folder).chmod(0o755)
    base = home / "cache"
    base.mkdir(mode=0o755)
    jdk = launcher.Jdk(21, Path(sys.executable).parent)
    layout = launcher.layout_for(FIRST_PORT, 3, None)
    assert layout.ports == (FIRST_PORT, FIRST_PORT + 1, FIRST_PORT + 2)
    assert layout.heap == launcher.CLUSTER_HEAP

    version = launcher.start(base, distribution, jdk, layout, timeout=20.0)

    assert version is None
    err = capsys.readouterr().err
    assert f"start-up failed (port {failing}: launcher exit code 1)" in err
    # The failed node's logs come first, then the others'.
    server_logs = [
        line for line in err.splitlines() if line.startswith("--- last") and "cluster.log" in line
    ]
    assert [f"/nodes/{failing}/" in line for line in server_logs] == [True, False, False]
    assert "fatal exception: disk on fire" in err
    assert f"console: node {failing} died" in err
    for port in layout.ports:
        assert f"[retrievalkit-{port}] starting" in err
        assert not launcher.node_pids(base, port)
    # Every node was told about all three, and the cluster's members were recorded.
    seeds = ",".join(f"127.0.0.1:{port + 100}" for port in layout.ports)
    masters = ",".join(f"retrievalkit-{port}" for port in layout.ports)
    for port in layout.ports:
        assert f"-E http.port={port} -E transport.port={port + 100}" in err
    assert err.count(f"discovery.seed_hosts={seeds}") == 3
    assert err.count(f"cluster.initial_master_nodes={masters}") == 3
    assert "discovery.type" not in err
    assert launcher.members(base, FIRST_PORT) == list(layout.ports)


def test_the_command_line_refuses_a_bad_node_count_and_heap() -> None:
    for arguments, message in (
        (["up", "--nodes", "0"], "--nodes must be between 1 and 9"),
        (["up", "--nodes", "10"], "--nodes must be between 1 and 9"),
        (["up", "--heap", "lots"], "expected a size such as 512m or 1g"),
    ):
        done = subprocess.run(
            [sys.executable, str(LAUNCHER), *arguments, "--port", str(FIRST_PORT)],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "RETRIEVALKIT_ES_HOME": tempfile.gettempdir()},
        )
        assert done.returncode == 2, done.stderr
        assert message in done.stderr
