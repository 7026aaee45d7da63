"""Render the effect of extra labels (``--extra-labels``) on several systems, side by side."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from retrievalkit.formats.labels import LabelEffect
from retrievalkit.render.summary import effect_data
from retrievalkit.render.terminal import plain, printable
from retrievalkit.render.text import NONE, mean_and_interval, number

if TYPE_CHECKING:
    from rich.console import Group

TITLE = "With extra labels (set's labels → with extra labels)"
CORRECTED_TITLE = "Judge-corrected (PPI): judge's labels → corrected by the human sample"


def effects_document(effects: Mapping[str, LabelEffect]) -> dict[str, Any]:
    """system label -> the effect as plain data (every metric, before and after)."""
    return {system: effect_data(effect) for system, effect in effects.items()}


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


def _corrected_rows(effects: Mapping[str, LabelEffect]) -> list[list[str]]:
    """metric, then each system's ``judge mean [ci] → corrected mean [ci]``."""
    first = next(iter(effects.values()))
    rows = []
    for index, (name, _) in enumerate(first.corrected_rows()):
        cells = [name]
        for effect in effects.values():
            found = effect.corrected_rows()
            if index >= len(found):
                cells.append(NONE)
                continue
            value = found[index][1]
            cells.append(
                f"{mean_and_interval(value.judge_mean, value.judge_ci)} → "
                f"{mean_and_interval(value.mean, value.ci)}"
            )
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
    corrected = _corrected_rows(effects)
    if corrected:
        lines += ["", f"### {CORRECTED_TITLE}", ""]
        lines += [
            f"- {_escape(system)}: {_escape(effect.describe_corrected())}"
            for system, effect in effects.items()
            if effect.corrected
        ]
        lines += ["", "| metric | " + " | ".join(_escape(system) for system in effects) + " |"]
        lines.append("|---|" + "---:|" * len(effects))
        lines += ["| " + " | ".join(row) + " |" for row in corrected]
    return "\n".join(lines) + "\n"


def _escape(text: str) -> str:
    return printable(text.replace("\n", " ")).replace("|", "\\|")


def effects_renderable(effects: Mapping[str, LabelEffect]) -> Group:
    from rich.console import Group
    from rich.table import Table

    from retrievalkit.render.fitting import fit

    if not effects:
        return Group()
    table = Table(title=plain(TITLE, style="italic"), title_justify="left")
    table.add_column("metric")
    for system in effects:
        table.add_column(plain(system), justify="right")
    for row in _rows(effects):
        table.add_row(*[plain(cell) for cell in row])
    # The metric and the first system stay; the last systems give way first.
    drop = [*range(len(effects), 1, -1)]
    parts: list[Any] = [
        fit(table, drop=drop),
        *[plain(f"{system}: {effect.describe()}") for system, effect in effects.items()],
    ]
    corrected = _corrected_rows(effects)
    if corrected:
        fixed = Table(title=plain(CORRECTED_TITLE, style="italic"), title_justify="left")
        fixed.add_column("metric")
        for system in effects:
            fixed.add_column(plain(system), justify="right")
        for row in corrected:
            fixed.add_row(*[plain(cell) for cell in row])
        parts.append(fit(fixed, drop=drop))
        parts += [
            plain(f"{system}: {effect.describe_corrected()}")
            for system, effect in effects.items()
            if effect.corrected
        ]
    return Group(*parts)
