"""Python's cyclic garbage collector during a command: what the command keeps is set aside.

A command such as ``eval`` reads a set of a million questions (millions of tracked
objects) and keeps it to the end; every full collection after that walks all of it
again, to free nothing, and reading it runs a full collection each time the objects
read grow by a quarter. `keeping` reads it without collections and then moves the
objects alive at that moment out of the collector's reach (`gc.freeze`); they are still
freed by reference counting as usual, and `owned` hands them back to the collector
(`gc.unfreeze`) when the command ends, so a program that runs commands in its own
process (tests, a notebook) loses nothing.

Only the command line does this, and only while a command runs: the Python API leaves
the collector to the program that calls it. A process whose objects were frozen before
the command (by the program around it) is left as it is.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_owned = False


@contextmanager
def owned() -> Iterator[None]:
    """Around a command: `keeping` may freeze, and whatever it froze is unfrozen after."""
    global _owned
    if _owned or gc.get_freeze_count():
        yield
        return
    _owned = True
    try:
        yield
    finally:
        _owned = False
        gc.unfreeze()


@contextmanager
def keeping() -> Iterator[None]:
    """Around the reading of what a command keeps to its end (its question set, say),
    within an `owned` command: no cyclic collection while it is read (a set read from a
    file holds no reference cycle, so none could free anything, and each would walk
    everything read so far), and what was read is set aside once it is."""
    if not _owned:
        yield
        return
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
    gc.freeze()
