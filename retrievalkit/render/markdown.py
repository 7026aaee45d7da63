"""The evaluation report as Markdown (``report.md`` and ``--format markdown``)."""

from __future__ import annotations

from retrievalkit.render.stages import stages_markdown
from retrievalkit.render.summary import (
    EvalReport,
    errored_questions,
    header_line,
    run_latency,
    storage_line,
)
from retrievalkit.render.terminal import printable
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


def _escape(text: str) -> str:
    """A table cell or list item: pipes escaped, control characters written as escapes."""
    return printable(text.replace("\n", " ")).replace("|", "\\|")


def render_markdown(report: EvalReport, *, question_limit: int | None = None) -> str:
    """The report as Markdown; ``question_limit`` caps the rows of its question table."""
    record = report.record
    lines = [
        f"# retrievalkit evaluation: {_escape(record.set)} × {_escape(record.model)}",
        "",
        _escape(header_line(report)),
        "",
    ]
    level = percent(record.manifest.confidence)
    lines += ["## Metrics", "", f"| metric | mean | {level} CI | method | n |"]
    lines.append("|---|---:|---|---|---:|")
    for name, value in record.metrics.items():
        lines.append(
            f"| {name} | {number(value.mean)} | {interval(value)} | {method_text(value)} "
            f"| {value.n} |"
        )
    latency = latency_rows(run_latency(record))
    if latency:
        lines += ["", "## Latency", "", f"| statistic | value | {level} CI | method |"]
        lines.append("|---|---:|---|---|")
        lines += [f"| {name} | {value} | {ci} | {method} |" for name, value, ci, method in latency]
    from retrievalkit.metrics.cost import run_cost

    spent = cost_line(run_cost(record), level)
    if spent is not None:
        lines += ["", "## Cost", "", _escape(spent)]
    lines += stages_markdown(record)
    if report.extra_labels is not None:
        effect = report.extra_labels
        lines += ["", "## With extra labels", "", _escape(effect.describe()), ""]
        lines += ["| metric | set's labels | with extra labels |", "|---|---:|---:|"]
        lines += [f"| {m} | {number(b)} | {number(a)} |" for m, b, a in effect.rows()]
        if effect.corrected_rows():
            lines += ["", "### Judge-corrected (PPI)", "", _escape(effect.describe_corrected())]
            lines += ["", "| metric | judge's labels | corrected | human-labelled |"]
            lines.append("|---|---:|---:|---:|")
            lines += [
                f"| {name} | {mean_and_interval(v.judge_mean, v.judge_ci)} | "
                f"{mean_and_interval(v.mean, v.ci)} | {v.labelled} |"
                for name, v in effect.corrected_rows()
            ]
    columns = breakdown_columns(record)
    for field, values in record.slices.items():
        if not values:
            continue
        lines += ["", f"## By {_escape(field)}", ""]
        lines.append(f"| {_escape(field)} | questions | " + " | ".join(columns) + " |")
        lines.append("|---|---:|" + "---|" * len(columns))
        for label, size, cells in breakdown_rows(record, field):
            lines.append(f"| {_escape(label)} | {size} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Questions",
        "",
        "| id | form | hard class | hit@1 | hit@3 | top 3 | expected |",
        "|---|---|---|:-:|:-:|---|---|",
    ]
    shown = record.outcomes if question_limit is None else record.outcomes[:question_limit]
    for outcome in shown:
        top = ", ".join(outcome.ranking[:3]) if outcome.error is None else f"ERROR: {outcome.error}"
        lines.append(
            f"| {_escape(outcome.question_id)} | {outcome.form.value if outcome.form else ''} "
            f"| {_escape(outcome.hard_class or '')} | {hits_cell(outcome.scores, 'hit@1')} "
            f"| {hits_cell(outcome.scores, 'hit@3')} | {_escape(top)} "
            f"| {_escape(', '.join(outcome.expected) or '(no answer)')} |"
        )
    left_out = len(record.outcomes) - len(shown)
    if left_out:
        lines += [
            "",
            f"... and {left_out:,} more questions: `--output-dir` writes them all "
            "(report.md, per_question.jsonl).",
        ]
    errors = errored_questions(record)
    if errors:
        lines += ["", f"## Errors ({len(errors)})", ""]
        lines += [f"- `{_escape(question)}`: {_escape(error or '')}" for question, error in errors]
    if report.warnings:
        lines += ["", "## Warnings", ""]
        lines += [f"- **warning**: {_escape(warning)}" for warning in report.warnings]
    lines += ["", "## Regression", ""]
    verdict = verdict_lines(
        report.verdict, report.baseline_note, confidence=record.manifest.confidence
    )
    lines += [f"    {printable(line)}" for line in verdict]
    lines += ["", _escape(storage_line(report)), ""]
    return "\n".join(lines)
