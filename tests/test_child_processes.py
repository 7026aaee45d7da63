"""Children and services: stopped by every stop signal, bounded in time, read as they write.

A ``command`` child (and what it starts in its process group) is stopped when
retrievalkit gets SIGTERM or SIGHUP exactly as for SIGINT; the ``http`` retriever's
``timeout`` bounds a whole request against a real loopback server that drips its answer;
a child's stderr is drained a block at a time; bytes that are not UTF-8 in a child's
answer are an error outcome, never U+FFFD in an id. Cases are seeded.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import random
import signal
import socketserver
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from child_env import child_environment
from process_tree import descendants, still_running

from retrievalkit.retrievers.command import ChildError, create_command
from retrievalkit.retrievers.http_service import create_http

# A child that starts a grandchild in its own process group, says both pids, then
# answers nothing: it hangs on each request. ``ignore`` makes both ignore SIGTERM.
FAMILY = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time
    ignore = sys.argv[2] == "ignore"
    if ignore:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    grandchild = subprocess.Popen(
        [sys.executable, "-c",
         "import signal, sys, time\\n"
         + ("signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n" if ignore else "")
         + "sys.stdin.close()\\n"
         + "while True: time.sleep(1)"],
        stdin=subprocess.DEVNULL,
    )
    with open(sys.argv[1], "w") as pids:
        pids.write(f"{os.getpid()} {grandchild.pid}")
    for line in sys.stdin:
        time.sleep(3600)
    """
)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # a zombie waiting for its parent to reap it has stopped running
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _wait_until(condition: object, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return bool(condition())  # type: ignore[operator]


SIGNAL_CASES = [
    (sig, behaviour)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
    for behaviour in ("polite", "ignore")
]


@pytest.mark.parametrize(
    ("sig", "behaviour"), SIGNAL_CASES, ids=[f"{s.name}-{b}" for s, b in SIGNAL_CASES]
)
def test_a_stop_signal_stops_the_child_and_its_process_group(
    sig: signal.Signals, behaviour: str, tmp_path: Path
) -> None:
    (tmp_path / "family.py").write_text(FAMILY, encoding="utf-8")
    (tmp_path / "golden.jsonl").write_text(
        '{"id": "q1", "question": "anything", "expected": ["d1"]}\n', encoding="utf-8"
    )
    pids_file = tmp_path / "pids.txt"
    command = [sys.executable, str(tmp_path / "family.py"), str(pids_file), behaviour]
    (tmp_path / "retrievalkit.toml").write_text(
        f'[retrievers.child]\nplugin = "command"\ncommand = {json.dumps(command)}\ntimeout = 600\n',
        encoding="utf-8",
    )
    env = child_environment()
    run = subprocess.Popen(
        [sys.executable, "-m", "retrievalkit", "eval", "--set", "golden.jsonl",
         "--retriever", "child", "--store", "sqlite:///runs.sqlite3", "--quiet"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert _wait_until(lambda: pids_file.exists() and pids_file.read_text().strip(), 60)
        time.sleep(0.3)  # the request is on its way; the child hangs on it
        child, grandchild = (int(pid) for pid in pids_file.read_text().split())
        tree = descendants(run.pid)
        assert {child, grandchild} <= tree
        run.send_signal(sig)
        _, err = run.communicate(timeout=60)
        assert run.returncode == 128 + sig, err
        assert "interrupted; nothing was saved" in err and "Traceback" not in err
        assert _wait_until(lambda: _gone(child) and _gone(grandchild), 10), (child, grandchild)
        assert not still_running(tree, 10), "descendants left running after the signal"
        assert not (tmp_path / "runs.sqlite3").exists() or _runs(tmp_path / "runs.sqlite3") == 0
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        if pids_file.exists() and pids_file.read_text().strip():
            for pid in pids_file.read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)


def _runs(path: Path) -> int:
    import sqlite3

    with sqlite3.connect(path) as connection:
        names = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        if "runs" not in names:
            return 0
        return int(connection.execute("SELECT count(*) FROM runs").fetchone()[0])


def test_what_a_child_leaves_in_its_group_is_stopped_at_the_end(tmp_path: Path) -> None:
    """A child that exits when its stdin closes, leaving a grandchild: both are gone."""
    script = tmp_path / "leaver.py"
    script.write_text(
        textwrap.dedent(
            """
            import json, subprocess, sys
            grandchild = subprocess.Popen(
                [sys.executable, "-c", "import time\\nwhile True: time.sleep(1)"],
                stdin=subprocess.DEVNULL,
            )
            for line in sys.stdin:
                request = json.loads(line)
                print(json.dumps({"id": request["id"], "hits": [str(grandchild.pid)]}),
                      flush=True)
            """
        ),
        encoding="utf-8",
    )
    before = descendants(os.getpid())
    retriever = create_command([sys.executable, str(script)], timeout=30)
    [grandchild] = retriever.retrieve("which pid", 5)
    tree = descendants(os.getpid()) - before
    assert int(grandchild) in tree
    retriever.close()
    assert _wait_until(lambda: _gone(int(grandchild)), 10)
    assert not still_running(tree, 10), "descendants left running after close()"


# A child that starts a grandchild, answers each request with the grandchild's pid, and
# crashes (exit code 3, no clean-up) on the request for "crash".
CRASHER = textwrap.dedent(
    """
    import json, os, subprocess, sys
    grandchild = subprocess.Popen(
        [sys.executable, "-c", "import time\\nwhile True: time.sleep(1)"],
        stdin=subprocess.DEVNULL,
    )
    for line in sys.stdin:
        request = json.loads(line)
        if request["question"] == "crash":
            os._exit(3)
        print(json.dumps({"id": request["id"], "hits": [str(grandchild.pid)]}), flush=True)
    """
)


def test_a_crashed_child_leaves_nothing_running(tmp_path: Path) -> None:
    """The child crashes mid-run: what it started is stopped with it, the next question
    gets a new child, and after close() no descendant of either is left."""
    script = tmp_path / "crasher.py"
    script.write_text(CRASHER, encoding="utf-8")
    before = descendants(os.getpid())
    retriever = create_command([sys.executable, str(script)], timeout=30)
    [first] = retriever.retrieve("which pid", 5)
    tree = descendants(os.getpid()) - before
    assert int(first) in tree
    with pytest.raises(ChildError, match="exited with code 3"):
        retriever.retrieve("crash", 5)
    assert not still_running(tree, 10), "the crashed child's processes are left running"
    [second] = retriever.retrieve("which pid again", 5)
    assert second != first
    tree |= descendants(os.getpid()) - before
    retriever.close()
    assert not still_running(tree, 10), "descendants left running after close()"


# --- the http retriever's timeout bounds a whole request --------------------------------


class _Drip(http.server.BaseHTTPRequestHandler):
    """Announces a JSON answer, then sends it one byte every ``gap`` seconds."""

    gap = 0.3

    def do_GET(self) -> None:
        body = b'{"hits": [' + b" " * 60 + b"]}"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            for byte in body:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(self.gap)
        except OSError:
            pass  # the client gave up, as it should

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def drip_server() -> Iterator[tuple[str, type[_Drip]]]:
    handler = type("Drip", (_Drip,), {})
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/search?q={{question}}", handler
    finally:
        server.shutdown()
        server.server_close()


_DRIP = random.Random(11)
#: (timeout, seconds between bytes): every byte in time, the whole answer never.
DRIP_CASES = [
    (round(_DRIP.uniform(0.5, 1.0), 2), round(_DRIP.uniform(0.1, 0.4), 2)) for _ in "abcd"
]


@pytest.mark.parametrize(("timeout", "gap"), DRIP_CASES)
def test_the_http_timeout_bounds_the_whole_request(
    timeout: float, gap: float, drip_server: tuple[str, type[_Drip]]
) -> None:
    url, handler = drip_server
    handler.gap = gap  # each byte well within the timeout; the whole answer far beyond it
    retriever = create_http(url=url, hits="hits", timeout=timeout, retries=0)
    began = time.monotonic()
    with pytest.raises(Exception, match=rf"no answer within {timeout:g} s"):
        retriever.retrieve("anything", 5)
    # The drip takes 60 * gap s (6 to 24 s); the request must end near its timeout.
    assert time.monotonic() - began < timeout + 2.0


# --- the child's stderr and stdout ---------------------------------------------------------

LOGGER = textwrap.dedent(
    """
    import json, sys
    size, newlines = int(sys.argv[1]), sys.argv[2] == "lines"
    chunk = (b"log line of a chatty child\\n" if newlines else b"x") * 4096
    for line in sys.stdin:
        request = json.loads(line)
        written = 0
        while written < size:
            sys.stderr.buffer.write(chunk)
            written += len(chunk)
        sys.stderr.buffer.write(b"\\nthe last line\\n")
        sys.stderr.flush()
        print(json.dumps({"id": request["id"], "hits": ["d1"]}), flush=True)
    """
)


@pytest.mark.parametrize("shape", ["lines", "one-line"])
def test_forty_megabytes_of_stderr_are_drained_not_a_hang(shape: str, tmp_path: Path) -> None:
    script = tmp_path / "logger.py"
    script.write_text(LOGGER, encoding="utf-8")
    # Read a byte per system call, 40 MB take minutes; read by blocks, well under a second.
    retriever = create_command(
        [sys.executable, str(script), str(40 * 1024 * 1024), shape], timeout=20
    )
    try:
        assert retriever.retrieve("log a lot", 5) == ["d1"]
    finally:
        retriever.close()


INVALID_UTF8 = (b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xe2\x82", b"\x80", b"\xf8\x88\x80\x80")


def _invalid_cases() -> list[bytes]:
    rng = random.Random(5)
    heads, tails = (b"doc-", b"", "é".encode()), (b"", b"-7")
    return [rng.choice(heads) + rng.choice(INVALID_UTF8) + rng.choice(tails) for _ in range(10)]


@pytest.mark.parametrize("doc_id", _invalid_cases())
def test_an_answer_that_is_not_utf8_is_an_error_outcome(doc_id: bytes, tmp_path: Path) -> None:
    script = tmp_path / "bytes.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import json, sys
            for line in sys.stdin:
                request = json.loads(line)
                head = json.dumps({{"id": request["id"], "hits": ["ok", "X"]}}).encode()
                sys.stdout.buffer.write(head.replace(b'"X"', b'"' + {doc_id!r} + b'"') + b"\\n")
                sys.stdout.flush()
            """
        ),
        encoding="utf-8",
    )
    retriever = create_command([sys.executable, str(script)], timeout=20)
    try:
        with pytest.raises(ChildError, match="not UTF-8"):
            retriever.retrieve("first", 5)
        with pytest.raises(ChildError, match="not UTF-8"):
            retriever.retrieve("second: the child keeps answering", 5)
    finally:
        retriever.close()
