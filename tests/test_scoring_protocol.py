"""The scoring protocol: overfetch, distinct documents, no-answer questions, errors, intervals."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from retrievalkit.formats.convert import to_json
from retrievalkit.metrics.scoring import (
    Scores,
    ScoringOptions,
    metric_column,
    outcome_values,
    pair_questions,
    positions_of,
    score_run,
)
from retrievalkit.model.outcomes import Outcomes
from retrievalkit.model.records import GRADER
from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet, MetricValue, QuestionForm
from retrievalkit.pipeline.engine.evaluator import Retrieval, evaluate_questions
from retrievalkit.pipeline.engine.record import build_record
from retrievalkit.retrievers.contract import document_id_of

KS = (1, 3, 5, 10)
OPTIONS = ScoringOptions(ks=KS, resamples=500)
UNDEFINED_FOR_NO_ANSWER = ("recall", "precision", "ndcg", "ap")


def question(
    question_id: str,
    expected: Sequence[str] = (),
    *,
    grades: dict[str, int] | None = None,
    form: QuestionForm | None = None,
    hard_class: str | None = None,
) -> GoldenQuestion:
    return GoldenQuestion(
        id=question_id,
        question=f"text of {question_id}",
        form=form,
        expected=tuple(expected),
        grades=grades or {},
        hard_class=hard_class,
    )


class Scripted:
    """Answers each question text with a fixed list, or raises a fixed exception."""

    identifier = "scripted"

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, int]] = []

    def retrieve(self, text: str, limit: int) -> Any:
        self.calls.append((text, limit))
        answer = self.answers[text]
        if isinstance(answer, BaseException):
            raise answer
        return answer


def scripted(**answers: Any) -> Scripted:
    return Scripted({f"text of {question_id}": answer for question_id, answer in answers.items()})


def run(
    retriever: Any,
    questions: Sequence[GoldenQuestion],
    *,
    options: ScoringOptions = OPTIONS,
    overfetch: int = 3,
    concurrency: int = 1,
) -> tuple[list[Retrieval], Scores]:
    retrievals = evaluate_questions(
        retriever,
        questions,
        depth=max(options.ks),
        overfetch=overfetch,
        concurrency=concurrency,
    )
    return retrievals, score_run(questions, retrievals, options)


def scores_of(scores: Scores, question_id: str) -> dict[str, float | None]:
    (outcome,) = [o for o in scores.outcomes if o.question_id == question_id]
    return dict(outcome.scores)


def test_duplicate_ids_collapse_to_their_first_occurrence() -> None:
    questions = [question("q1", ["c"])]
    retrievals, scores = run(scripted(q1=["a", "a", "b", "a", "c", "b"]), questions)
    assert retrievals[0].ranking == ("a", "b", "c")
    values = scores_of(scores, "q1")
    # Without collapsing, "c" would sit at rank 5 and miss the top 3.
    assert values["hit@1"] == 0.0
    assert values["hit@3"] == 1.0
    assert values["rr"] == pytest.approx(1 / 3)
    assert values["precision@3"] == pytest.approx(1 / 3)
    assert values["recall@3"] == 1.0
    assert scores.outcomes[0].ranking == ("a", "b", "c")


def test_document_id_of() -> None:
    assert document_id_of("doc-7#chunk-3") == "doc-7"
    assert document_id_of("doc-7") == "doc-7"
    assert document_id_of("a#b#c") == "a"
    assert document_id_of("doc-7::2", "::") == "doc-7"
    assert document_id_of("doc-7#chunk-3", None) == "doc-7#chunk-3"
    assert document_id_of("doc-7#chunk-3", "") == "doc-7#chunk-3"


class ChunkRetriever:
    """A chunked store: its native hits are chunk ids, mapped to documents by the helper."""

    identifier = "chunks"

    def __init__(self, chunk_ids: list[str]) -> None:
        self.chunk_ids = chunk_ids

    def retrieve(self, text: str, limit: int) -> list[str]:
        return [document_id_of(chunk) for chunk in self.chunk_ids[:limit]]


def test_chunk_ids_score_as_their_documents() -> None:
    retriever = ChunkRetriever(["doc#1", "doc#2", "other#1", "doc#3", "third#7"])
    retrievals, scores = run(retriever, [question("q1", ["other"])])
    assert retrievals[0].ranking == ("doc", "other", "third")
    values = scores_of(scores, "q1")
    assert values["hit@1"] == 0.0
    assert values["hit@3"] == 1.0
    assert values["rr"] == 0.5


@pytest.mark.parametrize(("ks", "overfetch", "limit"), [((1, 3, 5, 10), 3, 30), ((1, 3), 2, 6)])
def test_the_limit_is_max_k_times_overfetch(
    ks: tuple[int, ...], overfetch: int, limit: int
) -> None:
    questions = [question("q1", ["d1"]), question("q2", ["d2"])]
    retriever = scripted(q1=["d1"], q2=[])
    run(retriever, questions, options=ScoringOptions(ks=ks, resamples=50), overfetch=overfetch)
    assert retriever.calls == [("text of q1", limit), ("text of q2", limit)]


def test_overfetch_keeps_max_k_distinct_documents_from_chunks() -> None:
    # Three chunks per document: 30 chunk ids hold exactly 10 distinct documents.
    chunk_ids = [f"d{doc}#{chunk}" for doc in range(1, 11) for chunk in range(3)]
    retrievals, scores = run(ChunkRetriever(chunk_ids), [question("q1", ["d10"])])
    assert retrievals[0].ranking == tuple(f"d{doc}" for doc in range(1, 11))
    values = scores_of(scores, "q1")
    assert values["hit@5"] == 0.0
    assert values["hit@10"] == 1.0
    assert values["rr"] == pytest.approx(0.1)


def test_no_answer_question() -> None:
    questions = [question("silent"), question("noisy"), question("normal", ["d1"])]
    _, scores = run(scripted(silent=[], noisy=["d9"], normal=["d1"]), questions)
    silent, noisy = scores_of(scores, "silent"), scores_of(scores, "noisy")
    for k in KS:
        assert silent[f"hit@{k}"] == 1.0
        assert noisy[f"hit@{k}"] == 0.0
        for family in UNDEFINED_FOR_NO_ANSWER:
            assert silent[f"{family}@{k}"] is None
            assert noisy[f"{family}@{k}"] is None
    assert silent["rr"] is None and noisy["rr"] is None
    # Undefined values are left out of the mean, never counted as 0.
    # One question with recall 1: its interval is the exact binomial one of 1 hit of 1.
    recall = scores.metrics["recall@1"]
    assert (recall.mean, recall.n, recall.method) == (1.0, 1, "clopper-pearson")
    assert recall.ci == pytest.approx((0.025, 1.0))
    assert scores.metrics["rr"].n == 1
    assert scores.metrics["hit@1"].mean == pytest.approx(2 / 3)
    assert scores.metrics["hit@1"].n == 3


def test_k_larger_than_the_results() -> None:
    _, scores = run(scripted(q1=["a"]), [question("q1", ["a", "b"])])
    values = scores_of(scores, "q1")
    assert values["hit@10"] == 1.0
    assert values["recall@10"] == 0.5
    assert values["precision@1"] == 1.0
    assert values["precision@10"] == pytest.approx(0.1)
    assert values["ap@10"] == pytest.approx(0.5)
    assert values["ndcg@10"] == pytest.approx(1.0 / (1.0 + 1.0 / math.log2(3)))
    assert values["rr"] == 1.0


def test_graded_ndcg_uses_the_grades() -> None:
    grades = {"a": 1, "b": 3, "c": 0}
    _, scores = run(scripted(q1=["a", "c", "b"]), [question("q1", ["a", "b"], grades=grades)])
    dcg = 1.0 + 3.0 / math.log2(4)
    ideal = 3.0 + 1.0 / math.log2(3)
    values = scores_of(scores, "q1")
    assert values["ndcg@3"] == pytest.approx(dcg / ideal)
    assert values["judged@3"] == 1.0
    assert values["precision@3"] == pytest.approx(2 / 3)


def test_a_raising_retriever_gives_error_outcomes_that_miss_everywhere() -> None:
    questions = [question("q1", ["a"]), question("silent"), question("fine", ["b"])]
    failure = ConnectionError("backend down\nsecond line of detail")
    retriever = scripted(q1=failure, silent=failure, fine=["b"])
    retrievals, scores = run(retriever, questions)
    assert retrievals[0].error == "ConnectionError: backend down"
    assert retrievals[0].ranking == ()
    answerable, silent = scores_of(scores, "q1"), scores_of(scores, "silent")
    for k in KS:
        assert answerable[f"hit@{k}"] == 0.0
        assert answerable[f"recall@{k}"] == 0.0
        assert answerable[f"ndcg@{k}"] == 0.0
        # An empty result would be a hit for a no-answer question; an error never is.
        assert silent[f"hit@{k}"] == 0.0
    assert answerable["rr"] == 0.0
    assert scores_of(scores, "fine")["hit@1"] == 1.0
    golden = GoldenQuestionSet(name="s", questions=questions)
    record = build_record(
        golden, "scripted", "scripted", {}, scores, OPTIONS, overfetch=3, git_commit=None
    )
    assert record.errored == 2
    assert [o.question_id for o in record.outcomes if o.error] == ["q1", "silent"]
    assert record.pass_rate == pytest.approx(1 / 3)
    assert record.grader == GRADER


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (["a", 7], "returned a int (7) at rank 2"),
        (["a", None], "returned a NoneType"),
        ([f"d{i}" for i in range(31)], "returned 31 ids for a limit of 30"),
        ("abc", "returned str instead of a sequence"),
        (None, "returned NoneType instead of a sequence"),
    ],
)
def test_contract_breaches_become_error_outcomes(answer: Any, message: str) -> None:
    questions = [question("q1", ["a"]), question("q2", ["b"])]
    retrievals, scores = run(scripted(q1=answer, q2=["b"]), questions)
    assert retrievals[0].error is not None and message in retrievals[0].error
    assert retrievals[0].error.startswith("ValueError: ")
    assert retrievals[1].error is None
    assert scores_of(scores, "q1")["hit@10"] == 0.0
    assert scores_of(scores, "q2")["hit@1"] == 1.0


class Batched:
    """Offers retrieve_many; retrieve must never be called when it is there."""

    identifier = "batched"

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.single_calls = 0
        self.batches: list[tuple[list[str], int]] = []

    def retrieve(self, text: str, limit: int) -> list[str]:
        self.single_calls += 1
        return []

    def retrieve_many(self, questions: Sequence[str], limit: int) -> list[Any]:
        self.batches.append((list(questions), limit))
        return [self.answers[text] for text in questions]


def test_retrieve_many_is_used_when_present() -> None:
    questions = [question(f"q{i}", [f"d{i}"]) for i in range(70)]
    answers: dict[str, Any] = {f"text of q{i}": [f"d{i}", f"d{i}"] for i in range(70)}
    answers["text of q5"] = TimeoutError("shard timed out")
    answers["text of q6"] = ["d6", 6]
    retriever = Batched(answers)
    retrievals, scores = run(retriever, questions)
    assert retriever.single_calls == 0
    assert sum(len(batch) for batch, _ in retriever.batches) == 70
    assert {limit for _, limit in retriever.batches} == {30}
    assert [text for batch, _ in retriever.batches for text in batch] == [
        q.question for q in questions
    ]
    assert retrievals[0].ranking == ("d0",)
    assert retrievals[5].error == "TimeoutError: shard timed out"
    assert retrievals[6].error is not None and "rank 2" in retrievals[6].error
    errored = [outcome.question_id for outcome in scores.outcomes if outcome.error]
    assert errored == ["q5", "q6"]
    assert scores.metrics["hit@1"].mean == pytest.approx(68 / 70)


def test_retrieve_many_with_the_wrong_count_errors_its_batch() -> None:
    class Short(Batched):
        def retrieve_many(self, questions: Sequence[str], limit: int) -> list[Any]:
            return [["d0"]]

    retrievals, _ = run(Short({}), [question("q0", ["d0"]), question("q1", ["d1"])])
    assert all(r.error is not None and "2 questions" in r.error for r in retrievals)


class Deterministic:
    """A thread-safe retriever whose answer depends only on the question."""

    identifier = "deterministic"

    def retrieve(self, text: str, limit: int) -> list[str]:
        number = int(text.rsplit("q", 1)[1])
        if number % 7 == 3:
            raise RuntimeError(f"failed on {number}")
        return [f"d{(number * step) % 13}" for step in range(1, 8)][:limit]


def mixed_questions(count: int = 40) -> list[GoldenQuestion]:
    forms = (QuestionForm.MATCH, QuestionForm.GAP, None)
    classes = ("normal", "near-duplicate")
    return [
        question(
            f"q{i}",
            [] if i % 9 == 0 else [f"d{(i * 2) % 13}", f"d{i % 13}"],
            grades={f"d{(i * 3) % 13}": 0} if i % 4 == 0 and i % 9 else None,
            form=forms[i % 3],
            hard_class=classes[i % 2],
        )
        for i in range(count)
    ]


def test_concurrency_gives_the_same_outcomes() -> None:
    questions = mixed_questions()
    serial_retrievals, serial = run(Deterministic(), questions, concurrency=1)
    threaded_retrievals, threaded = run(Deterministic(), questions, concurrency=4)
    assert [(r.ranking, r.error) for r in serial_retrievals] == [
        (r.ranking, r.error) for r in threaded_retrievals
    ]
    assert any(r.error for r in serial_retrievals)
    assert [(o.question_id, o.ranking, o.scores, o.error) for o in serial.outcomes] == [
        (o.question_id, o.ranking, o.scores, o.error) for o in threaded.outcomes
    ]
    assert to_json(serial.metrics) == to_json(threaded.metrics)


def test_bootstrap_intervals_are_reproducible_and_contain_the_mean() -> None:
    questions = mixed_questions()
    options = ScoringOptions(ks=KS)  # the default resamples, confidence and seed
    _, first = run(Deterministic(), questions, options=options)
    _, second = run(Deterministic(), questions, options=options)
    assert to_json(first.metrics) == to_json(second.metrics)
    assert to_json(first.slices) == to_json(second.slices)
    every = [*first.metrics.values()]
    for field in first.slices.values():
        for metrics in field.values():
            every.extend(metrics.values())
    defined = [value for value in every if value.mean is not None]
    assert defined
    widths = []
    for value in defined:
        assert value.ci is not None and value.mean is not None
        low, high = value.ci
        assert low <= value.mean <= high
        widths.append(high - low)
    assert max(widths) > 0  # the intervals are real, not points
    assert set(first.slices) == {"form", "hard_class"}
    assert set(first.slices["form"]) == {"GAP", "MATCH", "(none)"}


def test_another_seed_or_confidence_changes_the_interval() -> None:
    questions = mixed_questions()
    _, base = run(Deterministic(), questions, options=ScoringOptions(ks=KS))
    _, narrow = run(Deterministic(), questions, options=ScoringOptions(ks=KS, confidence=0.5))
    wide, small = base.metrics["hit@3"].ci, narrow.metrics["hit@3"].ci
    assert wide is not None and small is not None
    assert base.metrics["hit@3"].mean == narrow.metrics["hit@3"].mean
    assert wide[0] <= small[0] and small[1] <= wide[1]
    assert wide != small


def test_a_slice_where_every_value_is_undefined_reports_none() -> None:
    questions = [
        question("a1", ["d1"], form=QuestionForm.MATCH, hard_class="normal"),
        question("a2", ["d2"], form=QuestionForm.MATCH, hard_class="normal"),
        question("n1", [], form=QuestionForm.GAP),
        question("n2", [], form=QuestionForm.GAP),
    ]
    _, scores = run(scripted(a1=["d1"], a2=["d9", "d2"], n1=[], n2=["d1"]), questions)
    gap = scores.slices["form"]["GAP"]
    for family in UNDEFINED_FOR_NO_ANSWER:
        assert gap[f"{family}@3"] == MetricValue(None, None, 0)
    assert gap["rr"] == MetricValue(None, None, 0)
    assert gap["hit@1"].mean == 0.5 and gap["hit@1"].n == 2 and gap["hit@1"].ci is not None
    match = scores.slices["form"]["MATCH"]
    assert match["rr"].mean == pytest.approx(0.75)
    assert set(scores.slices["hard_class"]) == {"normal", "(none)"}
    assert scores.slices["hard_class"]["(none)"]["recall@1"].mean is None


def test_meta_slices_are_added_on_request() -> None:
    questions = [
        GoldenQuestion(id="a", question="text of a", expected=["d1"], meta={"topic": "x"}),
        GoldenQuestion(id="b", question="text of b", expected=["d2"], meta={"topic": "y"}),
    ]
    options = ScoringOptions(ks=KS, resamples=100, slices=("topic", "absent"))
    _, scores = run(scripted(a=["d1"], b=["d1"]), questions, options=options)
    assert scores.slices["topic"]["x"]["hit@1"].mean == 1.0
    assert scores.slices["topic"]["y"]["hit@1"].mean == 0.0
    assert scores.slices["absent"] == {}


def test_the_record_maps_top1_and_top3() -> None:
    questions = [question("q1", ["a"]), question("q2", ["b"]), question("q3", ["z"])]
    _, scores = run(scripted(q1=["a"], q2=["x", "b"], q3=["x"]), questions)
    golden = GoldenQuestionSet(name="s", questions=questions)
    record = build_record(
        golden,
        "model",
        "plugin",
        {"api_key": "hunter2", "api_key_env": "KEY"},
        scores,
        OPTIONS,
        overfetch=3,
        git_commit=None,
    )
    assert record.key == ("s", "model", GRADER)
    assert record.pass_rate == pytest.approx(1 / 3)
    assert record.mean_score == pytest.approx(2 / 3)
    assert [(item.passed, item.score) for item in record.items] == [
        (True, 1.0),
        (False, 1.0),
        (False, 0.0),
    ]
    assert record.manifest.set_hash == golden.content_hash
    assert record.manifest.retriever_options == {"api_key": "***", "api_key_env": "KEY"}
    assert "hunter2" not in to_json(record)


def test_a_slice_field_no_question_has_does_not_hide_the_fields_after_it() -> None:
    questions = [
        GoldenQuestion(id="a", question="text of a", expected=["d1"], meta={"topic": "x"}),
        GoldenQuestion(id="b", question="text of b", expected=["d2"], meta={"topic": "y"}),
    ]
    options = ScoringOptions(ks=KS, resamples=100, slices=("absent", "topic"))
    _, scores = run(scripted(a=["d1"], b=["d1"]), questions, options=options)
    assert scores.slices["absent"] == {}
    assert scores.slices["topic"]["x"]["hit@1"].mean == 1.0
    assert scores.slices["topic"]["y"]["hit@1"].mean == 0.0


def test_the_seed_reaches_the_bootstrap() -> None:
    # The relevant document at rank 1, 2 or 3: rr takes three values, so its interval is
    # a bootstrap one, whose resamples the seed draws.
    questions = [question(f"q{i}", ["d"]) for i in range(30)]
    answers = {f"q{i}": [*("x", "y")[: i % 3], "d"] for i in range(30)}

    def interval(seed: int) -> tuple[float, float] | None:
        _, scores = run(scripted(**answers), questions, options=ScoringOptions(ks=KS, seed=seed))
        assert scores.metrics["rr"].method == "bca"
        return scores.metrics["rr"].ci

    assert interval(1) == interval(1)
    assert interval(1) != interval(2)


def test_a_set_without_questions_scores_to_empty_outcomes() -> None:
    scores = score_run([], [], ScoringOptions(ks=(1, 3), resamples=50))
    assert len(scores.outcomes) == 0 and scores.outcomes.question_ids == ()
    assert scores.metrics["hit@1"] == MetricValue(None, None, 0)
    assert list(scores.outcomes) == []


def columns(question_ids: Sequence[str], rr: Sequence[float]) -> Outcomes:
    return Outcomes.from_arrays(question_ids, {"rr": np.array(rr, dtype=np.float64)})


def test_outcome_values_map_each_question_to_its_value() -> None:
    _, scores = run(
        scripted(a=["d1"], b=["x", "d2"], c=["x"]),
        [
            question("a", ["d1"]),
            question("b", ["d2"]),
            question("c", ["d3"]),
            question("n", []),
        ],
    )
    found = outcome_values(scores.outcomes, "rr")
    assert list(found) == ["a", "b", "c", "n"]
    assert [found[key] for key in "abc"] == [1.0, 0.5, 0.0] and math.isnan(found["n"])
    # From plain QuestionOutcome values too, and a metric the run lacks is NaN throughout.
    assert outcome_values(list(scores.outcomes), "rr") == pytest.approx(found, nan_ok=True)
    deeper = outcome_values(scores.outcomes, "hit@100")
    assert list(deeper) == ["a", "b", "c", "n"]
    assert all(math.isnan(value) for value in deeper.values())


def test_a_metric_the_run_lacks_is_a_float_column_of_undefined_values() -> None:
    held = columns(["a", "b", "c"], [1.0, 0.5, 0.0])
    missing = metric_column(held, "ndcg@10")
    assert missing.dtype == np.float64 and missing.shape == (3,)
    assert np.isnan(missing).all()
    assert metric_column(held, "rr").tolist() == [1.0, 0.5, 0.0]


@pytest.mark.parametrize(
    ("before", "after", "shared", "at_before", "at_after"),
    [
        # The same questions in the same order: each at its own place.
        (["a", "b", "c"], ["a", "b", "c"], ("a", "b", "c"), [0, 1, 2], [0, 1, 2]),
        # Another order, and questions only one run has: the candidate's order, shared only.
        (["a", "b", "c", "d"], ["x", "c", "a", "y"], ("c", "a"), [2, 0], [1, 2]),
        # An id held twice matches its last occurrence, even where the ids are identical.
        (["a", "b", "a"], ["a", "b", "a"], ("a", "b", "a"), [2, 1, 2], [2, 1, 2]),
        (["a", "b", "a"], ["b", "a"], ("b", "a"), [1, 2], [0, 1]),
        # No question in common.
        (["a"], ["b"], (), [], []),
    ],
)
def test_pairing_matches_questions_by_id(
    before: list[str],
    after: list[str],
    shared: tuple[str, ...],
    at_before: list[int],
    at_after: list[int],
) -> None:
    baseline = columns(before, [float(index) for index in range(len(before))])
    candidate = columns(after, [10.0 + index for index in range(len(after))])
    pairing = pair_questions(baseline, candidate)
    assert pairing.question_ids == shared
    assert pairing.baseline.tolist() == at_before and pairing.candidate.tolist() == at_after
    assert positions_of(candidate, shared).tolist() == at_after
    old, new = pairing.values(baseline, candidate, "rr")
    # Each run's value is its position: the positions are read back through the values.
    assert old.tolist() == [float(index) for index in at_before]
    assert new.tolist() == [10.0 + index for index in at_after]
    missing_old, missing_new = pairing.values(baseline, candidate, "hit@1")
    assert missing_old.shape == missing_new.shape == (len(shared),)
    assert np.isnan(missing_old).all() and np.isnan(missing_new).all()
