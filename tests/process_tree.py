"""Every descendant of a process, read from /proc: what a test checks is gone afterwards.

A child that starts a grandchild in its own session, or whose parent died, is no longer
reachable by its process group or by ``wait``; the test takes the whole tree while it
stands, and then asks of each process in it that it has stopped running.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


def _parents() -> dict[int, int]:
    parents = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text(encoding="ascii", errors="replace")
        except OSError:
            continue  # it ended while we looked
        # pid (comm) state ppid ...: comm may hold spaces and parentheses.
        fields = stat.rsplit(")", 1)[1].split()
        parents[int(entry.name)] = int(fields[1])
    return parents


def descendants(pid: int) -> set[int]:
    """The processes below ``pid`` now: children, their children, and so on."""
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    found: set[int] = set()
    waiting = [pid]
    while waiting:
        for child in children.get(waiting.pop(), []):
            if child not in found:
                found.add(child)
                waiting.append(child)
    return found


def running(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie waiting to be reaped has stopped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def still_running(pids: set[int], seconds: float) -> set[int]:
    """Those of ``pids`` still running after up to ``seconds`` (empty as soon as all stop)."""
    end = time.monotonic() + seconds
    left = {pid for pid in pids if running(pid)}
    while left and time.monotonic() < end:
        time.sleep(0.05)
        left = {pid for pid in left if running(pid)}
    return left
