"""A question-set provider that offers every CSV file in the package's ``data`` folder.

One row per question, with the columns ``id``, ``question``, ``form``, ``expected``
(document ids separated by spaces; empty for a question nothing answers), ``grades``
(``doc-id:grade`` pairs separated by spaces), ``hard_class`` and ``gist``. Each row is
checked by retrievalkit's own golden-set parser, so a mistake in the CSV is reported
with the file, line and field, exactly as for a JSON Lines set.
"""

from __future__ import annotations

import contextlib
import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from retrievalkit.plugin_api import (
    GoldenQuestion,
    GoldenQuestionSet,
    InputError,
    parse_question,
    text_lines,
)

from retrievalkit_example import DATA

COLUMNS = ("id", "question", "form", "expected", "grades", "hard_class", "gist")


class CsvQuestionSets:
    """Offers ``NAME`` for every ``NAME.csv`` in a folder (by default the package's data)."""

    def __init__(self, folder: Path = DATA) -> None:
        self.folder = folder

    def set_names(self) -> list[str]:
        return sorted(path.stem for path in self.folder.glob("*.csv"))

    def load(self, name: str) -> GoldenQuestionSet:
        path = self.folder / f"{name}.csv"
        if name not in self.set_names():
            raise KeyError(f"no question set {name!r} in {self.folder}")
        return load_csv(path, name=name)


def load_csv(path: Path, *, name: str | None = None) -> GoldenQuestionSet:
    """Read a CSV golden set; every problem names the file, the line and the field."""
    # text_lines: a byte that is not UTF-8 is refused naming the file and the line.
    with contextlib.closing(text_lines(path, "the question set")) as lines:
        reader = csv.DictReader(lines)
        missing = [column for column in COLUMNS if column not in (reader.fieldnames or [])]
        if missing:
            raise InputError(
                f"missing column '{missing[0]}'",
                source=str(path),
                line=1,
                hint="the header is " + ",".join(COLUMNS),
            )
        questions: list[GoldenQuestion] = []
        seen: dict[str, int] = {}
        for line, row in _rows(reader, path):
            question = parse_question(_row_data(row, path, line), source=str(path), line=line)
            if question.id in seen:
                raise InputError(
                    f"duplicate id '{question.id}', first used on line {seen[question.id]}",
                    source=str(path),
                    line=line,
                    field="id",
                )
            seen[question.id] = line
            questions.append(question)
    if not questions:
        raise InputError("the file holds no questions", source=str(path))
    return GoldenQuestionSet(
        name=name or path.stem,
        questions=questions,
        description="Questions about home bicycle maintenance (retrievalkit-example).",
        source=str(path),
    )


def _rows(reader: csv.DictReader[str], path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, row) of each row; a line csv cannot read (a field past its size limit, a
    quote left open) is an `InputError` naming the file and the line."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            raise InputError(
                f"not a CSV line ({error})",
                source=str(path),
                line=reader.line_num,
                hint="is a quote left open?",
            ) from None
        yield reader.line_num, row


def _row_data(row: dict[str, Any], path: Path, line: int) -> dict[str, Any]:
    """A CSV row as the plain data a JSON Lines line would hold."""
    data: dict[str, Any] = {
        "id": row["id"],
        "question": row["question"],
        "expected": (row["expected"] or "").split(),
    }
    for column in ("form", "hard_class", "gist"):
        if row[column]:
            data[column] = row[column]
    grades: dict[str, int] = {}
    for pair in (row["grades"] or "").split():
        doc_id, colon, grade = pair.rpartition(":")
        if not colon or not grade.lstrip("-").isdigit():
            raise InputError(
                f"expected doc-id:grade pairs, got {pair!r}",
                source=str(path),
                line=line,
                field="grades",
            )
        grades[doc_id] = int(grade)
    if grades:
        data["grades"] = grades
    return data
