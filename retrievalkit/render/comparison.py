"""Renderers of a `pipeline.gating.comparison.Comparison`: JSON, Markdown and rich tables."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from retrievalkit.formats.convert import unstructure
from retrievalkit.formats.numbers import bounds, milliseconds, ratio, ratio_interval
from retrievalkit.formats.numbers import signed as signed
from retrievalkit.metrics.definitions import metric_order, parse_metric
from retrievalkit.render.summary import without_unset_clusters
from retrievalkit.render.terminal import plain, printable
from retrievalkit.render.text import NONE, number, percent
from retrievalkit.render.text import p_text as p_text

if TYPE_CHECKING:
    from rich.console import Group

    from retrievalkit.model.comparisons import ComparedRuns as Comparison
    from retrievalkit.model.comparisons import MetricDelta, PairComparison, QuestionChange


def comparison_document(comparison: Comparison) -> dict[str, Any]:
    """The JSON form (``--format json``): every field of the result, undefined values null."""
    document: dict[str, Any] = without_unset_clusters(unstructure(comparison))
    return document


def ci_text(delta: MetricDelta) -> str:
    return bounds(delta.ci, sign=True)


def header_line(comparison: Comparison) -> str:
    if comparison.cluster_by is not None:
        counts = sorted(
            {delta.clusters or 0 for pair in comparison.pairs for delta in pair.metrics} - {0}
        )
        return (
            f"set {comparison.set_name} · {comparison.shared_questions} questions in "
            f"{'/'.join(map(str, counts)) or NONE} clusters (by {comparison.cluster_by}) "
            f"compared pairwise · {percent(comparison.confidence)} cluster bootstrap "
            f"intervals ({comparison.resamples} resamples) · sign-flip p-values on cluster "
            "sums (exact while enumerable)" + _correction_text(comparison)
        )
    return (
        f"set {comparison.set_name} · {comparison.shared_questions} questions compared "
        f"pairwise · {percent(comparison.confidence)} paired intervals (BCa bootstrap, "
        f"{comparison.resamples} resamples; adjusted-t where fewer than 30 questions differ) · "
        "sign-flip permutation p-values (exact while enumerable)" + _correction_text(comparison)
    )


def _correction_text(comparison: Comparison) -> str:
    if comparison.correction == "tukey":
        if comparison.family == "pairs and metrics":
            return (
                " · randomised Tukey HSD over the systems (10,000 permutations), "
                "Bonferroni over the metrics"
            )
        return " · randomised Tukey HSD over the systems (10,000 permutations)"
    if comparison.correction != "holm":
        return ""
    if comparison.family == "pairs and metrics":
        return " · Holm-corrected over every pair and metric"
    return " · Holm-corrected over the candidates"


#: The column of the adjusted p-values, by correction.
_ADJUSTED_COLUMNS = {"holm": "p (Holm)", "tukey": "p (Tukey)"}


def _adjusted_column(comparison: Comparison) -> str:
    return _ADJUSTED_COLUMNS.get(comparison.correction or "", "p (adjusted)")


def effect_text(delta: MetricDelta) -> str:
    """d_z and its interval, e.g. ``0.42 [0.10, 0.73]``."""
    effect = delta.effect_size
    if not effect:
        return NONE
    value, ci = effect["value"], effect.get("ci")
    assert isinstance(value, float)
    if not isinstance(ci, list | tuple):
        return f"{value:+.2f}"
    return f"{value:+.2f} [{ci[0]:+.2f}, {ci[1]:+.2f}]"


def _significance_note(comparison: Comparison) -> str:
    alpha = 1.0 - comparison.confidence
    which = {"holm": "Holm-adjusted p", "tukey": "Tukey-adjusted p"}.get(
        comparison.correction or "", "p"
    )
    return (
        f"* significant: {which} < {alpha:.2f}; unresolvable (? in the terminal): so few "
        "questions differ that "
        f"even the smallest attainable p is not below {alpha:.2f}; W/T/L: questions the "
        "candidate won, tied and lost against the baseline"
    )


def _judged_names(comparison: Comparison) -> list[str]:
    return sorted(
        {name for system in comparison.systems for name in system.judged},
        key=metric_order,
    )


def system_columns(comparison: Comparison) -> list[str]:
    judged = _judged_names(comparison)
    ks = " ".join(f"@{parse_metric(name).k}" for name in judged)
    return ["system", "run", "questions", *([f"judged {ks}"] if judged else [])]


def system_rows(comparison: Comparison) -> list[list[str]]:
    judged = _judged_names(comparison)
    rows = []
    for system in comparison.systems:
        errored = f", {system.errored} errored" if system.errored else ""
        row = [system.label, system.run_id, f"{system.questions}{errored}"]
        if judged:
            row.append(" ".join(number(system.judged.get(name), 2) for name in judged))
        rows.append(row)
    return rows


def metric_columns(
    comparison: Comparison, pair: PairComparison, *, compact: bool = False
) -> list[str]:
    """Markdown shows raw and adjusted p-values; the compact terminal table only the
    decisive one."""
    columns = ["metric", pair.baseline, pair.candidate, "diff" if compact else "difference", "CI"]
    adjusted = _adjusted_column(comparison)
    if compact:
        columns.append(adjusted if comparison.correction else "p")
    else:
        columns += ["p", adjusted] if comparison.correction else ["p"]
    columns.append("W/T/L")
    if _has_judged(pair):
        columns.append("judged")
    if not compact:
        columns.append("d_z [CI]")
    return columns


def _has_judged(pair: PairComparison) -> bool:
    return any(delta.judged is not None for delta in pair.metrics)


def judged_cell(delta: MetricDelta) -> str:
    """Both sides' judged@k beside a difference: ``@10 0.62/0.91``."""
    context = delta.judged
    if context is None:
        return NONE
    k = context.measure.removeprefix("judged")
    return f"{k} {number(context.baseline, 2)}/{number(context.candidate, 2)}"


def condensed_lines(pair: PairComparison) -> list[str]:
    """The condensed result of each difference whose judged shares differ by more than the
    margin, said plainly when it disagrees with the difference itself."""
    lines = []
    for delta in pair.metrics:
        context = delta.judged
        if context is None or context.condensed_metric is None:
            continue
        interval = (
            NONE
            if context.condensed_ci is None
            else f"[{context.condensed_ci[0]:+.3f}, {context.condensed_ci[1]:+.3f}]"
        )
        line = (
            f"{delta.metric}: {context.measure} {number(context.baseline, 2)} against "
            f"{number(context.candidate, 2)} (more than {context.margin:.2f} apart); "
            f"{context.condensed_metric} {signed(context.condensed_difference)} {interval}, "
            f"{context.condensed_verdict or 'no test'}"
        )
        if context.disagree:
            line += (
                f"; it disagrees with {delta.metric} {signed(delta.difference)}: the "
                "difference may come from which documents were labelled"
            )
        lines.append(line)
    return lines


def metric_rows(
    comparison: Comparison, pair: PairComparison, *, compact: bool = False
) -> list[list[str]]:
    rows = []
    for delta in pair.metrics:
        mark = " *" if delta.significant else ""
        if delta.verdict == "unresolvable":
            # The terminal's compact table marks it short, so that its numbers fit 80 columns.
            mark = " ?" if compact else " (unresolvable)"
        row = [
            delta.metric,
            number(delta.baseline),
            number(delta.candidate),
            signed(delta.difference) + mark,
            ci_text(delta),
        ]
        if not compact or not comparison.correction:
            row.append(p_text(delta.p_value))
        if comparison.correction:
            row.append(p_text(delta.p_adjusted))
        row.append(f"{delta.wins}/{delta.ties}/{delta.losses}")
        if _has_judged(pair):
            row.append(judged_cell(delta))
        if not compact:
            row.append(effect_text(delta))
        rows.append(row)
    return rows


def _rank(value: int | None, error: str | None) -> str:
    if error is not None:
        return "error"
    return NONE if value is None else str(value)


def change_columns(pair: PairComparison) -> list[str]:
    return [
        "question",
        "text",
        pair.baseline,
        pair.candidate,
        "difference",
        "first relevant rank",
    ]


def change_row(change: QuestionChange) -> list[str]:
    return [
        change.question_id,
        change.question or "",
        number(change.baseline),
        number(change.candidate),
        signed(change.difference),
        f"{_rank(change.baseline_rank, change.baseline_error)} -> "
        f"{_rank(change.candidate_rank, change.candidate_error)}",
    ]


def latency_columns(comparison: Comparison) -> list[str]:
    return ["latency", "baseline", "candidate", "ratio", f"{percent(comparison.confidence)} CI"]


def latency_rows(pair: PairComparison) -> list[list[str]]:
    """One row a quantile: both runs' latency, the ratio candidate / baseline, its paired
    bootstrap interval; none when no question was answered in both runs."""
    return [
        [
            change.statistic,
            milliseconds(change.baseline),
            milliseconds(change.candidate),
            ratio(change.ratio),
            ratio_interval(change.ci),
        ]
        for change in pair.latency
    ]


def latency_note(pair: PairComparison) -> str:
    questions = pair.latency[0].n if pair.latency else 0
    return (
        f"Latency: ratio candidate / baseline over the {questions} questions both answered, "
        "paired bootstrap interval."
    )


def cost_note(pair: PairComparison, confidence: float) -> str | None:
    """``Cost per question: 0.001 -> 0.0012, ratio 1.200x (95% CI [...]), over N
    questions, paired bootstrap``; None when the two runs have no cost to compare."""
    from retrievalkit.render.text import price

    change = pair.cost
    if change is None:
        return None
    return (
        f"Cost per question: {price(change.baseline)} -> {price(change.candidate)}, ratio "
        f"{ratio(change.ratio)} ({percent(confidence)} CI {ratio_interval(change.ci)}), over "
        f"the {change.n} questions both asked, {change.method} interval."
    )


def _escape(text: str) -> str:
    return printable(text.replace("\n", " ")).replace("|", "\\|")


def _markdown_table(columns: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(_escape(column) for column in columns) + " |"]
    lines.append("|" + "---|" * len(columns))
    lines += ["| " + " | ".join(_escape(cell) for cell in row) + " |" for row in rows]
    return lines


def render_comparison_markdown(comparison: Comparison) -> str:
    labels = " vs ".join(system.label for system in comparison.systems)
    lines = [f"# retrievalkit comparison: {_escape(labels)}", "", _escape(header_line(comparison))]
    lines.append("")
    if comparison.warnings:
        lines += ["## Warnings", ""]
        lines += [f"- **warning**: {_escape(warning)}" for warning in comparison.warnings]
        lines.append("")
    lines += ["## Systems", ""]
    lines += _markdown_table(system_columns(comparison), system_rows(comparison))
    for pair in comparison.pairs:
        lines += ["", f"## {_escape(pair.candidate)} against {_escape(pair.baseline)}", ""]
        lines += _markdown_table(metric_columns(comparison, pair), metric_rows(comparison, pair))
        lines += ["", _significance_note(comparison)]
        condensed = condensed_lines(pair)
        if condensed:
            lines += ["", "Condensed rankings (unjudged documents removed):", ""]
            lines += [f"- {_escape(line)}" for line in condensed]
        if pair.latency:
            lines += ["", "### Latency", ""]
            lines += _markdown_table(latency_columns(comparison), latency_rows(pair))
            lines += ["", latency_note(pair)]
        spent = cost_note(pair, comparison.confidence)
        if spent is not None:
            lines += ["", "### Cost", "", _escape(spent)]
        lines += ["", f"### Questions that changed most ({_escape(pair.changed_by)})", ""]
        if pair.changed:
            rows = [change_row(change) for change in pair.changed]
            lines += _markdown_table(change_columns(pair), rows)
        else:
            lines.append(f"No question changed its {pair.changed_by}.")
    lines.append("")
    return "\n".join(lines)


def comparison_renderable(comparison: Comparison) -> Group:
    """The comparison for a terminal: every label and question text as plain text."""
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from retrievalkit.render.fitting import FittedTable, fit

    def table(
        title: str,
        columns: list[str],
        rows: list[list[str]],
        *,
        numeric_from: int,
        drop: list[int],
        wrap: tuple[int, ...] = (),
    ) -> FittedTable:
        # Every cell on one line (question texts may wrap between words); too narrow for
        # all columns, the ones named in ``drop`` give way, first to go first.
        view = Table(
            title=plain(title, style="italic"),
            title_justify="left",
            box=box.SIMPLE_HEAD,
            pad_edge=False,
        )
        for index, column in enumerate(columns):
            view.add_column(plain(column), justify="right" if index >= numeric_from else "left")
        for row in rows:
            view.add_row(*[plain(cell) for cell in row])
        return fit(view, drop=drop, wrap=wrap)

    parts: list[FittedTable | Text] = [plain(header_line(comparison), style="bold")]
    parts.append(
        table(
            "Systems",
            columns := system_columns(comparison),
            system_rows(comparison),
            numeric_from=1,
            drop=[*range(3, len(columns)), 2, 1],
        )
    )
    for pair in comparison.pairs:
        deltas = table(
            f"{pair.candidate} against {pair.baseline}",
            metric_columns(comparison, pair, compact=True),
            metric_rows(comparison, pair, compact=True),
            numeric_from=1,
            # The difference (marked * when significant) and its interval go last.
            drop=[-1, -2, -3, 1, 2, 4] if _has_judged(pair) else [-1, -2, 1, 2, 4],
        )
        parts += [deltas, plain(_significance_note(comparison))]
        parts += [plain(f"condensed: {line}") for line in condensed_lines(pair)]
        if pair.latency:
            parts.append(
                table(
                    "Latency",
                    latency_columns(comparison),
                    latency_rows(pair),
                    numeric_from=1,
                    drop=[4, 1, 2],
                )
            )
            parts.append(plain(latency_note(pair)))
        spent = cost_note(pair, comparison.confidence)
        if spent is not None:
            parts.append(plain(spent))
        if not pair.changed:
            parts.append(plain(f"No question changed its {pair.changed_by}."))
            continue
        changes = table(
            f"Questions that changed most ({pair.changed_by})",
            change_columns(pair),
            [change_row(change) for change in pair.changed],
            numeric_from=2,
            drop=[5, 1, 2, 3],
            wrap=(1,),
        )
        parts.append(changes)
    parts += [plain(f"warning: {warning}", style="yellow") for warning in comparison.warnings]
    return Group(*parts)
