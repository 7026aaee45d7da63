"""Load plugins through stevedore (private): the registry finds them, stevedore imports them.

A `DriverManager` loads the one plugin a command uses, an `ExtensionManager` every plugin
of a list (``list --check``, the question-set catalogue), and each manager's
``on_load_failure_callback`` is where a plugin that cannot be imported is caught: one
plugin's failure is raised, a list's failures are collected and the others load.

Each manager is handed the entry points the registry found (its ``list_entry_points``)
instead of scanning the installed packages again. stevedore's own scan comes from a cache
whose entry points carry no package (so neither a plugin's label nor a collision between
two packages could be told), and an `ExtensionManager` imports every entry point of its
group as it is made; handed the registry's choice, stevedore imports only the plugin a
collision's built-in won, and only when it is used. docs/plugins.md ("Discovery") gives
the figures.

This module imports stevedore (and with it `importlib.metadata`): nothing on the way to
``--help``, ``--version`` or ``list`` imports it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
from collections.abc import Sequence
from typing import Any

from stevedore import DriverManager, ExtensionManager

#: An entry point's object reference, as `importlib.metadata.EntryPoint` parses it.
REFERENCE = re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")


class AssertionFailed(Exception):
    """An `AssertionError` raised while importing a plugin, carried as an ordinary failure:
    stevedore lets an AssertionError past its failure callback (and so past every other
    plugin of the list), but a plugin whose import fails an assert is as broken as any."""

    def __init__(self, error: AssertionError) -> None:
        super().__init__(str(error))
        self.error = error


class EntryPoint(importlib.metadata.EntryPoint):
    """An entry point as the registry found it, loaded as `importlib.metadata` loads one,
    with an object reference that does not parse said in so many words."""

    def load(self) -> Any:
        try:
            return resolve(self.value)
        except AssertionError as error:
            raise AssertionFailed(error) from error


def resolve(value: str) -> Any:
    """The object an entry point's value names, imported as `EntryPoint.load` does."""
    match = REFERENCE.match(value)
    if match is None:
        raise ValueError(f"{value!r} is not an object reference (module or module:attribute)")
    found: Any = importlib.import_module(match.group("module"))
    for attribute in filter(None, (match.group("attr") or "").split(".")):
        found = getattr(found, attribute)
    return found


def original(error: BaseException) -> BaseException:
    """The plugin's own exception behind what stevedore's callback was handed."""
    return error.error if isinstance(error, AssertionFailed) else error


class _Driver(DriverManager):  # type: ignore[type-arg]
    """stevedore's driver over one entry point already found."""

    def __init__(self, point: EntryPoint) -> None:
        self._found = [point]
        super().__init__(
            point.group,
            point.name,
            invoke_on_load=False,
            on_load_failure_callback=_raise,
        )

    def list_entry_points(self) -> list[importlib.metadata.EntryPoint]:
        return list(self._found)


class _Extensions(ExtensionManager):  # type: ignore[type-arg]
    """stevedore's extension manager over entry points already found, each failure kept."""

    def __init__(self, group: str, points: Sequence[EntryPoint]) -> None:
        self._found = list(points)
        self.failures: dict[int, BaseException] = {}
        super().__init__(group, invoke_on_load=False, on_load_failure_callback=_keep)

    def list_entry_points(self) -> list[importlib.metadata.EntryPoint]:
        return list(self._found)


def _raise(manager: Any, point: importlib.metadata.EntryPoint, error: BaseException) -> None:
    """The failure callback of one plugin: its own exception, raised to the caller."""
    raise original(error)


def _keep(manager: Any, point: importlib.metadata.EntryPoint, error: BaseException) -> None:
    """The failure callback of a list: the exception kept, and the next plugin loaded."""
    manager.failures[id(point)] = original(error)


def load_one(group: str, name: str, value: str) -> Any:
    """The object the entry point ``name = value`` of ``group`` names, imported by a
    stevedore `DriverManager`; a failure raises the plugin's own exception."""
    manager = _Driver(EntryPoint(name=name, value=value, group=group))
    return manager.extensions[0].plugin


def load_each(
    group: str, points: Sequence[tuple[str, str]]
) -> list[tuple[Any, BaseException | None]]:
    """What each ``(name, value)`` entry point of ``group`` names, imported by one stevedore
    `ExtensionManager`, in order: ``(object, None)``, or ``(None, the exception that stopped
    its import)``."""
    found = [EntryPoint(name=name, value=value, group=group) for name, value in points]
    manager = _Extensions(group, found)
    loaded = {id(extension.entry_point): extension.plugin for extension in manager.extensions}
    return [
        (None, manager.failures[id(point)])
        if id(point) in manager.failures
        else (loaded[id(point)], None)
        for point in found
    ]
