"""stdout and stderr as retrievalkit leaves them: quiet when the reader goes away, never a secret.

``retrievalkit eval | head`` closes the pipe after one line. The command's outcome was
decided before anything was printed, so the rest of the output is dropped quietly: the
stream is pointed at ``os.devnull`` (at the file-descriptor level too, so the
interpreter's final flush cannot fail either) and the command returns the exit code it
decided. Every write is also scrubbed of the secrets this process has read, the last
line of defence against a plugin that prints its own credentials.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from retrievalkit.redaction import scrub_known


class GuardedStream:
    """A text stream that turns a broken pipe into silence and scrubs known secrets."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.broken = False

    def _drop(self) -> None:
        self.broken = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, self._stream.fileno())
            finally:
                os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass  # not a real file (a test's StringIO): nothing to flush at exit

    def write(self, text: str) -> int:
        if self.broken:
            return len(text)
        try:
            self._stream.write(scrub_known(text))
        except BrokenPipeError:
            self._drop()
        return len(text)

    def flush(self) -> None:
        if self.broken:
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._drop()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guard(stream: TextIO) -> TextIO:
    """``stream`` wrapped once in a `GuardedStream`."""
    if isinstance(stream, GuardedStream):
        return stream
    return GuardedStream(stream)  # type: ignore[return-value]


# --- the ground plugins stand on -------------------------------------------------------

_plugins_running = False
_forked_by_plugin = False


def _after_fork_in_child() -> None:
    global _forked_by_plugin
    if _plugins_running:
        _forked_by_plugin = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def forked_by_plugin() -> bool:
    """Whether this process is a copy a plugin forked while it ran (it must never save)."""
    return _forked_by_plugin


@contextmanager
def plugin_ground() -> Iterator[None]:
    """While plugins run, they cannot move the ground under retrievalkit.

    stdout is retrievalkit's alone: what a plugin prints (through ``print`` or straight
    to file descriptor 1) goes to stderr, so ``--format json`` stays one document. The
    working directory is put back when the block ends, so a plugin's ``chdir`` moves no
    store or output. A process a plugin forked that comes back here stops, exit code 3,
    before it could save a run or print a report.
    """
    global _plugins_running
    import sys

    log = logging.getLogger("retrievalkit")
    try:
        here: int | None = os.open(".", os.O_RDONLY)
        was = os.getcwd()
    except OSError:
        here, was = None, ""
    sys.stdout.flush()
    try:
        kept: int | None = os.dup(1)
        os.dup2(2, 1)
    except OSError:
        kept = None
    stdout, sys.stdout = sys.stdout, sys.stderr
    _plugins_running = True
    try:
        yield
    finally:
        _plugins_running = False
        if _forked_by_plugin:
            sys.stderr.write(
                "retrievalkit: error: a process forked by a plugin came back into "
                "retrievalkit; it stops here without saving (only the process that was "
                "started saves)\n"
            )
            sys.stderr.flush()
            os._exit(3)
        sys.stdout = stdout
        if kept is not None:
            sys.stderr.flush()
            os.dup2(kept, 1)
            os.close(kept)
        if here is not None:
            try:
                if os.getcwd() != was:
                    log.warning("a plugin changed the working directory; it was put back")
            except OSError:
                pass  # the folder it moved to is gone: going back is all the more right
            os.fchdir(here)
            os.close(here)
