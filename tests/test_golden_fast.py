"""A JSON Lines set read a block at a time gives the questions, the content hash and the
errors that reading it one line at a time gives, for every field and every odd line."""

from __future__ import annotations

import gc
import hashlib
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from retrievalkit.errors import InputError
from retrievalkit.formats import golden_sets as golden_files
from retrievalkit.formats.convert import converter
from retrievalkit.formats.golden_sets import fast_jsonl, jsonl, load_jsonl
from retrievalkit.formats.limits import MAX_GRADE
from retrievalkit.model.values import (
    QUESTION_FIELDS,
    FrozenDict,
    GoldenQuestion,
    GoldenQuestionSet,
    QuestionForm,
    questions_from_columns,
)

TEXTS = [
    "How long is a passport valid?",
    "¿Cuánto tiempo es válido un pasaporte? — ü",
    'He said "hi": then left\\ for C:\\temp',
    "tabs\tand a line\nbreak",
    "Ratio 3:2, or 16:9?",
    "護照的有效期是多久",
    "a line separator \u2028 inside",
    "an emoji \U0001f600, escaped as a surrogate pair by ensure_ascii",
]
DOCUMENTS = ["doc-1", "doc-2", "wiki:Paris", "doc-é", "doc/7", 'quote"d', "back\\slash", "d:1:2"]


def random_rows(seed: int, count: int) -> list[dict[str, Any]]:
    """Rows with every optional field present, absent or null, in shuffled key order."""
    rng = random.Random(seed)
    rows = []
    for index in range(count):
        expected = rng.sample(DOCUMENTS, rng.randint(0, 3))
        grades: dict[str, int] = {doc: rng.randint(1, 4) for doc in expected if rng.random() < 0.6}
        for doc in rng.sample([d for d in DOCUMENTS if d not in expected], rng.randint(0, 2)):
            grades[doc] = rng.choice((0, 1, 3))
        row: dict[str, Any] = {
            "id": f"q{index}" if index % 7 else f"q:{index}é",
            "question": rng.choice(TEXTS) + f" {index}",
            "expected": expected,
        }
        optional: dict[str, Any] = {
            "form": rng.choice(("MATCH", "gap", "Match", "Gap", "", None)),
            "grades": grades if grades or rng.random() < 0.5 else rng.choice(({}, None)),
            "hard_class": rng.choice(("near-duplicate", "negation", "a:b", None)),
            "gist": rng.choice(("the gist: short", "", "ünïcode gist", None)),
            "meta": rng.choice(({}, {"topic": "travel", "lang": "ü"}, {"z": "1", "a": "x:y"})),
        }
        for key, value in optional.items():
            if rng.random() < 0.7:
                row[key] = value
        items = list(row.items())
        rng.shuffle(items)
        rows.append(dict(items))
    return rows


def write(path: Path, rows: list[Any], *, newline: str = "\n", **dumps: Any) -> Path:
    lines = [row if isinstance(row, str) else json.dumps(row, **dumps) for row in rows]
    path.write_bytes((newline.join(lines) + newline).encode("utf-8"))
    return path


def reference_hash(questions: tuple[GoldenQuestion, ...]) -> str:
    text = json.dumps(
        [converter.unstructure(question) for question in questions],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """Blocks of 2 kB, so a few hundred rows span many; yields whether each block was
    taken whole by the checks in bulk (True) or line by line (False)."""
    taken: list[bool] = []
    block_questions = fast_jsonl._block_questions

    def spy(text: str, seen: set[str]) -> list[GoldenQuestion] | None:
        found = block_questions(text, seen)
        taken.append(found is not None)
        return found

    monkeypatch.setattr(fast_jsonl, "_BLOCK_BYTES", 2048)
    monkeypatch.setattr(fast_jsonl, "_block_questions", spy)
    yield taken


def line_by_line(path: Path) -> tuple[GoldenQuestion, ...]:
    return tuple(jsonl._load_jsonl_lines(path))


@pytest.mark.parametrize(
    "style",
    [
        {},
        {"ensure_ascii": False},
        {"ensure_ascii": False, "separators": (",", ":")},
        {"newline": "\r\n"},
    ],
    ids=["escaped", "utf-8", "compact", "crlf"],
)
def test_blocks_and_lines_give_equal_questions_and_hash(
    tmp_path: Path, small_blocks: list[bool], style: dict[str, Any]
) -> None:
    path = write(tmp_path / "set.jsonl", random_rows(len(small_blocks) + 3, 400), **style)
    loaded = load_jsonl(path)
    assert loaded.questions == line_by_line(path)
    assert len(loaded.questions) == 400
    assert loaded.content_hash == reference_hash(loaded.questions)
    assert small_blocks and all(small_blocks)  # every block went through the bulk checks


def test_a_file_without_a_last_line_break_or_with_a_byte_order_mark(
    tmp_path: Path, small_blocks: list[bool]
) -> None:
    rows = random_rows(5, 120)
    text = "\n".join(json.dumps(row, ensure_ascii=False) for row in rows)
    path = tmp_path / "set.jsonl"
    for raw in (text.encode(), b"\xef\xbb\xbf" + text.encode() + b"\n"):
        path.write_bytes(raw)
        assert load_jsonl(path).questions == line_by_line(path)
    assert all(small_blocks)


@pytest.mark.parametrize(
    "odd",
    [
        "",
        "   ",
        ' {"id": "odd", "question": "spaces around", "expected": []} ',
        '{"id": "odd", "question": "a float grade", "expected": ["d"], "grades": {"d": 2.0}}',
        '{"id": "odd", "question": "an escaped colon \\u003a", "expected": []}',
        '{"id": "odd", "question": "spaced", "expected": [] }\t',
    ],
    ids=["blank", "spaces", "padded", "float-grade", "colon-escape", "tab"],
)
def test_odd_but_valid_lines_are_read_line_by_line(
    tmp_path: Path, small_blocks: list[bool], odd: str
) -> None:
    rows: list[Any] = random_rows(11, 200)
    rows.insert(120, odd)
    path = write(tmp_path / "set.jsonl", rows, ensure_ascii=False)
    loaded = load_jsonl(path)
    assert loaded.questions == line_by_line(path)
    assert loaded.content_hash == reference_hash(loaded.questions)
    assert small_blocks.count(False) == 1  # only the odd line's block, line by line


#: The start of a bad line: its id and question.
BAD = '{"id": "bad", "question": "q", '
BAD_LINES = {
    "key twice": '{"id": "bad", "question": "a: b", "expected": [], "question": "c"}',
    "key twice, colons": '{"id": "b:a:d", "question": ":", "expected": ["x:y"], "id": "z"}',
    "key twice, escaped colon": '{"id": "bad", "question": "a\\u003a", "expected": [], "id": "z"}',
    "grade key twice": BAD + '"expected": ["d"], "grades": {"d": 2, "d": 3}}',
    "meta key twice": BAD + '"expected": [], "meta": {"a": "1", "a": "2"}}',
    "lone surrogate": '{"id": "bad", "question": "q \\ud800", "expected": []}',
    "surrogate id": '{"id": "b\\udfff", "question": "q", "expected": []}',
    "surrogate expected": '{"id": "bad", "question": "q", "expected": ["\\udc00"]}',
    "surrogate grade": '{"id": "bad", "question": "q", "expected": [], "grades": {"\\ud800": 1}}',
    "surrogate meta": '{"id": "bad", "question": "q", "expected": [], "meta": {"a": "\\ud800"}}',
    "surrogate meta key": '{"id": "bad", "question": "q", "expected": [], "meta": {"\\ud800": ""}}',
    "surrogate gist": '{"id": "bad", "question": "q", "expected": [], "gist": "\\ud800"}',
    "surrogate class": '{"id": "bad", "question": "q", "expected": [], "hard_class": "\\ud800"}',
    "surrogate key": '{"id": "bad", "question": "q", "expected": [], "\\ud800": 1}',
    "expected graded 0": '{"id": "bad", "question": "q", "expected": ["d"], "grades": {"d": 0}}',
    "bool grade": '{"id": "bad", "question": "q", "expected": ["d"], "grades": {"d": true}}',
    "half grade": '{"id": "bad", "question": "q", "expected": ["d"], "grades": {"d": 2.5}}',
    "grade too large": BAD + f'"expected": [], "grades": {{"d": {MAX_GRADE + 1}}}}}',
    "negative grade": '{"id": "bad", "question": "q", "expected": [], "grades": {"d": -1}}',
    "NaN grade": '{"id": "bad", "question": "q", "expected": [], "grades": {"d": NaN}}',
    "huge grade": '{"id": "bad", "question": "q", "expected": [], "grades": {"d": 1%s}}'
    % ("0" * 200),
    "graded id with space": '{"id": "bad", "question": "q", "expected": [], "grades": {"d 1": 1}}',
    "grades a list": '{"id": "bad", "question": "q", "expected": [], "grades": [1]}',
    "meta null": '{"id": "bad", "question": "q", "expected": [], "meta": null}',
    "meta number": '{"id": "bad", "question": "q", "expected": [], "meta": {"a": 1}}',
    "meta control": '{"id": "bad", "question": "q", "expected": [], "meta": {"a\\u001b": "1"}}',
    "unknown form": '{"id": "bad", "question": "q", "expected": [], "form": "maybe"}',
    "form number": '{"id": "bad", "question": "q", "expected": [], "form": 1}',
    "id with space": '{"id": "b ad", "question": "q", "expected": []}',
    "id empty": '{"id": "", "question": "q", "expected": []}',
    "id number": '{"id": 7, "question": "q", "expected": []}',
    "id missing": '{"question": "q", "expected": []}',
    "question blank": '{"id": "bad", "question": "  ", "expected": []}',
    "question bell": '{"id": "bad", "question": "q\\u0007", "expected": []}',
    "question too long": json.dumps({"id": "bad", "question": "q" * 10_001, "expected": []}),
    "question null": '{"id": "bad", "question": null, "expected": []}',
    "expected missing": '{"id": "bad", "question": "q"}',
    "expected string": '{"id": "bad", "question": "q", "expected": "d"}',
    "expected twice": '{"id": "bad", "question": "q", "expected": ["d", "d"]}',
    "expected empty id": '{"id": "bad", "question": "q", "expected": [""]}',
    "expected number": '{"id": "bad", "question": "q", "expected": [1]}',
    "hard class empty": '{"id": "bad", "question": "q", "expected": [], "hard_class": ""}',
    "hard class number": '{"id": "bad", "question": "q", "expected": [], "hard_class": 5}',
    "hard class override": BAD + '"expected": [], "hard_class": "\\u202e"}',
    "gist number": '{"id": "bad", "question": "q", "expected": [], "gist": 5}',
    "gist null byte": '{"id": "bad", "question": "q", "expected": [], "gist": "\\u0000"}',
    "unknown field": '{"id": "bad", "question": "q", "expected": [], "answer": "x"}',
    "array": '["bad", "q", []]',
    "two objects": '{"id": "bad", "question": "q", "expected": []}{"id": "b2"}',
    "two objects, comma": '{"id": "bad", "question": "q", "expected": []},{"id": "b2", '
    '"question": "q", "expected": []}',
    "truncated": '{"id": "bad", "question": "q", "expected": [',
    "nested": '{"id": "bad", "question": "q", "expected": [], "meta": ' + "[" * 5000 + "]" * 5000,
    "duplicate id": '{"id": "q3", "question": "again", "expected": []}',
    "object over two lines": '{"id": "bad", "question": "q",\n"expected": []}',
    "split string": '{"id": "bad", "question": "q',
}


@pytest.mark.parametrize("bad", list(BAD_LINES.values()), ids=list(BAD_LINES))
def test_a_bad_line_is_named_as_line_by_line_names_it(
    tmp_path: Path, small_blocks: list[bool], bad: str
) -> None:
    rows: list[Any] = random_rows(13, 300)
    rows.insert(250, bad)
    if bad.endswith('"question": "q'):  # the rest of the string on the next line
        rows.insert(251, 'x", "expected": []}')
    path = write(tmp_path / "set.jsonl", rows, ensure_ascii=False)
    with pytest.raises(InputError) as fast:
        load_jsonl(path)
    with pytest.raises(InputError) as slow:
        line_by_line(path)
    assert str(fast.value) == str(slow.value)
    assert fast.value.line == 251
    assert small_blocks.count(True) >= 5  # blocks before it were taken in bulk


def test_invalid_utf8_anywhere_is_named_before_an_earlier_bad_line(
    tmp_path: Path, small_blocks: list[bool]
) -> None:
    lines = [json.dumps(row).encode() for row in random_rows(17, 300)]
    lines[20] = b'{"id": "bad"'
    lines[280] = b'{"id": "q280", "question": "\xff", "expected": []}'
    path = tmp_path / "set.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(InputError) as error:
        load_jsonl(path)
    assert error.value.line == 281
    assert "invalid UTF-8 at byte" in str(error.value)


def test_no_questions_and_missing_files_are_reported_as_before(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n  \n", encoding="utf-8")
    with pytest.raises(InputError, match="holds no questions"):
        load_jsonl(empty)
    with pytest.raises(InputError, match=r"cannot read the file: No such file"):
        load_jsonl(tmp_path / "missing.jsonl")


@pytest.mark.parametrize("enabled", [True, False])
def test_loading_leaves_the_cyclic_collector_as_it_found_it(tmp_path: Path, enabled: bool) -> None:
    good = write(tmp_path / "good.jsonl", random_rows(3, 10))
    bad = write(tmp_path / "bad.jsonl", [*random_rows(3, 10), BAD_LINES["key twice"]])
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        load_jsonl(good)
        assert gc.isenabled() is enabled
        with pytest.raises(InputError):
            load_jsonl(bad)
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_loading_never_switches_or_freezes_the_cyclic_collector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The collector is the whole interpreter's: a library that loads a file leaves it alone.
    def refuse() -> None:
        raise AssertionError("loading a set touched the cyclic collector")

    for name in ("disable", "enable", "freeze", "unfreeze", "set_threshold"):
        monkeypatch.setattr(gc, name, refuse)
    rows = random_rows(5, 3000)
    golden = load_jsonl(write(tmp_path / "good.jsonl", rows))
    assert [question.id for question in golden.questions] == [row["id"] for row in rows]


def test_a_graded_expected_document_id_is_one_string(tmp_path: Path) -> None:
    row = {"id": "q1", "question": "q", "expected": ["doc-1", "doc-2"], "grades": {"doc-2": 3}}
    question = load_jsonl(write(tmp_path / "set.jsonl", [row])).questions[0]
    assert question.expected == ("doc-1", "doc-2")
    assert question.expected[1] is next(iter(question.grades))


def test_questions_from_columns_equal_the_constructed_questions() -> None:
    assert tuple(field.name for field in attrs.fields(GoldenQuestion)) == QUESTION_FIELDS
    rows = [
        GoldenQuestion("a", "first", QuestionForm.GAP, ("d1",), {"d1": 2}, "neg", "g", {"k": "v"}),
        GoldenQuestion("b", "second"),
    ]
    columns = [[getattr(row, name) for row in rows] for name in QUESTION_FIELDS]
    built = questions_from_columns(*columns)
    assert built == rows
    assert [hash(question) for question in built] == [hash(row) for row in rows]
    assert all(type(question) is GoldenQuestion for question in built)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        built[0].id = "changed"  # type: ignore[misc]
    columns[3] = columns[3][:1]
    with pytest.raises(ValueError, match="1 values of expected for 2 questions"):
        questions_from_columns(*columns)


def test_the_content_hash_of_odd_values_built_in_code_is_the_canonical_json_one() -> None:
    """Strings needing escapes, and grades or meta of any JSON type, are written by the
    fast writer; a text field holding a number by the general one: both give the digest
    of the canonical JSON."""
    rng = random.Random(23)
    escapes = ['a "quoted" \\ text', "nul \x00 and \x1f and \x7f", "sep \u2028 \u00e9"]
    usual = [
        GoldenQuestion(
            id=f"q{index}",
            question=rng.choice(escapes + TEXTS),
            form=rng.choice((None, QuestionForm.MATCH, QuestionForm.GAP)),
            expected=tuple(rng.sample(DOCUMENTS, 2)),
            grades={rng.choice(DOCUMENTS): 2, "zz": 0, "aa": 4} if index % 2 else {},
            hard_class=rng.choice((None, "near-duplicate", 'x"y')),
            gist=rng.choice((None, "\t gist")),
            meta={"b": "\\", "a": '"'} if index % 3 else {},
        )
        for index in range(300)
    ]
    unusual_values = [
        GoldenQuestion("bool", "q", grades={"d": True, "c": False}),
        GoldenQuestion("float", "q", grades={"d": 2.5, "a": float("nan")}),
        GoldenQuestion("meta", "q", meta={"b": 1, "a": None}),  # type: ignore[dict-item]
    ]
    unusual_fields = [
        GoldenQuestion(7, "q"),  # type: ignore[arg-type]
        GoldenQuestion("gist", "q", gist=3),  # type: ignore[arg-type]
        GoldenQuestion("class", "q", hard_class=5),  # type: ignore[arg-type]
        GoldenQuestion("expected", "q", expected=(1,)),  # type: ignore[arg-type]
    ]
    from retrievalkit.model.values import _canonical_texts

    assert _canonical_texts(usual + unusual_values) is not None
    for question in unusual_fields:
        assert _canonical_texts([question]) is None
    for questions in (
        usual,
        usual[:5] + unusual_values + unusual_fields[:3] + usual[5:],
        unusual_values,
    ):
        golden = GoldenQuestionSet("odd", questions)
        assert golden.content_hash == reference_hash(golden.questions)


def test_loaded_empty_labels_share_one_mapping(tmp_path: Path) -> None:
    rows = [{"id": f"q{n}", "question": "q", "expected": [], "grades": {}} for n in range(3)]
    questions = load_jsonl(write(tmp_path / "set.jsonl", rows)).questions
    assert questions[0].grades == {} and type(questions[0].grades) is FrozenDict
    assert questions[0].grades is questions[2].grades is questions[1].meta


def test_the_question_schema_is_the_fields_of_golden_question(tmp_path: Path) -> None:
    names = tuple(field.name for field in attrs.fields(GoldenQuestion))
    assert names == QUESTION_FIELDS
    path = tmp_path / "set.jsonl"
    path.write_text(json.dumps({"id": "q", "question": "x?", "expected": [], "colour": 1}) + "\n")
    with pytest.raises(InputError) as caught:
        load_jsonl(path)
    assert caught.value.field == "colour"
    assert caught.value.hint == "known fields: " + ", ".join(names)
    # the canonical writer writes what the reader reads, in the schema's order
    question = GoldenQuestion(
        "q", "x?", expected=("d",), cluster="c", expected_chunks=("d#1",), gist="g"
    )
    written = golden_files.question_record(question)
    assert list(written) == [name for name in names if name in written]
    golden_files.write_jsonl([question], path)
    assert load_jsonl(path).questions == (question,)
