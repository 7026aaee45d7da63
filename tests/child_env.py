"""The environment of a child process a test starts: it imports what the test imports.

A test that runs ``python -m retrievalkit`` (or any child) must exercise the tree under
test, not another installed copy of retrievalkit. So a child's PYTHONPATH is the plugin
sites the test names, then the folder the parent imported retrievalkit from, then the
parent's own PYTHONPATH; every other variable is inherited unless overridden.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import retrievalkit


def tree_root() -> Path:
    """The folder holding the ``retrievalkit`` package this process imported."""
    return Path(retrievalkit.__file__).resolve().parent.parent


def child_pythonpath(*sites: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> str:
    """PYTHONPATH for a child: ``sites`` first, then this tree, then the parent's entries."""
    entries: list[str] = []
    for site in sites:
        if isinstance(site, (str, os.PathLike)):
            entries.append(os.fspath(site))
        else:
            entries.extend(os.fspath(each) for each in site)
    entries.append(str(tree_root()))
    entries.extend(part for part in os.environ.get("PYTHONPATH", "").split(os.pathsep) if part)
    return os.pathsep.join(dict.fromkeys(entries))


def child_environment(
    *sites: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], **extra: str
) -> dict[str, str]:
    """This process's environment with :func:`child_pythonpath` and ``extra`` applied."""
    env = dict(os.environ)
    env["PYTHONPATH"] = child_pythonpath(*sites)
    env.update(extra)
    return env
