"""A drift comparison rendered: terminal lines, Markdown, and JUnit XML for CI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from retrievalkit.formats.numbers import NONE, bounds, number, signed
from retrievalkit.pipeline.drift.engine import DriftResult


def measure_rows(result: DriftResult) -> list[tuple[str, str, str, str, str]]:
    """(measure, baseline, candidate, value or difference, interval) for each measure,
    written through `retrievalkit.formats.numbers` (the no-value glyph where undefined)."""
    rows = []
    measures = result.measures
    k = result.settings.get("k")
    found = measures["rbo"]
    rows.append(
        (
            f"rbo (p={found['p']:g})",
            NONE,
            NONE,
            number(found["value"]),
            bounds(found["ci"])
            + " bounds "
            + bounds(_pair(found.get("lower"), found.get("upper"))),
        )
    )
    for name in (f"overlap@{k}", f"jaccard@{k}"):
        entry = measures[name]
        rows.append((name, NONE, NONE, number(entry["value"]), bounds(entry["ci"])))
    paired: list[tuple[str, dict[str, Any], int]] = [
        ("zero_result_rate", measures["zero_result_rate"], 3)
    ]
    paired += [
        (f"latency {q} (ms)", measures["latency"][q], 2)
        for q in LATENCY_ROWS
        if q in measures["latency"]
    ]
    for name, value in (measures.get("qpp") or {}).items():
        paired.append((name, value, 3))
    for name, value, digits in paired:
        rows.append(
            (
                name,
                number(value["baseline"], digits),
                number(value["candidate"], digits),
                signed(value["difference"], digits),
                bounds(value["ci"], sign=True, digits=digits),
            )
        )
    return rows


#: The latency statistics a drift's table shows.
LATENCY_ROWS = ("p50", "p95")


def _pair(low: float | None, high: float | None) -> tuple[float, float] | None:
    return None if low is None or high is None else (low, high)


def drift_lines(result: DriftResult) -> list[str]:
    """What the terminal shows."""
    lines = [
        f"{result.candidate} against {result.baseline} on {result.log}: {result.queries} "
        f"distinct queries ({result.logged} logged), k={result.settings.get('k')}",
    ]
    for name, left, right, value, ci in measure_rows(result):
        sides = f"  {left} -> {right}," if (left, right) != (NONE, NONE) else ""
        lines.append(f"  {name}:{sides} {value} {ci}".rstrip())
    errors = result.measures.get("errors", {})
    if errors.get("baseline") or errors.get("candidate"):
        lines.append(
            f"  errors: {errors.get('baseline', 0)} (baseline), "
            f"{errors.get('candidate', 0)} (candidate)"
        )
    if result.moved:
        lines.append(
            "  moved most: "
            + "; ".join(
                f"{json.dumps(row['query'], ensure_ascii=False)} (rbo {number(row['rbo'], 2)})"
                for row in result.moved[:5]
            )
        )
    if result.gated:
        lines.append("  drift gate: " + ("passed" if result.passed else "FAILED"))
        lines += [f"    {failure}" for failure in result.failures]
    return lines


def _cell(text: str) -> str:
    """A Markdown table cell: no line break, pipes and markup escaped."""
    flat = " ".join(str(text).split())
    for character in "\\|`*_[]<>#":
        flat = flat.replace(character, "\\" + character)
    return flat


def drift_markdown(result: DriftResult) -> str:
    """The drift as a Markdown section: the measures table, the gate and the moved queries."""
    out = [
        f"## Drift: {_cell(result.candidate)} against {_cell(result.baseline)}",
        "",
        f"{result.queries} distinct queries ({result.logged} logged) from {_cell(result.log)}, "
        f"k = {result.settings.get('k')}, intervals: bootstrap over queries "
        f"({result.settings.get('confidence', 0.95):.0%}).",
        "",
        "| measure | baseline | candidate | value / difference | interval |",
        "|---|---|---|---|---|",
    ]
    out += [f"| {' | '.join(_cell(cell) for cell in row)} |" for row in measure_rows(result)]
    if result.gated:
        out += ["", "**Drift gate: " + ("passed**" if result.passed else "failed**")]
        out += [f"- {_cell(failure)}" for failure in result.failures]
    if result.moved:
        k = result.settings.get("k")
        out += [
            "",
            "### The queries that moved most",
            "",
            f"| query | weight | rbo | overlap@{k} |",
            "|---|---|---|---|",
        ]
        out += [
            f"| {_cell(row['query'])} | {row['weight']:g} | {number(row['rbo'])} | "
            f"{number(row.get(f'overlap@{k}'))} |"
            for row in result.moved
        ]
    return "\n".join(out) + "\n"


def drift_junit_xml(result: DriftResult) -> str:
    """The drift gate as a JUnit test suite: one test case per limit."""
    cases = []
    limits = (
        ("min_rbo", "rbo", result.settings.get("min_rbo")),
        (
            "max_zero_result_increase",
            "zero_result_rate",
            result.settings.get("max_zero_result_increase"),
        ),
    )
    for limit, measure, value in limits:
        if value is None:
            continue
        failed = [failure for failure in result.failures if failure.startswith(measure)]
        body = "".join(
            f"<failure message={quoteattr(_clean(failure))}>{escape(_clean(failure))}</failure>"
            for failure in failed
        )
        cases.append(
            f'  <testcase classname="retrievalkit.drift" name={quoteattr(f"{limit} = {value:g}")}>'
            f"{body}</testcase>"
        )
    failures = len(result.failures)
    name = _clean(f"drift {result.candidate} against {result.baseline}")
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<testsuite name={quoteattr(name)} tests="{len(cases)}" failures="{failures}">\n'
        + "".join(case + "\n" for case in cases)
        + "</testsuite>\n"
    )


def _clean(text: str) -> str:
    import re

    return re.sub(
        "[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]", "\ufffd", text
    )


def write_drift_junit(result: DriftResult, path: Path) -> None:
    from retrievalkit.formats.files import output_error, write_file

    try:
        if path.parent != Path():
            path.parent.mkdir(parents=True, exist_ok=True)
        write_file(path, drift_junit_xml(result))
    except OSError as error:
        raise output_error(error, path, "--junit-xml", "the JUnit report") from None
