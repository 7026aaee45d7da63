"""Query logs: the queries people asked, with how often, read as two columns.

A log is JSON Lines, one object a line with the query text under ``query`` (a golden
set's ``question`` works too, so a golden set is a log) and optionally ``count`` (how
many times it was asked; 1 without it), ``id`` and ``ts``, which are not needed; or CSV
or TSV (by the file's suffix, ``.csv``/``.tsv``/``.tab``) with a header naming a
``query`` (or ``question``) column and optionally a ``count`` column. Blank lines are
skipped. The same query text (after stripping surrounding whitespace) asked again is
merged into one query whose weight is the sum of its counts.

The file is read a line at a time; what is kept is one entry per distinct query, so a
log of 10^6 lines held as (text, count) columns. `sample_log` then draws a reproducible
weighted sample.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator
from pathlib import Path

import attrs
import numpy as np
import numpy.typing as npt

from retrievalkit.errors import InputError
from retrievalkit.formats.text_files import text_lines

QUERY_FIELDS = ("query", "question")


@attrs.frozen(eq=False)
class QueryLog:
    """The distinct queries of a log, in order of first appearance, with their weights."""

    queries: tuple[str, ...]
    weights: npt.NDArray[np.float64]
    source: str
    lines: int
    """How many queries the file held (before merging duplicates), the sum of counts."""

    def __len__(self) -> int:
        return len(self.queries)


def _count(value: object, source: str, line: int) -> float:
    if value is None or value == "":
        return 1.0
    try:
        number = (
            float(value)
            if isinstance(value, (int, float, str)) and not isinstance(value, bool)
            else math.nan
        )
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or number <= 0 or number != int(number):
        raise InputError(
            f"count must be a whole number above 0, not {value!r}",
            source=source,
            line=line,
            field="count",
        )
    return number


def _query(value: object, source: str, line: int, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError(
            f"the query must be a non-empty string, not {value!r}",
            source=source,
            line=line,
            field=field,
        )
    return value.strip()


def _json_rows(path: Path) -> Iterator[tuple[int, str, float]]:
    source = str(path)
    for number, text in enumerate(text_lines(path, "the query log"), start=1):
        if not text.strip():
            continue
        try:
            row = json.loads(text)
        except json.JSONDecodeError as error:
            raise InputError(
                f"not valid JSON: {error.msg} (column {error.colno})", source=source, line=number
            ) from None
        if not isinstance(row, dict):
            raise InputError(
                f"each line must be a JSON object, not {type(row).__name__}",
                source=source,
                line=number,
            )
        field = next((name for name in QUERY_FIELDS if name in row), None)
        if field is None:
            raise InputError(
                "has no 'query' field", source=source, line=number, hint="one object a query"
            )
        yield (
            number,
            _query(row[field], source, number, field),
            _count(row.get("count"), source, number),
        )


def _table_rows(path: Path, delimiter: str) -> Iterator[tuple[int, str, float]]:
    source = str(path)
    lines = text_lines(path, "the query log")
    reader = csv.reader(lines, delimiter=delimiter)
    try:
        header = next(reader)
    except StopIteration:
        return
    except csv.Error as error:
        raise InputError(f"not valid CSV: {error}", source=source, line=1) from None
    names = [name.strip().lower() for name in header]
    column = next((names.index(name) for name in QUERY_FIELDS if name in names), None)
    if column is None:
        raise InputError(
            f"the header names no 'query' column (it has {', '.join(header) or 'none'})",
            source=source,
            line=1,
        )
    counts = names.index("count") if "count" in names else None
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            raise InputError(
                f"not valid CSV: {error}", source=source, line=reader.line_num
            ) from None
        number = reader.line_num
        if not row or not any(cell.strip() for cell in row):
            continue
        if column >= len(row):
            raise InputError("has no query cell", source=source, line=number, field=names[column])
        count = row[counts] if counts is not None and counts < len(row) else None
        yield (
            number,
            _query(row[column], source, number, names[column]),
            _count(count, source, number),
        )


def read_log(path: str | Path) -> QueryLog:
    """The distinct queries of the log at ``path`` with their counts summed."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        rows = _table_rows(path, ",")
    elif suffix in (".tsv", ".tab"):
        rows = _table_rows(path, "\t")
    else:
        rows = _json_rows(path)
    weights: dict[str, float] = {}
    lines = 0
    for _, query, count in rows:
        weights[query] = weights.get(query, 0.0) + count
        lines += int(count)
    if not weights:
        raise InputError("holds no query", source=str(path), hint="one query a line")
    return QueryLog(
        tuple(weights), np.fromiter(weights.values(), dtype=np.float64), str(path), lines
    )


def sample_log(log: QueryLog, size: int, seed: int = 0) -> QueryLog:
    """``size`` queries drawn with replacement, each with the chance its weight gives,
    merged again: a query's weight in the sample is how often it was drawn, so weighted
    means over the sample estimate those over the whole log. The same seed draws the
    same sample. A log of ``size`` queries or fewer is returned as it is."""
    if size <= 0:
        raise InputError(f"--sample must be above 0, not {size}", field="sample")
    if log.weights.sum() <= size:
        return log
    generator = np.random.default_rng(seed)
    drawn = generator.choice(len(log), size=size, p=log.weights / log.weights.sum())
    picked, counts = np.unique(drawn, return_counts=True)
    return QueryLog(
        tuple(log.queries[index] for index in picked),
        counts.astype(np.float64),
        log.source,
        log.lines,
    )
