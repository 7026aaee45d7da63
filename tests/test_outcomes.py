"""Outcomes by column: exact round trips, lazy loading, the checks on the way in."""

from __future__ import annotations

import json
import pickle
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrievalkit.errors import StoreError
from retrievalkit.formats.convert import structure, to_json, unstructure
from retrievalkit.metrics.definitions import (
    DEFAULT_KS,
    compute_metrics,
    judge_rankings,
    metric_names,
)
from retrievalkit.model.outcomes import (
    DOCUMENTS,
    ERRORS,
    JUDGMENTS,
    LATENCY,
    QUESTION_IDS,
    RANKINGS,
    Judgments,
    Outcomes,
    Rankings,
    column_name,
)
from retrievalkit.model.values import QuestionForm, QuestionOutcome
from retrievalkit.stores.columns import columns_header, decode_columns, encode_columns

METRICS = ("hit@1", "hit@3", "ndcg@3", "rr")

ids = st.text(min_size=1, max_size=12)
docs = st.text(min_size=1, max_size=8)
value = st.one_of(
    st.none(),
    st.sampled_from([0.0, 1.0, 0.5, 1 / 3, -0.0]),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
)


@st.composite
def outcome_lists(draw: st.DrawFn) -> list[QuestionOutcome]:
    """Outcomes as any scorer or hand could make them, some lacking a metric altogether."""
    names = draw(st.lists(st.text(min_size=1, max_size=6), unique=True, max_size=4))
    question_ids = draw(st.lists(ids, unique=True, max_size=12))
    drop_some = draw(st.booleans())
    made = []
    for question_id in question_ids:
        scores = {name: draw(value) for name in names}
        if drop_some and names and draw(st.booleans()):
            del scores[names[0]]
        made.append(
            QuestionOutcome(
                question_id=question_id,
                ranking=draw(st.lists(docs, unique=True, max_size=5)),
                scores=scores,
                latency_ms=draw(
                    st.one_of(
                        st.floats(0, 1e6, allow_nan=False).map(lambda x: round(x, 3)),
                        st.floats(allow_nan=False, allow_infinity=False),
                    )
                ),
                error=draw(st.one_of(st.none(), st.text(max_size=20))),
                form=draw(st.one_of(st.none(), st.sampled_from(QuestionForm))),
                hard_class=draw(st.one_of(st.none(), st.text(max_size=6))),
                judgments=draw(st.dictionaries(docs, st.integers(-3, 2**40), max_size=4)),
            )
        )
    return made


def stored(outcomes: Outcomes) -> tuple[Outcomes, Counter[str]]:
    """``outcomes`` through the stored form, with a count of the columns loaded."""
    columns = encode_columns(outcomes)
    header = json.loads(json.dumps(columns_header(outcomes)))
    loads: Counter[str] = Counter()

    def load(name: str) -> bytes:
        loads[name] += 1
        return columns[name]

    return decode_columns(header, load, where="test store run r1"), loads


def plain(outcomes: list[QuestionOutcome] | Outcomes) -> str:
    """Canonical text of outcomes, so that a lost sign of zero or key would show."""
    return json.dumps(
        [unstructure(outcome) for outcome in outcomes], sort_keys=True, ensure_ascii=False
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(made=outcome_lists())
def test_outcomes_round_trip_exactly_through_columns_and_json(
    made: list[QuestionOutcome],
) -> None:
    outcomes = Outcomes.from_outcomes(made)
    assert list(outcomes) == made
    assert outcomes == tuple(made)
    assert plain(outcomes) == plain(made)
    back, _ = stored(outcomes)
    assert back == outcomes
    assert plain(back) == plain(made)
    assert back.errored == sum(outcome.error is not None for outcome in made)
    # The JSON export's list of dicts structures back into the same outcomes.
    exported = json.loads(to_json(outcomes))
    assert structure(exported, Outcomes) == outcomes
    assert hash(back) == hash(tuple(made))


@settings(max_examples=30, deadline=None)
@given(made=outcome_lists(), data=st.data())
def test_indexing_and_slicing_match_the_list(
    made: list[QuestionOutcome], data: st.DataObject
) -> None:
    outcomes, _ = stored(Outcomes.from_outcomes(made))
    if made:
        index = data.draw(st.integers(-len(made), len(made) - 1))
        assert outcomes[index] == made[index]
        # The first look-up scans the ids, the later ones share an index: both agree.
        for _ in range(2):
            assert outcomes.index_of(made[index].question_id) == index % len(made)
            assert outcomes.index_of(made[0].question_id) == 0
            with pytest.raises(ValueError, match="not in these outcomes"):
                outcomes.index_of("no such question")
        assert outcomes.ranking(index % len(made)) == made[index].ranking
    part = data.draw(st.slices(len(made) + 1))
    assert list(outcomes[part]) == made[part]
    assert outcomes[part].errored == sum(o.error is not None for o in made[part])
    with pytest.raises(IndexError):
        outcomes[len(made)]


def scored(count: int, seed: int = 7) -> Outcomes:
    """Outcomes of real metric kernels over random rankings and judgments."""
    rng = np.random.default_rng(seed)
    corpus = np.array([f"doc-{i}" for i in range(500)])
    picks = np.argsort(rng.random((count, 500)), axis=1)[:, :14]
    rankings = [tuple(row) for row in corpus[picks[:, :10]].tolist()]
    sizes = rng.integers(0, 4, count).tolist()
    starts = rng.integers(0, 11, count).tolist()
    # Labels: some among the ranked documents, some not.
    labels = [
        {
            doc: int(grade)
            for doc, grade in zip(row[at : at + size], rng.integers(0, 3, size), strict=True)
        }
        for row, size, at in zip(corpus[picks].tolist(), sizes, starts, strict=True)
    ]
    judged = judge_rankings(rankings, labels, depth=10, errored=[False] * count)
    values = compute_metrics(judged, DEFAULT_KS, with_judged=True)
    table = np.column_stack(list(values.values())).tolist()
    latency = np.round(rng.gamma(2.0, 20.0, count), 3).tolist()
    return Outcomes.from_outcomes(
        QuestionOutcome(
            f"q{i}",
            rankings[i],
            {name: (None if v != v else v) for name, v in zip(values, table[i], strict=True)},
            latency[i],
            judgments=labels[i],
        )
        for i in range(count)
    )


def test_values_of_real_metrics_are_bit_exact_after_storing() -> None:
    outcomes = scored(400)
    back, _ = stored(outcomes)
    assert back.metric_names == tuple(metric_names(DEFAULT_KS, judged=True))
    for name in outcomes.metric_names:
        before, after = outcomes.values(name), back.values(name)
        assert before.dtype == after.dtype == np.float64
        assert np.array_equal(before.view(np.uint64), after.view(np.uint64))
        # the gate and the intervals read means of these: the same to the last bit
        assert np.nanmean(before) == np.nanmean(after) or np.isnan(np.nanmean(before))
    assert np.array_equal(outcomes.latency_ms, back.latency_ms)


def test_a_stored_run_reads_only_the_columns_asked_for() -> None:
    back, loads = stored(scored(50))
    assert len(back) == 50
    assert back.errored == 0
    assert back.metric_names[0] == "hit@1"
    assert columns_header(back)["count"] == 50
    assert loads == Counter()
    hits = back.values("hit@1")
    assert loads == Counter({column_name("hit@1"): 1})
    assert back.values("hit@1") is hits
    assert len(back.question_ids) == 50
    back.values("hit@1")
    assert loads == Counter({column_name("hit@1"): 1, QUESTION_IDS: 1})
    back.ranking(3)
    assert set(loads) == {column_name("hit@1"), QUESTION_IDS, DOCUMENTS, RANKINGS}
    list(back)
    assert set(loads) == set(columns_header(back)["columns"])
    assert max(loads.values()) == 1


def test_a_record_from_a_summary_answers_count_errored_and_items_from_few_columns() -> None:
    from retrievalkit.stores.serialization import dump_columns, dump_summary, load_summary

    record = load_fixture()[0]
    columns = dump_columns(record)
    loads: Counter[str] = Counter()

    def load(name: str) -> bytes:
        loads[name] += 1
        return columns[name]

    back = load_summary(dump_summary(record), load, where="test")
    assert (len(back.outcomes), back.errored, back.pass_rate) == (5, 1, record.pass_rate)
    assert loads == Counter()
    assert list(back.items) == list(record.items)
    assert set(loads) == {QUESTION_IDS, column_name("hit@1"), column_name("hit@3")}
    assert back == record


def test_the_values_of_a_run_are_read_only() -> None:
    outcomes = scored(5)
    with pytest.raises(ValueError):
        outcomes.values("hit@1")[0] = 0.5
    with pytest.raises(ValueError):
        outcomes.rankings.codes[0] = 1
    with pytest.raises(KeyError, match="ndcg@99"):
        outcomes.values("ndcg@99")


def test_from_arrays_equals_from_outcomes_whatever_the_document_order() -> None:
    made = [
        QuestionOutcome("q1", ("b", "a"), {"hit@1": 0.0, "rr": 0.5}, 1.5, judgments={"a": 1}),
        QuestionOutcome("q2", (), {"hit@1": 1.0, "rr": None}, 2.0, error="Timeout"),
        QuestionOutcome(
            "q3", ("c",), {"hit@1": 1.0, "rr": 1.0}, 0.25, form=QuestionForm.GAP,
            hard_class="typo", judgments={"c": 2, "z": 0},
        ),
    ]  # fmt: skip
    documents = ["z", "c", "unused", "a", "b"]
    code = {doc: i for i, doc in enumerate(documents)}
    built = Outcomes.from_arrays(
        ["q1", "q2", "q3"],
        {"hit@1": np.array([0.0, 1.0, 1.0]), "rr": np.array([0.5, np.nan, 1.0])},
        latency_ms=[1.5, 2.0, 0.25],
        errors={1: "Timeout"},
        forms=[None, None, "GAP"],
        hard_classes=[None, None, "typo"],
        documents=documents,
        rankings=Rankings(np.array([0, 2, 2, 3]), np.array([code["b"], code["a"], code["c"]])),
        judgments=Judgments(
            np.array([0, 1, 1, 3]),
            np.array([code["a"], code["c"], code["z"]]),
            np.array([1, 2, 0]),
        ),
    )
    assert built == Outcomes.from_outcomes(made)
    assert list(built) == made
    back, _ = stored(built)
    assert back == built
    assert back.documents == ("a", "b", "c", "z")  # only the ids used, sorted
    assert built.errored == 1 and built.errors == {1: "Timeout"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"values": {"hit@1": [1.0, 0.0]}}, "values of hit@1 must be 3 floats"),
        ({"latency_ms": [1.0]}, "latency_ms must be 3 floats"),
        ({"errors": {3: "boom"}}, "errors must map question indexes"),
        ({"forms": ["MATCH"]}, "forms must hold 3 labels"),
        ({"forms": ["MATCH", "gap", None]}, "forms must be MATCH, GAP or None"),
        ({"rankings": ([0, 1, 1], [0])}, "ranking offsets must be 4 values"),
        ({"rankings": ([0, 2, 1, 2], [0, 0])}, "must not decrease"),
        ({"rankings": ([0, 1, 1, 1], [5])}, "ranking codes must index the 2 documents"),
        ({"judgments": ([0, 1, 1, 1], [0], [])}, "one grade per document code"),
        ({"question_ids": ["q1", "q2", 3]}, "question ids must be strings"),
    ],
)
def test_from_arrays_names_what_does_not_fit(change: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {
        "question_ids": ["q1", "q2", "q3"],
        "values": {"hit@1": [1.0, 0.0, 1.0]},
        "documents": ["a", "b"],
    }
    arguments.update(change)
    with pytest.raises(ValueError, match=message):
        Outcomes.from_arrays(**arguments)  # type: ignore[arg-type]


def test_a_document_given_twice_is_stored_once() -> None:
    built = Outcomes.from_arrays(
        ["q1", "q2"],
        {"hit@1": [1.0, 0.0]},
        documents=["b", "a", "b", "c"],
        rankings=([0, 2, 3], [0, 1, 2]),
        judgments=([0, 1, 2], [2, 3], [1, 0]),
    )
    back, _ = stored(built)
    assert back.documents == ("a", "b", "c")
    assert [o.ranking for o in back] == [("b", "a"), ("b",)]
    assert [dict(o.judgments) for o in back] == [{"b": 1}, {"c": 0}]
    assert back == built


@settings(max_examples=40, deadline=None)
@given(names=st.lists(st.text(max_size=6) | st.binary(max_size=6).map(lambda b: b.hex())))
def test_document_ids_round_trip_front_coded(names: list[str]) -> None:
    """Sorted, shared prefixes, duplicates, empty ids and ids longer than front coding takes."""
    names = [*names, *names[:2], "a", "a\x00", "a", "x" * 300 if len(names) % 2 else ""]
    made = [QuestionOutcome(f"q{i}", (name,), {}, 0.0) for i, name in enumerate(names)]
    back, _ = stored(Outcomes.from_outcomes(made))
    assert [o.ranking for o in back] == [(name,) for name in names]
    assert back.documents == tuple(sorted(set(names), key=lambda n: n.encode("utf-8")))


def test_an_empty_run_round_trips() -> None:
    empty = Outcomes.from_outcomes([])
    back, loads = stored(empty)
    assert (len(back), back.errored, back.metric_names, list(back)) == (0, 0, (), [])
    assert not loads
    assert back == empty == ()
    assert Outcomes.from_arrays([], {"hit@1": []}) == Outcomes.from_arrays([], {"hit@1": []})
    arrays, _ = stored(Outcomes.from_arrays([], {"hit@1": []}))
    assert arrays.values("hit@1").shape == (0,)


def test_outcomes_differ_when_any_column_does() -> None:
    base = scored(20)
    made = list(base)
    import attrs

    for changed in (
        attrs.evolve(made[4], ranking=made[4].ranking[::-1]),
        attrs.evolve(made[4], judgments={**made[4].judgments, "doc-x": 1}),
        attrs.evolve(made[4], scores={**made[4].scores, "hit@1": None}),
        attrs.evolve(made[4], latency_ms=made[4].latency_ms + 0.001),
        attrs.evolve(made[4], error="boom"),
        attrs.evolve(made[4], hard_class="x"),
        attrs.evolve(made[4], question_id="other"),
    ):
        other = Outcomes.from_outcomes([*made[:4], changed, *made[5:]])
        assert other != base
        assert stored(other)[0] != stored(base)[0]


def test_undefined_values_stay_undefined_and_absent_ones_absent() -> None:
    made = [
        QuestionOutcome("q1", (), {"hit@1": None, "rr": 0.0}, 0.0),
        QuestionOutcome("q2", (), {"hit@1": 1.0}, 0.0),
    ]
    back, _ = stored(Outcomes.from_outcomes(made))
    assert [dict(o.scores) for o in back] == [{"hit@1": None, "rr": 0.0}, {"hit@1": 1.0}]
    assert np.isnan(back.values("rr")[1]) and np.isnan(back.values("hit@1")[0])
    # The same metrics listed in another order are read by name, not by position.
    mixed = [
        QuestionOutcome("q1", (), {"hit@1": 1.0, "rr": 0.5}, 0.0),
        QuestionOutcome("q2", (), {"rr": 0.25, "hit@1": 0.0}, 0.0),
    ]
    back, _ = stored(Outcomes.from_outcomes(mixed))
    assert back.values("rr").tolist() == [0.5, 0.25] and list(back) == mixed


def test_a_damaged_column_names_the_store_and_the_column() -> None:
    outcomes = scored(10)
    columns = encode_columns(outcomes)
    columns[RANKINGS] = columns[RANKINGS][:-3]
    damaged = decode_columns(columns_header(outcomes), columns.__getitem__, where="runs.db r7")
    assert damaged.values("hit@1").shape == (10,)
    with pytest.raises(StoreError, match=r"runs.db r7: outcome column 'rankings' cannot be read"):
        list(damaged)
    columns[JUDGMENTS] = b"nonsense"
    damaged = decode_columns(columns_header(outcomes), columns.__getitem__, where="runs.db r7")
    with pytest.raises(StoreError, match="'judgments'"):
        _ = damaged.judgments
    wrong = encode_columns(outcomes)
    wrong[QUESTION_IDS] = encode_columns(Outcomes.from_outcomes(list(outcomes)[:9]))[QUESTION_IDS]
    with pytest.raises(StoreError, match="expected 10 strings"):
        _ = decode_columns(columns_header(outcomes), wrong.__getitem__).question_ids


def test_a_header_of_a_newer_format_or_without_counts_is_refused() -> None:
    header = columns_header(scored(3))
    with pytest.raises(StoreError, match="newer than this retrievalkit reads"):
        decode_columns({**header, "format": 99}, lambda name: b"", where="w")
    with pytest.raises(StoreError, match="w: the outcomes header is incomplete"):
        decode_columns({"format": 1}, lambda name: b"", where="w")
    with pytest.raises(StoreError, match="no valid counts"):
        decode_columns({**header, "errored": 4}, lambda name: b"", where="w")


def test_outcomes_refuse_what_is_not_a_list_of_outcomes() -> None:
    with pytest.raises(TypeError, match="not dict"):
        Outcomes.from_outcomes({})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="found str"):
        Outcomes.from_outcomes(["q1"])  # type: ignore[list-item]


def test_ids_holding_nul_and_unpaired_surrogates_round_trip() -> None:
    odd = ["a\x00b", "\ud800", "", "ü€𝄞", "\x00"]
    made = [QuestionOutcome(question_id, (question_id,), {}, 0.0) for question_id in odd]
    made[0] = QuestionOutcome("a\x00b", (), {}, 0.0, error="x\x00y", hard_class="\x00")
    back, _ = stored(Outcomes.from_outcomes(made))
    assert list(back) == made


def test_pickling_keeps_the_outcomes() -> None:
    outcomes, _ = stored(scored(30))
    assert pickle.loads(pickle.dumps(outcomes)) == outcomes


def test_columns_of_a_large_run_are_compact() -> None:
    """hit@k costs about a bit a question; a 10-deep ranking about its codes' entropy."""
    outcomes = scored(5_000)
    columns = encode_columns(outcomes)
    assert len(columns[column_name("hit@1")]) < 5_000 / 8 * 1.5
    # 10 codes from 500 documents: at most 9 bits each before compression.
    assert len(columns[RANKINGS]) < 5_000 * 10 * 9 / 8 * 1.1
    assert len(columns[ERRORS]) < 200
    assert len(columns[LATENCY]) < 5_000 * 3
    assert sum(map(len, columns.values())) < 5_000 * 40


FIXTURE = Path(__file__).parent / "fixtures" / "schema_v2_runs.jsonl"


def load_fixture() -> list:  # type: ignore[type-arg]
    from retrievalkit.stores.serialization import load_record

    return [
        load_record(line, where=f"{FIXTURE.name}:{number}")
        for number, line in enumerate(FIXTURE.read_text("utf-8").splitlines(), 1)
    ]


def test_records_of_schema_2_open_with_the_items_they_stored() -> None:
    lines = FIXTURE.read_text("utf-8").splitlines()
    assert [json.loads(line)["schema_version"] for line in lines] == [2, 2]
    for line, record in zip(lines, load_fixture(), strict=True):
        data = json.loads(line)
        assert record.schema_version == 3
        assert [unstructure(item) for item in record.items] == data["items"]
        assert json.loads(to_json(record.outcomes)) == data["outcomes"]
        exported = json.loads(to_json(record))
        assert {k: v for k, v in exported.items() if k != "schema_version"} == {
            k: v for k, v in data.items() if k != "schema_version"
        }


def test_a_summary_is_small_and_refuses_an_inline_record() -> None:
    from retrievalkit.stores.serialization import dump_record, dump_summary, load_summary

    record = load_fixture()[0]
    summary = json.loads(dump_summary(record))
    assert "items" not in summary and summary["outcomes"] == columns_header(record.outcomes)
    load: Callable[[str], bytes] = lambda name: b""  # noqa: E731
    with pytest.raises(StoreError, match="has no outcomes header"):
        load_summary(FIXTURE.read_text("utf-8").splitlines()[0], load, where="w")
    with pytest.raises(StoreError, match="has no outcomes header"):
        load_summary(dump_record(record), load, where="w")


def _utf8(name: str) -> bytes:
    return name.encode("utf-8", "surrogatepass")


def reference_document_columns(outcomes: Outcomes) -> dict[str, bytes]:
    """The documents, rankings and judgments columns as the module documentation
    describes them, written out plainly: the ids used, each once, sorted by their UTF-8
    bytes, each as the prefix it shares with the one before (none when any id is longer
    than 128 bytes, nor for every 32nd id, stored whole) and the rest; codes into that
    list."""
    from retrievalkit.stores.columns import _narrowest, _pack, _pack_bytes

    ranked, labels, documents = outcomes.rankings, outcomes.judgments, outcomes.documents
    used_codes = [*ranked.codes.tolist(), *labels.codes.tolist()]
    used = sorted({documents[code] for code in used_codes}, key=_utf8)
    encoded = [_utf8(name) for name in used]
    front = all(len(name) <= 128 for name in encoded)
    shared, suffixes, previous = [], [], b""
    for index, name in enumerate(encoded):
        common = 0
        while front and index % 32 and common < min(len(name), len(previous)):
            if name[common] != previous[common]:
                break
            common += 1
        shared.append(common)
        suffixes.append(name[common:])
        previous = name
    new_code = {name: index for index, name in enumerate(used)}

    def codes(old: list[int]) -> np.ndarray:
        return _narrowest(np.array([new_code[documents[c]] for c in old], dtype=np.int64))

    return {
        DOCUMENTS: _pack(
            {
                "shared": _narrowest(np.array(shared, dtype=np.int64)),
                **_pack_bytes("suffix.", suffixes),
            },
            {"count": len(used)},
            level=6,
        ),
        RANKINGS: _pack(
            {"lengths": _narrowest(np.diff(ranked.offsets)), "codes": codes(ranked.codes.tolist())}
        ),
        JUDGMENTS: _pack(
            {
                "lengths": _narrowest(np.diff(labels.offsets)),
                "codes": codes(labels.codes.tolist()),
                "grades": _narrowest(labels.grades),
            }
        ),
    }


ALPHABETS = {
    "ascii ids": ["doc-", "a", "b", "7", "-", "_", "z"],
    "unicode ids": ["é", "中文", "𝄞", "\ud800", "a", "ÿ", "\x7f", "doc"],
    "ids holding NUL": ["\x00", "a", "é", "b\x00"],
    "one id past front coding": ["x", "é", "y"],
}


def generated_run(kind: str) -> Outcomes:
    """A run over ids of ``kind`` (`ALPHABETS`): empty rankings, ids repeated in a ranking,
    in the vocabulary and across questions, ids that prefix others, unused ids."""
    rng = np.random.default_rng(sorted(ALPHABETS).index(kind))
    alphabet = ALPHABETS[kind]
    # Pieces picked by index: a numpy array of strings would drop their trailing NULs.
    vocabulary = [
        "".join(alphabet[i] for i in rng.integers(0, len(alphabet), rng.integers(0, 9)))
        for _ in range(600)
    ]
    # Ids that prefix others, and ids that differ only in their last byte at a multiple
    # of 8 bytes, listed out of order.
    edges = ["", "doc", "doc-", "doc-1", "a" * 7 + "c", "a" * 7 + "b", "a" * 8]
    edges += ["a" * 15 + "c", "a" * 15 + "b", "a" * 16, "a" * 15]
    vocabulary += vocabulary[:50] + edges
    if kind == "one id past front coding":
        vocabulary.append("é" * 80)
    count = 400
    ranking_lengths = rng.integers(0, 13, count) * (rng.random(count) > 0.1)
    label_lengths = rng.integers(0, 5, count)
    ranking_codes = rng.integers(0, len(vocabulary), int(ranking_lengths.sum()))
    ranking_codes[::7] = len(vocabulary) - 1  # the long id (or another) in many rankings
    ranking_codes[1 : 1 + len(edges)] = [vocabulary.index(edge) for edge in edges]
    label_codes = rng.integers(0, len(vocabulary) - 100, int(label_lengths.sum()))
    return Outcomes.from_arrays(
        [f"q{i}" for i in range(count)],
        {"hit@1": rng.integers(0, 2, count).astype(float)},
        documents=vocabulary,
        rankings=(np.concatenate([[0], np.cumsum(ranking_lengths)]), ranking_codes),
        judgments=(
            np.concatenate([[0], np.cumsum(label_lengths)]),
            label_codes,
            rng.integers(-1, 4, len(label_codes)),
        ),
    )


@pytest.mark.parametrize("kind", sorted(ALPHABETS))
def test_document_columns_are_the_plain_front_coding_bit_for_bit(kind: str) -> None:
    """Generated runs encode to exactly the bytes of the plainly written front coding,
    and read back to every ranking and label."""
    built = generated_run(kind)
    vocabulary = list(built.documents)
    columns = encode_columns(built)
    expected = reference_document_columns(built)
    for name in (DOCUMENTS, RANKINGS, JUDGMENTS):
        assert columns[name] == expected[name], name
    back, _ = stored(built)
    assert [o.ranking for o in back] == [o.ranking for o in built]
    assert [o.judgments for o in back] == [o.judgments for o in built]
    assert back.documents == tuple(sorted(set(back.documents), key=_utf8))
    assert set(back.documents) < set(vocabulary)
    if kind == "ids holding NUL":
        assert {"a", "a\x00", "\x00", ""} <= set(back.documents)


@pytest.mark.parametrize("written", ["by 0.3", "before 0.3"])
@pytest.mark.parametrize("kind", sorted(ALPHABETS))
def test_document_ids_read_one_by_one_are_those_of_the_whole_vocabulary(
    kind: str, written: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ids asked by code from a stored run are the ones the whole vocabulary decodes to,
    with every 32nd id stored whole (read without decoding the vocabulary) and without
    (a run written before 0.3: walked back to an id sharing no prefix, or, when that is
    too far, read from the whole vocabulary); a code outside it is an IndexError."""
    import retrievalkit.model.outcomes as outcomes_module
    import retrievalkit.stores.columns as columns_module

    if written == "before 0.3":
        monkeypatch.setattr(columns_module, "_RESTART", 1 << 62)
    monkeypatch.setattr(columns_module, "_WALK_LIMIT", 40)
    built = generated_run(kind)
    whole = stored(built)[0].documents
    rng = np.random.default_rng(len(whole))
    codes = [0, len(whole) - 1, *rng.integers(0, len(whole), 300).tolist()]
    back, loads = stored(built)
    assert back.document_count == len(whole)
    assert back.document_names(codes) == [whole[code] for code in codes]
    assert [back.ranking(i) for i in range(len(back))] == [o.ranking for o in built]
    assert loads[DOCUMENTS] == 1
    if written == "by 0.3" or kind == "one id past front coding":  # (long ids: all whole)
        assert DOCUMENTS not in back._cache
    for wrong in (len(whole), -1):
        with pytest.raises(IndexError, match="not in a vocabulary"):
            back.document_names([wrong])
    # Past the limit of ids asked one by one, the whole vocabulary is decoded once.
    monkeypatch.setattr(outcomes_module, "_PICKED_LIMIT", 100)
    again, loads = stored(built)
    assert again.document_names(codes[:50]) == [whole[code] for code in codes[:50]]
    assert again.document_names(codes) == [whole[code] for code in codes]
    assert DOCUMENTS in again._cache
    assert loads[DOCUMENTS] == 1


@pytest.mark.parametrize(("shortest", "longest"), [(0, 12), (40, 120)])
def test_ids_sort_as_python_sorts_bytes_by_one_sort_or_word_by_word(
    shortest: int, longest: int
) -> None:
    """Short ids sort by one sort of packed integers; long random ones, whose words take
    too many distinct values for that, by a sort per word: both in Python's order of
    the bytes, equal ids in the order given."""
    from retrievalkit.stores.columns import _byte_order, _packed_order, _word_keys

    rng = np.random.default_rng(longest)
    names = [
        rng.integers(0, 256, rng.integers(shortest, longest), dtype=np.uint8).tobytes()
        for _ in range(2_000)
    ]
    names += [*names[:100], b"", b"\x00", b"a", b"a\x00", b"a\x00\x00", b"\xff" * 8]
    lengths = np.array([len(name) for name in names], dtype=np.int64)
    width = int(lengths.max())
    matrix = np.array(names, dtype=f"S{width}").view(np.uint8).reshape(len(names), width)
    assert (_packed_order(_word_keys(matrix, lengths)) is None) == (shortest > 0)
    expected = sorted(range(len(names)), key=names.__getitem__)
    assert _byte_order(matrix, lengths).tolist() == expected


@settings(max_examples=60, deadline=None)
@given(
    names=st.lists(
        st.text(st.characters(blacklist_characters="\x00", codec="utf-8"), max_size=9)
        | st.sampled_from(["doc-1", "doc-10", "doc-1", "", "é" * 70, "z" * 129]),
        max_size=40,
    )
)
def test_ids_laid_out_from_their_joined_text_code_as_each_encoded_on_its_own(
    names: list[str],
) -> None:
    """Front coding from the ids' text joined at once (short ids, ids over the front
    coding width, empty ids, non-ASCII) gives what coding each id's bytes gives."""
    from retrievalkit.stores.columns import _encoded, _front_code, _front_code_strings

    fast = _front_code_strings(names)
    slow = _front_code(_encoded(names))
    for got, expected in zip(fast[:3], slow[:3], strict=True):
        assert got.tolist() == expected.tolist()
    assert fast[3].keys() == slow[3].keys()
    for key in slow[3]:
        assert fast[3][key].tobytes() == slow[3][key].tobytes(), key
        assert fast[3][key].dtype == slow[3][key].dtype, key


@pytest.mark.parametrize("kind", ["two values", "rare values", "many values", "few then many"])
def test_a_long_column_codes_its_values_as_a_whole_sort_would(kind: str) -> None:
    """Long columns look for their distinct values in a sample first; the values the
    sample misses (rare ones, or too many) still get their codes."""
    from retrievalkit.stores.columns import _distinct_codes

    rng = np.random.default_rng(len(kind))
    count = 70_001
    if kind == "two values":
        values = rng.integers(0, 2, count).astype(np.float64)
    elif kind == "rare values":
        values = rng.integers(0, 5, count) / 4.0
        values[rng.choice(count, 7, replace=False)] = [0.3, 0.7, np.nan, -0.0, 2.0, 0.3, 9.0]
    elif kind == "many values":
        values = rng.random(count)
    else:
        values = rng.integers(0, 3, count).astype(np.float64)
        values[-5_000:] = rng.random(5_000)
    bits = values.view(np.uint64)
    distinct, codes = _distinct_codes(bits)
    expected, inverse = np.unique(bits, return_inverse=True)
    assert distinct.tolist() == expected.tolist()
    assert codes.tolist() == inverse.reshape(-1).tolist()
