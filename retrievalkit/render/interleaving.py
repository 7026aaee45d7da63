"""Renderers of an `InterleaveCredit`: the JSON document, a terminal table, Markdown."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from retrievalkit.formats.numbers import (
    NONE,
    difference_and_interval,
    mean_and_interval,
    number,
    p_text,
    percent,
)

if TYPE_CHECKING:
    from rich.console import Console

    from retrievalkit.model.interleaving import InterleaveCredit, Rate


def _rate(rate: Rate) -> dict[str, Any]:
    return {
        "value": rate.value,
        "ci": None if rate.ci is None else list(rate.ci),
        "method": rate.method,
    }


def credit_document(result: InterleaveCredit) -> dict[str, Any]:
    """What ``--format json`` writes (see docs/interleaving.md for every key)."""
    needed = result.needed
    return {
        "log": result.log,
        "teams": list(result.teams),
        "impressions": result.impressions,
        "with_clicks": result.with_clicks,
        "queries": result.queries,
        "wins": result.wins,
        "ties": result.ties,
        "losses": result.losses,
        "preference": _rate(result.preference),
        "win_share": _rate(result.win_share),
        "sign_test": {
            "p_value": result.p_value,
            "significant": result.significant,
            "alpha": round(1.0 - result.confidence, 12),
        },
        "confidence": result.confidence,
        "needed": None
        if needed is None
        else {
            "effect": needed.effect,
            "power": needed.power,
            "discordance": needed.discordance,
            "with_clicks": needed.with_clicks,
            "impressions": needed.impressions,
            "more_impressions": needed.more,
        },
        "by_query": [
            {"query": row.query, "wins": row.wins, "ties": row.ties, "losses": row.losses}
            for row in result.by_query
        ],
    }


def _count(value: int | None) -> str:
    return NONE if value is None else f"{value:,}"


def credit_rows(result: InterleaveCredit) -> list[tuple[str, str]]:
    """(what, value) lines of the summary, as the table and Markdown show them."""
    first, second = result.teams
    level = percent(result.confidence)
    rows = [
        ("teams", f"{first} (first) vs {second} (second)"),
        (
            "impressions",
            f"{result.impressions:,}, {result.with_clicks:,} with clicks, "
            f"{result.queries:,} distinct queries",
        ),
        (
            f"{first} wins / ties / losses",
            f"{result.wins:,} / {result.ties:,} / {result.losses:,}",
        ),
        (
            f"preference [{level} CI]",
            difference_and_interval(result.preference.value, result.preference.ci),
        ),
        (
            f"{first} win share [{level} CI]",
            mean_and_interval(result.win_share.value, result.win_share.ci),
        ),
        ("sign test p", p_text(result.p_value) + _verdict(result)),
    ]
    needed = result.needed
    if needed is not None:
        rows.append(
            (
                f"impressions for {number(needed.effect)} at {needed.power:.0%} power",
                f"{_count(needed.impressions)} ({_count(needed.with_clicks)} with clicks; "
                f"{_count(needed.more)} more)",
            )
        )
    return rows


def _verdict(result: InterleaveCredit) -> str:
    if result.significant is None:
        return ""
    return " (significant)" if result.significant else " (not significant)"


NOTE = (
    "preference: (wins - losses) / impressions with clicks, above 0 favours the first team; "
    "a click counts for the team that contributed the clicked document."
)


def render_credit_table(result: InterleaveCredit, console: Console) -> None:
    from rich.table import Table

    from retrievalkit.render.terminal import plain

    console.print(plain(f"interleaving log {result.log}"))
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column("what")
    table.add_column("value")
    for what, value in credit_rows(result):
        table.add_row(plain(what), plain(value))
    console.print(table)
    console.print(plain(NOTE))


def render_credit_markdown(result: InterleaveCredit) -> str:
    from retrievalkit.render.terminal import printable

    def cell(text: str) -> str:
        return printable(text).replace("|", "\\|")

    lines = [f"**Interleaving log** `{result.log}`", "", "| | |", "|---|---|"]
    lines += [f"| {cell(what)} | {cell(value)} |" for what, value in credit_rows(result)]
    return "\n".join([*lines, "", NOTE])
