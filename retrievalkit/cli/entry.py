"""The ``retrievalkit`` program: stop signals handled from its first line to its last.

This module imports almost nothing before it makes SIGINT, SIGTERM and SIGHUP raise
(`retrievalkit.cli.interrupts.handle_for_process`), so that a signal that arrives while
the command line is still being imported ends with 128 + its number and a message, as
at any later moment, instead of killing the process. Once the command has returned its
exit code, the signals are only noted until the process is gone: the code and what was
said stay true.
"""

from __future__ import annotations

import sys

from retrievalkit.cli import interrupts


def run() -> int:
    """Run the command line of this process; the exit code it ends with."""
    interrupts.handle_for_process()
    try:
        from retrievalkit.cli.main import main

        code = main()
    except interrupts.Interrupted as stopped:
        # While importing, or between the command's end and `hold_for_exit`.
        code = _stopped(stopped.signum)
    except BaseException:
        # A signal that an import turned into another error on its way up.
        signum = interrupts.signal_received()
        if signum is None:
            raise
        code = _stopped(signum)
    while True:
        try:
            interrupts.hold_for_exit()
            return code
        except interrupts.Interrupted as stopped:  # one came while the handlers changed
            code = _stopped(stopped.signum)


def _stopped(signum: int) -> int:
    said = interrupts.kept() or interrupts.untouched()
    print(f"retrievalkit: interrupted; {said}", file=sys.stderr)
    return interrupts.exit_code_for(signum)


def entry() -> None:
    """The console script ``retrievalkit`` and ``python -m retrievalkit``."""
    raise SystemExit(run())
