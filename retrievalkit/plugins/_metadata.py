"""Read installed packages' entry points without importing importlib.metadata (private).

Start-up time is a feature: ``retrievalkit --help`` and ``list`` run in CI logs and at the
desk many times a day. Reading ``entry_points.txt`` of each ``*.dist-info`` folder on
``sys.path`` directly, and the METADATA headers only of the packages that register a
``retrievalkit.*`` entry point, costs far less than `importlib.metadata` (which parses
every package's metadata) or stevedore (which imports it, and keeps a cache of every
group of every package); docs/plugins.md gives the figures. Where the path holds
anything this reader does not handle (an egg, a zip file, a custom finder), it hands over
to `importlib.metadata`, so the result is always the one importlib would give.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import importlib.metadata

#: The prefix of every entry-point group retrievalkit reads.
PREFIX = "retrievalkit."


#: (group, name, value, the importlib entry point when importlib read it)
Point = tuple[str, str, str, "importlib.metadata.EntryPoint | None"]


def distributions(
    path_state: tuple[tuple[str, float], ...],
) -> Iterator[tuple[str, str, list[Point]]]:
    """(name, version, retrievalkit entry points) of each installed distribution that has
    any, in the order `importlib.metadata.distributions()` yields them."""
    if not _plain_folders(entry for entry, _ in path_state):
        yield from _distributions_by_importlib()
        return
    for entry, _ in path_state:
        yield from _distributions_in(entry or ".")


def _plain_folders(entries: Iterator[str]) -> bool:
    """True when every distribution is found the way `_distributions_in` reads them."""
    from importlib.machinery import PathFinder

    for finder in sys.meta_path:
        if finder is not PathFinder and hasattr(finder, "find_distributions"):
            return False
    # An egg or a zip file on the path: importlib.metadata reads those.
    return not any(entry.endswith(".egg") or os.path.isfile(entry) for entry in entries)


def _distributions_in(folder: str) -> Iterator[tuple[str, str, list[Point]]]:
    """The distributions in one folder of sys.path, read as importlib.metadata reads them:
    ``*.dist-info`` and ``*.egg-info`` folders, grouped by name in the folder's order."""
    try:
        children = os.listdir(folder)
    except OSError:
        return
    by_name: dict[str, list[str]] = {}
    for child in children:
        low = child.lower()
        if low.endswith((".dist-info", ".egg-info")):
            name = low.rpartition(".")[0].partition("-")[0]
            key = re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")
            by_name.setdefault(key, []).append(os.path.join(folder, child))
    for paths in by_name.values():
        for path in paths:
            text = _read(path, "entry_points.txt")
            if not text or f"[{PREFIX}" not in text:
                continue
            points: list[Point] = [
                (group, name, value, None) for group, name, value in _entry_points(text)
            ]
            if points:
                headers = _headers(_read(path, "METADATA") or _read(path, "PKG-INFO") or "")
                yield headers.get("name") or "?", headers.get("version", ""), points


def _read(folder: str, name: str) -> str | None:
    try:
        with open(os.path.join(folder, name), encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def _entry_points(text: str) -> Iterator[tuple[str, str, str]]:
    """(group, name, value) of each retrievalkit entry point in an ``entry_points.txt``."""
    group: str | None = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            group = line.strip("[]")
            continue
        if group is None or not group.startswith(PREFIX) or "=" not in line:
            continue
        name, _, value = line.partition("=")
        yield group, name.strip(), value.strip()


def _headers(text: str) -> dict[str, str]:
    """The first Name and Version headers of a METADATA or PKG-INFO file."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break  # the body (a long description) begins
        key, colon, value = line.partition(":")
        key = key.strip().lower()
        if colon and key in ("name", "version") and key not in found:
            found[key] = value.strip()
    return found


def _distributions_by_importlib() -> Iterator[tuple[str, str, list[Point]]]:
    import importlib.metadata

    for dist in importlib.metadata.distributions():
        points: list[Point] = [
            (point.group, point.name, point.value, point)
            for point in dist.entry_points
            if point.group.startswith(PREFIX)
        ]
        if points:
            yield dist.metadata["Name"] or "?", dist.version, points
