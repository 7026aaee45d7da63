"""The stage table of a staged run (each stage's metrics, its change from the stage before, and
where the misses happened), as rows every renderer shares."""

from __future__ import annotations

from typing import Any

from retrievalkit.formats.numbers import NONE, difference_and_interval
from retrievalkit.model.records import ResultRecord, StageDelta, StageReport
from retrievalkit.render.text import with_interval


def stage_metrics(report: StageReport) -> list[str]:
    """The metrics the stage table shows: rr, hit@1 and, at the largest k, hit and ndcg."""
    names = list(report.metrics[report.order[-1]])
    k = report.attribution_k
    wanted = ["rr", "hit@1", f"hit@{k}", f"ndcg@{k}"]
    return [name for name in dict.fromkeys(wanted) if name in names]


def delta_text(delta: StageDelta | None) -> str:
    """``+0.012 [-0.010, +0.034]``, or ``–`` for the first stage."""
    if delta is None:
        return NONE
    return difference_and_interval(delta.difference, delta.ci)


def stage_columns(report: StageReport) -> list[str]:
    return ["stage", "metric", "mean [CI]", "Δ [CI]", "p"]


def stage_rows(report: StageReport) -> list[list[str]]:
    """One row a stage and shown metric, stages in order: the mean with its interval, then
    the paired difference from the stage before (this stage minus that one) with its
    interval and p-value (none for the first stage)."""
    from retrievalkit.render.text import p_text

    rows = []
    for stage in report.order:
        for position, name in enumerate(stage_metrics(report)):
            value = report.metrics[stage].get(name)
            delta = report.deltas.get(stage, {}).get(name)
            rows.append(
                [
                    stage if position == 0 else "",
                    name,
                    NONE if value is None else with_interval(value),
                    delta_text(delta),
                    NONE if delta is None else p_text(delta.p_value),
                ]
            )
    return rows


def attribution_lines(report: StageReport) -> list[str]:
    """``lost in fusion: 11`` and the like, most frequent first, with what k means."""
    if not report.attribution:
        return [f"No miss or rescue to put down to a stage at k = {report.attribution_k}."]
    counted = sorted(report.attribution.items(), key=lambda item: (-item[1], item[0]))
    return [f"Misses and rescues by stage (top {report.attribution_k}):"] + [
        f"  {label}: {count}" for label, count in counted
    ]


def stages_renderable(record: ResultRecord) -> list[Any]:
    """The stage table and the attribution lines for the terminal (empty without stages)."""
    from rich.table import Table
    from rich.text import Text

    from retrievalkit.render.fitting import fit
    from retrievalkit.render.terminal import plain

    report = record.stages
    if report is None:
        return []
    table = Table(
        title=Text("Stages (mean [CI]; Δ: paired difference from the stage before)", style="bold"),
        title_justify="left",
    )
    for column in stage_columns(report):
        table.add_column(column)
    for row in stage_rows(report):
        table.add_row(*[plain(cell) for cell in row])
    fitted = fit(table, drop=("p", "mean [CI]", "Δ [CI]"))
    return [fitted, *(plain(line) for line in attribution_lines(report))]


def stages_document(record: ResultRecord) -> dict[str, Any] | None:
    """The ``stages`` of the JSON output: None for a run of a retriever without stages."""
    report = record.stages
    if report is None:
        return None
    return {
        "order": list(report.order),
        "metrics": {
            stage: {
                name: {
                    "mean": value.mean,
                    "ci": None if value.ci is None else list(value.ci),
                    "n": value.n,
                }
                for name, value in table.items()
            }
            for stage, table in report.metrics.items()
        },
        "deltas": {
            f"{stage}_delta_{name}": {
                "stage": stage,
                "metric": name,
                "difference": delta.difference,
                "low": None if delta.ci is None else delta.ci[0],
                "high": None if delta.ci is None else delta.ci[1],
                "p_value": delta.p_value,
                "n": delta.n,
                "verdict": delta.verdict,
            }
            for stage, table in report.deltas.items()
            for name, delta in table.items()
        },
        "attribution_k": report.attribution_k,
        "attribution": dict(report.attribution),
        "questions": dict(report.questions),
    }


def stages_markdown(record: ResultRecord) -> list[str]:
    """The ``## Stages`` section of the Markdown report (no lines without stages)."""
    report = record.stages
    if report is None:
        return []
    columns = stage_columns(report)
    lines = ["", "## Stages", "", "| " + " | ".join(columns) + " |"]
    lines.append("|---|" + "---:|" * (len(columns) - 1))
    lines += ["| " + " | ".join(row) + " |" for row in stage_rows(report)]
    head, *counts = attribution_lines(report)
    lines += ["", head]
    if counts:
        lines += ["", *(f"- {line.strip()}" for line in counts)]
    return lines
