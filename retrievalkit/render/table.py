"""The evaluation report as rich tables for a terminal (``--format table``, the default)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from retrievalkit.render.summary import EvalReport
from retrievalkit.render.text import (
    breakdown_columns,
    breakdown_rows,
    header_line,
    hits_cell,
    interval,
    method_text,
    number,
    storage_line,
    verdict_lines,
)

if TYPE_CHECKING:
    from rich.console import Console

    from retrievalkit.model import ResultRecord


#: What the question table spends on borders and padding (7 columns).
_TABLE_FRAME = 22


def _widest_id(record: ResultRecord) -> int:
    return max(
        (len(doc) for o in record.outcomes for doc in (*o.ranking[:3], *o.expected)), default=11
    )


def _fits(record: ResultRecord, width: int) -> bool:
    """Whether the question table fits with every document id on one line of its cell."""
    question = max((len(o.question_id) for o in record.outcomes), default=2)
    hard = max((len(o.hard_class or "") for o in record.outcomes), default=0)
    fixed = max(question, 2) + 5 + max(hard, 10) + 5 + 5
    return _TABLE_FRAME + fixed + 2 * max(_widest_id(record), 11) <= width


def _question_list(record: ResultRecord, console: Console) -> None:
    """The questions for a narrow terminal: a line per question, then its ids.

    Lines wrap between ids, never inside one (a table would split long ids mid-word).
    """
    from rich.text import Text

    console.print(Text("Questions", style="italic"))
    for outcome in record.outcomes:
        form = outcome.form.value if outcome.form else ""
        head = "  ".join(
            part
            for part in (
                outcome.question_id,
                form,
                outcome.hard_class or "",
                f"hit@1 {hits_cell(outcome.scores, 'hit@1')}",
                f"hit@3 {hits_cell(outcome.scores, 'hit@3')}",
            )
            if part
        )
        console.print(Text(head))
        if outcome.error is None:
            top = Text("    top 3:    " + ", ".join(outcome.ranking[:3]))
        else:
            top = Text("    ERROR: ", style="red") + Text(outcome.error)
        console.print(top)
        console.print(Text("    expected: " + (", ".join(outcome.expected) or "(no answer)")))


def render_table(report: EvalReport, console: Console, *, per_question: bool = True) -> None:
    from rich.table import Table

    record = report.record
    console.print(f"[bold]{header_line(report)}[/bold]")
    if per_question and not _fits(record, console.width):
        _question_list(record, console)
    elif per_question:
        questions = Table(title="Questions", title_justify="left")
        for column in ("id", "form", "hard class", "hit@1", "hit@3"):
            questions.add_column(column, overflow="fold")
        widest = _widest_id(record)
        questions.add_column("top 3", overflow="fold", min_width=widest)
        questions.add_column("expected", overflow="fold", min_width=widest)
        for outcome in record.outcomes:
            top = (
                ", ".join(outcome.ranking[:3])
                if outcome.error is None
                else f"[red]ERROR[/red] {outcome.error}"
            )
            questions.add_row(
                outcome.question_id,
                outcome.form.value if outcome.form else "",
                outcome.hard_class or "",
                hits_cell(outcome.scores, "hit@1"),
                hits_cell(outcome.scores, "hit@3"),
                top,
                ", ".join(outcome.expected) or "(no answer)",
            )
        console.print(questions)
    metrics = Table(title="Metrics (mean, 95% CI, interval method)", title_justify="left")
    for column, justify in (
        ("metric", "left"),
        ("mean", "right"),
        ("CI", "left"),
        ("method", "left"),
        ("n", "right"),
    ):
        metrics.add_column(column, justify=justify)  # type: ignore[arg-type]
    for name, value in record.metrics.items():
        metrics.add_row(name, number(value.mean), interval(value), method_text(value), str(value.n))
    console.print(metrics)
    if report.extra_labels is not None:
        effect = report.extra_labels
        both = Table(title="With extra labels (means)", title_justify="left")
        for column, justify in (
            ("metric", "left"),
            ("set's labels", "right"),
            ("with extra", "right"),
        ):
            both.add_column(column, justify=justify)  # type: ignore[arg-type]
        for name, before, after in effect.rows():
            both.add_row(name, number(before), number(after))
        console.print(both)
        console.print(effect.describe(), markup=False)
    columns = breakdown_columns(record)
    for field, values in record.slices.items():
        if not values:
            continue
        breakdown = Table(title=f"By {field}", title_justify="left")
        # Labels and counts never fold; the "mean [low, high]" cells may wrap at the space.
        widest = max((len(label) for label in values), default=0)
        breakdown.add_column(field, no_wrap=True, min_width=min(max(widest, len(field)), 24))
        breakdown.add_column("questions", justify="right", no_wrap=True, min_width=9)
        for column in columns:
            breakdown.add_column(column, min_width=5)
        for label, size, cells in breakdown_rows(record, field):
            breakdown.add_row(label, str(size), *cells)
        console.print(breakdown)
    errors = [outcome for outcome in record.outcomes if outcome.error is not None]
    if errors:
        console.print(f"[red]{len(errors)} questions errored:[/red]")
        for outcome in errors:
            console.print(f"  {outcome.question_id}: {outcome.error}", markup=False)
    for warning in report.warnings:
        console.print(f"warning: {warning}", style="yellow", markup=False)
    for line in verdict_lines(report.verdict, report.baseline_note):
        style = "bold red" if line.startswith("REGRESSION") else None
        console.print(line, style=style, markup=False)
    console.print(storage_line(report), markup=False)
