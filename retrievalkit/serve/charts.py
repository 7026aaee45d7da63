"""The geometry of the history chart (a metric's mean and interval over runs), for an SVG template.

Only numbers and plain strings come out of here; the template writes the SVG elements and
escapes every string, so the chart needs no script, no font download and no network.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

WIDTH = 820
HEIGHT = 280
LEFT, RIGHT, TOP, BOTTOM = 52, 16, 28, 40


@attrs.frozen
class TrendPoint:
    run_id: str
    created_at: str
    mean: float | None
    ci: tuple[float, float] | None
    pinned: bool


def _number(value: float) -> str:
    return f"{value:.1f}"


def trend_chart(points: Sequence[TrendPoint], *, title: str) -> dict[str, Any]:
    """Coordinates of the mean line, the interval band, one marker per run (its hover text
    names the run, its time, mean and interval) and the axes; runs without a value leave
    a gap in the line."""
    plot_width = WIDTH - LEFT - RIGHT
    plot_height = HEIGHT - TOP - BOTTOM
    values = [p.mean for p in points if p.mean is not None]
    lows = [p.ci[0] for p in points if p.ci is not None] or values
    highs = [p.ci[1] for p in points if p.ci is not None] or values
    low = min([*lows, *values], default=0.0)
    high = max([*highs, *values], default=1.0)
    # The axis spans 0 to 1 when the values do, else the values with some room.
    bottom = 0.0 if low >= 0 and high <= 1 else low
    top = 1.0 if low >= 0 and high <= 1 else (high if high > bottom else bottom + 1)

    def x(index: int) -> float:
        if len(points) == 1:
            return LEFT + plot_width / 2
        return LEFT + plot_width * index / (len(points) - 1)

    def y(value: float) -> float:
        return TOP + plot_height * (1 - (value - bottom) / (top - bottom))

    segments: list[str] = []
    current: list[str] = []
    band_top: list[str] = []
    band_bottom: list[str] = []
    markers = []
    for index, point in enumerate(points):
        if point.mean is None:
            if current:
                segments.append("M" + " L".join(current))
            current = []
            continue
        current.append(f"{_number(x(index))},{_number(y(point.mean))}")
        if point.ci is not None:
            band_top.append(f"{_number(x(index))},{_number(y(point.ci[1]))}")
            band_bottom.append(f"{_number(x(index))},{_number(y(point.ci[0]))}")
        interval = "" if point.ci is None else f" [{point.ci[0]:.3f}, {point.ci[1]:.3f}]"
        markers.append(
            {
                "x": _number(x(index)),
                "y": _number(y(point.mean)),
                "pinned": point.pinned,
                "run_id": point.run_id,
                "hover": f"{point.run_id} ({point.created_at}): {point.mean:.3f}{interval}"
                + (" — pinned baseline" if point.pinned else ""),
            }
        )
    if current:
        segments.append("M" + " L".join(current))
    ticks = [bottom + (top - bottom) * step / 4 for step in range(5)]
    first = points[0].created_at[:10] if points else ""
    last = points[-1].created_at[:10] if points else ""
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "left": LEFT,
        "right": WIDTH - RIGHT,
        "top": TOP,
        "bottom": HEIGHT - BOTTOM,
        "title": title,
        "line": " ".join(segments),
        "band": " ".join([*band_top, *reversed(band_bottom)]),
        "markers": markers,
        "small": len(points) > 200,
        "yticks": [{"y": _number(y(value)), "label": f"{value:.2f}"} for value in ticks],
        "first": first,
        "last": last,
        "runs": len(points),
    }
