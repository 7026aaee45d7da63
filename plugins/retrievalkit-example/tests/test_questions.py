"""The CSV question sets: what the bundled one holds, and errors that name line and field."""

from __future__ import annotations

from pathlib import Path

import pytest
from retrievalkit.errors import InputError
from retrievalkit.model.values import QuestionForm

from retrievalkit_example.questions import CsvQuestionSets, load_csv

HEADER = "id,question,form,expected,grades,hard_class,gist\n"


def test_the_bundled_set_uses_every_feature() -> None:
    golden = CsvQuestionSets().load("bikes")
    by_id = {question.id: question for question in golden.questions}
    assert by_id["b02"].form is QuestionForm.GAP
    assert by_id["b02"].grades == {"bk-flat-tyre": 2, "bk-puncture-prevention": 1}
    assert by_id["b04"].expected == ("bk-puncture-prevention", "bk-tubeless")
    assert not by_id["b20"].answerable, "b20 is a no-answer question"


def test_an_unknown_set_name_raises() -> None:
    with pytest.raises(KeyError):
        CsvQuestionSets().load("cars")


@pytest.mark.parametrize(
    ("row", "line", "field"),
    [
        ("q1,How?,SIDEWAYS,doc-1,,,\n", 2, "form"),
        ("q1,How?,MATCH,doc-1,doc-1:high,,\n", 2, "grades"),
        (",How?,MATCH,doc-1,,,\n", 2, "id"),
    ],
)
def test_mistakes_name_the_line_and_field(tmp_path: Path, row: str, line: int, field: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(HEADER + row, encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_csv(path)
    assert caught.value.line == line
    assert caught.value.field == field
    assert str(path) in str(caught.value)


def test_a_duplicate_id_names_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "dupe.csv"
    path.write_text(HEADER + "q1,How?,,doc-1,,,\nq1,Why?,,doc-2,,,\n", encoding="utf-8")
    with pytest.raises(InputError, match="first used on line 2"):
        load_csv(path)


def test_a_missing_column_is_named(tmp_path: Path) -> None:
    path = tmp_path / "short.csv"
    path.write_text("id,question\nq1,How?\n", encoding="utf-8")
    with pytest.raises(InputError, match="missing column 'form'"):
        load_csv(path)
