"""Files and folders even root cannot change, for the tests of what a store does when it
cannot write."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def immutable(*paths: Path) -> Iterator[None]:
    """``chattr +i`` on each path, undone afterwards (in reverse order) whatever happens."""
    done: list[Path] = []
    try:
        for path in paths:
            subprocess.run(["chattr", "+i", str(path)], check=True, capture_output=True)
            done.append(path)
        yield
    finally:
        for path in reversed(done):
            subprocess.run(["chattr", "-i", str(path)], check=True, capture_output=True)
