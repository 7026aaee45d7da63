"""Every terminal table fitted to its width: a cell is never split, whole columns give way.

A rich table narrower than its content shrinks its columns until numbers, intervals and
names wrap or fold inside their cells (``[-0.039,`` over ``+0.220]``). `fit` wraps a
table so that this never happens: each cell stays on one line (a column of free text, named
in ``wrap``, may break at its spaces but never inside a word); when the table's content is
wider than the space it is given, whole columns are left out in the order the table
declares (``drop``), and one line under the table names them; when even the columns that
may not go do not fit, the rows are folded into lines, one per cell (or into the table's
own ``folded`` form).

On a pipe without ``COLUMNS`` (a CI log) there is no width to fit: `log_console` makes a
console on which every table is drawn at its natural width, however wide.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.measure import Measurement
from rich.text import Text

if TYPE_CHECKING:
    from rich.console import ConsoleOptions, RenderableType, RenderResult
    from rich.table import Column, Table

#: A width no table reaches: the space a table is measured in to find its natural width.
UNBOUNDED = 1_000_000


class LogConsole(Console):
    """A console for a pipe or file without ``COLUMNS``: tables at their natural width.

    Text still wraps at the console's width (80 unless told); only a fitted table is drawn
    as wide as its content, and no line is cropped to the width.
    """

    def print(self, *objects: Any, **settings: Any) -> None:
        settings.setdefault("crop", False)
        super().print(*objects, **settings)


def log_console(stream: object, environ: Mapping[str, str] | None = None) -> bool:
    """Whether output to ``stream`` should be a `LogConsole`: not a terminal, no ``COLUMNS``."""
    from retrievalkit.render.terminal import watched

    environ = os.environ if environ is None else environ
    return "COLUMNS" not in environ and not watched(stream)


def _header_text(column: Column) -> str:
    header = column.header
    return header.plain if isinstance(header, Text) else str(header)


class FittedTable:
    """A rich table drawn whole within the width it is given (see the module's docstring)."""

    def __init__(
        self,
        table: Table,
        *,
        drop: Sequence[int | str] = (),
        wrap: Iterable[int | str] = (),
        folded: RenderableType | None = None,
    ) -> None:
        self.table = table
        # By header or place; a column named twice goes once.
        self.drop = list(dict.fromkeys(self._index(which) for which in drop))
        self.wrap = {self._index(which) for which in wrap}
        self.folded = folded
        for index, column in enumerate(table.columns):
            # A fitted column is as wide as its widest cell: no hint may shrink or widen it.
            column.min_width = column.max_width = column.width = None
            column.no_wrap = index not in self.wrap
            column.overflow = "fold" if index in self.wrap else "ellipsis"

    def _index(self, which: int | str) -> int:
        if isinstance(which, int):
            return which if which >= 0 else len(self.table.columns) + which
        for index, column in enumerate(self.table.columns):
            if _header_text(column) == which:
                return index
        raise ValueError(f"the table has no column {which!r}")

    def _subset(self, kept: list[int]) -> Table:
        view = copy.copy(self.table)
        view.title = None  # drawn by `_title`, at the width given rather than the table's
        view.columns = []
        for position, index in enumerate(kept):
            column = copy.copy(self.table.columns[index])
            column._index = position
            view.columns.append(column)
        return view

    def _widths(
        self, console: Console, options: ConsoleOptions, kept: list[int]
    ) -> tuple[int, int, dict[int, tuple[int, int]]]:
        """(frame, natural width, index -> (narrowest, widest) content of each column)."""
        wide = options.update_width(UNBOUNDED)
        ranges: dict[int, tuple[int, int]] = {}
        for index in kept:
            column = self.table.columns[index]
            cells: list[Any] = [column.header, *column.cells]
            measured = [Measurement.get(console, wide, cell) for cell in cells]
            ranges[index] = (
                max((m.minimum for m in measured), default=0),
                max((m.maximum for m in measured), default=0),
            )
        total = Measurement.get(console, wide, self._subset(kept)).maximum
        frame = total - sum(widest for _, widest in ranges.values())
        return frame, total, ranges

    def _needed(self, frame: int, ranges: dict[int, tuple[int, int]]) -> int:
        """The narrowest the kept columns can be with no cell split: free text at its
        longest word, every other column at its widest cell."""
        return frame + sum(
            narrow if index in self.wrap else wide for index, (narrow, wide) in ranges.items()
        )

    def layout(self, console: Console, options: ConsoleOptions) -> tuple[list[int], int] | None:
        """The columns kept and the width to draw them in, or None when even the columns
        that may not go are too wide (the rows are then folded)."""
        width = options.max_width
        kept = list(range(len(self.table.columns)))
        gone = iter(self.drop)
        while True:
            frame, natural, ranges = self._widths(console, options, kept)
            if isinstance(console, LogConsole) or natural <= width:
                return kept, natural
            if self._needed(frame, ranges) <= width:
                return kept, width
            leaving = next(gone, None)
            if leaving is None:
                return None
            kept.remove(leaving)

    def _sized(self, console: Console, kept: list[int], width: int) -> Table:
        """The table of the kept columns, free-text columns given widths that fit ``width``
        (rich, left to itself, would shrink them below their longest word)."""
        view = self._subset(kept)
        options = console.options.update_width(UNBOUNDED)
        frame, natural, ranges = self._widths(console, options, kept)
        if natural <= width or not self.wrap:
            return view
        spare = width - self._needed(frame, ranges)
        for position, index in enumerate(kept):
            if index not in self.wrap:
                continue
            narrow, wide = ranges[index]
            extra = min(spare, wide - narrow)
            spare -= extra
            view.columns[position].width = narrow + extra
        return view

    def _folded_rows(self) -> list[Text]:
        """One line per row's first cell, then one per other cell: ``  header: value``."""
        columns = self.table.columns
        rows = [list(column.cells) for column in columns]
        lines: list[Text] = []
        for row in range(len(self.table.rows)):
            lines.append(_as_text(rows[0][row]))
            for index in range(1, len(columns)):
                value = _as_text(rows[index][row])
                if value.plain:
                    name = _header_text(columns[index]) or "·"
                    lines.append(Text.assemble("  ", name, ": ", value))
        return lines

    def _title(self, console: Console, options: ConsoleOptions) -> RenderResult:
        """The title as rich draws it, but wrapped at ``options``' width: a title naming two
        systems may be wider than the table under it."""
        from rich.style import Style

        title = self.table.title
        if not title:
            return
        style = Style.pick_first(self.table.title_style, "table.title")
        text = title
        if isinstance(title, str):
            text = console.render_str(title, style=style, highlight=False)
        yield from console.render(text, options.update(justify=self.table.title_justify))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        chosen = self.layout(console, options)
        if chosen is None:
            if self.folded is not None:
                yield self.folded
                return
            yield from self._title(console, options)
            yield from self._folded_rows()
            return
        kept, drawn = chosen
        yield from self._title(console, options.update_width(max(drawn, width)))
        yield from console.render(self._sized(console, kept, drawn), options.update_width(drawn))
        left_out = [i for i in range(len(self.table.columns)) if i not in kept]
        if left_out:
            names = ", ".join(_header_text(self.table.columns[i]) or "marks" for i in left_out)
            yield Text(f"left out at {width} columns: {names} (--format json has every column)")

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.table)


def _as_text(renderable: Any) -> Text:
    return renderable if isinstance(renderable, Text) else Text(str(renderable))


def fit(
    table: Table,
    *,
    drop: Sequence[int | str] = (),
    wrap: Iterable[int | str] = (),
    folded: RenderableType | None = None,
) -> FittedTable:
    """``table`` drawn whole at any width: ``drop`` lists the columns that may be left out,
    first to go first (by header or index); ``wrap`` the free-text columns that may break
    at their spaces; ``folded`` what to show when even the other columns do not fit (by
    default one line per cell)."""
    return FittedTable(table, drop=drop, wrap=wrap, folded=folded)
