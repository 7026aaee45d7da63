"""Render a `retrievalkit.render.run_report.RunReport` as one self-contained HTML page.

Everything the page needs is inside it: CSS and a few lines of JavaScript inline, the
charts as inline SVG (`retrievalkit.render.charts`). Nothing is fetched when it is
viewed, so it can be mailed, attached to a CI run or opened offline. Every string that
comes from users' files (question texts, ids, document ids, hard classes, meta names
and values, errors, retriever names and options) goes through one helper, `_e`,
whether it lands in text or in an attribute value; an element id made from user text
(a slice's anchor) is encoded by `_anchor` to letters, digits and escapes.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from html import escape

from retrievalkit._version import __version__
from retrievalkit.formats.numbers import bounds
from retrievalkit.metrics.definitions import TREND, headline, metric_order
from retrievalkit.model.records import ResultRecord
from retrievalkit.model.values import MetricValue
from retrievalkit.pipeline.gating.comparison import Comparison, MetricDelta
from retrievalkit.render import charts
from retrievalkit.render.comparison import (
    ci_text,
    header_line,
    metric_columns,
    metric_rows,
    p_text,
    signed,
    system_columns,
    system_rows,
)
from retrievalkit.render.run_report import QuestionResult, QuestionRow, RunReport
from retrievalkit.render.summary import latency_summary, record_latencies
from retrievalkit.render.text import NONE, number

#: The hit columns of the question table.
HIT_COLUMNS = ("hit@1", "hit@3")
#: Documents shown per question before the rest are folded away.
SHOWN = 3
#: Past this many questions the question table lists only this many rows (a page of
#: 100,000 rows is about 100 MB and too slow for a browser to sort or filter): every
#: errored question first, then the largest changes, then misses, then the rest. The
#: metrics, charts and counts above it still cover every question.
TABLE_ROWS = 1000

_CSS = """
:root { --ink: #1d2329; --muted: #5b6670; --line: #dde2e7; --run: #0072b2;
  --worse: #d55e00; --hit: #e8f3fb; --miss: #fdf0e7; --error: #fbe3e3; }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Liberation Sans", Arial,
  sans-serif; color: var(--ink); margin: 0; background: #f6f7f9; }
main { max-width: 1500px; margin: 0 auto; padding: 24px 28px 48px; background: #fff; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 36px 0 8px; padding-top: 8px; border-top: 1px solid var(--line); }
h3 { font-size: 15px; margin: 16px 0 6px; }
p.meta, p.note, figcaption { color: var(--muted); margin: 4px 0; }
nav { margin: 12px 0 0; font-size: 14px; }
nav a { margin-right: 14px; color: var(--run); text-decoration: none; }
code, .ids { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, "Liberation Mono",
  monospace; font-size: 12px; }
section.verdict { border-radius: 6px; padding: 8px 16px; margin: 12px 0; }
section.verdict h2 { margin: 4px 0; font-size: 1.15em; }
section.verdict ul { margin: 4px 0; padding-left: 20px; }
section.verdict.failed { background: #fde8e8; border: 2px solid #c62828; }
section.verdict.passed { background: #e8f5e9; border: 1px solid #66bb6a; }
section.verdict.none { background: #f4f4f4; border: 1px solid #bbb; }
ul.warnings { background: #fff7e0; border: 1px solid #f0d68a; padding: 10px 10px 10px 30px;
  border-radius: 6px; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(250px, 1fr)); gap: 12px; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px; }
.card .name { font-weight: 600; color: var(--muted); }
.card .value { font-size: 30px; font-weight: 650; font-variant-numeric: tabular-nums; }
.card .ci, .card .base { color: var(--muted); font-size: 13.5px;
  font-variant-numeric: tabular-nums; }
.card .diff { font-weight: 600; font-variant-numeric: tabular-nums; }
.card hr { border: 0; border-top: 1px solid var(--line); margin: 8px 0; }
.scroll { overflow-x: auto; }
.better { color: var(--run); }
.worse { color: var(--worse); }
figure { margin: 8px 0 0; }
svg.chart { width: 100%; max-width: 1180px; height: auto; display: block; }
table { border-collapse: collapse; font-size: 13px; margin: 6px 0; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 8px; text-align: left;
  vertical-align: top; }
th { background: #f1f3f5; position: sticky; top: 0; z-index: 1; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
details { margin: 8px 0; }
summary { cursor: pointer; color: var(--run); }
table.sortable th { cursor: pointer; user-select: none; white-space: nowrap; }
table.sortable th::after { content: " \\2195"; color: #aab3bc; }
table.sortable th[aria-sort="ascending"]::after { content: " \\2191"; color: var(--ink); }
table.sortable th[aria-sort="descending"]::after { content: " \\2193"; color: var(--ink); }
#questions-table { width: 100%; }
#questions-table td.text { min-width: 200px; }
tr.miss td { background: var(--miss); }
tr.error td { background: var(--error); }
ol.ranking { margin: 0; padding-left: 22px; }
.ids, ol.ranking li { white-space: nowrap; }
td details { margin: 0; font-size: 12.5px; }
ol.ranking li.relevant { font-weight: 700; color: var(--run); }
ol.ranking li.judged-not-relevant { color: #98a2ab; text-decoration: line-through; }
.mark-hit { color: var(--run); font-weight: 700; }
.mark-miss { color: var(--worse); font-weight: 700; }
.filter { margin: 6px 0; }
.filter input { font: inherit; padding: 4px 8px; width: 320px; }
footer { margin-top: 36px; color: var(--muted); font-size: 13px; }
"""

# Sorting: click a header (again to reverse); numeric columns sort by their data-v value,
# empty values last either way. The filter hides rows that do not contain the typed text.
_SCRIPT = """
(function () {
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
    heads.forEach(function (th, column) {
      th.addEventListener("click", function () {
        var numeric = th.dataset.type === "number";
        var direction = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var key = function (row) { return row.cells[column].dataset.v; };
        rows.sort(function (a, b) {
          var x = key(a), y = key(b);
          if (x === "" || y === "") { return (x === "") - (y === ""); }
          var order = numeric ? Number(x) - Number(y) : x.localeCompare(y, undefined,
            {numeric: true});
          return direction * order;
        });
        heads.forEach(function (other) { other.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", direction === 1 ? "ascending" : "descending");
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  });
  var filter = document.getElementById("question-filter");
  if (filter) {
    var rows = document.querySelectorAll("#questions-table tbody tr");
    var count = document.getElementById("question-count");
    filter.addEventListener("input", function () {
      var term = filter.value.toLowerCase(), shown = 0;
      rows.forEach(function (row) {
        var match = row.textContent.toLowerCase().indexOf(term) !== -1;
        row.hidden = !match;
        shown += match ? 1 : 0;
      });
      count.textContent = shown + " of " + rows.length + " shown";
    });
  }
})();
"""


def _e(text: object) -> str:
    """Text or an attribute value: ``& < > " '`` escaped, so it can end neither."""
    return escape(str(text), quote=True)


def _anchor(name: str) -> str:
    """An element id from user text: ASCII letters, digits and ``-`` kept, everything else
    encoded (``_2f_`` for ``/``, ``_5f_`` for ``_`` itself, so no two names meet), safe in
    an id, a URL fragment and a CSS selector alike."""
    return "".join(
        ch if (ch.isascii() and ch.isalnum()) or ch == "-" else f"_{ord(ch):x}_" for ch in name
    )


def _table(columns: Sequence[str], rows: Iterable[Sequence[str]], *, numeric_from: int = 1) -> str:
    """A plain table of already-formatted cells (escaped here)."""
    head = "".join(
        f"<th{' class=num' if index >= numeric_from else ''}>{_e(column)}</th>"
        for index, column in enumerate(columns)
    )
    body = "".join(
        "<tr>"
        + "".join(
            f"<td{' class=num' if index >= numeric_from else ''}>{_e(cell)}</td>"
            for index, cell in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _interval(value: MetricValue) -> str:
    return bounds(value.ci)


def _percent(report: RunReport) -> str:
    return f"{report.record.manifest.confidence:.0%}"


# --- sections -------------------------------------------------------------------------------


def _header(report: RunReport) -> str:
    record = report.record
    manifest = record.manifest
    latency = latency_summary(record_latencies(record))
    errored = f", {record.errored} errored" if record.errored else ""
    title = f"{record.set} × {report.label}"
    if report.baseline is not None:
        title += f" against {report.baseline_label}"
    facts = [
        f"set <b>{_e(record.set)}</b>",
        f"retriever <b>{_e(record.model)}</b> (plugin {_e(manifest.plugin)})",
        f"{len(record.outcomes)} questions{errored}",
        f"run <code>{_e(record.run_id)}</code> of {_e(manifest.created_at)}",
    ]
    if manifest.git_commit:
        facts.append(f"commit <code>{_e(manifest.git_commit[:12])}</code>")
    facts.append(
        f"latency mean {number(latency['mean'], 1)} ms, p50 {number(latency['p50'], 1)} ms, "
        f"p95 {number(latency['p95'], 1)} ms"
    )
    sections = [("headline", "Headline"), *_slice_sections(report)]
    sections += [("ranks", "First relevant rank"), ("history", "History")]
    if report.comparison is not None:
        sections.append(("differences", "Per-question differences"))
    sections.append(("questions", "Questions"))
    links = "".join(f'<a href="#{_e(anchor)}">{_e(name)}</a>' for anchor, name in sections)
    return (
        f"<header><h1>retrievalkit report: {_e(title)}</h1>"
        f'<p class="meta">{" · ".join(facts)}</p><nav>{links}</nav></header>'
    )


def _slice_sections(report: RunReport) -> list[tuple[str, str]]:
    return [
        (f"by-{_anchor(field)}", f"By {field.replace('_', ' ')}")
        for field, values in report.record.slices.items()
        if values
    ]


def _warnings(report: RunReport) -> str:
    notes = list(report.warnings)
    errored = [row for row in report.questions if row.result.error is not None]
    if errored:
        notes.append(
            f"{len(errored)} of {len(report.questions)} questions errored: each counts as a miss "
            "in every metric (listed below and marked in the question table)"
        )
    if not notes:
        return ""
    items = "".join(f"<li>{_e(note)}</li>" for note in notes)
    return f'<ul class="warnings" id="warnings">{items}</ul>'


def _verdict(report: RunReport) -> str:
    """The regression gate's verdict, as `eval` printed it: a failed gate is never silent."""
    from retrievalkit.render.text import verdict_lines

    verdict = report.verdict
    if verdict is None:
        state, heading = "none", "Gate: not checked"
    elif verdict.regressed:
        state, heading = "failed", "Gate: REGRESSION"
    else:
        state, heading = "passed", "Gate: no regression"
    lines = verdict_lines(
        verdict, report.verdict_note, confidence=report.record.manifest.confidence
    )
    items = "".join(f"<li>{_e(line.strip())}</li>" for line in lines)
    return (
        f'<section class="verdict {state}" id="verdict" data-verdict="{state}">'
        f"<h2>{_e(heading)}</h2><ul>{items}</ul></section>"
    )


def _card(name: str, body: str) -> str:
    return f'<div class="card"><div class="name">{_e(name)}</div>{body}</div>'


def _headline(report: RunReport) -> str:
    record = report.record
    percent = _percent(report)
    parts = [f'<section id="headline"><h2>Headline metrics of {_e(report.label)}</h2>']
    names = headline(record.metrics)
    cards = []
    deltas = _deltas(report.comparison)
    for name in names:
        value = record.metrics[name]
        body = (
            f'<div class="value">{number(value.mean)}</div>'
            f'<div class="ci">{percent} CI {_interval(value)}</div>'
            f'<div class="ci">n = {value.n} · {_e(value.method or NONE)}</div>'
        )
        delta = deltas.get(name)
        if delta is not None:
            body += _delta_lines(delta, report)
        cards.append(_card(name, body))
    parts.append(f'<div class="cards">{"".join(cards)}</div>')
    parts.append(
        f"<p class=note>Means over the questions where the metric is defined, with "
        f"{percent} intervals chosen by the kind of values: exact binomial "
        f"(clopper-pearson) for 0/1 values, BCa bootstrap ({record.manifest.resamples} "
        "resamples) for the others; the method is shown per metric.</p>"
    )
    if report.comparison is not None:
        parts.append(_comparison_tables(report.comparison))
    else:
        ordered = sorted(record.metrics.items(), key=lambda item: metric_order(item[0]))
        rows = [
            [name, number(v.mean), _interval(v), v.method or NONE, str(v.n)] for name, v in ordered
        ]
        parts.append(
            "<details><summary>All metrics</summary>"
            + _table(["metric", "mean", f"{percent} CI", "method", "n"], rows)
            + "</details>"
        )
    errored = [row for row in report.questions if row.result.error is not None]
    if errored:
        items = "".join(
            f"<li><code>{_e(row.question_id)}</code>: {_e(row.result.error)}</li>"
            for row in errored
        )
        parts.append(f"<h3>Errored questions ({len(errored)})</h3><ul>{items}</ul>")
    parts.append(_manifest(record))
    parts.append("</section>")
    return "".join(parts)


def _stages(report: RunReport) -> str:
    """Each stage's metrics and change from the stage before, and where misses happened."""
    from retrievalkit.render.stages import attribution_lines, stage_columns, stage_rows

    stages = report.record.stages
    if stages is None:
        return ""
    head, *counts = attribution_lines(stages)
    items = "".join(f"<li>{_e(line.strip())}</li>" for line in counts)
    return (
        '<section id="stages"><h2>Stages</h2><p class=note>Each stage of the retriever scored '
        "on every question; Δ is the paired difference from the stage before, with its "
        f"interval.</p>{_table(stage_columns(stages), stage_rows(stages))}"
        f"<p>{_e(head)}</p>{f'<ul>{items}</ul>' if items else ''}</section>"
    )


def _deltas(comparison: Comparison | None) -> dict[str, MetricDelta]:
    if comparison is None:
        return {}
    return {delta.metric: delta for delta in comparison.pairs[0].metrics}


def _delta_lines(delta: MetricDelta, report: RunReport) -> str:
    tone = ""
    if delta.significant and delta.difference is not None:
        tone = " better" if delta.difference > 0 else " worse"
    mark = " (significant)" if delta.significant else ""
    if delta.verdict == "unresolvable":
        mark = " (unresolvable)"
    return (
        f'<hr><div class="base">{_e(report.baseline_label)} (baseline): '
        f"{number(delta.baseline)}</div>"
        f'<div class="diff{tone}">difference {signed(delta.difference)}{mark}</div>'
        f'<div class="ci">CI {_e(ci_text(delta))}</div>'
        f'<div class="ci">p {_e(p_text(delta.p_value))} · smallest attainable p '
        f"{_e(p_text(delta.p_floor))} · {delta.discordant} discordant · W/T/L "
        f"{delta.wins}/{delta.ties}/{delta.losses}</div>"
    )


def _comparison_tables(comparison: Comparison) -> str:
    pair = comparison.pairs[0]
    return (
        f"<p class=note>{_e(header_line(comparison))}. Differences are "
        f"{_e(pair.candidate)} − {_e(pair.baseline)}; * marks p &lt; "
        f"{1 - comparison.confidence:.2f}; W/T/L: questions won, tied and lost.</p>"
        + _table(system_columns(comparison), system_rows(comparison), numeric_from=2)
        + "<details><summary>Every metric, paired</summary>"
        + _table(metric_columns(comparison, pair), metric_rows(comparison, pair))
        + "</details>"
    )


def _manifest(record: ResultRecord) -> str:
    manifest = record.manifest
    rows = [
        ["retriever options (secrets redacted)", _options(manifest.retriever_options)],
        ["retriever options hash", manifest.retriever_options_hash],
        ["set content hash", manifest.set_hash],
        ["k", ", ".join(str(k) for k in manifest.ks)],
        ["overfetch", str(manifest.overfetch)],
        [
            "confidence, resamples, seed",
            f"{manifest.confidence}, {manifest.resamples}, {manifest.seed}",
        ],
        ["retrievalkit", manifest.retrievalkit_version],
        ["git commit", manifest.git_commit or NONE],
    ]
    return (
        "<details><summary>How this run was made (manifest)</summary>"
        + _table(["field", "value"], rows, numeric_from=99)
        + "</details>"
    )


def _options(options: object) -> str:
    import json

    return json.dumps(options, sort_keys=True, ensure_ascii=False, default=str)


def _systems(report: RunReport) -> list[tuple[str, ResultRecord]]:
    """(label, record) of every run shown, the baseline first and the reported run last."""
    shown = [(report.label, report.record)]
    if report.baseline is not None and report.baseline_label is not None:
        shown.insert(0, (f"{report.baseline_label} (baseline)", report.baseline))
    return shown


def _slices(report: RunReport) -> str:
    parts = []
    systems = _systems(report)
    fields = [field for field, values in report.record.slices.items() if values]
    for field, (anchor, heading) in zip(fields, _slice_sections(report), strict=True):
        metrics = headline(report.record.metrics)
        svg = charts.slice_chart(
            field, [(label, record.slices.get(field, {})) for label, record in systems], metrics
        )
        percent = _percent(report)
        tables = []
        for label, record in systems:
            rows = []
            for slice_label, values in record.slices.get(field, {}).items():
                size = max(value.n for value in values.values()) if values else 0
                cells = [
                    NONE
                    if name not in values or values[name].mean is None
                    else f"{number(values[name].mean)} {_interval(values[name])}"
                    for name in metrics
                ]
                rows.append([slice_label, str(size), *cells])
            tables.append(f"<h3>{_e(label)}</h3>" + _table([field, "questions", *metrics], rows))
        parts.append(
            f'<section id="{_e(anchor)}"><h2>{_e(heading)}</h2><figure>{svg}<figcaption>'
            f"Bars: means; whiskers: {percent} intervals. In brackets: questions in "
            "the slice.</figcaption></figure><details><summary>The numbers</summary>"
            + "".join(tables)
            + "</details></section>"
        )
    return "".join(parts)


def _ranks(report: RunReport) -> str:
    answerable = [row for row in report.questions if row.expected]
    no_answer = len(report.questions) - len(answerable)
    series: list[tuple[str, list[int | None]]] = [
        (report.label, [row.result.first_relevant for row in answerable])
    ]
    if report.comparison is not None and report.baseline_label is not None:
        compared = [row for row in answerable if row.baseline is not None]
        series = [
            (
                f"{report.baseline_label} (baseline)",
                [row.baseline.first_relevant for row in compared if row.baseline],
            ),
            (report.label, [row.result.first_relevant for row in compared]),
        ]
    svg = charts.rank_histogram(series, report.depth)
    left_out = (
        f" {no_answer} no-answer questions are left out (they have no relevant document)."
        if no_answer
        else ""
    )
    return (
        f'<section id="ranks"><h2>First relevant rank</h2><figure>{svg}<figcaption>'
        f"Where the first relevant document (grade 1 or more) came back, over "
        f"{len(series[-1][1])} answerable questions; errored questions count as none.{left_out}"
        "</figcaption></figure></section>"
    )


def _history(report: RunReport) -> str:
    record = report.record
    head = f'<section id="history"><h2>History of {_e(record.set)} × {_e(record.model)}</h2>'
    if not report.history:
        return head + f"<p class=note>No runs of this key in {_e(report.store)}.</p></section>"
    highlight = {record.run_id: "this run"}
    if report.baseline is not None:
        highlight[report.baseline.run_id] = "baseline"
    metrics = [name for name in TREND if name in record.metrics]
    svg = charts.history_chart(report.history, metrics, highlight)
    note = f"The {len(report.history)} runs of this set and retriever in {_e(report.store)}"
    if len(report.history) == 1:
        note = (
            f"The only run of this set and retriever in {_e(report.store)} so far; the line "
            "grows with every run saved there"
        )
    return (
        f"{head}<figure>{svg}<figcaption>{note}, oldest left. Bands: {_percent(report)} "
        "intervals. Dotted lines: the retriever's options or the set changed since the run "
        "before.</figcaption></figure></section>"
    )


def _differences(report: RunReport) -> str:
    if report.comparison is None or report.baseline_label is None:
        return ""
    metric = report.difference_metric
    svg = charts.difference_chart(report.differences(), metric, report.baseline_label, report.label)
    return (
        f'<section id="differences"><h2>Per-question differences</h2><figure>{svg}'
        f"<figcaption>{_e(metric)} of {_e(report.label)} minus {_e(report.baseline_label)}, "
        "question by question, for the questions where it changed; sorted from the largest "
        "loss to the largest gain.</figcaption></figure></section>"
    )


# --- the question table ---------------------------------------------------------------------


def _cell(content: str, sort_value: object, *, css: str = "") -> str:
    value = "" if sort_value is None else sort_value
    klass = f' class="{css}"' if css else ""
    return f'<td{klass} data-v="{_e(value)}">{content}</td>'


def _mark(value: float | None) -> str:
    if value is None:
        return NONE
    if value >= 1.0:
        return '<span class="mark-hit" title="hit">✓</span>'
    return '<span class="mark-miss" title="miss">✗</span>'


def _ranking(row: QuestionRow, result: QuestionResult) -> str:
    """The top documents as a list; past `SHOWN`, folded away."""
    if result.error is not None:
        return "<i>error</i>"
    if not result.ranking:
        return "<i>nothing</i>"
    items = []
    for doc in result.ranking:
        grade = row.judgments.get(doc)
        css = ""
        if grade is not None:
            css = ' class="relevant"' if grade >= 1 else ' class="judged-not-relevant"'
        items.append(f"<li{css}>{_e(doc)}</li>")
    shown = f'<ol class="ranking ids">{"".join(items[:SHOWN])}</ol>'
    if len(items) <= SHOWN:
        return shown
    rest = f'<ol class="ranking ids" start="{SHOWN + 1}">{"".join(items[SHOWN:])}</ol>'
    return f"{shown}<details><summary>{len(items) - SHOWN} more</summary>{rest}</details>"


def _rank_text(result: QuestionResult) -> str:
    return NONE if result.first_relevant is None else str(result.first_relevant)


def _move(row: QuestionRow, metric: str) -> float | None:
    """This run minus the baseline in ``metric``; None where either is undefined."""
    if row.baseline is None:
        return None
    value = row.result.scores.get(metric)
    before = row.baseline.scores.get(metric)
    return None if value is None or before is None else value - before


def _listed(report: RunReport) -> list[QuestionRow]:
    """The rows the table lists: all of them, or past `TABLE_ROWS` the most telling ones,
    in the run's order."""
    rows = report.questions
    if len(rows) <= TABLE_ROWS:
        return list(rows)
    metric = report.difference_metric
    compare = report.comparison is not None

    def priority(index: int) -> tuple[int, float, int]:
        row = rows[index]
        if row.result.error is not None or (row.baseline is not None and row.baseline.error):
            return (0, 0.0, index)
        move = _move(row, metric) if compare else None
        if move is not None and abs(move) >= 1e-12:
            return (1, -abs(move), index)
        if row.expected and row.result.first_relevant is None:
            return (2, 0.0, index)
        return (3, 0.0, index)

    chosen = sorted(heapq.nsmallest(TABLE_ROWS, range(len(rows)), key=priority))
    return [rows[index] for index in chosen]


def _left_out(report: RunReport, listed: int) -> str:
    total = len(report.questions)
    if listed == total:
        return ""
    order = "every errored question first, "
    if report.comparison is not None:
        order += f"then the largest changes in {report.difference_metric}, "
    order += "then the misses, then the rest, in the run's order"
    return (
        f'<p class="note" id="questions-left-out">This run has {total} questions; the table '
        f"lists {listed} of them ({_e(order)}) and leaves out the other {total - listed}. "
        "Every metric, chart and count above covers all the questions; "
        f"<code>retrievalkit show {_e(report.record.run_id)} --format json</code> lists "
        "every one.</p>"
    )


def _question_table(report: RunReport) -> str:
    record = report.record
    hits = [name for name in HIT_COLUMNS if name in record.metrics]
    compare = report.comparison is not None
    metric = report.difference_metric
    texts = any(row.text is not None for row in report.questions)
    columns: list[tuple[str, str]] = [("id", "text")]
    if texts:
        columns.append(("question", "text"))
    columns += [("form", "text"), ("hard class", "text"), ("expected", "text")]
    columns += [("returned", "text"), ("rank", "number")]
    columns += [(name, "number") for name in hits]
    columns.append((metric, "number"))
    if compare:
        columns += [("baseline rank", "number"), (f"Δ {metric}", "number")]
    columns.append(("latency ms", "number"))
    errors_shown = any(
        row.result.error is not None or (row.baseline is not None and row.baseline.error)
        for row in report.questions
    )
    if errors_shown:
        columns.append(("error", "text"))
    head = "".join(
        f'<th data-type="{kind}"{" class=num" if kind == "number" else ""}>{_e(name)}</th>'
        for name, kind in columns
    )
    body = []
    listed = _listed(report)
    for row in listed:
        result = row.result
        answerable = bool(row.expected)
        if result.error is not None:
            css = "error"
        elif answerable and result.first_relevant is None:
            css = "miss"
        else:
            css = "hit" if answerable else "no-answer"
        cells = [_cell(f"<code>{_e(row.question_id)}</code>", row.question_id)]
        if texts:
            cells.append(_cell(_e(row.text or ""), row.text or "", css="text"))
        cells.append(_cell(_e(row.form or ""), row.form or ""))
        cells.append(_cell(_e(row.hard_class or ""), row.hard_class or ""))
        expected = "<br>".join(f'<span class="ids">{_e(doc)}</span>' for doc in row.expected)
        cells.append(_cell(expected or "<i>no answer</i>", " ".join(row.expected)))
        cells.append(_cell(_ranking(row, result), " ".join(result.ranking)))
        cells.append(_cell(_rank_text(result), result.first_relevant, css="num"))
        for name in hits:
            value = result.scores.get(name)
            cells.append(_cell(_mark(value), value, css="num"))
        value = result.scores.get(metric)
        cells.append(_cell(number(value), value, css="num"))
        if compare:
            other = row.baseline
            base_rank = None if other is None else other.first_relevant
            cells.append(_cell(NONE if other is None else _rank_text(other), base_rank, css="num"))
            move = _move(row, metric)
            tone = "" if move is None or abs(move) < 1e-12 else ("better" if move > 0 else "worse")
            cells.append(_cell(signed(move), move, css=f"num {tone}".strip()))
        cells.append(_cell(f"{result.latency_ms:.1f}", result.latency_ms, css="num"))
        if errors_shown:
            errors = [] if result.error is None else [result.error]
            if compare and row.baseline is not None and row.baseline.error is not None:
                errors.append(f"baseline: {row.baseline.error}")
            cells.append(_cell(_e("; ".join(errors)), "; ".join(errors)))
        body.append(f'<tr class="{css}">{"".join(cells)}</tr>')
    total = len(listed)
    note = f"<p class=note>{_e(report.texts_note)}</p>" if report.texts_note else ""
    note += _left_out(report, total)
    return (
        f'<section id="questions"><h2>Questions</h2>{note}<p class=note>Click a column '
        "heading to sort (again to reverse). <i>rank</i>: where the first relevant "
        "document came back. In <i>returned</i>, relevant documents are bold, documents "
        "judged not relevant are struck through; rows of misses and errors are tinted.</p>"
        '<div class="filter"><input type="search" id="question-filter" '
        'placeholder="filter: any text in the row" aria-label="filter questions"> '
        f'<span id="question-count">{total} of {total} shown</span></div>'
        f'<div class="scroll"><table id="questions-table" class="sortable"><thead><tr>{head}'
        f"</tr></thead><tbody>{''.join(body)}</tbody></table></div></section>"
    )


def render_html_report(report: RunReport) -> str:
    """The whole page. Needs matplotlib (the ``report`` extra) for the charts."""
    record = report.record
    title = f"retrievalkit report: {record.set} × {report.label}"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head>\n<body><main>\n"
        + _header(report)
        + _verdict(report)
        + _warnings(report)
        + _headline(report)
        + _stages(report)
        + _slices(report)
        + _ranks(report)
        + _history(report)
        + _differences(report)
        + _question_table(report)
        + f"<footer>Made by retrievalkit {_e(__version__)} from the store {_e(report.store)}. "
        "This file is self-contained: it loads nothing from the network.</footer>"
        + f"\n</main><script>{_SCRIPT}</script></body></html>\n"
    )
