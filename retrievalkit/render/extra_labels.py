"""Render the effect of extra labels (``--extra-labels``) on several systems, side by side."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from retrievalkit.formats.convert import unstructure
from retrievalkit.formats.labels import LabelEffect
from retrievalkit.render.terminal import plain, printable
from retrievalkit.render.text import number

if TYPE_CHECKING:
    from rich.console import Group

TITLE = "With extra labels (set's labels → with extra labels)"


def effects_document(effects: Mapping[str, LabelEffect]) -> dict[str, Any]:
    """system label -> the effect as plain data (every metric, before and after)."""
    return {system: unstructure(effect) for system, effect in effects.items()}


def _rows(effects: Mapping[str, LabelEffect]) -> list[list[str]]:
    first = next(iter(effects.values()))
    rows = []
    for index, (name, _, _) in enumerate(first.rows()):
        cells = [name]
        for effect in effects.values():
            _, before, after = effect.rows()[index]
            cells.append(f"{number(before)} → {number(after)}")
        rows.append(cells)
    return rows


def effects_markdown(effects: Mapping[str, LabelEffect]) -> str:
    if not effects:
        return ""
    lines = ["", f"## {TITLE}", ""]
    lines += [
        f"- {_escape(system)}: {_escape(effect.describe())}" for system, effect in effects.items()
    ]
    lines += ["", "| metric | " + " | ".join(_escape(system) for system in effects) + " |"]
    lines.append("|---|" + "---:|" * len(effects))
    lines += ["| " + " | ".join(row) + " |" for row in _rows(effects)]
    return "\n".join(lines) + "\n"


def _escape(text: str) -> str:
    return printable(text.replace("\n", " ")).replace("|", "\\|")


def effects_renderable(effects: Mapping[str, LabelEffect]) -> Group:
    from rich.console import Group
    from rich.table import Table

    if not effects:
        return Group()
    table = Table(title=plain(TITLE, style="italic"), title_justify="left")
    table.add_column("metric")
    for system in effects:
        table.add_column(plain(system), justify="right")
    for row in _rows(effects):
        table.add_row(*[plain(cell) for cell in row])
    return Group(
        table, *[plain(f"{system}: {effect.describe()}") for system, effect in effects.items()]
    )
