"""The evaluation report as rich renderables for a terminal (``--format table``, the default).

Every string that comes from a golden set, a store, a configuration or a plugin enters
a table as `retrievalkit.render.terminal.plain` text, never as markup; styles are
chosen from the report object (an error outcome, a regression), never from the text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from retrievalkit.render.summary import (
    EvalReport,
    errored_questions,
    header_line,
    run_latency,
    storage_line,
)
from retrievalkit.render.terminal import plain, printable
from retrievalkit.render.text import (
    breakdown_columns,
    breakdown_rows,
    cost_line,
    hits_cell,
    interval,
    latency_rows,
    mean_and_interval,
    method_text,
    number,
    percent,
    verdict_lines,
)

if TYPE_CHECKING:
    from rich.console import Group
    from rich.text import Text

    from retrievalkit.formats.labels import LabelEffect
    from retrievalkit.model.records import ResultRecord
    from retrievalkit.model.values import QuestionOutcome
    from retrievalkit.render.fitting import FittedTable

#: Past this many questions the questions are listed as plain lines, written at once:
#: rich lays out every line and table row on its own (22 s for 100,000 questions).
PLAIN_LISTING = 1000


def _question_head(outcome: QuestionOutcome) -> str:
    """A question's first line in the list form: id, form, hard class and its hits."""
    return "  ".join(
        part
        for part in (
            outcome.question_id,
            outcome.form.value if outcome.form else "",
            outcome.hard_class or "",
            f"hit@1 {hits_cell(outcome.scores, 'hit@1')}",
            f"hit@3 {hits_cell(outcome.scores, 'hit@3')}",
        )
        if part
    )


def _top_line(outcome: QuestionOutcome) -> str:
    return "    top 3:    " + ", ".join(outcome.ranking[:3])


def _expected_line(outcome: QuestionOutcome) -> str:
    return "    expected: " + (", ".join(outcome.expected) or "(no answer)")


def question_listing(record: ResultRecord) -> str:
    """The list form of the questions as plain text (controls escaped), for large runs."""
    lines = ["Questions"]
    for outcome in record.outcomes:
        lines.append(_question_head(outcome))
        if outcome.error is None:
            lines.append(_top_line(outcome))
        else:
            lines.append("    ERROR: " + outcome.error)
        lines.append(_expected_line(outcome))
    return "\n".join(printable(line) for line in lines) + "\n"


def _question_list(record: ResultRecord) -> list[Text]:
    """The questions for a terminal too narrow for their table: a line per question, then
    its ids (lines wrap between ids, never inside one)."""
    from rich.text import Text

    lines = [plain("Questions", style="italic")]
    for outcome in record.outcomes:
        lines.append(plain(_question_head(outcome)))
        if outcome.error is None:
            lines.append(plain(_top_line(outcome)))
        else:
            lines.append(Text.assemble(("    ERROR: ", "red"), plain(outcome.error)))
        lines.append(plain(_expected_line(outcome)))
    return lines


def _title(text: str) -> Text:
    return plain(text, style="italic")


def eval_renderable(
    report: EvalReport,
    *,
    per_question: bool = True,
    header: bool = True,
) -> Group:
    """Everything ``eval`` and ``show`` print in a terminal, as one rich Group.

    Every table is fitted to the width it is drawn in (`retrievalkit.render.fitting`):
    too narrow for every document id to fit its cell, the questions become a list instead
    of a table. Without ``header``, the first line is left out (for a caller that printed
    it and `question_listing` already).
    """
    from rich.console import Group

    from retrievalkit.metrics.cost import run_cost
    from retrievalkit.render.stages import stages_renderable

    record = report.record
    parts: list[FittedTable | Text] = [plain(header_line(report), style="bold")] if header else []
    if per_question:
        parts.append(_questions_table(record))
    level = percent(record.manifest.confidence)
    parts.append(_metrics_table(record, level))
    parts += _latency_table(record, level)
    spent = cost_line(run_cost(record), level)
    if spent is not None:
        parts.append(plain(spent))
    parts += stages_renderable(record)
    if report.extra_labels is not None:
        parts += _extra_label_tables(report.extra_labels)
    parts += _breakdown_tables(record)
    errors = errored_questions(record)
    if errors:
        parts.append(plain(f"{len(errors)} questions errored:", style="red"))
        parts += [plain(f"  {question_id}: {error}") for question_id, error in errors]
    parts += [plain(f"warning: {warning}", style="yellow") for warning in report.warnings]
    parts += _verdict_block(report)
    parts.append(plain(storage_line(report)))
    return Group(*parts)


def _questions_table(record: ResultRecord) -> FittedTable:
    """One row per question (its hits, top 3 or error, and expected documents), folded
    into a list where the ids cannot fit."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from retrievalkit.render.fitting import fit

    questions = Table(title=_title("Questions"), title_justify="left")
    for column in ("id", "form", "hard class", "hit@1", "hit@3", "top 3", "expected"):
        questions.add_column(column)
    for outcome in record.outcomes:
        if outcome.error is None:
            top = plain(", ".join(outcome.ranking[:3]))
        else:
            top = Text.assemble(("ERROR", "red"), " ", plain(outcome.error))
        questions.add_row(
            plain(outcome.question_id),
            plain(outcome.form.value if outcome.form else ""),
            plain(outcome.hard_class or ""),
            plain(hits_cell(outcome.scores, "hit@1")),
            plain(hits_cell(outcome.scores, "hit@3")),
            top,
            plain(", ".join(outcome.expected) or "(no answer)"),
        )
    # The ids of "top 3" and "expected" (and an error's text) wrap between words.
    folded = Group(*_question_list(record))
    return fit(questions, wrap=("top 3", "expected"), folded=folded)


def _metrics_table(record: ResultRecord, level: str) -> FittedTable:
    """Each metric's mean with its `level` interval and the interval's method."""
    from rich.table import Table

    from retrievalkit.render.fitting import fit

    metrics = Table(
        title=_title(f"Metrics (mean, {level} CI, interval method)"), title_justify="left"
    )
    for column, justify in (
        ("metric", "left"),
        ("mean", "right"),
        ("CI", "left"),
        ("method", "left"),
        ("n", "right"),
    ):
        metrics.add_column(column, justify=justify)  # type: ignore[arg-type]
    for name, value in record.metrics.items():
        metrics.add_row(
            plain(name),
            plain(number(value.mean)),
            plain(interval(value)),
            plain(method_text(value)),
            plain(value.n),
        )
    return fit(metrics, drop=("method", "n", "CI"))


def _latency_table(record: ResultRecord, level: str) -> list[FittedTable]:
    """The latency statistics with their `level` intervals; none for a run without timings."""
    from rich.table import Table

    from retrievalkit.render.fitting import fit

    latency = latency_rows(run_latency(record))
    if not latency:
        return []
    timing = Table(title=_title(f"Latency (ms, {level} CI, interval method)"), title_justify="left")
    for column, justify in (
        ("statistic", "left"),
        ("value", "right"),
        ("CI", "left"),
        ("method", "left"),
    ):
        timing.add_column(column, justify=justify)  # type: ignore[arg-type]
    for row in latency:
        timing.add_row(*(plain(cell) for cell in row))
    return [fit(timing, drop=("method", "CI"))]


def _extra_label_tables(effect: LabelEffect) -> list[FittedTable | Text]:
    """The means with the set's labels and with ``--extra-labels``, then the
    judge-corrected (PPI) means where human labels gave them, each with its note."""
    from rich.table import Table

    from retrievalkit.render.fitting import fit

    both = Table(title=_title("With extra labels (means)"), title_justify="left")
    for column, justify in (
        ("metric", "left"),
        ("set's labels", "right"),
        ("with extra", "right"),
    ):
        both.add_column(column, justify=justify)  # type: ignore[arg-type]
    for name, before, after in effect.rows():
        both.add_row(plain(name), plain(number(before)), plain(number(after)))
    parts: list[FittedTable | Text] = [fit(both, drop=("set's labels",)), plain(effect.describe())]
    if effect.corrected_rows():
        fixed = Table(title=_title("Judge-corrected (PPI)"), title_justify="left")
        for column in ("metric", "judge's labels", "corrected", "human-labelled"):
            fixed.add_column(column, justify="left" if column == "metric" else "right")
        for name, fix in effect.corrected_rows():
            fixed.add_row(
                plain(name),
                plain(mean_and_interval(fix.judge_mean, fix.judge_ci)),
                plain(mean_and_interval(fix.mean, fix.ci)),
                plain(fix.labelled),
            )
        fitted = fit(fixed, drop=("human-labelled", "judge's labels"))
        parts += [fitted, plain(effect.describe_corrected())]
    return parts


def _breakdown_tables(record: ResultRecord) -> list[FittedTable]:
    """One table per slicing field with values: each label's questions and headline means."""
    from rich.table import Table

    from retrievalkit.render.fitting import fit

    breakdown_names = breakdown_columns(record)
    tables = []
    for field, values in record.slices.items():
        if not values:
            continue
        breakdown = Table(title=_title(f"By {field}"), title_justify="left")
        breakdown.add_column(plain(field))
        breakdown.add_column("questions", justify="right")
        for column in breakdown_names:
            breakdown.add_column(column)
        for label, size, means in breakdown_rows(record, field):
            breakdown.add_row(plain(label), plain(size), *[plain(cell) for cell in means])
        # The last metrics go first, then the counts; the label and first metric stay.
        metrics_last = [*range(len(breakdown_names) + 1, 2, -1)]
        tables.append(fit(breakdown, drop=[*metrics_last, 1]))
    return tables


def _verdict_block(report: EvalReport) -> list[Text]:
    """The verdict's lines (`verdict_lines`), its headline in bold red for a regression."""
    record = report.record
    lines = verdict_lines(
        report.verdict, report.baseline_note, confidence=record.manifest.confidence
    )
    verdict = report.verdict
    # The verdict's headline follows the note on a changed set, when there is one.
    headline = None if verdict is None or not verdict.regressed else int(not verdict.same_set)
    return [
        plain(line, style="bold red" if index == headline else "")
        for index, line in enumerate(lines)
    ]
