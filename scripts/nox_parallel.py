"""Run nox sessions side by side: their installs one after another, their tests together.

`nox` (CI's test command) runs lint and typecheck first, then every other default session
through this script, so that the plugin sessions' tests, which mostly wait on a child
process, a server or a download, share the machine with the core suite instead of
queueing behind it:

- one lane installs every session in turn (``nox -s NAME --install-only``): installs never
  overlap, so no two editable builds write the source tree's egg-info at once, and the
  downloads of one overlap the tests of another;
- a session whose install is done runs its tests (``nox -s NAME --no-install``) as soon as
  its weight fits in the free slots: the core suite weighs as many slots as the pytest
  processes it starts, every other session one;
- sessions listed with ``--last`` (the package build, which writes the tree's egg-info
  itself) run when every install is done.

Each session's output is kept in a file and printed whole when it ends; a line says when
each one starts and ends, and a table of every session's install and test times closes
the run. The exit code is 1 if any session failed (every session still runs), 130 on an
interrupt (every child stopped first).

    python scripts/nox_parallel.py [--slots N] [--weight NAME=W ...] [--last NAME ...] NAME ...
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import IO


@dataclass
class Session:
    """One nox session and what has happened to it so far."""

    name: str
    weight: int = 1
    last: bool = False
    installed: float | None = None  #: seconds its install took, once done
    ran: float | None = None  #: seconds its tests took, once done
    failed: str = ""  #: the step that failed, if one did

    def row(self) -> str:
        install = "-" if self.installed is None else f"{self.installed:.0f} s"
        tests = "-" if self.ran is None else f"{self.ran:.0f} s"
        outcome = f"FAILED ({self.failed})" if self.failed else "ok"
        return f"{self.name:<20} {install:>9} {tests:>9}  {outcome}"


@dataclass
class Child:
    """A running ``nox`` child: its session, its step, its log and when it began."""

    session: Session
    step: str  #: "install", "tests" or "whole" (both in one child)
    process: subprocess.Popen[bytes]
    log: IO[bytes]
    began: float


#: The nox flag of each step: "whole" installs and tests in one child.
FLAGS = {"install": ["--install-only"], "tests": ["--no-install"], "whole": []}


def nox_command(name: str, step: str) -> list[str]:
    return [sys.executable, "-m", "nox", "--no-color", "-s", name, *FLAGS[step]]


def start(session: Session, step: str, logs: contextlib.ExitStack) -> Child:
    log = logs.enter_context(tempfile.TemporaryFile())  # noqa: SIM115 (closed by `logs`)
    # Its own process group: an interrupt stops the child and everything it started.
    process = subprocess.Popen(
        nox_command(session.name, step),
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    print(f"[{clock()}] {session.name}: {step} started", flush=True)
    return Child(session, step, process, log, time.monotonic())


def finish(child: Child, returned: int) -> None:
    took = time.monotonic() - child.began
    session = child.session
    if child.step == "install":
        session.installed = took
    else:
        session.ran = took
    if returned:
        session.failed = child.step
    # A passing install is quiet; a failing one, and every session's tests, print whole.
    if returned or child.step != "install":
        child.log.seek(0)
        outcome = f"exit {returned}" if returned else "passed"
        print(f"\n===== {session.name}: {child.step} {outcome} in {took:.0f} s", flush=True)
        sys.stdout.buffer.write(child.log.read())
        sys.stdout.flush()
    print(f"[{clock()}] {session.name}: {child.step} done, exit {returned}", flush=True)


def clock() -> str:
    return time.strftime("%H:%M:%S")


def run(sessions: list[Session], slots: int) -> int:
    """Run every session's install and tests; 1 if any failed."""
    to_install = [s for s in sessions if not s.last]
    last = [s for s in sessions if s.last]
    ready: list[tuple[Session, str]] = []  # (session, step) that may start when slots allow
    running: list[Child] = []
    began = time.monotonic()
    with contextlib.ExitStack() as logs:
        try:
            while to_install or last or ready or running:
                installing = any(child.step == "install" for child in running)
                if to_install and not installing:
                    running.append(start(to_install.pop(0), "install", logs))
                    installing = True
                if last and not to_install and not installing:
                    # Installed and tested in one child once no other install can run.
                    ready += [(session, "whole") for session in last]
                    last = []
                busy = sum(child.session.weight for child in running if child.step != "install")
                for session, step in list(ready):
                    # A session heavier than every slot still runs, alone.
                    if busy == 0 or busy + session.weight <= slots:
                        ready.remove((session, step))
                        running.append(start(session, step, logs))
                        busy += session.weight
                time.sleep(0.5)
                for child in list(running):
                    returned = child.process.poll()
                    if returned is None:
                        continue
                    running.remove(child)
                    finish(child, returned)
                    if child.step == "install" and not returned:
                        ready.append((child.session, "tests"))
        except KeyboardInterrupt:
            stop(running)
            return 130
    print(f"\n{'session':<20} {'install':>9} {'tests':>9}  outcome")
    for session in sessions:
        print(session.row())
    print(f"{len(sessions)} sessions in {time.monotonic() - began:.0f} s")
    return 1 if any(session.failed for session in sessions) else 0


def stop(running: list[Child]) -> None:
    """SIGTERM every child's process group, then SIGKILL what is left after 10 s."""
    for child in running:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.process.pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    for child in running:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.process.wait(max(0.0, deadline - time.monotonic()))
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.process.pid, signal.SIGKILL)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="+", metavar="NAME")
    parser.add_argument("--slots", type=int, default=(os.cpu_count() or 1) + 1)
    parser.add_argument("--weight", action="append", default=[], metavar="NAME=W")
    parser.add_argument("--last", action="append", default=[], metavar="NAME")
    args = parser.parse_args()
    weights = dict(item.split("=", 1) for item in args.weight)
    sessions = [
        Session(name, weight=int(weights.get(name, 1)), last=name in args.last)
        for name in args.names
    ]
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    print(f"{len(sessions)} sessions, {args.slots} slots", flush=True)
    return run(sessions, max(1, args.slots))


if __name__ == "__main__":
    raise SystemExit(main())
