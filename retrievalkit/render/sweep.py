"""Renderers of a `pipeline.sweeps.sweep.SweepResult`: JSON, Markdown and a rich table."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from retrievalkit.formats.numbers import signed, signed_bounds
from retrievalkit.pipeline.sweeps.sweep import Configuration, SweepResult
from retrievalkit.render.summary import metric_map
from retrievalkit.render.terminal import plain, printable
from retrievalkit.render.text import NONE, interval, number, p_text, percent

if TYPE_CHECKING:
    from rich.console import Group


def sweep_document(result: SweepResult) -> dict[str, Any]:
    """The JSON form (``--format json``, ``sweep.json``): every number, undefined ones null."""
    winner = result.winner
    confirmation = winner.confirmation
    return {
        "sweep": result.name,
        "set": result.set_name,
        "set_hash": result.set_hash,
        "retriever": result.retriever,
        "select": result.select,
        "method": result.method,
        "confidence": result.confidence,
        "seed": result.seed,
        "split": {
            "questions": result.questions,
            "tuning": result.tuning_questions,
            "held_out": result.held_out_questions,
            "folds": result.folds,
            "units": result.units,
            "stratified_by": "form",
        },
        "configured": _configuration(result.configured),
        "configurations": [_configuration(each) for each in result.configurations],
        "winner": {
            "index": winner.index,
            "options": dict(winner.options),
            "configured": winner.configured,
            "tuning": _value(winner.tuning),
            "held_out": _value(winner.held_out),
            "confirmation": {
                "metric": confirmation.metric,
                "n": confirmation.n,
                "baseline": confirmation.baseline,
                "candidate": confirmation.candidate,
                "difference": confirmation.difference,
                "low": confirmation.low,
                "high": confirmation.high,
                "p_value": confirmation.p_value,
                "p_floor": confirmation.p_floor,
                "discordant": confirmation.discordant,
                "verdict": confirmation.verdict,
            },
            "folds": [dict(options) for options in winner.folds],
        },
        "pareto": [
            {
                "index": index,
                "options": dict(result.configurations[index].options),
                result.select: result.configurations[index].metrics[result.select].mean,
                "latency_ms": dict(result.configurations[index].latency_ms),
            }
            for index in result.pareto
        ],
        "halving": [
            {"round": r.round, "configurations": r.configurations, "questions": r.questions}
            for r in result.halving
        ],
        "reused_answers": result.reused_answers,
        "resumed_answers": result.resumed_answers,
    }


def _value(value: Any) -> dict[str, Any]:
    return {
        "mean": value.mean,
        "ci": None if value.ci is None else [value.ci[0], value.ci[1]],
        "n": value.n,
    }


def _configuration(each: Configuration) -> dict[str, Any]:
    return {
        "options": dict(each.options),
        "metrics": metric_map(each.metrics),
        "latency_ms": dict(each.latency_ms),
        "questions": each.questions,
        "errored": each.errored,
        "round": each.round,
        "difference": each.difference,
        "low": each.low,
        "high": each.high,
        "p_value": each.p_value,
        "p_holm": each.p_holm,
        "pareto": each.pareto,
    }


def _shown(value: Any) -> str:
    return printable(json.dumps(value) if not isinstance(value, str) else value)


def header_lines(result: SweepResult) -> list[str]:
    level = percent(result.confidence)
    if result.method == "folds":
        split = (
            f"{result.folds}-fold cross-validation over {result.questions} questions "
            f"(folds stratified by form, whole {result.units}s, seed {result.seed})"
        )
    else:
        split = (
            f"{result.tuning_questions} tuning / {result.held_out_questions} held-out "
            f"questions (stratified by form, whole {result.units}s, seed {result.seed})"
        )
    lines = [
        f"sweep {result.name}: {result.retriever} on {result.set_name}, "
        f"{len(result.configurations)} configurations, maximising {result.select}",
        split,
        f"{level} intervals; differences are each configuration minus the configured "
        "retriever on its tuning questions, p-values Holm-adjusted over the grid",
    ]
    if result.halving:
        rounds = ", ".join(f"{r.configurations} on {r.questions}" for r in result.halving)
        lines.append(f"successive halving (configurations on questions): {rounds}")
    if result.reused_answers or result.resumed_answers:
        lines.append(
            f"{result.reused_answers} answers of shared stages reused, "
            f"{result.resumed_answers} read back from an interrupted sweep"
        )
    return lines


def configuration_columns(result: SweepResult) -> list[str]:
    options = list(result.configurations[0].options) if result.configurations else []
    return [
        "#",
        *options,
        result.select,
        f"{percent(result.confidence)} CI",
        "diff",
        "p Holm",
        "p50 ms",
        "p95 ms",
        "n",
        "",
    ]


def configuration_rows(result: SweepResult) -> list[list[str]]:
    rows = []
    for index, each in enumerate(result.configurations):
        value = each.metrics[result.select]
        mark = "winner" if index == result.winner.index else ""
        rows.append(
            [
                str(index),
                *(_shown(option) for option in each.options.values()),
                number(value.mean),
                interval(value),
                signed(each.difference),
                p_text(each.p_holm),
                number(each.latency_ms["p50"], 1),
                number(each.latency_ms["p95"], 1),
                str(each.questions),
                " ".join(part for part in ("◆" if each.pareto else "", mark) if part),
            ]
        )
    return rows


def winner_lines(result: SweepResult) -> list[str]:
    winner = result.winner
    confirmation = winner.confirmation
    options = ", ".join(f"{key} = {_shown(value)}" for key, value in winner.options.items())
    held = "cross-validated" if result.method == "folds" else "held out"
    lines = [
        f"winner #{winner.index}: {options}"
        + (" (the configured options)" if winner.configured else ""),
        f"{result.select} on the tuning questions {number(winner.tuning.mean)} "
        f"{interval(winner.tuning)} (n={winner.tuning.n}; biased upward by the choice) · "
        f"{held} {number(winner.held_out.mean)} {interval(winner.held_out)} "
        f"(n={winner.held_out.n})",
        f"confirmation against the configured retriever on {confirmation.n} questions "
        f"the choice never saw: {signed(confirmation.difference)} "
        f"{signed_bounds(confirmation.low, confirmation.high)}, "
        f"p = {p_text(confirmation.p_value)}: {confirmation.verdict or NONE}",
    ]
    if winner.folds:
        chosen = "; ".join(
            f"fold {index + 1}: "
            + ", ".join(f"{key}={_shown(value)}" for key, value in options.items())
            for index, options in enumerate(winner.folds)
        )
        lines.append(f"chosen on the other folds: {chosen}")
    return lines


def _escape(text: str) -> str:
    return printable(text.replace("\n", " ")).replace("|", "\\|")


def render_sweep_markdown(result: SweepResult) -> str:
    """The sweep as Markdown (``--format markdown``, ``report.md``)."""
    lines = [f"# retrievalkit sweep: {_escape(result.name)}", ""]
    lines += [_escape(line) + "  " for line in header_lines(result)]
    lines += ["", "## Winner", ""]
    lines += [f"- {_escape(line)}" for line in winner_lines(result)]
    columns = configuration_columns(result)
    lines += ["", "## Configurations", "", "| " + " | ".join(map(_escape, columns)) + " |"]
    lines.append("|" + "---|" * len(columns))
    for row in configuration_rows(result):
        lines.append("| " + " | ".join(_escape(cell) for cell in row) + " |")
    configured = result.configured.metrics[result.select]
    lines += [
        "",
        f"The configured retriever on the same questions: {result.select} "
        f"{number(configured.mean)} {interval(configured)}, p50 "
        f"{number(result.configured.latency_ms['p50'], 1)} ms. "
        "◆: on the quality-latency Pareto front (no other configuration is both better "
        "and faster at p50).",
        "",
    ]
    return "\n".join(lines)


def sweep_renderable(result: SweepResult) -> Group:
    """The terminal view: the header, the configurations table, the winner."""
    from rich import box
    from rich.console import Group
    from rich.table import Table

    from retrievalkit.render.fitting import fit

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for index, column in enumerate(configuration_columns(result)):
        table.add_column(plain(column), justify="left" if index == 0 else "right")
    for row in configuration_rows(result):
        table.add_row(*(plain(cell) for cell in row))
    # The options, the metric and the marks stay; latency and the test go first.
    # (by place from the end, as an option may share a name: p95 ms, n, p Holm, diff, p50 ms,
    # the interval)
    parts: list[Any] = [plain(line) for line in header_lines(result)]
    parts += [fit(table, drop=[-3, -2, -5, -6, -4, -7])]
    parts += [plain(line) for line in winner_lines(result)]
    return Group(*parts)
