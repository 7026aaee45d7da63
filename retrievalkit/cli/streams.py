"""stdout and stderr as retrievalkit leaves them: quiet when the reader goes away, never a secret.

``retrievalkit eval | head`` closes the pipe after one line. The command's outcome was
decided before anything was printed, so the rest of the output is dropped quietly: the
stream is pointed at ``os.devnull`` (at the file-descriptor level too, so the
interpreter's final flush cannot fail either) and the command returns the exit code it
decided. Every write is also scrubbed of the secrets this process has read, the last
line of defence against a plugin that prints its own credentials.
"""

from __future__ import annotations

import os
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
