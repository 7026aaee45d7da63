"""The one qrels reader behind TREC qrels (`read_qrels`) and BEIR's qrels (`load_beir`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrievalkit.errors import InputError
from retrievalkit.formats.golden_sets import load_beir
from retrievalkit.formats.qrels import QrelsRow, qrels_rows
from retrievalkit.formats.trec import read_qrels


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_both_layouts_give_the_same_rows_with_raw_grades(tmp_path: Path) -> None:
    trec = write(tmp_path / "trec", "# a comment\nq1 0 d1 2\n\nq1 0 d2 -1\nq2 0 d1 0\n")
    beir = write(
        tmp_path / "beir", "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t-1\nq2\td1\t0\n"
    )
    tabbed = write(tmp_path / "tabbed", "q1\t0\td1\t2\nq1\t0\td2\t-1\nq2\t0\td1\t0\n")
    rows = [(row.query_id, row.doc_id, row.grade) for row in qrels_rows(trec)]
    assert rows == [("q1", "d1", 2), ("q1", "d2", -1), ("q2", "d1", 0)]
    assert [row.line for row in qrels_rows(trec)] == [2, 4, 5]
    for other in (beir, tabbed):
        assert [(row.query_id, row.doc_id, row.grade) for row in qrels_rows(other)] == rows
    assert next(iter(qrels_rows(beir))) == QrelsRow(2, "q1", "d1", 2)
    # read_qrels keeps the negative grade, as trec_eval does.
    assert read_qrels(trec) == {"q1": {"d1": 2, "d2": -1}, "q2": {"d1": 0}}


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("q1 0 d1 1\nq1 0 d1 0\n", 2, "judges document 'd1' again; first on line 1"),
        ("q1\td1\t1\nq1\td1\t0\n", 2, "judges document 'd1' again; first on line 1"),
        ("q1 0 d1 high\n", 1, "grade 'high' is not a whole number"),
        ("q1 0 d1 1.5\n", 1, "grade '1.5' is not a whole number"),
        ("q1\td1\t\u00b2\n", 1, "score '\u00b2' is not an integer"),
        ("q1 0 d1\n", 1, "expected 4 columns"),
        ("q1\td1\n", 1, "expected 3 tab-separated columns"),
    ],
)
def test_refusals_name_the_file_and_line(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    path = write(tmp_path / "qrels", text)
    with pytest.raises(InputError, match=message) as raised:
        read_qrels(path)
    assert f"line {line}" in str(raised.value) and "qrels" in str(raised.value)


def test_load_beir_clamps_negative_grades_and_refuses_twice_judged(tmp_path: Path) -> None:
    (tmp_path / "qrels").mkdir()
    queries = [{"_id": "1", "text": "what is bm25"}]
    write(tmp_path / "queries.jsonl", "".join(json.dumps(q) + "\n" for q in queries))
    write(tmp_path / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\n1\td1\t-1\n1\td2\t1\n")
    question = load_beir(tmp_path).questions[0]
    assert list(question.expected) == ["d2"] and dict(question.grades) == {"d1": 0}
    write(tmp_path / "qrels" / "test.tsv", "1\td1\t1\n1\td2\t1\n1\td1\t2\n")
    with pytest.raises(InputError, match="first on line 1") as raised:
        load_beir(tmp_path)
    assert "line 3" in str(raised.value) and "'corpus-id'" in str(raised.value)
