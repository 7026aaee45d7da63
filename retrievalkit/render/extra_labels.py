"""Render the effect of extra labels (``--extra-labels``) on several systems, side by side."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from retrievalkit.formats.labels import LabelEffect, PairedCorrection
from retrievalkit.formats.numbers import bounds, signed
from retrievalkit.metrics.definitions import headline
from retrievalkit.render.summary import effect_data
from retrievalkit.render.terminal import plain, printable
from retrievalkit.render.text import NONE, mean_and_interval, number

if TYPE_CHECKING:
    from rich.console import Group

TITLE = "With extra labels (set's labels → with extra labels)"
CORRECTED_TITLE = "Judge-corrected (PPI): judge's labels → corrected by the human sample"
PAIRED_TITLE = "Judge-corrected difference (PPI)"
PAIRED_COLUMNS = [
    "metric",
    "judge's labels",
    "corrected",
    "width",
    "human-labelled only",
    "width",
    "λ",
    "labelled",
]

#: (baseline label, candidate label) -> the pair's judge-corrected differences.
PairedCorrections = Mapping[tuple[str, str], PairedCorrection]


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


def paired_data(correction: PairedCorrection) -> dict[str, Any]:
    """metric -> the judge-corrected difference as plain data (``compare``'s ``ppi``)."""
    from retrievalkit.formats.convert import unstructure

    return {name: unstructure(value) for name, value in correction.differences.items()}


def paired_rows(correction: PairedCorrection) -> list[list[str]]:
    """The headline metrics' judge-corrected differences, one row each (`PAIRED_COLUMNS`)."""
    rows = []
    for name in headline(correction.differences):
        value = correction.differences[name]
        rows.append(
            [
                name,
                signed(value.judge_mean),
                f"{signed(value.mean)} {bounds(value.ci, sign=True)}",
                number(value.width),
                f"{signed(value.human_mean)} {bounds(value.human_ci, sign=True)}",
                number(value.human_width),
                number(value.weight, 2),
                f"{value.labelled} of {value.labelled + value.unlabelled}",
            ]
        )
    return rows


def paired_note(correction: PairedCorrection) -> str:
    """One line on what the table shows and when it holds."""
    return (
        "candidate − baseline; the judge's differences on every question corrected by the "
        "human-labelled ones (PPI++, ppi-bca; λ: the judge's weight, 0 = human labels only); "
        "valid when the human-labelled questions are a random sample"
    )


def paired_markdown(
    pair: tuple[str, str], correction: PairedCorrection, label_next: Mapping[str, list[str]]
) -> str:
    """A pair's judge-corrected differences as Markdown (empty without human labels)."""
    rows = paired_rows(correction)
    if not rows:
        return ""
    baseline, candidate = pair
    lines = ["", f"## {PAIRED_TITLE}: {_escape(candidate)} against {_escape(baseline)}", ""]
    lines += ["| " + " | ".join(PAIRED_COLUMNS) + " |", "|---|" + "---:|" * 7]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    lines += ["", _escape(paired_note(correction))]
    for metric, questions in label_next.items():
        shown = ", ".join(_escape(question) for question in questions) or NONE
        lines += ["", f"Label next (for {_escape(metric)}): {shown}"]
    return "\n".join(lines) + "\n"


def paired_renderable(
    pair: tuple[str, str], correction: PairedCorrection, label_next: Mapping[str, list[str]]
) -> Group:
    """A pair's judge-corrected differences for a terminal (empty without human labels)."""
    from rich.console import Group
    from rich.table import Table

    from retrievalkit.render.fitting import fit

    rows = paired_rows(correction)
    if not rows:
        return Group()
    baseline, candidate = pair
    table = Table(
        title=plain(f"{PAIRED_TITLE}: {candidate} against {baseline}", style="italic"),
        title_justify="left",
    )
    for index, column in enumerate(PAIRED_COLUMNS):
        table.add_column(plain(column), justify="right" if index else "left")
    for row in rows:
        table.add_row(*[plain(cell) for cell in row])
    parts: list[Any] = [fit(table, drop=[7, 5, 1, 3]), plain(paired_note(correction))]
    for metric, questions in label_next.items():
        parts.append(plain(f"label next (for {metric}): {', '.join(questions) or NONE}"))
    return Group(*parts)
