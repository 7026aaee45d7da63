"""Generated ids: one identity (Unicode NFC, no surrounding whitespace) for labels and
returned ids alike, twins refused, unordered or broken rankings as error outcomes.

Ids are drawn with characters that have a decomposed form (é, Å, ñ, ế, Hangul), so every
case has an NFC and an NFD spelling of the same id.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import retrievalkit as rk
from retrievalkit.errors import InputError
from retrievalkit.formats.golden_sets import load_set_file
from retrievalkit.formats.ids import trimmed

GENERATED = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
COMPOSED = "éÅñếḱ한글Ǻǘ"
ids = st.text(alphabet=st.sampled_from("abc-_.0123456789" + COMPOSED), min_size=1, max_size=10)
composed_ids = st.tuples(ids, st.sampled_from(COMPOSED), ids).map("".join)
whitespace = st.sampled_from([" ", "\t", "\n", "\u00a0", "\u3000", "\r\n"])


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


def nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


class Answers:
    """Returns, for question ``q<i>``, what ``answers[i]`` holds."""

    identifier = "answers"

    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers

    def retrieve(self, question: str, limit: int) -> Any:
        return self.answers[int(question.split()[-1])]


def golden_of(labels: list[str]) -> rk.GoldenQuestionSet:
    questions = [
        rk.GoldenQuestion(id=f"q{i}", question=f"question {i}", expected=[label])
        for i, label in enumerate(labels)
    ]
    return rk.GoldenQuestionSet("ids", questions)


@GENERATED
@given(
    labels=st.lists(composed_ids, min_size=1, max_size=6, unique_by=nfc),
    label_form=st.sampled_from([nfc, nfd]),
    returned_form=st.sampled_from([nfc, nfd]),
    before=st.lists(whitespace, max_size=2).map("".join),
    after=st.lists(whitespace, max_size=2).map("".join),
)
def test_an_id_in_either_normal_form_with_whitespace_around_it_is_a_hit_with_a_warning(
    labels: list[str], label_form: Any, returned_form: Any, before: str, after: str
) -> None:
    golden = golden_of([label_form(label) for label in labels])
    answers = [[before + returned_form(label) + after] for label in labels]
    run = rk.evaluate(golden, Answers(answers), git_commit=None, k=(1,))
    assert run.errored == 0
    assert run.metrics["hit@1"].mean == 1.0
    changed = returned_form is nfd or before or after
    assert any("returned document id" in w for w in run.warnings) == bool(changed)
    if label_form is nfd:
        assert any("not in Unicode NFC" in w for w in run.warnings)
    for outcome, label in zip(run.outcomes, labels, strict=True):
        assert outcome.ranking == (nfc(label),)


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), "utf-8")
    return path


@GENERATED
@given(label=composed_ids, ascii_escapes=st.booleans(), as_question_ids=st.booleans())
def test_nfc_and_nfd_twins_are_refused_in_one_list_and_as_two_question_ids(
    tmp_path: Path, label: str, ascii_escapes: bool, as_question_ids: bool
) -> None:
    if as_question_ids:
        rows = [
            {"id": nfc(label), "question": "one", "expected": []},
            {"id": nfd(label), "question": "two", "expected": []},
        ]
    else:
        rows = [{"id": "q1", "question": "one", "expected": [nfc(label), nfd(label)]}]
    path = tmp_path / "twins.jsonl"
    text = "".join(json.dumps(row, ensure_ascii=ascii_escapes) + "\n" for row in rows)
    path.write_text(text, "utf-8")
    with pytest.raises(InputError) as refused:
        load_set_file(path)
    assert "one id in Unicode NFC" in refused.value.detail
    assert refused.value.field == ("id" if as_question_ids else "expected")
    toml = tmp_path / "twins.toml"
    toml.write_text(
        "".join(
            f"[[questions]]\nid = {json.dumps(r['id'])}\nquestion = {json.dumps(r['question'])}\n"
            f"expected = {json.dumps(r['expected'])}\n"
            for r in rows
        ),
        "utf-8",
    )
    with pytest.raises(InputError, match="one id in Unicode NFC"):
        load_set_file(toml)


@GENERATED
@given(label=composed_ids)
def test_validate_refuses_twins_with_exit_code_2(tmp_path: Path, label: str) -> None:
    from retrievalkit.cli.main import main

    path = _write(
        tmp_path / "twins.jsonl",
        [{"id": "q1", "question": "one", "expected": [nfc(label), nfd(label)]}],
    )
    assert main(["validate", "--set", str(path)]) == 2


unordered = st.one_of(
    st.sets(ids, min_size=1, max_size=5),
    st.frozensets(ids, min_size=1, max_size=5),
    st.dictionaries(ids, st.floats(0, 1), min_size=1, max_size=5),
    st.dictionaries(ids, st.floats(0, 1), min_size=1, max_size=5).map(lambda d: d.keys()),
)
broken = st.one_of(
    st.lists(st.one_of(st.integers(), st.none(), st.binary(max_size=3)), min_size=1, max_size=3),
    st.lists(st.sampled_from(["", " ", "\t", "\u3000"]), min_size=1, max_size=3),
)


@GENERATED
@given(answer=st.one_of(unordered, broken), batched=st.booleans(), timeout=st.booleans())
def test_an_unordered_or_broken_ranking_is_an_error_outcome_of_its_question(
    answer: Any, batched: bool, timeout: bool
) -> None:
    golden = golden_of(["a", "b"])
    retriever: Any = Answers([answer, ["b"]])
    if batched:
        retriever.retrieve_many = lambda texts, limit: [retriever.retrieve(t, limit) for t in texts]
    run = rk.evaluate(
        golden, retriever, git_commit=None, max_error_rate=None, timeout=5.0 if timeout else None
    )
    first, second = run.outcomes
    assert first.error is not None and second.error is None
    assert run.metrics["hit@1"].n == 2


def test_scores_do_not_depend_on_the_hash_seed_because_a_set_is_refused(tmp_path: Path) -> None:
    script = (
        "import retrievalkit as rk\n"
        "qs=[rk.GoldenQuestion(id=f'q{i}', question=f'question {i}', expected=['d3']) "
        "for i in range(4)]\n"
        "class R:\n identifier='r'\n"
        " def retrieve(self, q, limit): return {f'd{j}' for j in range(8)}\n"
        "run=rk.evaluate(rk.GoldenQuestionSet('s', qs), R(), git_commit=None,\n"
        " max_error_rate=None)\n"
        "print(run.errored, run.metrics['rr'].mean)\n"
    )
    seen = set()
    for seed in ("0", "1", "2", "3"):
        done = subprocess.run(
            [sys.executable, "-c", script],
            env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            check=True,
            cwd=tmp_path,
        )
        seen.add(done.stdout)
    assert seen == {"4 0.0\n"}  # every question an error outcome, whatever the seed


@GENERATED
@given(
    head=st.text(alphabet="abcd-", min_size=1, max_size=5),
    separator=st.sampled_from(["#", "::", "|", "~"]),
    tail=st.text(alphabet="0123", min_size=1, max_size=3),
)
def test_a_label_holding_the_retrievers_separator_is_refused_with_the_fix(
    tmp_path: Path, head: str, separator: str, tail: str
) -> None:
    label = head + separator + tail
    golden = golden_of(["plain", label])
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"_id": "plain", "title": "", "text": "plain text"}) + "\n")
    with pytest.raises(InputError) as refused:
        rk.evaluate(
            golden, "bm25", options={"corpus": str(corpus), "doc_id_separator": separator},
            git_commit=None,
        )  # fmt: skip
    assert refused.value.field == "expected"
    assert repr(head) in (refused.value.hint or "")
    from retrievalkit.pipeline.authoring.validation import lint_set

    warnings = lint_set(golden, {"chunks": {"doc_id_separator": separator}})["warnings"]
    assert any("doc_id_separator" in w and repr(head) in w for w in warnings)


def _beir(folder: Path, queries: list[dict[str, Any]], qrels: list[tuple[str, str, str]]) -> Path:
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries), "utf-8"
    )
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join("\t".join(r) + "\n" for r in qrels), "utf-8"
    )
    return folder


non_ascii_digits = st.text(alphabet="²³¹٣٤۵०१߂൧๑", min_size=1, max_size=4)


@GENERATED
@given(query_id=non_ascii_digits, plain=st.integers(0, 99).map(str))
def test_beir_reads_query_ids_of_non_ascii_digits_as_jsonl_does(
    tmp_path: Path, query_id: str, plain: str
) -> None:
    folder = _beir(
        tmp_path / f"b{abs(hash(query_id))}",
        [{"_id": query_id, "text": "one"}, {"_id": plain, "text": "two"}],
        [(query_id, "d1", "1"), (plain, "d2", "1")],
    )
    assert sorted(q.id for q in load_set_file(folder).questions) == sorted({query_id, plain})


@GENERATED
@given(
    bad_id=st.one_of(st.none(), st.integers(), st.floats(allow_nan=False), st.booleans()),
    long_text=st.integers(10_001, 30_000),
    which=st.sampled_from(["id", "text", "field"]),
)
def test_beir_refuses_what_jsonl_refuses_with_one_line(
    tmp_path: Path, bad_id: Any, long_text: int, which: str
) -> None:
    folder = tmp_path / f"b{abs(hash((repr(bad_id), long_text, which)))}"
    if which == "id":
        _beir(folder, [{"_id": bad_id, "text": "one"}], [(str(bad_id), "d1", "1")])
        field = "_id"
    elif which == "text":
        _beir(folder, [{"_id": "1", "text": "w" * long_text}], [("1", "d1", "1")])
        field = "text"
    else:
        # A qrels field longer than csv's 128 KiB limit: an id like any other.
        _beir(folder, [{"_id": "1", "text": "one"}], [("1", "d" * (long_text * 20), "1")])
        assert load_set_file(folder).questions[0].expected == ("d" * (long_text * 20),)
        return
    with pytest.raises(InputError) as refused:
        load_set_file(folder)
    assert refused.value.field == field and refused.value.line == 1
    assert "\n" not in str(refused.value)


ID_TEXT = (
    st.text(
        alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")),
        min_size=1,
        max_size=8,
    )
    .map(trimmed)  # what surrounds an id unseen is never part of it
    .filter(bool)
)


def _ranx_export(
    tmp_path: Path, labels: list[str], answers: list[list[str]] | None = None
) -> tuple[rk.Run, dict[str, Any]]:
    """A run of questions whose question i expects label i and returns ``answers[i]``
    (default: label i), saved and exported with `export --format ranx-json`: the run and
    the exported document."""
    from retrievalkit.cli.main import main

    answers = answers or [[nfc(label)] for label in labels]
    run = rk.evaluate(golden_of(labels), Answers(answers), git_commit=None, k=(1,))
    store_path = tmp_path / f"s{abs(hash(tuple(labels)))}.sqlite3"
    rk.open_store(f"sqlite:///{store_path}").save(run.record)
    out = tmp_path / f"ranx{abs(hash(tuple(labels)))}.json"
    assert main(["export", run.run_id, "--format", "ranx-json", "--store", f"sqlite:///{store_path}",
                 "--output", str(out)]) == 0  # fmt: skip
    return run, json.loads(out.read_text("utf-8"))


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(labels=st.lists(ID_TEXT, min_size=1, max_size=4, unique_by=nfc))
def test_the_ranx_json_export_keeps_every_id_as_the_run_holds_it(
    tmp_path: Path, labels: list[str]
) -> None:
    run, document = _ranx_export(tmp_path, labels)
    questions = [f"q{i}" for i in range(len(labels))]
    assert sorted(document["run"]) == sorted(document["qrels"]) == sorted(questions)
    for question, label in zip(questions, labels, strict=True):
        assert list(document["run"][question]) == [nfc(label)]
        assert document["qrels"][question] == {nfc(label): 1}
    assert run.metrics["hit@1"].mean == 1.0


def test_ranx_reads_the_export_of_any_id_and_scores_it_as_retrievalkit_does(
    tmp_path: Path,
) -> None:
    import ranx

    # One export of many drawn ids, not one per example: ranx compiles its functions again
    # for some new ids, seconds each. Every third question returns the next one's id.
    labels = awkward_ids(random.Random(20261208), 60)
    answers = [
        [labels[(i + 1) % len(labels)] if i % 3 == 2 else labels[i]] for i in range(len(labels))
    ]
    run, document = _ranx_export(tmp_path, labels, answers)
    ranked = ranx.Run.from_dict(document["run"])
    judged = ranx.Qrels.from_dict(document["qrels"])
    right = sum(1 for i in range(len(labels)) if i % 3 != 2)
    assert run.metrics["hit@1"].mean == pytest.approx(right / len(labels))
    assert ranx.evaluate(judged, ranked, "hit_rate@1") == pytest.approx(right / len(labels))


def awkward_ids(draw: random.Random, count: int) -> list[str]:
    """``count`` distinct ids of 1 to 8 characters from all of Unicode but surrogates,
    controls and line or paragraph separators (as ID_TEXT draws them), trimmed and in NFC,
    from Latin-1, the rest of the basic plane and the astral planes in turn, so that
    every width of string numba keeps (1, 2 and 4 bytes a character) is among them."""
    planes = ((0x20, 0xFF), (0x100, 0xFFFF), (0x10000, 0x10FFFF))
    found: dict[str, None] = {}
    while len(found) < count:
        low, high = planes[len(found) % len(planes)]
        characters: list[str] = []
        length = draw.randint(1, 8)
        while len(characters) < length:
            character = chr(draw.randint(low, high))
            if unicodedata.category(character) not in ("Cs", "Cc", "Zl", "Zp"):
                characters.append(character)
        text = nfc(trimmed("".join(characters)))
        if text:
            found[text] = None
    return list(found)


def test_an_ascii_file_is_canonical_as_read_and_an_escaped_nfd_id_is_still_found(
    tmp_path: Path,
) -> None:
    from retrievalkit.formats.ids import canonical_set

    rows = [{"id": f"q{i}", "question": f"question {i}", "expected": [f"d{i}"]} for i in range(50)]
    plain = load_set_file(_write(tmp_path / "plain.jsonl", rows))
    assert canonical_set(plain) is plain and not plain.warnings
    # ASCII on disk, but a \u escape writes a decomposed id: it must still be made NFC.
    rows[37]["expected"] = [nfd("caf\u00e9")]
    path = tmp_path / "escaped.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), "utf-8")
    assert path.read_text("utf-8").isascii()
    escaped = load_set_file(path)
    assert escaped.questions[37].expected == (nfc("caf\u00e9"),)
    assert any("not in Unicode NFC" in warning for warning in escaped.warnings)
