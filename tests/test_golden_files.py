"""Golden sets load from JSON Lines, TOML and BEIR folders, and every bad input names its place."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from retrievalkit.errors import InputError
from retrievalkit.formats.golden_sets import load_beir, load_jsonl, load_set_file, load_toml
from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet, QuestionForm


@pytest.fixture(scope="session")
def shared_data_dir() -> Path:
    """The IR collections beside the repository: ``<repo>/../shared/data``."""
    from conftest import shared_data

    return shared_data()


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    lines = [row if isinstance(row, str) else json.dumps(row) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def good(question_id: str = "q1", **fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"id": question_id, "question": "How long is a passport valid?"}
    row["expected"] = ["doc-1"]
    row.update(fields)
    return row


# --- JSON Lines ------------------------------------------------------------------------------


def test_jsonl_reads_every_field(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "support.jsonl",
        [
            good("q1", form="MATCH", hard_class="near-duplicate", expected=["doc-12", "doc-40"]),
            "",
            good(
                "q2",
                form="gap",
                expected=["doc-7"],
                grades={"doc-7": 2, "doc-9": 0},
                gist="bring an id",
                meta={"topic": "travel"},
            ),
            good("q3", expected=[]),
        ],
    )
    golden = load_set_file(path)
    assert golden.name == "support"
    assert [question.id for question in golden.questions] == ["q1", "q2", "q3"]
    first, second, third = golden.questions
    assert first.form is QuestionForm.MATCH
    assert first.expected == ("doc-12", "doc-40")
    assert first.hard_class == "near-duplicate"
    assert second.form is QuestionForm.GAP
    assert second.judgments() == {"doc-7": 2, "doc-9": 0}
    assert dict(second.meta) == {"topic": "travel"}
    assert second.gist == "bring an id"
    assert third.form is None
    assert not third.answerable
    assert first.answerable


def test_jsonl_accepts_a_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(good()).encode("utf-8") + b"\n")
    assert load_jsonl(path).questions[0].id == "q1"


def test_name_can_be_given(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "file.jsonl", [good()])
    assert load_set_file(path, name="other").name == "other"


def assert_names_place(error: InputError, path: Path, line: int | None, field: str | None) -> None:
    message = str(error)
    assert path.name in message
    if line is not None:
        assert f"line {line}" in message
        assert error.line == line
    if field is not None:
        assert f"'{field}'" in message
        assert error.field == field


BAD_LINES: list[tuple[str, str, str]] = [
    ("malformed-json", '{"id": "q2", "question": "x", "expected": [}', ""),
    ("missing-question", json.dumps({"id": "q2", "expected": []}), "question"),
    ("unknown-form", json.dumps(good("q2", form="SEMANTIC")), "form"),
    ("expected-not-list", json.dumps(good("q2", expected="doc-1")), "expected"),
    ("expected-not-strings", json.dumps(good("q2", expected=["doc-1", 7])), "expected"),
    ("negative-grade", json.dumps(good("q2", grades={"doc-1": -1})), "grades"),
    ("nan-grade", '{"id": "q2", "question": "x", "expected": [], "grades": {"d": NaN}}', "grades"),
    (
        "infinite-grade",
        '{"id": "q2", "question": "x", "expected": [], "grades": {"d": Infinity}}',
        "grades",
    ),
    ("fractional-grade", json.dumps(good("q2", grades={"doc-1": 1.5})), "grades"),
    ("unknown-field", json.dumps(good("q2", answer="yes")), "answer"),
    ("id-with-spaces", json.dumps(good("q 2")), "id"),
    ("missing-id", json.dumps({"question": "x", "expected": []}), "id"),
    ("missing-expected", json.dumps({"id": "q2", "question": "x"}), "expected"),
    ("expected-graded-0", json.dumps(good("q2", grades={"doc-1": 0})), "grades"),
    ("meta-not-strings", json.dumps(good("q2", meta={"topic": 3})), "meta"),
    ("blank-question", json.dumps(good("q2", question="  ")), "question"),
]


@pytest.mark.parametrize(
    ("line", "field"),
    [(line, field) for _, line, field in BAD_LINES],
    ids=[name for name, _, _ in BAD_LINES],
)
def test_bad_line_names_file_line_and_field(tmp_path: Path, line: str, field: str) -> None:
    path = write_jsonl(tmp_path / "golden.jsonl", [good("q1"), line])
    with pytest.raises(InputError) as raised:
        load_set_file(path)
    assert_names_place(raised.value, path, 2, field or None)
    assert raised.value.exit_code == 2


def test_malformed_json_says_so(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "golden.jsonl", ['{"id": "q1",'])
    with pytest.raises(InputError, match="malformed JSON"):
        load_jsonl(path)


def test_nan_anywhere_is_refused_with_its_field(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "golden.jsonl", ['{"id": "q1", "question": NaN, "expected": []}'])
    with pytest.raises(InputError) as raised:
        load_jsonl(path)
    assert_names_place(raised.value, path, 1, "question")


def test_duplicate_id_names_both_lines(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "golden.jsonl", [good("q1"), good("q2"), "", good("q1")])
    with pytest.raises(InputError) as raised:
        load_jsonl(path)
    assert_names_place(raised.value, path, 4, "id")
    assert "line 1" in str(raised.value)
    assert "'q1'" in str(raised.value)


def test_empty_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("\n  \n", encoding="utf-8")
    with pytest.raises(InputError, match="no questions") as raised:
        load_jsonl(path)
    assert_names_place(raised.value, path, None, None)


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    first = json.dumps(good("q1")).encode("utf-8")
    second = json.dumps(good("q2", question="caf\u00e9"), ensure_ascii=False).encode("latin-1")
    path.write_bytes(first + b"\n" + second + b"\n")
    with pytest.raises(InputError, match="UTF-8") as raised:
        load_jsonl(path)
    assert_names_place(raised.value, path, 2, None)


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_set_file(tmp_path / "absent.jsonl")


def test_a_line_that_is_not_an_object(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "golden.jsonl", ["[1, 2]"])
    with pytest.raises(InputError, match="JSON object") as raised:
        load_jsonl(path)
    assert_names_place(raised.value, path, 1, None)


# --- TOML ----------------------------------------------------------------------------------


TOML_SET = """\
name = "passports"
description = "Travel documents"

[[questions]]
id = "q1"
question = "How long is a passport valid?"
form = "MATCH"
expected = ["doc-12"]
grades = { "doc-12" = 2, "doc-13" = 0 }

[[questions]]
id = "q2"
question = "Can I renew a fishing licence here?"
expected = []
meta = { topic = "other" }
"""


def test_toml_set(tmp_path: Path) -> None:
    path = tmp_path / "set.toml"
    path.write_text(TOML_SET, encoding="utf-8")
    golden = load_set_file(path)
    assert golden.name == "passports"
    assert golden.description == "Travel documents"
    assert [question.id for question in golden.questions] == ["q1", "q2"]
    assert golden.questions[0].judgments() == {"doc-12": 2, "doc-13": 0}
    assert dict(golden.questions[1].meta) == {"topic": "other"}


def test_toml_and_jsonl_of_the_same_questions_hash_alike(tmp_path: Path) -> None:
    toml_path = tmp_path / "set.toml"
    toml_path.write_text(TOML_SET, encoding="utf-8")
    jsonl_path = write_jsonl(
        tmp_path / "set.jsonl",
        [
            {
                "id": "q1",
                "question": "How long is a passport valid?",
                "form": "MATCH",
                "expected": ["doc-12"],
                "grades": {"doc-12": 2, "doc-13": 0},
            },
            {
                "id": "q2",
                "question": "Can I renew a fishing licence here?",
                "expected": [],
                "meta": {"topic": "other"},
            },
        ],
    )
    assert load_toml(toml_path).content_hash == load_jsonl(jsonl_path).content_hash


def test_toml_bad_question_names_file_question_and_field(tmp_path: Path) -> None:
    path = tmp_path / "set.toml"
    path.write_text(TOML_SET.replace('form = "MATCH"', 'form = "FUZZY"'), encoding="utf-8")
    with pytest.raises(InputError) as raised:
        load_toml(path)
    message = str(raised.value)
    assert path.name in message and "question 1" in message and "'form'" in message


def test_toml_duplicate_id(tmp_path: Path) -> None:
    path = tmp_path / "set.toml"
    path.write_text(TOML_SET.replace('id = "q2"', 'id = "q1"'), encoding="utf-8")
    with pytest.raises(InputError, match="first used by question 1") as raised:
        load_toml(path)
    assert "question 2" in str(raised.value) and "'id'" in str(raised.value)


def test_toml_malformed_and_unknown_keys(tmp_path: Path) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text("name = \n", encoding="utf-8")
    with pytest.raises(InputError, match="malformed TOML"):
        load_toml(broken)
    unknown = tmp_path / "unknown.toml"
    unknown.write_text('title = "x"\n' + TOML_SET, encoding="utf-8")
    with pytest.raises(InputError, match="unknown top-level key 'title'"):
        load_toml(unknown)
    empty = tmp_path / "empty.toml"
    empty.write_text('name = "x"\n', encoding="utf-8")
    with pytest.raises(InputError, match="questions"):
        load_toml(empty)


# --- BEIR ----------------------------------------------------------------------------------


def test_scifact_from_the_shared_data(shared_data_dir: Path) -> None:
    directory = shared_data_dir / "scifact"
    qrels: dict[str, dict[str, int]] = {}
    with (directory / "qrels" / "test.tsv").open(encoding="utf-8") as handle:
        reader = csv.reader(handle, delimiter="\t")
        next(reader)
        for query_id, doc_id, score in reader:
            qrels.setdefault(query_id, {})[doc_id] = int(score)
    texts = {}
    with (directory / "queries.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            texts[record["_id"]] = record["text"]

    golden = load_set_file(directory)
    assert golden.name == "scifact"
    assert {question.id for question in golden.questions} == set(qrels)
    assert len(golden.questions) == len(qrels)
    for question in golden.questions:
        assert question.question == texts[question.id]
        assert question.judgments() == qrels[question.id]
        assert set(question.expected) == {d for d, g in qrels[question.id].items() if g >= 1}
    numeric = [int(question.id) for question in golden.questions]
    assert numeric == sorted(numeric)


def test_scifact_train_split_by_qrels_file(shared_data_dir: Path) -> None:
    golden = load_set_file(shared_data_dir / "scifact" / "qrels" / "train.tsv")
    assert golden.name == "scifact-train"
    assert len(golden.questions) > 0


def make_beir(root: Path, qrels: str, queries: list[dict[str, str]] | None = None) -> Path:
    root.mkdir()
    (root / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": d, "title": "", "text": d}) + "\n" for d in ("d1", "d2", "d3")),
        encoding="utf-8",
    )
    queries = (
        queries
        if queries is not None
        else [
            {"_id": "2", "text": "second"},
            {"_id": "10", "text": "tenth"},
            {"_id": "1", "text": "first"},
            {"_id": "9", "text": "never judged"},
        ]
    )
    (root / "queries.jsonl").write_text(
        "".join(json.dumps(query) + "\n" for query in queries), encoding="utf-8"
    )
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text(qrels, encoding="utf-8")
    return root


def test_small_beir_directory(tmp_path: Path) -> None:
    qrels = "query-id\tcorpus-id\tscore\n10\td1\t1\n2\td2\t2\n2\td3\t0\n1\td1\t-1\n1\td3\t1\n"
    golden = load_beir(make_beir(tmp_path / "tiny", qrels))
    assert golden.name == "tiny"
    assert [question.id for question in golden.questions] == ["1", "2", "10"]
    by_id = {question.id: question for question in golden.questions}
    assert by_id["10"].expected == ("d1",) and by_id["10"].judgments() == {"d1": 1}
    assert by_id["2"].judgments() == {"d2": 2, "d3": 0}
    assert by_id["2"].expected == ("d2",)
    assert by_id["1"].judgments() == {"d1": 0, "d3": 1}  # Cranfield's -1 reads as 0
    assert by_id["1"].question == "first"


def test_beir_reads_four_column_trec_qrels(tmp_path: Path) -> None:
    golden = load_beir(make_beir(tmp_path / "trec", "1 0 d1 1\n1 0 d2 0\n".replace(" ", "\t")))
    assert golden.questions[0].judgments() == {"d1": 1, "d2": 0}


def test_beir_errors(tmp_path: Path) -> None:
    bad_score = make_beir(tmp_path / "a", "query-id\tcorpus-id\tscore\n1\td1\t1\n1\td2\thigh\n")
    with pytest.raises(InputError) as raised:
        load_beir(bad_score)
    assert "test.tsv" in str(raised.value) and "line 3" in str(raised.value)
    assert "'score'" in str(raised.value)

    columns = make_beir(tmp_path / "b", "1\td1\n")
    with pytest.raises(InputError, match="3 tab-separated columns") as raised:
        load_beir(columns)
    assert "line 1" in str(raised.value)

    unknown_query = make_beir(tmp_path / "c", "77\td1\t1\n")
    with pytest.raises(InputError, match=r"'77' is judged but not in queries\.jsonl"):
        load_beir(unknown_query)

    no_queries = make_beir(tmp_path / "d", "1\td1\t1\n")
    (no_queries / "queries.jsonl").unlink()
    with pytest.raises(InputError, match="missing file") as raised:
        load_set_file(no_queries)
    assert "queries.jsonl" in str(raised.value)

    bad_query = make_beir(tmp_path / "e", "1\td1\t1\n")
    (bad_query / "queries.jsonl").write_text('{"_id": "1"}\n', encoding="utf-8")
    with pytest.raises(InputError) as raised:
        load_beir(bad_query)
    assert "queries.jsonl" in str(raised.value) and "line 1" in str(raised.value)


# --- content hash --------------------------------------------------------------------------


def test_content_hash_ignores_the_name_and_follows_the_labels(tmp_path: Path) -> None:
    rows = [good("q1", expected=["doc-1"], grades={"doc-1": 2}), good("q2", expected=[])]
    first = load_jsonl(write_jsonl(tmp_path / "a.jsonl", rows))
    renamed = load_jsonl(write_jsonl(tmp_path / "b.jsonl", rows), name="renamed")
    assert first.name != renamed.name
    assert first.content_hash == renamed.content_hash
    assert len(first.content_hash) == 64

    relabelled_rows = [good("q1", expected=["doc-1"], grades={"doc-1": 3}), rows[1]]
    relabelled = load_jsonl(write_jsonl(tmp_path / "c.jsonl", relabelled_rows))
    assert relabelled.content_hash != first.content_hash

    extra_expected = GoldenQuestionSet(
        name="a",
        questions=[
            GoldenQuestion(
                id="q1",
                question=first.questions[0].question,
                expected=["doc-1", "doc-2"],
                grades={"doc-1": 2},
            ),
            first.questions[1],
        ],
    )
    assert extra_expected.content_hash != first.content_hash
