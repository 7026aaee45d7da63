"""The HTML report's charts: matplotlib figures written as inline SVG strings.

matplotlib is an optional dependency (``pip install 'retrievalkit-eval[report]'``) and is
imported inside these functions only, so the command line starts without it. Figures
are made with `matplotlib.figure.Figure` rather than pyplot: no GUI backend is
ever selected and no global figure state is touched, which is what choosing the Agg
backend is usually for. Text stays text (``svg.fonttype = none``): it is selectable and
searchable in the page, and matplotlib escapes it as XML. Math parsing is off, so a
hard class or id holding ``$`` is drawn as typed. A fixed hash salt and no date make
the same data give byte-identical SVG.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from html import escape
from typing import TYPE_CHECKING, Any

from retrievalkit.model.values import MetricValue

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from retrievalkit.render.run_report import HistoryPoint

#: This run, the baseline it is compared with, and improvements and losses (Okabe-Ito,
#: readable with the common colour-vision deficiencies).
RUN_COLOUR = "#0072b2"
BASELINE_COLOUR = "#9aa3ad"
BETTER_COLOUR = "#0072b2"
WORSE_COLOUR = "#d55e00"
METRIC_COLOURS = ("#0072b2", "#e69f00", "#009e73", "#cc79a7")

# Any: matplotlib's stubs type rc_context's keys as a Literal of every rc name.
_STYLE: Any = {
    "svg.fonttype": "none",
    "svg.hashsalt": "retrievalkit",
    "text.parse_math": False,
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Liberation Sans", "Arial", "Helvetica", "sans-serif"],
    "font.size": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": 11,
    "axes.titleweight": "bold",
    "axes.grid": True,
    "grid.color": "#e3e6ea",
    "grid.linewidth": 0.8,
    "axes.axisbelow": True,
    "legend.frameon": False,
}
_ROOT = re.compile(r"<svg\b[^>]*>")
_PROLOGUE = re.compile(r"^.*?(?=<svg\b)", re.DOTALL)
_METADATA = re.compile(r"\s*<metadata>.*?</metadata>", re.DOTALL)


def available() -> bool:
    """Whether matplotlib can be imported (the ``report`` extra is installed)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


@contextmanager
def _style() -> Iterator[None]:
    import matplotlib

    with matplotlib.rc_context(_STYLE):
        yield


def _figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _svg(figure: Figure, label: str) -> str:
    """The figure as an ``<svg>`` element to paste into HTML: no prologue, scales to its box."""
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = _METADATA.sub("", _PROLOGUE.sub("", buffer.getvalue(), count=1), count=1)
    root = _ROOT.search(text)
    assert root is not None
    view_box = re.search(r'viewBox="([^"]*)"', root.group(0))
    assert view_box is not None
    opening = (
        f'<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '
        f'viewBox="{view_box.group(1)}" class="chart" role="img" aria-label="{escape(label)}">'
    )
    return opening + text[root.end() :].strip() + "\n"


def _interval_errors(values: Sequence[MetricValue | None]) -> tuple[list[float], list[list[float]]]:
    """Bar lengths and matplotlib's asymmetric error arrays (0 where a value is undefined)."""
    means, below, above = [], [], []
    for value in values:
        mean = None if value is None else value.mean
        means.append(0.0 if mean is None else mean)
        if value is None or mean is None or value.ci is None:
            below.append(0.0)
            above.append(0.0)
        else:
            below.append(max(0.0, mean - value.ci[0]))
            above.append(max(0.0, value.ci[1] - mean))
    return means, [below, above]


def slice_chart(
    field: str,
    systems: Sequence[tuple[str, Mapping[str, Mapping[str, MetricValue]]]],
    metrics: Sequence[str],
) -> str:
    """One panel per metric: a horizontal bar per slice label (and system), with its interval.

    ``systems`` is (name, the run's slices of ``field``) per system, the baseline first
    and the reported run last; label sizes are the reported run's.
    """
    with _style():
        runs = systems[-1][1]
        labels = list(runs) + [label for _, slices in systems[:-1] for label in slices]
        labels = list(dict.fromkeys(labels))
        height = 1.1 + 0.32 * len(labels) * len(systems)
        figure = _figure(11, max(2.2, height))
        panels = figure.subplots(1, len(metrics), sharey=True, squeeze=False)[0]
        bar = 0.8 / len(systems)
        colours = [BASELINE_COLOUR] * (len(systems) - 1) + [RUN_COLOUR]
        for panel, metric in zip(panels, metrics, strict=True):
            for index, (name, slices) in enumerate(systems):
                values = [slices.get(label, {}).get(metric) for label in labels]
                means, errors = _interval_errors(values)
                # Labels top to bottom (the y axis is inverted); within a label the
                # baseline above the reported run, read as before and after.
                positions = [
                    row + (index - (len(systems) - 1) / 2) * bar for row in range(len(labels))
                ]
                panel.barh(
                    positions,
                    means,
                    height=bar * 0.9,
                    xerr=errors,
                    color=colours[index],
                    ecolor="#333333",
                    error_kw={"elinewidth": 1, "capsize": 2.5},
                    label=name,
                )
                for position, value in zip(positions, values, strict=True):
                    if value is None or value.mean is None:
                        panel.text(0.02, position, "undefined", va="center", fontsize=8)
            panel.set_title(metric)
            panel.set_xlim(0, 1.02)
            panel.set_xticks([0, 0.5, 1], ["0", "0.5", "1"])
            panel.grid(axis="y", visible=False)
        # The panels share their y axis: set its ticks and invert it once.
        panels[0].set_yticks(range(len(labels)), [_sized(label, runs) for label in labels])
        panels[0].invert_yaxis()
        if len(systems) > 1:
            handles, names = panels[0].get_legend_handles_labels()
            figure.legend(handles, names, loc="outside upper center", ncols=len(systems))
        return _svg(figure, f"metrics by {field}, with intervals")


def _sized(label: str, slices: Mapping[str, Mapping[str, MetricValue]]) -> str:
    metrics = slices.get(label)
    if not metrics:
        return label
    size = max(value.n for value in metrics.values())
    return f"{label} ({size})"


def rank_histogram(systems: Sequence[tuple[str, Sequence[int | None]]], depth: int) -> str:
    """Questions by the rank of their first relevant document; ``none`` past the scored depth.

    ``systems`` is (name, first relevant rank per answerable question), baseline first.
    """
    with _style():
        categories = [str(rank) for rank in range(1, depth + 1)] + [f"none in top {depth}"]
        figure = _figure(11, 3.4)
        axes = figure.add_subplot()
        bar = 0.8 / len(systems)
        colours = [BASELINE_COLOUR] * (len(systems) - 1) + [RUN_COLOUR]
        for index, (name, ranks) in enumerate(systems):
            counts = [0] * (depth + 1)
            for rank in ranks:
                counts[depth if rank is None or rank > depth else rank - 1] += 1
            offset = (index - (len(systems) - 1) / 2) * bar
            positions = [column + offset for column in range(len(categories))]
            bars = axes.bar(positions, counts, width=bar * 0.92, color=colours[index], label=name)
            axes.bar_label(bars, fontsize=8, padding=1)
        axes.set_xticks(range(len(categories)), categories)
        axes.set_xlabel("rank of the first relevant document")
        axes.set_ylabel("questions")
        axes.grid(axis="x", visible=False)
        axes.margins(y=0.12)
        if len(systems) > 1:
            axes.legend(loc="upper center", ncols=len(systems))
        return _svg(figure, "histogram of first relevant ranks")


def history_chart(
    points: Sequence[HistoryPoint], metrics: Sequence[str], highlight: Mapping[str, str]
) -> str:
    """Each metric over the key's runs, oldest left, with its interval as a band.

    ``highlight`` maps run ids to a label drawn over them (``this run``, ``baseline``);
    runs whose retriever options or set changed since the run before are marked.
    """
    with _style():
        figure = _figure(11, 3.6)
        axes = figure.add_subplot()
        xs = list(range(len(points)))
        for colour, metric in zip(METRIC_COLOURS, metrics, strict=False):
            values = [point.metrics.get(metric) for point in points]
            means = [None if v is None or v.mean is None else v.mean for v in values]
            ys = [float("nan") if mean is None else mean for mean in means]
            lows = [float("nan") if v is None or v.ci is None else v.ci[0] for v in values]
            highs = [float("nan") if v is None or v.ci is None else v.ci[1] for v in values]
            axes.plot(xs, ys, marker="o", markersize=4, color=colour, label=metric)
            axes.fill_between(xs, lows, highs, color=colour, alpha=0.13, linewidth=0)
        for x, point in enumerate(points):
            if point.marks:
                axes.axvline(x, color="#777777", linestyle=":", linewidth=1)
                axes.annotate(
                    " + ".join(point.marks) + " changed",
                    (x, 0.0),
                    xytext=(3, 3),
                    textcoords="offset points",
                    fontsize=8,
                    color="#555555",
                )
            if point.run_id in highlight:
                axes.axvline(x, color="#222222", linewidth=1.2, alpha=0.6)
                axes.annotate(
                    highlight[point.run_id],
                    (x, 1.02),
                    xytext=(0, 2),
                    textcoords="offset points",
                    ha="center",
                    fontsize=8,
                    fontweight="bold",
                )
        step = max(1, -(-len(points) // 12))
        ticks = xs[::step]
        axes.set_xticks(ticks, [_short_time(points[x].created_at) for x in ticks])
        axes.tick_params(axis="x", labelrotation=25, labelsize=8)
        axes.set_xlim(-0.5, len(points) - 0.5)
        axes.set_ylim(0, 1.08)
        axes.set_ylabel("mean (band: interval)")
        axes.legend(loc="lower left", ncols=len(metrics), bbox_to_anchor=(0, 1.04))
        return _svg(figure, "history of the key metrics over the stored runs")


def _short_time(created_at: str) -> str:
    """``2026-11-29T12:46:57Z`` -> ``2026-11-29 12:46:57``."""
    return created_at.replace("T", " ").rstrip("Z")


#: Past this many changed questions the difference chart is drawn as filled areas
#: rather than one bar per question (which would be narrower than a pixel anyway).
DRAWN_BARS = 1000


def difference_chart(
    differences: Sequence[tuple[str, float]], metric: str, baseline: str, candidate: str
) -> str:
    """The questions whose ``metric`` changed, sorted by the change; ties are counted, not drawn."""
    with _style():
        changed = sorted(
            ((question, move) for question, move in differences if abs(move) > 1e-12),
            key=lambda item: (item[1], item[0]),
        )
        better = sum(1 for _, move in changed if move > 0)
        worse = len(changed) - better
        same = len(differences) - len(changed)
        figure = _figure(11, 3.8)
        axes: Axes = figure.add_subplot()
        if changed:
            xs = range(len(changed))
            moves = [move for _, move in changed]
            if len(changed) <= DRAWN_BARS:
                colours = [BETTER_COLOUR if move > 0 else WORSE_COLOUR for move in moves]
                axes.bar(xs, moves, width=0.8, color=colours)
            else:
                # One bar each would be thousands of SVG paths, each narrower than a pixel:
                # the same sorted profile as one filled staircase per sign, a step per run
                # of equal differences.
                for positive, colour in ((False, WORSE_COLOUR), (True, BETTER_COLOUR)):
                    edges: list[float] = []
                    heights: list[float] = []
                    for index, move in enumerate(moves):
                        if (move > 0) != positive:
                            continue
                        if not heights or heights[-1] != move:
                            edges.append(index - 0.5)
                            heights.append(move)
                        last = index + 0.5
                    if heights:
                        edges.append(last)
                        axes.stairs(heights, edges, baseline=0, fill=True, color=colour)
            if len(changed) <= 80:
                axes.set_xticks(list(xs), [question for question, _ in changed])
                axes.tick_params(axis="x", labelrotation=90, labelsize=7)
            else:
                axes.set_xticks([])
            axes.set_xlim(-0.6, len(changed) - 0.4)
        else:
            axes.set_xticks([])
            axes.text(
                0.5, 0.5, f"no question changed its {metric}", ha="center", transform=axes.transAxes
            )
        axes.axhline(0, color="#333333", linewidth=0.8)
        axes.set_ylim(-1.05, 1.05)
        axes.grid(axis="x", visible=False)
        axes.set_ylabel(f"{metric}: {candidate} − {baseline}")
        axes.set_title(
            f"{better} better, {worse} worse, {same} unchanged (not drawn)",
            loc="left",
            fontsize=10,
            fontweight="normal",
        )
        return _svg(figure, f"per-question difference in {metric}")
