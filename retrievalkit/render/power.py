"""Renderers of a `retrievalkit.stats.power.PowerReport`: a rich table and Markdown."""

from __future__ import annotations

from typing import TYPE_CHECKING

from retrievalkit.render.text import NONE, number

if TYPE_CHECKING:
    from rich.console import Console

    from retrievalkit.stats.power import PowerReport, PowerRow

COLUMNS = ("metric", "slice", "questions", "spread", "allowed drop", "detectable drop")


def _spread(row: PowerRow) -> str:
    """Discordance (share of questions that change) for 0/1 metrics, else the sd."""
    if row.discordance is not None:
        return f"{row.discordance:.2f} differ"
    return NONE if row.sd is None else f"sd {row.sd:.3f}"


def _cells(report: PowerReport, row: PowerRow) -> list[str]:
    detectable = "none" if row.detectable is None else f"{row.detectable:.3f}"
    if row.below_detectable:
        detectable += " !"
    questions = str(row.n) if row.clusters is None else f"{row.n} in {row.clusters} clusters"
    cells = [
        row.metric,
        row.slice or "(all)",
        questions,
        _spread(row),
        number(row.threshold),
        detectable,
    ]
    if report.drop is not None:
        needed = NONE if row.needed is None else f"{row.needed:,}"
        if row.needed_clusters is not None:
            needed += f" ({row.needed_clusters:,} clusters)"
        cells.append(needed)
    return cells


def _columns(report: PowerReport) -> list[str]:
    columns = list(COLUMNS)
    if report.drop is not None:
        columns.append(f"questions for {report.drop:g}")
    return columns


def _header(report: PowerReport) -> str:
    bases = sorted({row.basis for row in report.rows})
    return (
        f"set {report.set_name} · {report.questions} questions · {report.evidence} "
        f"(spread: {', '.join(bases) or 'none'}) · paired sign-flip test at alpha "
        f"{report.alpha:.2f}, {report.power:.0%} power"
        + ("" if report.cluster_by is None else f" · whole clusters by {report.cluster_by}")
    )


def _notes(report: PowerReport) -> list[str]:
    notes = [
        "detectable drop: the smallest absolute drop the gate's paired test finds "
        f"{report.power:.0%} of the time; none: no drop can be found with so few questions.",
        f"No comparison is significant unless at least {report.min_discordant} questions "
        "differ (with fewer it is unresolvable).",
    ]
    if report.cluster_by is not None:
        notes[1] = notes[1].replace(" questions differ", " questions (clusters) differ")
        notes.append(
            f"Clusters by {report.cluster_by}: related questions move together, so the "
            "paired test flips whole clusters; a row counts its clusters, and the questions "
            "needed are that many clusters of the set's mean size."
        )
    notes.append(_methods_note(report))
    if any(row.below_detectable for row in report.rows):
        notes.append(
            "!: the allowed drop is below what the set can detect, so a drop between the "
            "two passes or fails by chance; raise the threshold or add questions."
        )
    return notes


def _methods_note(report: PowerReport) -> str:
    """Which rows' power is exact, simulated (with its Monte Carlo error) or approximate."""
    from retrievalkit.stats.power import EXACT, NORMAL, SIMULATED, SIMULATIONS

    used = {row.method for row in report.rows} | {
        row.needed_method for row in report.rows if row.needed_method is not None
    }
    parts = []
    if EXACT in used:
        parts.append("exact for 0/1 metrics (the sign test of the questions that differ)")
    if SIMULATED in used:
        errors = [row.mc_error for row in report.rows if row.mc_error is not None]
        error = f", Monte Carlo error ±{100 * max(errors):.1f} points" if errors else ""
        parts.append(
            f"simulated for continuous metrics ({SIMULATIONS:,} seeded sets drawn from the "
            f"pilot's differences{error})"
        )
    if NORMAL in used:
        parts.append("the normal approximation of the sign-flip test (clusters, large sets)")
    return "power: " + "; ".join(parts) + "."


def render_power_table(report: PowerReport, console: Console) -> None:
    from rich.table import Table
    from rich.text import Text

    from retrievalkit.render.fitting import fit

    console.print(Text(_header(report)))
    table = Table(title="What the set can detect", title_justify="left")
    for index, column in enumerate(_columns(report)):
        table.add_column(column, justify="right" if index in (2, 4, 5, 6) else "left")
    for row in report.rows:
        table.add_row(*(Text(cell) for cell in _cells(report, row)))
    console.print(fit(table, drop=("spread", "allowed drop", "questions", "slice")))
    for note in _notes(report):
        console.print(Text(note))


def render_power_markdown(report: PowerReport) -> str:
    columns = _columns(report)
    lines = [f"# retrievalkit power: {report.set_name}", "", _header(report), ""]
    lines.append("| " + " | ".join(columns) + " |")
    lines.append("|" + "---|" * len(columns))
    for row in report.rows:
        cells = [cell.replace("|", "\\|") for cell in _cells(report, row)]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", *(f"- {note}" for note in _notes(report)), ""]
    return "\n".join(lines)
