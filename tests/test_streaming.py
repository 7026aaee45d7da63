"""Streaming evaluation: batches of questions asked, judged and scored into columns give the
very values, outcomes and warnings that judging and scoring the whole run at once gives."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import pytest

import retrievalkit as rk
from retrievalkit.metrics.definitions import compute_metrics, judge_codes, judge_rankings
from retrievalkit.metrics.scoring import RunScorer, ScoringOptions, score_run, slice_label
from retrievalkit.model.outcomes import Outcomes
from retrievalkit.model.values import (
    GoldenQuestion,
    GoldenQuestionSet,
    QuestionForm,
    QuestionOutcome,
    Retrieval,
)
from retrievalkit.pipeline.engine.diagnostics import (
    chunk_id_warning,
    chunk_like,
    short_of_documents_warning,
)
from retrievalkit.pipeline.engine.evaluator import STREAM_BATCH, ask_in_batches, evaluate_questions
from retrievalkit.stats.intervals import DEFAULT_SEED, bootstrap_means, slice_masks

KS = (1, 3, 5, 10)


def random_case(
    seed: int, count: int, depth: int = 10
) -> tuple[list[GoldenQuestion], list[Retrieval]]:
    """Questions with 0 to 4 labels (grades 0 to 3, some no-answer) and rankings that may
    repeat an id, run past ``depth``, come back empty or error."""
    rng = np.random.default_rng(seed)
    corpus = [f"d{number}" for number in range(60)]
    questions, retrievals = [], []
    for index in range(count):
        labelled = rng.choice(60, size=int(rng.integers(0, 5)), replace=False).tolist()
        grades = {corpus[doc]: int(rng.integers(0, 4)) for doc in labelled}
        expected = tuple(doc for doc, grade in grades.items() if grade == 1)
        graded = {doc: grade for doc, grade in grades.items() if grade != 1}
        questions.append(
            GoldenQuestion(
                id=f"q{index}",
                question=f"question {index}",
                expected=expected,
                grades=graded,
                form=(QuestionForm.MATCH, QuestionForm.GAP, None)[index % 3],
                hard_class=("normal", "near-duplicate", None)[index % 5 % 3],
            )
        )
        roll = rng.random()
        if roll < 0.05:
            retrievals.append(Retrieval((), float(rng.random() * 9), "RuntimeError: down"))
            continue
        length = 0 if roll < 0.1 else int(rng.integers(1, depth + 6))
        ranking = [corpus[doc] for doc in rng.integers(0, 60, size=length).tolist()]
        retrievals.append(Retrieval(tuple(ranking), float(rng.random() * 9), returned=length))
    return questions, retrievals


def codes_of(
    questions: Sequence[GoldenQuestion], retrievals: Sequence[Retrieval]
) -> tuple[np.ndarray, ...]:
    vocabulary: dict[str, int] = {}
    labels = [question.judgments() for question in questions]
    ranked = [vocabulary.setdefault(doc, len(vocabulary)) for r in retrievals for doc in r.ranking]
    labelled = [vocabulary.setdefault(doc, len(vocabulary)) for label in labels for doc in label]
    grades = [grade for label in labels for grade in label.values()]
    return (
        np.concatenate([[0], np.cumsum([len(r.ranking) for r in retrievals])]).astype(np.int64),
        np.array(ranked, dtype=np.int64),
        np.concatenate([[0], np.cumsum([len(label) for label in labels])]).astype(np.int64),
        np.array(labelled, dtype=np.int64),
        np.array(grades, dtype=np.int64),
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_judging_codes_gives_the_matrices_of_judging_ids(seed: int) -> None:
    questions, retrievals = random_case(seed, 400)
    errored = [retrieval.error is not None for retrieval in retrievals]
    expected = judge_rankings(
        [retrieval.ranking for retrieval in retrievals],
        [question.judgments() for question in questions],
        10,
        errored=errored,
    )
    found = judge_codes(*codes_of(questions, retrievals), 10, np.array(errored))
    _same_judgments(found, expected)
    # The case holds what it is meant to: repeats, rankings past the depth, grade 0, errors.
    assert any(len(set(r.ranking)) < len(r.ranking) for r in retrievals)
    assert any(len(r.ranking) > 10 for r in retrievals)
    assert (expected.grades == 0).any() and any(errored)


def _same_judgments(found: Any, expected: Any) -> None:
    for field in ("grades", "ideal", "relevant_total", "returned_any", "errored"):
        value, wanted = getattr(found, field), getattr(expected, field)
        assert value.dtype == wanted.dtype and value.shape == wanted.shape, field
        assert np.array_equal(value, wanted), field


@pytest.mark.parametrize(
    ("labelled", "ranked"),
    [(False, True), (True, False), (False, False)],
    ids=["nothing-labelled", "nothing-returned", "neither"],
)
def test_judging_codes_when_no_question_has_labels_or_no_ranking_has_ids(
    labelled: bool, ranked: bool
) -> None:
    # A set of no-answer questions only (every label list empty), a retriever that
    # returned nothing at all, or both: the code path without any key to look up.
    questions = [
        GoldenQuestion(
            id=f"q{i}", question=f"question {i}", expected=(f"d{i}",) if labelled else ()
        )
        for i in range(4)
    ]
    retrievals = [
        Retrieval((f"d{i}", "x", f"d{i}") if ranked else (), 1.0, returned=3 if ranked else 0)
        for i in range(4)
    ]
    errored = [False, False, True, False]
    expected = judge_rankings(
        [retrieval.ranking for retrieval in retrievals],
        [question.judgments() for question in questions],
        5,
        errored=errored,
    )
    found = judge_codes(*codes_of(questions, retrievals), 5, np.array(errored))
    _same_judgments(found, expected)
    # By hand: a question whose first ranked document is labelled has grade 1 there
    # (-1: ranked but unjudged; -2: nothing ranked there)
    assert found.grades[0, 0] == (1 if labelled and ranked else (-1 if ranked else -2))
    assert found.returned_any.tolist() == [ranked, ranked, False, ranked]
    assert found.relevant_total.tolist() == [float(labelled)] * 4


def test_scores_in_batches_equal_the_whole_run_judged_at_once() -> None:
    """Across batch boundaries: every value to the last bit, and every outcome's columns."""
    count = 2 * STREAM_BATCH + 123
    questions, retrievals = random_case(7, count)
    scores = score_run(questions, retrievals, ScoringOptions(ks=KS, resamples=50))
    direct = compute_metrics(
        judge_rankings(
            [retrieval.ranking for retrieval in retrievals],
            [question.judgments() for question in questions],
            max(KS),
            errored=[retrieval.error is not None for retrieval in retrievals],
        ),
        KS,
        with_judged=True,
        # judged non-relevant labels (grade 0) bring bpref, infap and the condensed metrics
        incomplete=any(0 in question.grades.values() for question in questions),
    )
    outcomes = scores.outcomes
    assert list(outcomes.metric_names) == list(direct)
    masks = [np.ones(count, dtype=bool)]
    for field in ("form", "hard_class"):
        masks += slice_masks([slice_label(question, field) for question in questions]).values()
    overall = bootstrap_means(
        np.column_stack(list(direct.values())), np.array(masks), resamples=50, seed=DEFAULT_SEED
    )[0]
    for (name, values), estimate in zip(direct.items(), overall, strict=True):
        assert np.array_equal(outcomes.values(name), values, equal_nan=True), name
        shown = scores.metrics[name]
        assert (shown.mean, shown.ci, shown.n) == (
            estimate.mean,
            (estimate.low, estimate.high),
            estimate.n,
        )
    assert outcomes.question_ids == tuple(question.id for question in questions)
    assert dict(outcomes.errors) == {
        index: r.error for index, r in enumerate(retrievals) if r.error is not None
    }
    for index in (0, STREAM_BATCH - 1, STREAM_BATCH, count - 1, *range(100, 140)):
        outcome, question, retrieval = outcomes[index], questions[index], retrievals[index]
        assert outcome.ranking == retrieval.ranking
        assert dict(outcome.judgments) == question.judgments()
        assert outcome.latency_ms == round(retrieval.latency_ms, 3)
        assert outcome.form == question.form and outcome.hard_class == question.hard_class


def test_a_scorer_refuses_more_answers_than_questions_and_an_unfinished_run() -> None:
    questions, retrievals = random_case(3, 10)
    scorer = RunScorer(questions[:5], ScoringOptions(ks=KS))
    with pytest.raises(ValueError, match="10 retrievals for 5 questions"):
        scorer.add(retrievals)
    scorer.add(retrievals[:3])
    with pytest.raises(ValueError, match="3 of 5 questions"):
        scorer.finish()


@pytest.mark.parametrize("overfetch", [1, 2])
def test_the_short_of_documents_warning_is_the_same_from_columns(overfetch: int) -> None:
    questions, retrievals = random_case(11, 600)
    # Every 7th question filled the limit with ids of fewer documents (errored ones too).
    retrievals = [
        attrs.evolve(r, returned=10 * overfetch) if index % 7 == 0 else r
        for index, r in enumerate(retrievals)
    ]
    scorer = RunScorer(questions, ScoringOptions(ks=KS))
    scorer.add(retrievals)
    expected = short_of_documents_warning(retrievals, depth=10, overfetch=overfetch)
    assert scorer.short_of_documents(overfetch) == expected
    assert expected is not None


class Numbered:
    """Question ``question N`` gets a ranking that depends on N; N % 97 == 5 raises."""

    identifier = "numbered"

    def __init__(self) -> None:
        self.asked: list[str] = []

    def retrieve(self, question: str, limit: int) -> list[str]:
        self.asked.append(question)
        number = int(question.rsplit(" ", 1)[1])
        if number % 97 == 5:
            raise RuntimeError(f"no answer for {number}")
        return [f"d{(number * step) % 60}" for step in range(1, limit + 1)]


@pytest.mark.parametrize("concurrency", [1, 3])
def test_evaluate_streams_the_set_and_scores_as_the_whole_run(concurrency: int) -> None:
    """`evaluate` asks every question once, in batches, and its run is the one scoring all
    the answers at once gives."""
    questions, _ = random_case(5, STREAM_BATCH + 500)
    golden = GoldenQuestionSet("streamed", questions)
    retriever = Numbered()
    done: list[int] = []
    run = rk.evaluate(
        golden,
        retriever,
        git_commit=None,
        max_error_rate=None,
        concurrency=concurrency,
        resamples=40,
        progress=done.append,
    )
    assert sum(done) == len(questions)
    assert sorted(retriever.asked) == sorted(question.question for question in questions)
    again = evaluate_questions(Numbered(), questions, depth=10)
    whole = score_run(questions, again, ScoringOptions(ks=KS, resamples=40))
    assert run.record.metrics == whole.metrics
    assert run.record.slices == whole.slices
    for name in whole.outcomes.metric_names:
        assert np.array_equal(
            run.outcomes.values(name), whole.outcomes.values(name), equal_nan=True
        )
    assert dict(run.outcomes.errors) == dict(whole.outcomes.errors)
    assert run.errored == len(whole.outcomes.errors) > 0


def test_batches_follow_the_set_in_order() -> None:
    questions, _ = random_case(9, 300)
    batches = list(ask_in_batches(Numbered(), questions, depth=10, batch=128))
    assert [len(batch) for batch in batches] == [128, 128, 44]
    flat = [(r.ranking, r.error, r.returned) for batch in batches for r in batch]
    whole = evaluate_questions(Numbered(), questions, depth=10)
    assert flat == [(r.ranking, r.error, r.returned) for r in whole]


def chunk_warning_question_by_question(outcomes: Sequence[QuestionOutcome]) -> str | None:
    """The chunk-id warning computed outcome by outcome, as it is defined."""
    labelled = {doc for outcome in outcomes for doc in outcome.judgments}
    affected: list[tuple[str, str, str]] = []
    for outcome in outcomes:
        expected = sorted(outcome.expected)
        if outcome.error is not None or not expected:
            continue
        for returned in outcome.ranking:
            if returned in labelled:
                continue
            document = next((e for e in expected if chunk_like(returned, e)), None)
            if document is not None:
                affected.append((outcome.question_id, returned, document))
                break
    if not affected:
        return None
    question, returned, document = affected[0]
    return (
        f"{len(affected)} question(s) got ids that look like chunk ids of an expected "
        f"document (e.g. {question}: '{returned}' for expected '{document}') and scored them "
        f"as misses; if the retriever returns chunk ids, set its doc_id_separator option "
        f"(here '{returned[len(document)]}') so they count as their document"
    )


@pytest.mark.parametrize("seed", range(6))
def test_the_chunk_id_warning_from_columns_is_the_one_question_by_question(seed: int) -> None:
    rng = np.random.default_rng(seed)
    bases = ["doc", "doc-fees", "doc-fees-2019", "a", "a:b", "x.y", ""]
    suffixes = ["#3", "::p2", "-chunk3", "_p2", ".c7", "-2019", "-x", "#", "|", "~~", "/a/b"]
    outcomes = []
    for index in range(300):
        labels = {
            str(rng.choice(bases)): int(rng.integers(0, 3)) for _ in range(int(rng.integers(0, 4)))
        }
        ranking = tuple(
            dict.fromkeys(
                str(rng.choice(bases)) + (str(rng.choice(suffixes)) if rng.random() < 0.6 else "")
                for _ in range(int(rng.integers(0, 6)))
            )
        )
        outcomes.append(
            QuestionOutcome(
                f"q{index}",
                ranking,
                {},
                1.0,
                error="TimeoutError" if rng.random() < 0.1 else None,
                judgments=labels,
            )
        )
    expected = chunk_warning_question_by_question(outcomes)
    assert chunk_id_warning(outcomes) == expected
    assert chunk_id_warning(Outcomes.from_outcomes(outcomes[:0])) is None
    if seed == 0:
        assert expected is not None


@pytest.mark.parametrize("newline", [False, True])
def test_ids_that_may_be_chunks_are_found_in_one_search_as_id_by_id(newline: bool) -> None:
    """The chunk-id warning searches one by one only the ids a search of all of them
    picks: the ids it ends with are those the pattern finds in each id alone (ends of
    ids, case, a long s that matches s, unicode digits, empty ids, newlines)."""
    from retrievalkit.pipeline.engine.diagnostics import _MAYBE_CHUNK, maybe_chunks

    rng = np.random.default_rng(int(newline))
    pieces = ["doc", "#", "-", "_", ".", "chunk", "CHUNK", "p", "c", "3", "١٢", "é", ":", "x", ""]
    pieces += ["ſ", "eg", "ſeg", "art", "~"]
    if newline:
        pieces.append("\n")
    ids = [
        "".join(pieces[i] for i in rng.integers(0, len(pieces), rng.integers(0, 6)))
        for _ in range(3_000)
    ]
    ids += ["doc#", "#", "doc-p2", "doc-p2x", "doc.C-7", "doc_seg12", "doc-2019", ""]
    found = maybe_chunks(ids)
    assert found == [i for i, name in enumerate(ids) if _MAYBE_CHUNK.search(name) is not None]
    assert len(found) > 100 and len(ids) - len(found) > 100
    assert maybe_chunks([]) == [] and maybe_chunks(["doc-2019", "doc"]) == []


def test_the_content_hash_is_the_sha256_of_the_sorted_json_of_every_question() -> None:
    """Hashed a slice at a time with keys written in order: the digest of the one canonical
    text, across slices, for every field, unicode, unsorted grades and meta."""
    import hashlib
    import json

    from retrievalkit.formats.convert import converter
    from retrievalkit.model.values import HASHED_FIELDS

    rng = np.random.default_rng(4)
    questions = []
    for index in range(4096 + 37):
        names = [f"d{n}é" for n in rng.integers(0, 50, size=int(rng.integers(0, 4))).tolist()]
        questions.append(
            GoldenQuestion(
                id=f"q{index}",
                question=f"wie weit ist es — {index}?",
                form=(QuestionForm.MATCH, QuestionForm.GAP, None)[index % 3],
                expected=tuple(dict.fromkeys(names)),
                grades={f"z{n}": int(n % 4) for n in rng.integers(0, 9, size=3).tolist()},
                hard_class=None if index % 4 else "near-duplicate",
                gist=None if index % 5 else "the gist",
                meta={"zeta": "1", "alpha": "ü"} if index % 2 else {},
            )
        )
    golden = GoldenQuestionSet("hashed", questions)
    text = json.dumps(
        [converter.unstructure(question) for question in questions],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    assert golden.content_hash == hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert GoldenQuestionSet("none", ()).content_hash == hashlib.sha256(b"[]").hexdigest()
    assert tuple(sorted(converter.unstructure(questions[0]))) == HASHED_FIELDS
