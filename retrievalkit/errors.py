"""The errors retrievalkit raises on purpose, each tied to an exit code of the command line."""

from __future__ import annotations

from typing import Any

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_USAGE = 2
EXIT_EVALUATION_FAILED = 3
#: Stopped by Ctrl-C (128 + SIGINT, as a shell reports it); nothing half-done is kept.
EXIT_INTERRUPTED = 130


def one_line(text: str) -> str:
    """``text`` with line breaks and other unprintable characters shown as escapes.

    An error message is one line on stderr, even when it quotes a field name or a value
    from the input that holds a newline.
    """
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


class RetrievalkitError(Exception):
    """Base class: a message a person can act on, and the exit code it maps to."""

    exit_code = EXIT_USAGE


class InputError(RetrievalkitError):
    """Bad usage, configuration or input. Names the file, line and field where it can."""

    exit_code = EXIT_USAGE

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        line: int | None = None,
        field: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.source = source
        self.line = line
        self.field = field
        self.hint = hint
        self.detail = message
        super().__init__(self._render())

    def _render(self) -> str:
        where = ""
        if self.source is not None:
            where = self.source
            if self.line is not None:
                where += f", line {self.line}"
        if self.field is not None:
            where += (", " if where else "") + f"field '{self.field}'"
        text = f"{where}: {self.detail}" if where else self.detail
        if self.hint:
            text += f" ({self.hint})"
        return one_line(text)


class ArgumentError(InputError, TypeError):
    """An argument of the Python API of the wrong kind (``evaluate(set=None)``): an
    `InputError` naming the argument in ``field``, and a `TypeError` for code that catches
    those (`retrievalkit.api_arguments`)."""


class PluginError(RetrievalkitError):
    """A plugin is unknown, ambiguous or broken."""

    exit_code = EXIT_USAGE


class EvaluationError(RetrievalkitError):
    """The evaluation could not be carried out: retriever unreachable, error rate over the limit."""

    exit_code = EXIT_EVALUATION_FAILED


class StoreError(RetrievalkitError):
    """A result store could not be opened, read or written."""

    exit_code = EXIT_USAGE


class StoreBusyError(StoreError):
    """A store could not be written now (locked past the timeout, disk full): exit code 3.

    The input was fine; the run could not be carried through to the store. It is a
    `StoreError`, so ``except StoreError`` catches every store failure.
    """

    exit_code = EXIT_EVALUATION_FAILED


class RunFailed(EvaluationError):
    """More questions errored than ``max_error_rate`` allows; ``run`` holds the failed run
    (a `retrievalkit.Run`, for its report). A failed run must never be saved or become a
    baseline. ``run`` is typed loosely so that this module, which every other one imports,
    imports none of them."""

    def __init__(self, message: str, run: Any) -> None:
        super().__init__(message)
        self.run = run
