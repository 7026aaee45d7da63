"""Stop signals delivered to a process under test (`deliver_stop_signals`)."""

from __future__ import annotations


def deliver_stop_signals() -> None:
    """Let the processes a test suite starts receive Ctrl-C (SIGINT) and hang-up (SIGHUP).

    A job started in the background (``cmd &`` in a script, ``nohup``) ignores them, and
    every process it starts inherits that, so a test that stops a run with Ctrl-C would
    wait for a run that never stops. Call it from a ``conftest.py``: where either signal
    is ignored, Ctrl-C raises `KeyboardInterrupt` again and a hang-up ends the process,
    as at a terminal; a signal with a handler is left alone.
    """
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    hangup = getattr(signal, "SIGHUP", None)  # not on Windows
    if hangup is not None and signal.getsignal(hangup) is signal.SIG_IGN:
        signal.signal(hangup, signal.SIG_DFL)
