"""Property-based tests (hypothesis) of the golden set loaders and of the metric engine.

Loaders: any bytes, any JSON, any TOML give either a valid set or an InputError that
names the file (and a line that exists), never another exception; valid sets survive a
write and a read (JSON Lines and TOML) with the same content hash.

Metrics: every value is in [0, 1] or undefined; hit@k and recall@k never fall as k
grows; values agree with a plain reading of the definitions; appending a non-relevant
document changes nothing at smaller k; permuting the questions changes no mean.

CI runs ``RETRIEVALKIT_FUZZ_EXAMPLES`` examples per property (default 200); set it
higher for a long run, e.g. ``RETRIEVALKIT_FUZZ_EXAMPLES=20000 pytest
tests/test_loaders_and_metrics_fuzz.py``.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from retrievalkit.errors import InputError
from retrievalkit.formats.config import find_config
from retrievalkit.formats.golden_sets import (
    MAX_QUESTION_CHARS,
    load_beir,
    load_jsonl,
    load_toml,
    question_record,
    unsafe_character,
    write_jsonl,
)
from retrievalkit.metrics.definitions import compute_metrics, judge_rankings
from retrievalkit.metrics.scoring import ScoringOptions, score_run
from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet, QuestionForm
from retrievalkit.pipeline.engine.evaluator import Retrieval, distinct_ranking

EXAMPLES = int(os.environ.get("RETRIEVALKIT_FUZZ_EXAMPLES", "200"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,  # nothing written into the work tree
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="rk-fuzz-") as directory:
        yield Path(directory)


# --- loaders --------------------------------------------------------------------------------

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
IDS = st.text(max_size=8) | st.sampled_from(["q1", "q2", "doc-1", "doc 2", "d\u0007", ""])
FIELD_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "id": IDS | JSON_VALUES,
    "question": st.text(max_size=40) | st.just("x" * (MAX_QUESTION_CHARS + 1)) | JSON_VALUES,
    "form": st.sampled_from(["MATCH", "GAP", "match", "", "FUZZY"]) | JSON_VALUES,
    "expected": st.lists(IDS, max_size=4) | JSON_VALUES,
    "grades": st.dictionaries(IDS, st.integers(-2, 4) | JSON_SCALARS, max_size=4) | JSON_VALUES,
    "hard_class": st.text(max_size=10) | JSON_VALUES,
    "gist": st.text(max_size=10) | JSON_VALUES,
    "meta": st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3) | JSON_VALUES,
    "answer": JSON_VALUES,
}
QUESTION_DATA = st.fixed_dictionaries({}, optional=FIELD_VALUES)
JSONL_LINES = st.lists(
    st.one_of(
        QUESTION_DATA.map(lambda data: json.dumps(data, allow_nan=True)),
        JSON_VALUES.map(lambda value: json.dumps(value, allow_nan=True)),
        st.text(max_size=30),
    ),
    max_size=5,
)


def assert_names_the_place(error: InputError, path: Path, lines: int) -> None:
    assert error.exit_code == 2
    assert str(error).startswith(str(path)), str(error)
    assert error.line is None or 1 <= error.line <= max(lines, 1), (error.line, lines)
    assert "\n" not in str(error)


def assert_valid(golden: GoldenQuestionSet) -> None:
    ids = [question.id for question in golden.questions]
    assert golden.questions and len(ids) == len(set(ids))
    for question in golden.questions:
        assert question.question.strip() and len(question.question) <= MAX_QUESTION_CHARS
        for doc in (question.id, *question.expected, *question.grades):
            assert doc and not any(ch.isspace() or not ch.isprintable() for ch in doc)
        assert len(set(question.expected)) == len(question.expected)
        assert all(type(grade) is int and grade >= 0 for grade in question.grades.values())
        assert all(question.grades.get(doc, 1) >= 1 for doc in question.expected)
        json.dumps(question_record(question), allow_nan=False).encode("utf-8")


@FUZZ
@given(lines=JSONL_LINES, garbage=st.binary(max_size=8), cut=st.integers(0, 400))
def test_jsonl_loader_gives_a_set_or_a_placed_error(
    scratch: Path, lines: list[str], garbage: bytes, cut: int
) -> None:
    path = scratch / "fuzz.jsonl"
    raw = "\n".join(lines).encode("utf-8", "surrogatepass")
    raw = raw[:cut] + garbage + raw[cut:] if garbage else raw
    path.write_bytes(raw)
    try:
        golden = load_jsonl(path)
    except InputError as error:
        assert_names_the_place(error, path, raw.count(b"\n") + 1)
    else:
        assert_valid(golden)


def toml_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def toml_value(value: Any) -> str:
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return (
            "nan"
            if math.isnan(value)
            else ("inf" if value > 0 else "-inf")
            if math.isinf(value)
            else repr(value)
        )
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value if item is not None) + "]"
    if isinstance(value, dict):
        items = (
            f"{toml_string(str(k))} = {toml_value(v)}" for k, v in value.items() if v is not None
        )
        return "{" + ", ".join(items) + "}"
    return '""'


def toml_document(questions: list[dict[str, Any]], name: Any = "fuzz") -> str:
    parts = [f"name = {toml_value(name)}\n"]
    for data in questions:
        parts.append("\n[[questions]]\n")
        for key, value in data.items():
            if value is not None:
                parts.append(f"{toml_string(key)} = {toml_value(value)}\n")
    return "".join(parts)


@FUZZ
@given(
    questions=st.lists(QUESTION_DATA, max_size=4),
    name=st.text(max_size=5) | JSON_SCALARS,
    noise=st.text(max_size=20),
    where=st.integers(0, 500),
)
def test_toml_loader_gives_a_set_or_a_placed_error(
    scratch: Path, questions: list[dict[str, Any]], name: Any, noise: str, where: int
) -> None:
    text = toml_document(questions, name)
    text = text[:where] + noise + text[where:]
    path = scratch / "fuzz.toml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        golden = load_toml(path)
    except InputError as error:
        assert_names_the_place(error, path, text.count("\n") + 1)
    else:
        assert_valid(golden)


@FUZZ
@given(
    rows=st.lists(
        st.lists(st.text(alphabet="12ad -\t\x00é", max_size=4), min_size=0, max_size=5),
        max_size=6,
    ),
    queries=st.lists(
        st.fixed_dictionaries(
            {},
            optional={
                "_id": st.sampled_from(["1", "2", "a", 3]),
                "text": st.text(max_size=8) | JSON_SCALARS,
            },
        ),
        max_size=4,
    ),
)
def test_beir_loader_gives_a_set_or_a_placed_error(
    scratch: Path, rows: list[list[str]], queries: list[dict[str, Any]]
) -> None:
    directory = scratch / "beir"
    (directory / "qrels").mkdir(parents=True, exist_ok=True)
    qrels = "query-id\tcorpus-id\tscore\n" + "".join("\t".join(row) + "\n" for row in rows)
    (directory / "qrels" / "test.tsv").write_text(qrels, encoding="utf-8")
    lines = "".join(json.dumps(query) + "\n" for query in queries)
    (directory / "queries.jsonl").write_text(lines, encoding="utf-8")
    try:
        golden = load_beir(directory)
    except InputError as error:
        assert error.exit_code == 2 and error.source is not None
        assert "\n" not in str(error)
    else:
        assert_valid(golden)


@FUZZ
@given(
    sections=st.dictionaries(
        st.sampled_from(["eval", "regression", "store", "sets", "retrievers", "extra"]),
        st.dictionaries(
            st.sampled_from(
                [
                    "k",
                    "timeout",
                    "confidence",
                    "url",
                    "max_top1_drop",
                    "metrics",
                    "x",
                    "plugin",
                    "path",
                ]
            ),
            JSON_SCALARS | st.lists(st.integers(-1, 20), max_size=3),
            max_size=3,
        ),
        max_size=3,
    ),
)
def test_config_loader_gives_a_config_or_a_placed_error(
    scratch: Path, sections: dict[str, dict[str, Any]]
) -> None:
    text = "".join(
        f"[{section}]\n" + "".join(f"{key} = {toml_value(value)}\n" for key, value in body.items())
        for section, body in sections.items()
    )
    path = scratch / "fuzz-config.toml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        find_config(str(path))
    except InputError as error:
        assert_names_the_place(error, path, text.count("\n") + 1)


CLEAN_IDS = st.text(alphabet="abcdefghij0123456789-_#.", min_size=1, max_size=6)
#: Valid text: no control or direction-changing character, which loading refuses (the
#: question's own text may hold tabs and newlines; labels may not).
TEXT = st.text(max_size=30).filter(lambda text: unsafe_character(text, free_text=True) is None)
LABEL = st.text(max_size=8).filter(lambda text: unsafe_character(text) is None)
VALID_QUESTIONS = st.builds(
    GoldenQuestion,
    id=CLEAN_IDS,
    question=TEXT.filter(lambda text: text.strip() != ""),
    form=st.sampled_from([None, QuestionForm.MATCH, QuestionForm.GAP]),
    expected=st.lists(CLEAN_IDS, unique=True, max_size=3),
    grades=st.dictionaries(CLEAN_IDS, st.integers(0, 3), max_size=3),
    hard_class=st.none() | LABEL.filter(lambda text: text.strip() != ""),
    gist=st.none() | TEXT,
    meta=st.dictionaries(LABEL.filter(lambda t: len(t) <= 4), LABEL, max_size=2),
).filter(lambda q: all(q.grades.get(doc, 1) >= 1 for doc in q.expected))


@FUZZ
@given(questions=st.lists(VALID_QUESTIONS, min_size=1, max_size=5, unique_by=lambda q: q.id))
def test_valid_sets_survive_writing_and_reading(
    scratch: Path, questions: list[GoldenQuestion]
) -> None:
    expected = GoldenQuestionSet(name="fuzz", questions=questions)
    write_jsonl(questions, scratch / "round.jsonl")
    from_jsonl = load_jsonl(scratch / "round.jsonl", name="fuzz")
    assert from_jsonl.questions == expected.questions
    assert from_jsonl.content_hash == expected.content_hash
    toml = toml_document([question_record(question) for question in questions])
    (scratch / "round.toml").write_text(toml, encoding="utf-8")
    from_toml = load_toml(scratch / "round.toml")
    assert from_toml.content_hash == expected.content_hash


@FUZZ
@given(
    ids=st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), max_size=12), depth=st.integers(1, 6)
)
def test_distinct_ranking_keeps_first_occurrences(ids: list[str], depth: int) -> None:
    ranking = distinct_ranking(ids, len(ids), depth)
    assert len(ranking) == len(set(ranking)) <= depth
    assert list(ranking) == list(dict.fromkeys(ids))[:depth]


# --- metric engine --------------------------------------------------------------------------

DEPTH = 10
KS = tuple(range(1, DEPTH + 1))
DOCS = [f"d{n}" for n in range(8)]
UNJUDGED = [f"u{n}" for n in range(4)]


@st.composite
def question_cases(draw: st.DrawFn) -> tuple[dict[str, int], list[str], bool]:
    """A question's labels (doc -> grade), a ranking of distinct ids, and whether it errored."""
    labels = draw(st.dictionaries(st.sampled_from(DOCS), st.integers(0, 3), max_size=6))
    ranking = draw(st.lists(st.sampled_from(DOCS + UNJUDGED), unique=True, max_size=DEPTH))
    errored = draw(st.integers(0, 9)) == 0
    return labels, ranking, errored


CASES = st.lists(question_cases(), min_size=1, max_size=12)


def metrics_of(cases: list[tuple[dict[str, int], list[str], bool]]) -> dict[str, np.ndarray]:
    judged = judge_rankings(
        [ranking for _, ranking, _ in cases],
        [labels for labels, _, _ in cases],
        depth=DEPTH,
        errored=[errored for _, _, errored in cases],
    )
    return compute_metrics(judged, KS, with_judged=True)


@FUZZ
@given(cases=CASES)
def test_values_are_in_range_monotone_and_as_defined(
    cases: list[tuple[dict[str, int], list[str], bool]],
) -> None:
    values = metrics_of(cases)
    for name, column in values.items():
        defined = column[~np.isnan(column)]
        assert ((defined >= 0) & (defined <= 1 + 1e-12)).all(), name
    for index, (labels, ranking, errored) in enumerate(cases):
        relevant = {doc for doc, grade in labels.items() if grade >= 1}
        shown = [] if errored else ranking
        hits = [values[f"hit@{k}"][index] for k in KS]
        assert hits == sorted(hits)
        if not relevant:
            assert hits == [float(not shown and not errored)] * len(KS)
            assert all(np.isnan(values[f"{m}@{k}"][index]) for m in ("recall", "ndcg") for k in KS)
            assert np.isnan(values["rr"][index])
            continue
        recalls = [values[f"recall@{k}"][index] for k in KS]
        assert recalls == sorted(recalls)
        for k in KS:
            found = len(relevant & set(shown[:k]))
            assert values[f"hit@{k}"][index] == float(found > 0)
            assert values[f"recall@{k}"][index] == pytest.approx(found / len(relevant))
            assert values[f"precision@{k}"][index] == pytest.approx(found / k)
            # judged@k: the labelled share of what was returned in the top k, if anything was.
            top = shown[:k]
            judged = values[f"judged@{k}"][index]
            if top:
                assert judged == pytest.approx(sum(doc in labels for doc in top) / len(top))
            else:
                assert np.isnan(judged)
        first = next((rank for rank, doc in enumerate(shown, 1) if doc in relevant), None)
        assert values["rr"][index] == pytest.approx(0.0 if first is None else 1 / first)


@FUZZ
@given(cases=CASES, which=st.integers(0, 100), unjudged=st.booleans())
def test_appending_a_non_relevant_document_changes_nothing_at_smaller_k(
    cases: list[tuple[dict[str, int], list[str], bool]], which: int, unjudged: bool
) -> None:
    index = which % len(cases)
    labels, ranking, errored = cases[index]
    if len(ranking) >= DEPTH:
        ranking = ranking[: DEPTH - 1]
    spare = [doc for doc in (UNJUDGED if unjudged else DOCS) if doc not in ranking]
    spare = [doc for doc in spare if labels.get(doc, 0) == 0]
    assume(spare)  # a case with no spare document says nothing: hypothesis draws another
    before = list(cases)
    before[index] = (labels, ranking, errored)
    after = list(before)
    after[index] = (labels, [*ranking, spare[0]], errored)
    old, new = metrics_of(before), metrics_of(after)
    for name in old:
        family, _, k = name.partition("@")
        if family == "judged" or (k and int(k) > len(ranking)):
            continue
        assert np.array_equal(old[name], new[name], equal_nan=True), name


@FUZZ
@given(cases=CASES, data=st.data())
def test_permuting_the_questions_changes_no_mean(
    cases: list[tuple[dict[str, int], list[str], bool]], data: st.DataObject
) -> None:
    order = data.draw(st.permutations(range(len(cases))))
    forms = [None, QuestionForm.MATCH, QuestionForm.GAP]

    def scored(indices: list[int]) -> dict[str, Any]:
        questions, retrievals = [], []
        for index in indices:
            labels, ranking, errored = cases[index]
            questions.append(
                GoldenQuestion(
                    id=f"q{index}",
                    question="?",
                    form=forms[index % 3],
                    expected=[doc for doc, grade in labels.items() if grade >= 1],
                    grades=labels,
                    meta={"half": str(index % 2)},
                )
            )
            error = "RuntimeError: down" if errored else None
            retrievals.append(Retrieval(() if errored else tuple(ranking), 1.0, error))
        scores = score_run(questions, retrievals, ScoringOptions(KS, 20, slices=("half",)))
        means = {name: (value.mean, value.n) for name, value in scores.metrics.items()}
        for field, groups in scores.slices.items():
            for label, metrics in groups.items():
                for name, value in metrics.items():
                    means[f"{field}={label}/{name}"] = (value.mean, value.n)
        return means

    first, second = scored(list(range(len(cases)))), scored(list(order))
    assert first.keys() == second.keys()
    for name, (mean, n) in first.items():
        other_mean, other_n = second[name]
        assert n == other_n, name
        assert (mean is None) == (other_mean is None), name
        if mean is not None and other_mean is not None:
            assert 0.0 <= mean <= 1.0 + 1e-12
            assert mean == pytest.approx(other_mean, abs=1e-12), name
