"""Render the effect of extra labels (``--extra-labels``) on several systems, side by side."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from retrievalkit.convert import unstructure
from retrievalkit.labels import LabelEffect
from retrievalkit.render.text import number

if TYPE_CHECKING:
    from rich.console import Console

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
    lines += [f"- {system}: {effect.describe()}" for system, effect in effects.items()]
    lines += ["", "| metric | " + " | ".join(effects) + " |"]
    lines.append("|---|" + "---:|" * len(effects))
    lines += ["| " + " | ".join(row) + " |" for row in _rows(effects)]
    return "\n".join(lines) + "\n"


def print_effects(effects: Mapping[str, LabelEffect], console: Console) -> None:
    from rich.table import Table

    if not effects:
        return
    table = Table(
        title="With extra labels (set's labels → with extra labels)", title_justify="left"
    )
    table.add_column("metric")
    for system in effects:
        table.add_column(system, justify="right")
    for row in _rows(effects):
        table.add_row(*row)
    console.print(table)
    for system, effect in effects.items():
        console.print(f"{system}: {effect.describe()}", markup=False)
