"""Hold back Ctrl-C while a run is being saved, so a saved run and the message agree.

A KeyboardInterrupt that lands between a store's write and its return would leave the
run saved while the command line reports that nothing was saved (or, in a store
without transactions, half a line). Inside `interrupts_deferred` a SIGINT is only
noted; the caller finishes the save and then says what happened.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import attrs


@attrs.define
class Deferred:
    """Whether a SIGINT arrived while it was held back."""

    received: bool = False


@contextmanager
def interrupts_deferred() -> Iterator[Deferred]:
    """Note SIGINT instead of raising KeyboardInterrupt until the block ends.

    Only Python's own Ctrl-C handler in the main thread is replaced; where SIGINT is
    ignored (``nohup``) or handled by someone else, nothing changes.
    """
    deferred = Deferred()
    main = threading.current_thread() is threading.main_thread()
    if not main or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield deferred  # not ours to change: another thread, or SIGINT ignored or handled
        return

    def note(_signal: int, _frame: FrameType | None) -> None:
        deferred.received = True

    previous = signal.signal(signal.SIGINT, note)
    try:
        yield deferred
    finally:
        signal.signal(signal.SIGINT, previous)
