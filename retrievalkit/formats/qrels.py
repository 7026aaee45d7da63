"""Read qrels rows, the one reader behind TREC qrels and a BEIR directory's qrels.

Two layouts are read, chosen by the file's first row:

- tab-separated (BEIR): ``query-id corpus-id score`` or ``qid iteration docid grade``,
  a ``query-id`` header on line 1 skipped;
- whitespace-separated (TREC): ``qid iteration docid grade``, ``#`` comments skipped.

Each row comes out as it is written: the grade is an ASCII integer, a negative one
(Cranfield's -1) kept, so each caller decides what it means. A document judged twice
for one query is refused with both lines, as trec_eval refuses it: keeping the last
row would hide a merge mistake.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from retrievalkit.errors import InputError
from retrievalkit.formats.limits import MAX_LINE_BYTES, line_too_long
from retrievalkit.formats.text_files import text_lines


class QrelsRow(NamedTuple):
    """One judgment: its line in the file, the query, the document and the raw grade."""

    line: int
    query_id: str
    doc_id: str
    grade: int


def qrels_rows(path: Path) -> Iterator[QrelsRow]:
    """Every judgment of a qrels file in either layout, with its line number."""
    tabs: bool | None = None
    seen: dict[tuple[str, str], int] = {}
    # Split here, not with csv: a row's number is always its line number, and no field
    # is refused for passing csv's 128 KiB limit with a message naming neither.
    for number, raw in enumerate(text_lines(path), start=1):
        line = raw.rstrip("\n").rstrip("\r")
        if len(line) > MAX_LINE_BYTES:
            raise line_too_long(len(line), source=str(path), line=number)
        if not line.strip():
            continue
        if tabs is None:
            tabs = "\t" in line
        if tabs:
            row = _tab_row(line, path, number)
            if row is None:
                continue
        else:
            fields = line.split()
            if fields[0].startswith("#"):
                continue
            if len(fields) != 4:
                raise InputError(
                    f"expected 4 columns (qid iteration docid grade), got {len(fields)}",
                    source=str(path),
                    line=number,
                )
            row = (fields[0], fields[2], fields[3])
        query_id, doc_id, grade_text = row
        grade = _grade(grade_text)
        if grade is None:
            if tabs:
                raise InputError(
                    f"score {grade_text!r} is not an integer",
                    source=str(path),
                    line=number,
                    field="score",
                )
            raise InputError(
                f"grade {grade_text!r} is not a whole number", source=str(path), line=number
            )
        if (query_id, doc_id) in seen:
            raise InputError(
                f"query '{query_id}' judges document '{doc_id}' again; first on line "
                f"{seen[query_id, doc_id]}",
                source=str(path),
                line=number,
                field="corpus-id" if tabs else "docid",
                hint="keep one row per query and document",
            )
        seen[query_id, doc_id] = number
        yield QrelsRow(number, query_id, doc_id, grade)


def _tab_row(line: str, path: Path, number: int) -> tuple[str, str, str] | None:
    row = line.split("\t")
    if number == 1 and row[0] == "query-id":
        return None
    if len(row) == 4:  # TREC qrels, tab-separated: qid iteration docid grade
        return row[0], row[2], row[3]
    if len(row) == 3:
        return row[0], row[1], row[2]
    raise InputError(
        f"expected 3 tab-separated columns (query-id, corpus-id, score), got {len(row)}",
        source=str(path),
        line=number,
    )


def _grade(text: str) -> int | None:
    """The grade as an int, or None: ASCII digits only ('²'.isdigit() holds)."""
    digits = text.strip()
    if not digits.lstrip("+-").isascii():
        return None
    try:
        return int(digits)
    except ValueError:
        return None
