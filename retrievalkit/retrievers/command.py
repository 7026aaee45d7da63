"""The ``command`` retriever: a retriever in any language, as one long-running child process.

retrievalkit starts the ``command`` once and speaks JSON Lines with it: one request per
line on the child's stdin, one response per line on its stdout, matched by ``id``::

    -> {"id": 1, "question": "How do I renew a book?", "limit": 30}
    <- {"id": 1, "hits": ["doc-renewals", "doc-loans#2"]}
    <- {"id": 1, "hits": [{"id": "doc-renewals", "score": 7.1}]}   (also accepted)
    <- {"id": 1, "error": "index not loaded"}                       (that question errors)

With the ``questions`` option a request also carries ``question_id`` and ``meta``.
Responses may come in any order. The child writes its logs to stderr, which is kept:
the last lines go into the message of any error outcome. A child that answers nothing
within ``timeout`` seconds, exits, or writes a line that is not a response is stopped
(its whole process group, first politely, then with SIGKILL) and always waited for; the
question(s) it held get error outcomes naming the cause, and the next question starts
a fresh child, at most ``restarts`` times in a run. At the end of the run stdin is
closed, which is the child's cue to exit.
"""

from __future__ import annotations

import collections
import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from retrievalkit.errors import EvaluationError, InputError
from retrievalkit.redaction import is_secret_option, remember, scrub
from retrievalkit.retrievers.contract import document_id_of
from retrievalkit.retrievers.templates import QuestionLookup, context_for, question_lookup

_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_STDERR_LINES = 20
_GRACE_SECONDS = 2.0
_BLOCK = 1 << 16
#: The longest stderr line kept whole; a longer one keeps its end.
_STDERR_LINE = 2000


class ChildError(EvaluationError):
    """The child process failed a request; the message says how and quotes its stderr."""


class _Slot:
    """Where the reader thread leaves the answer to one request."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.response: dict[str, Any] | None = None
        self.failure: str | None = None


class _Child:
    """One running child: its pipes, the reader threads and the requests in flight."""

    def __init__(self, argv: list[str], cwd: str | None, secrets: list[str]) -> None:
        self._secrets = secrets
        self.process = subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            # Buffered pipes: lines are read a block at a time, not a byte per system call.
            bufsize=_BLOCK,
            # Its own process group, so stopping it also stops what it started (npm -> node).
            start_new_session=sys.platform != "win32",
        )
        self.stderr: collections.deque[str] = collections.deque(maxlen=_STDERR_LINES)
        self.pending: dict[int, _Slot] = {}
        self.lock = threading.Lock()
        self.closing = False
        #: Why the child can take no more requests, once it cannot.
        self.failed: str | None = None
        self._threads = [
            threading.Thread(target=self._read_stdout, name="retrievalkit-child-out", daemon=True),
            threading.Thread(target=self._read_stderr, name="retrievalkit-child-err", daemon=True),
            threading.Thread(target=self._watch, name="retrievalkit-child-exit", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def alive(self) -> bool:
        return self.process.poll() is None and not self.closing and self.failed is None

    def register(self, request_id: int, slot: _Slot) -> None:
        """Wait for the answer to ``request_id``; fails at once if the child is gone."""
        with self.lock:
            if self.failed is not None:
                slot.failure = self.failed
                slot.done.set()
            else:
                self.pending[request_id] = slot

    def stderr_tail(self) -> str:
        lines = [line for line in list(self.stderr) if line.strip()]
        if not lines:
            return ""
        return scrub(" | ".join(lines[-5:])[-600:], self._secrets)

    def send(self, line: bytes) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(line)
        stdin.flush()

    def fail_all(self, reason: str) -> None:
        with self.lock:
            self.failed = self.failed or reason
            slots, self.pending = list(self.pending.values()), {}
        for slot in slots:
            slot.failure = reason
            slot.done.set()

    def _read_stdout(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        try:
            for raw in stdout:
                problem = self._deliver(raw)
                if problem is not None:
                    self.stop()
                    self.fail_all(problem)
                    return
        except (OSError, ValueError):
            pass  # the pipe was closed under us: the child is being stopped
        # End of output: the child exited (or closed stdout). Reap it, then say why.
        self._join_stderr()
        code = self.process.wait()
        if not self.closing:
            tail = self.stderr_tail()
            self.fail_all(
                f"the child exited with {_exit_text(code)}"
                + (f"; stderr: {tail}" if tail else "; it wrote nothing to stderr")
            )

    def _watch(self) -> None:
        """When the child exits on its own (a crash), stop what it left in its process
        group: a grandchild that inherited its stdout would otherwise hold the pipe open,
        so the crash would be noticed only when the request timed out."""
        self.process.wait()
        if not self.closing:
            _stop_group_remains(self.process.pid)

    def _deliver(self, raw: bytes) -> str | None:
        """Hand one stdout line to its request; the reason to stop the child if it is bad."""
        undecodable: UnicodeDecodeError | None = None
        try:
            text = raw.decode("utf-8").strip()
        except UnicodeDecodeError as error:
            # Never U+FFFD in an id: the response errors, naming the bytes.
            undecodable = error
            text = raw.decode("utf-8", "replace").strip()
        if not text:
            return None
        try:
            response = json.loads(text)
        except json.JSONDecodeError:
            response = None
        if not isinstance(response, dict) or "id" not in response:
            return (
                f"the child wrote a line that is not a JSON response with an id: {text[:120]!r} "
                "(write logs to stderr, not stdout)"
            )
        with self.lock:
            slot = self.pending.pop(response["id"], None) if _hashable(response["id"]) else None
        if slot is None:
            return f"the child answered id {response['id']!r}, which no request in flight has"
        if undecodable is not None:
            bad = raw[undecodable.start : undecodable.end]
            slot.failure = (
                f"the child's response is not UTF-8: bytes {bad!r} at byte "
                f"{undecodable.start} of its line"
            )
        slot.response = response
        slot.done.set()
        return None

    def _read_stderr(self) -> None:
        """Keep the last lines of the child's stderr, reading it a block at a time.

        A child that logs tens of megabytes is drained as fast as it writes, and a line
        of any length costs at most `_STDERR_LINE` bytes of memory.
        """
        stderr = self.process.stderr
        assert stderr is not None
        partial = b""
        try:
            while block := stderr.read1(_BLOCK):  # type: ignore[attr-defined]
                *lines, partial = (partial + block).split(b"\n")
                for raw in lines[-_STDERR_LINES:]:
                    self.stderr.append(_shown(raw))
                partial = partial[-_STDERR_LINE:]
        except (OSError, ValueError):
            pass  # the pipe was closed under us: the child is being stopped
        if partial:
            self.stderr.append(_shown(partial))

    def _join_stderr(self) -> None:
        self._threads[1].join(timeout=_GRACE_SECONDS)

    def stop(self) -> None:
        """Stop the child and wait for it: close stdin, then SIGTERM, then SIGKILL."""
        self.closing = True
        process = self.process
        try:
            if process.stdin is not None:
                process.stdin.close()
        except OSError:
            pass
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None:
                _signal_group(process, sig)
            try:
                process.wait(timeout=_GRACE_SECONDS)
                break
            except subprocess.TimeoutExpired:
                continue
        _stop_group_remains(process.pid)
        # The readers see the end of the pipes once the process group is gone.
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=_GRACE_SECONDS)
        for pipe in (process.stdout, process.stderr):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass


def _shown(raw: bytes) -> str:
    """A stderr line as kept for messages: its end, invalid UTF-8 shown as escapes."""
    return raw[-_STDERR_LINE:].decode("utf-8", "backslashreplace").rstrip()


def _hashable(value: Any) -> bool:
    return isinstance(value, (int, str)) and not isinstance(value, bool)


def _signal_group(process: subprocess.Popen[bytes], sig: int) -> None:
    try:
        if sys.platform != "win32":
            os.killpg(process.pid, sig)
        else:  # pragma: no cover - Windows has no process groups of this kind
            process.kill()
    except (ProcessLookupError, PermissionError):
        pass


def _stop_group_remains(group: int) -> None:
    """Stop what the child started and left behind in its process group (npm -> node)."""
    if sys.platform == "win32":  # pragma: no cover - no process groups of this kind
        return
    import time

    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(group, sig)
        except (ProcessLookupError, PermissionError):
            return  # the group is empty: nothing was left behind
        deadline = time.monotonic() + _GRACE_SECONDS
        while time.monotonic() < deadline:
            try:
                os.killpg(group, 0)
            except (ProcessLookupError, PermissionError):
                return
            time.sleep(0.02)


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"code {code}"


def _stop_quietly(holder: list[_Child | None]) -> None:
    child = holder[0]
    if child is not None:
        child.stop()


class CommandRetriever:
    """Sends each question to the child process and reads its ranked ids back."""

    #: Present only with ``scored = true`` (the child sends scores, fusion may use them).
    retrieve_scored: Callable[[str, int], list[tuple[str, float]]]

    def __init__(
        self,
        argv: list[str],
        *,
        shown: list[str],
        cwd: str | None,
        timeout: float,
        restarts: int,
        scored: bool,
        doc_id_separator: str | None,
        lookup: QuestionLookup | None,
        secrets: list[str],
        identifier: str = "command",
    ) -> None:
        self.identifier = identifier
        self._argv = argv
        self._shown = shown
        self._cwd = cwd
        self._timeout = timeout
        self._restarts = restarts
        self._separator = doc_id_separator
        self._lookup = lookup
        self._secrets = secrets
        self._lock = threading.Lock()
        self._next_id = 0
        self._starts = 0
        self._last_exit = ""
        # A list, so the finalizer (run at exit at the latest) sees the current child.
        self._holder: list[_Child | None] = [None]
        self._finalizer = weakref.finalize(self, _stop_quietly, self._holder)
        self._start()
        if scored:
            self.retrieve_scored = self._retrieve_scored

    def describe(self) -> dict[str, str]:
        """The command as run, with ``${VARIABLE}`` references in place of their values."""
        return {"command": shlex.join(self._shown)}

    def close(self) -> None:
        """Close the child's stdin and wait for it to exit (stopping it if it does not)."""
        self._finalizer()

    def _start(self) -> _Child:
        try:
            child = _Child(self._argv, self._cwd, self._secrets)
        except FileNotFoundError:
            raise InputError(
                f"no such program: {self._shown[0]!r}",
                field="command",
                hint="give the full path, or a program on PATH such as node or go",
            ) from None
        except PermissionError:
            raise InputError(
                f"cannot run {self._shown[0]!r}: permission denied",
                field="command",
                hint="make it executable (chmod +x) or run it through its interpreter",
            ) from None
        self._starts += 1
        self._holder[0] = child
        return child

    def _child(self) -> _Child:
        """The running child, restarted if it died and restarts remain."""
        with self._lock:
            child = self._holder[0]
            if child is not None and child.alive():
                return child
            if child is not None:
                if child.failed is not None:
                    self._last_exit = "last: " + child.failed.partition(";")[0]
                child.stop()
            if self._starts > self._restarts:
                raise ChildError(
                    f"the child has stopped {self._starts} times ({self._last_exit}); "
                    f"it is not restarted again (restarts = {self._restarts})"
                )
            return self._start()

    def retrieve(self, question: str, limit: int) -> list[str]:
        return [doc_id for doc_id, _ in self._ask(question, limit)]

    def _retrieve_scored(self, question: str, limit: int) -> list[tuple[str, float]]:
        pairs = self._ask(question, limit)
        if any(score is None for _, score in pairs):
            raise ChildError("scored = true, but the child sent hits without a score")
        return [(doc_id, float(score or 0.0)) for doc_id, score in pairs]

    def _ask(self, question: str, limit: int) -> list[tuple[str, float | None]]:
        if limit <= 0:
            return []
        context = context_for(self._lookup, question, limit)
        child = self._child()
        slot = _Slot()
        with self._lock:
            self._next_id += 1
            request_id = self._next_id
        child.register(request_id, slot)
        request: dict[str, Any] = {"id": request_id, "question": question, "limit": limit}
        if context.question_id is not None:
            request["question_id"] = context.question_id
            request["meta"] = dict(context.meta)
        line = json.dumps(request, ensure_ascii=False).encode("utf-8") + b"\n"
        try:
            if not slot.done.is_set():
                with self._lock:
                    child.send(line)
        except (OSError, ValueError):
            # It died before reading the request: the reader thread reports how.
            slot.done.wait(self._timeout)
            if slot.failure is None:
                slot.failure = "the child closed its stdin"
        else:
            if not slot.done.wait(self._timeout):
                tail = child.stderr_tail()
                reason = (
                    f"the child gave no answer to request {request_id} within "
                    f"{self._timeout:g} s, so it was stopped"
                    + (f"; stderr: {tail}" if tail else "")
                )
                child.stop()
                child.fail_all(f"stopped with request {request_id}, which hung")
                self._last_exit = "last: no answer in time"
                raise ChildError(reason)
        if slot.failure is not None:
            self._last_exit = "last: " + slot.failure.partition(";")[0]
            raise ChildError(scrub(slot.failure, self._secrets))
        assert slot.response is not None
        return self._hits_of(slot.response, limit, child)

    def _hits_of(
        self, response: Mapping[str, Any], limit: int, child: _Child
    ) -> list[tuple[str, float | None]]:
        if "error" in response:
            tail = child.stderr_tail()
            raise ChildError(
                f"the child answered an error: {' '.join(str(response['error']).split())[:300]}"
                + (f"; stderr: {tail}" if tail else "")
            )
        hits = response.get("hits")
        if not isinstance(hits, list):
            raise ChildError(
                f"the child's response has no list 'hits' (keys: {', '.join(sorted(response))})"
            )
        found: list[tuple[str, float | None]] = []
        for rank, hit in enumerate(hits[:limit], start=1):
            score: float | None = None
            if isinstance(hit, Mapping):
                doc_id, value = hit.get("id"), hit.get("score")
                if value is not None:
                    if isinstance(value, bool) or not isinstance(value, (int, float)):
                        raise ChildError(f"hit {rank} has a non-numeric score {value!r}")
                    score = float(value)
                    if not math.isfinite(score):
                        raise ChildError(f"hit {rank} has the score {value!r}")
            else:
                doc_id = hit
            if isinstance(doc_id, bool) or not isinstance(doc_id, (str, int)):
                raise ChildError(
                    f"hit {rank} is {doc_id!r}; a hit is an id string or "
                    '{"id": ..., "score": ...}'
                )
            found.append((document_id_of(str(doc_id), self._separator), score))
        return found


def _argv(command: Any) -> list[str]:
    if isinstance(command, str):
        try:
            argv = shlex.split(command)
        except ValueError as error:
            raise InputError(f"cannot split the command line: {error}", field="command") from None
    elif isinstance(command, Sequence) and all(isinstance(part, str) for part in command):
        argv = list(command)
    else:
        argv = []
    if not argv:
        raise InputError(
            "needs the program to start and its arguments",
            field="command",
            hint='e.g. command = ["node", "search.js", "--index", "kb"]',
        )
    return argv


def _refuse_literal_secrets(argv: list[str]) -> None:
    """A secret written into the command would be recorded: it must come from ${VARIABLE}."""
    for index, part in enumerate(argv):
        flag, equals, value = part.partition("=")
        name = flag.lstrip("-")
        if not flag.startswith("-") or not is_secret_option(name.replace("-", "_")):
            continue
        if name.endswith(("file", "path")):
            continue  # --token-file PATH names where a secret is, not the secret
        literal = value if equals else (argv[index + 1] if index + 1 < len(argv) else "")
        if literal and not _ENV_REFERENCE.fullmatch(literal):
            raise InputError(
                f"the argument {flag} carries a secret, which would be recorded with the run",
                field="command",
                hint=f'write "{flag}{"=" if equals else " "}${{VARIABLE}}" and export VARIABLE: '
                "references are expanded when the child starts and recorded as written",
            )


def _expand(argv: list[str]) -> tuple[list[str], list[str]]:
    """``${NAME}`` references replaced by the environment, and the values that came in."""
    values: list[str] = []

    def value_of(match: re.Match[str]) -> str:
        name = match[1]
        if name not in os.environ:
            raise InputError(
                f"the command refers to ${{{name}}}, which is not set",
                field="command",
                hint=f"export {name}=... before running retrievalkit",
            )
        values.append(os.environ[name])
        return os.environ[name]

    expanded = [_ENV_REFERENCE.sub(value_of, part) for part in argv]
    return expanded, sorted({value for value in values if value}, key=lambda v: (-len(v), v))


def create_command(
    command: str | Sequence[str] | None = None,
    *,
    cwd: str | None = None,
    timeout: float = 30.0,
    restarts: int = 2,
    scored: bool = False,
    doc_id_separator: str | None = None,
    questions: str | None = None,
) -> CommandRetriever:
    """Factory of the ``command`` plugin: a child process speaking JSON Lines.

    Options: ``command`` (a list, or one string split as a shell would; ``${VARIABLE}``
    is replaced by that environment variable when the child starts, and recorded as
    written), ``cwd``, ``timeout`` (seconds one question may take, 30), ``restarts``
    (how often a dead or hung child is started again in one run, 2), ``scored`` (the
    child sends scores, so score fusion may use them), ``doc_id_separator``, and
    ``questions`` (the set that request ids and meta fields come from).
    """
    argv = _argv(command)
    _refuse_literal_secrets(argv)
    for name, value, whole, minimum in (
        ("timeout", timeout, False, 0.001),
        ("restarts", restarts, True, 0),
    ):
        kinds: tuple[type, ...] = (int,) if whole else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds) or value < minimum:
            raise InputError(f"must be a number >= {minimum:g}, got {value!r}", field=name)
    if cwd is not None and not os.path.isdir(cwd):
        raise InputError(f"no such folder: {cwd!r}", field="cwd")
    expanded, secrets = _expand(argv)
    remember(secrets)
    lookup = question_lookup(questions, (), "command")
    return CommandRetriever(
        expanded,
        shown=argv,
        cwd=cwd,
        timeout=float(timeout),
        restarts=restarts,
        scored=bool(scored),
        doc_id_separator=doc_id_separator,
        lookup=lookup,
        secrets=secrets,
    )
