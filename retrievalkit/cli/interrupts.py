"""Stop signals as retrievalkit handles them: SIGINT, SIGTERM and SIGHUP end a run alike.

CI systems cancel a job with SIGTERM (and a closed terminal sends SIGHUP); Python's
default for both is to die at once, leaving the ``command`` retriever's children
running in their own process groups. While `stop_signals_handled` is active each of
the three raises `Interrupted` in the main thread instead, so the run unwinds as it does
for Ctrl-C: children are stopped, nothing half-done is saved, and the exit code is
128 + the signal's number. A ``KeyboardInterrupt`` that no signal caused (raised by a
plugin) is told apart by `signal_received`.

A signal that lands between a store's write and its return would leave the run saved
while the command line reports that nothing was saved. Inside `interrupts_deferred`
the stop signals are only noted; the caller finishes the save and then says what
happened.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

#: The signals that stop a run: Ctrl-C, a CI system's cancel, a closed terminal.
STOP_SIGNALS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)

_received: list[int] = []
#: What the running command has done that outlives it (a run saved, runs pruned), in
#: the words of the message that reports it; see `note_kept`.
_kept: list[str] = []
#: What is said when nothing was kept: what the running command would have changed.
_untouched: list[str] = ["nothing was saved"]


class Interrupted(KeyboardInterrupt):
    """Raised in the main thread by a stop signal while `stop_signals_handled` is active."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def signal_received() -> int | None:
    """The first stop signal this process received while its handlers were ours, or None."""
    return _received[0] if _received else None


def note_kept(text: str) -> None:
    """Record something this command made last (``run X was saved whole to URL``).

    Whatever ends the command afterwards (a signal, an error) says this instead of
    "nothing was saved": the message must state what is in the store.
    """
    _kept.append(text)


def note_saved(run_id: str, url: str) -> None:
    """`note_kept` for a run saved whole."""
    note_kept(f"run {run_id} was saved whole to {url}")


def kept() -> str | None:
    """What this command has kept so far (`note_kept`), as one clause, or None."""
    return "; ".join(_kept) if _kept else None


def forget_kept() -> None:
    """A new command starts: nothing is kept yet, and no stop signal has come."""
    _kept.clear()
    _received.clear()
    _untouched[:] = ["nothing was saved"]


def say_untouched(text: str) -> None:
    """What to say when the command ends before it kept anything ("nothing was deleted")."""
    _untouched[:] = [text]


def untouched() -> str:
    """What is said when nothing was kept: "nothing was saved", unless said otherwise."""
    return _untouched[0]


def handle_for_process() -> None:
    """Make the stop signals raise `Interrupted` from now on, for a process that is
    retrievalkit's command line (installed before anything else is imported, so that a
    signal during start-up is handled as at any other moment)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in STOP_SIGNALS:
        if _is_default(sig, signal.getsignal(sig)):
            signal.signal(sig, _raise)


def hold_for_exit() -> None:
    """Ignore the stop signals from now on: the command has decided its exit code and said
    what it kept, so a signal now changes neither (it is dropped, as one arriving a moment
    later, once the process is gone, would be).

    Ignored, not handled: Python's shutdown puts every signal it handles back to the
    system's default (which ends the process, with no exit code of retrievalkit's) while
    it still has modules to free, but leaves an ignored one ignored.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in STOP_SIGNALS:
        if _ours(sig, signal.getsignal(sig)):
            signal.signal(sig, signal.SIG_IGN)


def watching_interrupts() -> bool:
    """Whether SIGINT raises through this module now, so that a ``KeyboardInterrupt``
    without `signal_received` can only have been raised by code, not by Ctrl-C."""
    if threading.current_thread() is not threading.main_thread():
        return False
    return signal.getsignal(signal.SIGINT) is _raise


def exit_code_for(signum: int) -> int:
    """What a shell reports for a process ended by ``signum``: 128 + its number."""
    return 128 + int(signum)


def _raise(signum: int, _frame: FrameType | None) -> None:
    _received.append(signum)
    raise Interrupted(signum)


def _is_default(sig: signal.Signals, handler: Any) -> bool:
    """Whether ``handler`` is what Python installs for ``sig`` (nobody else chose one)."""
    if sig == signal.SIGINT:
        return handler is signal.default_int_handler
    return bool(handler == signal.SIG_DFL)


def _ours(sig: signal.Signals, handler: Any) -> bool:
    return handler is _raise or _is_default(sig, handler)


@contextmanager
def stop_signals_handled() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP raise `Interrupted` until the block ends.

    Only handlers nobody else chose are replaced, and only in the main thread: where a
    signal is ignored (``nohup``) or handled by the embedding program, nothing changes.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[signal.Signals, Any] = {}
    for sig in STOP_SIGNALS:
        handler = signal.getsignal(sig)
        if _is_default(sig, handler):
            previous[sig] = signal.signal(sig, _raise)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class Deferred:
    """Whether a stop signal arrived while it was held back, and which one.

    A plain class: this module is imported by every command, ``--help`` included, and
    attrs would cost that start-up 70 ms.
    """

    __slots__ = ("received", "signum")

    def __init__(self, received: bool = False, signum: int = int(signal.SIGINT)) -> None:
        self.received = received
        self.signum = signum


@contextmanager
def interrupts_deferred() -> Iterator[Deferred]:
    """Note the stop signals instead of raising until the block ends.

    Only Python's default handlers and those of `stop_signals_handled` are replaced, in
    the main thread; where a signal is ignored or handled by someone else, nothing changes.
    """
    deferred = Deferred()
    if threading.current_thread() is not threading.main_thread():
        yield deferred
        return

    def note(signum: int, _frame: FrameType | None) -> None:
        if not deferred.received:
            deferred.signum = signum
        deferred.received = True
        _received.append(signum)

    previous: dict[signal.Signals, Callable[..., Any] | int | None] = {}
    for sig in STOP_SIGNALS:
        handler = signal.getsignal(sig)
        if _ours(sig, handler):
            previous[sig] = signal.signal(sig, note)
    try:
        yield deferred
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
