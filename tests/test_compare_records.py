"""`compare_records` in process, on runs whose rankings are chosen so every number is known.

Thirty questions, each with one relevant document. The baseline finds every one at rank 1;
candidate A finds ten of them only at rank 2, candidate B four. Each expected value
below is counted from those rankings by hand: means, differences, wins / ties / losses,
the exact two-sided sign-flip p-value (all m discordant questions move the same way, so
p = 2 / 2^m), Holm's adjustment and floors written out, and the verdicts they give.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import pytest

from retrievalkit.errors import InputError
from retrievalkit.metrics.scoring import ScoringOptions, score_run
from retrievalkit.model.records import ResultRecord
from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet, Retrieval
from retrievalkit.pipeline.engine.record import build_record
from retrievalkit.pipeline.gating.comparison import (
    MetricDelta,
    PairComparison,
    Side,
    compare_records,
)
from retrievalkit.stats.paired import paired_test

COUNT = 30
GOLDEN = GoldenQuestionSet(
    name="thirty",
    questions=tuple(
        GoldenQuestion(
            id=f"q{index:02d}",
            question=f"question {index}",
            expected=[f"d{index}"],
            grades={f"d{index}": 1, "judged-miss": 0},
        )
        for index in range(COUNT)
    ),
)
SCORING = ScoringOptions(ks=(1, 3), resamples=200)
STATS: dict[str, Any] = {"resamples": 400, "confidence": 0.95, "seed": 5}


def run(
    second_for: Sequence[int],
    model: str,
    golden: GoldenQuestionSet = GOLDEN,
    *,
    errored: Sequence[int] = (),
    filler: str = "judged-miss",
) -> ResultRecord:
    """The relevant document at rank 2 (after ``filler``) for ``second_for``, else at rank 1."""
    retrievals = []
    for question in golden.questions:
        index = int(question.id[1:])
        relevant = question.expected[0]
        if index in errored:
            retrievals.append(Retrieval((), 1.0, error="boom"))
        elif index in second_for:
            retrievals.append(Retrieval((filler, relevant), 1.0))
        else:
            retrievals.append(Retrieval((relevant, filler), 1.0))
    scores = score_run(golden.questions, retrievals, SCORING)
    return build_record(golden, model, "test", {}, scores, SCORING, overfetch=1, git_commit=None)


BASE = run((), "base")
WORSE = run(range(10), "worse")  # ten questions lost at hit@1 (rr 1 -> 0.5)
SLIGHTLY = run(range(10, 14), "slightly")  # four lost


def deltas(pair: PairComparison) -> dict[str, MetricDelta]:
    return {delta.metric: delta for delta in pair.metrics}


def test_one_candidate_is_judged_on_its_raw_p_value() -> None:
    comparison = compare_records([Side("base", BASE), Side("worse", WORSE)], **STATS)
    assert comparison.correction is None and comparison.shared_questions == COUNT
    assert comparison.same_set and comparison.set_name == "thirty"
    assert (comparison.confidence, comparison.resamples) == (0.95, 400)
    (pair,) = comparison.pairs
    assert (pair.baseline, pair.candidate, pair.changed_by) == ("base", "worse", "rr")
    hit1 = deltas(pair)["hit@1"]
    assert (hit1.baseline, hit1.candidate) == (1.0, pytest.approx(20 / 30))
    assert hit1.difference == pytest.approx(-10 / 30)
    assert (hit1.wins, hit1.ties, hit1.losses, hit1.n, hit1.discordant) == (0, 20, 10, 30, 10)
    assert hit1.p_value == pytest.approx(2 / 2**10) and hit1.p_floor == pytest.approx(2 / 2**10)
    assert (hit1.p_method, hit1.p_error, hit1.p_holm) == ("exact", 0.0, None)
    assert (hit1.verdict, hit1.significant) == ("significant", True)
    assert hit1.ci is not None and hit1.ci[0] < -10 / 30 < hit1.ci[1] < 0
    reference = paired_test(
        np.ones(COUNT), np.repeat([0.0, 1.0], [10, 20]), resamples=400, confidence=0.95, seed=5
    )
    assert hit1.ci == (reference.low, reference.high) and hit1.ci_method == "adjusted-t"
    rr = deltas(pair)["rr"]
    assert rr.difference == pytest.approx(-0.5 * 10 / 30)
    assert (rr.wins, rr.ties, rr.losses) == (0, 20, 10)
    hit3 = deltas(pair)["hit@3"]  # rank 2 is still in the top 3: nothing to decide
    assert (hit3.difference, hit3.discordant, hit3.p_value, hit3.p_floor) == (0.0, 0, 1.0, 1.0)
    assert (hit3.wins, hit3.ties, hit3.losses) == (0, 30, 0)
    assert (hit3.verdict, hit3.significant) == ("unresolvable", False)


def test_several_candidates_get_holm_adjusted_p_values_and_floors() -> None:
    comparison = compare_records(
        [Side("base", BASE), Side("worse", WORSE), Side("slightly", SLIGHTLY)], **STATS
    )
    assert comparison.correction == "holm"
    worse, slightly = (deltas(pair)["hit@1"] for pair in comparison.pairs)
    # Raw: 2/2^10 and 2/2^4. Holm over m = 2: the smaller doubled, the larger times one,
    # then the running maximum.
    assert worse.p_value == pytest.approx(2 / 2**10)
    assert slightly.p_value == pytest.approx(2 / 2**4)
    assert worse.p_holm == pytest.approx(2 * 2 / 2**10)
    assert slightly.p_holm == pytest.approx(max(2 * 2 / 2**10, 2 / 2**4))
    # The floors are adjusted the same way, and decide "unresolvable".
    assert worse.p_floor == pytest.approx(2 * 2 / 2**10)
    assert slightly.p_floor == pytest.approx(2 / 2**4)
    assert (worse.verdict, worse.significant) == ("significant", True)
    assert (slightly.verdict, slightly.significant) == ("unresolvable", False)
    # A raw p-value below alpha whose adjusted one is not is "not significant". Against a
    # baseline that misses q29 at rank 1, "mixed" loses nine questions and wins q29:
    # |sum| >= 8 for 10 signs has 1 + 10 + 10 + 1 = 22 of the 1,024 patterns.
    base = run([29], "base")
    mixed = run(range(9), "mixed")
    six = run([*range(6), 29], "six")
    also_six = run([*range(20, 26), 29], "also-six")
    sides = [Side("base", base), Side("mixed", mixed), Side("six", six), Side("6", also_six)]
    found = [deltas(pair)["hit@1"] for pair in compare_records(sides, **STATS).pairs]
    first, second, third = found
    assert (first.wins, first.losses, first.discordant) == (1, 9, 10)
    assert first.p_value == pytest.approx(22 / 1024) and first.p_value < 0.05
    assert second.p_value == pytest.approx(2 / 2**6)
    # Sorted raw: 22/1024, 2/64, 2/64 -> times 3, 2, 1, then the running maximum.
    assert first.p_holm == pytest.approx(3 * 22 / 1024)
    assert second.p_holm == pytest.approx(3 * 22 / 1024)
    assert third.p_holm == pytest.approx(3 * 22 / 1024)
    assert first.p_floor == pytest.approx(3 * 2 / 1024)
    assert second.p_floor == third.p_floor == pytest.approx(2 * 2 / 2**6)
    assert (first.verdict, first.significant) == ("not significant", False)
    assert (second.verdict, third.verdict) == ("unresolvable", "unresolvable")


def test_the_systems_and_the_changed_questions() -> None:
    failing = run(range(3), "failing", errored=(5, 6))
    comparison = compare_records(
        [Side("base", BASE, saved_to="here"), Side("failing", failing)],
        changed_limit=4,
        question_texts={"q05": "question five"},
        **STATS,
    )
    base, other = comparison.systems
    assert (base.label, base.run_id, base.retriever, base.saved_to) == (
        "base",
        BASE.run_id,
        "base",
        "here",
    )
    assert (base.set_name, base.set_hash) == ("thirty", BASE.manifest.set_hash)
    assert (base.questions, base.errored, other.errored, other.saved_to) == (30, 0, 2, None)
    # Every returned document is labelled, except on the two errored questions (undefined).
    assert base.judged == {"judged@1": 1.0, "judged@3": 1.0}
    assert other.judged == {"judged@1": 1.0, "judged@3": 1.0}
    (pair,) = comparison.pairs
    # rr moves: -1 for the errored q05, q06; -0.5 for q00..q02; largest first, then by id.
    assert [change.question_id for change in pair.changed] == ["q05", "q06", "q00", "q01"]
    first, _, third, _ = pair.changed
    assert (first.baseline, first.candidate, first.difference) == (1.0, 0.0, -1.0)
    assert (first.baseline_rank, first.candidate_rank) == (1, None)
    assert (first.baseline_error, first.candidate_error) == (None, "boom")
    # A given text over the stored one (q05); the stored one where none is given (q00).
    assert (first.question, third.question) == ("question five", "question 0")
    assert BASE.outcomes.known_texts()["q05"] != "question five"
    assert (third.baseline_rank, third.candidate_rank, third.difference) == (1, 2, -0.5)
    backwards = compare_records([Side("failing", failing), Side("base", BASE)], **STATS)
    change = backwards.pairs[0].changed[0]
    assert (change.question_id, change.baseline_error, change.candidate_error) == (
        "q05",
        "boom",
        None,
    )


def test_a_low_judged_share_is_warned_about_by_name() -> None:
    unjudged = run(range(COUNT), "unjudged", filler="never-judged")
    comparison = compare_records([Side("base", BASE), Side("unjudged", unjudged)], **STATS)
    assert comparison.systems[1].judged == {"judged@1": 0.0, "judged@3": 0.5}
    (warning,) = [warning for warning in comparison.warnings if "pooling bias" in warning]
    assert warning.startswith("unjudged: judged@1 = 0.00, judged@3 = 0.50 (below 0.80)")


def test_different_set_versions_compare_only_with_leave_and_on_the_shared_questions() -> None:
    smaller = GoldenQuestionSet(name="thirty", questions=GOLDEN.questions[:24])
    part = run(range(10), "part", smaller)
    with pytest.raises(InputError, match=r"share 24 question ids \(base 30, part 24") as caught:
        compare_records([Side("base", BASE), Side("part", part)], **STATS)
    assert caught.value.field == "--allow-different-sets"
    hashes = f"base: {BASE.manifest.set_hash[:12]}, part: {part.manifest.set_hash[:12]})"
    assert f"(content hashes {hashes};" in str(caught.value)
    comparison = compare_records(
        [Side("base", BASE), Side("part", part)], allow_different_sets=True, **STATS
    )
    assert not comparison.same_set and comparison.shared_questions == 24
    assert comparison.warnings == (
        "the systems ran on different versions of the set: compared on the 24 question ids "
        "they share (base 30, part 24 questions)",
    )
    hit1 = deltas(comparison.pairs[0])["hit@1"]
    assert (hit1.n, hit1.losses) == (24, 10)
    assert hit1.difference == pytest.approx(-10 / 24)
    assert comparison.systems[1].questions == 24


def test_runs_without_a_shared_question_are_refused() -> None:
    other = GoldenQuestionSet(
        name="other",
        questions=(GoldenQuestion(id="z1", question="zeta", expected=["d1"]),),
    )
    with pytest.raises(InputError, match="share no question id") as caught:
        compare_records(
            [Side("base", BASE), Side("other", run((), "other", other))],
            allow_different_sets=True,
            **STATS,
        )
    assert caught.value.field == "--run"


def test_judged_shares_in_report_order_and_none_without_values() -> None:
    deep = ScoringOptions(ks=(1, 3, 10), resamples=200)
    retrievals = [Retrieval((q.expected[0], "judged-miss"), 1.0) for q in GOLDEN.questions]
    base = build_record(
        GOLDEN,
        "base",
        "test",
        {},
        score_run(GOLDEN.questions, retrievals, deep),
        deep,
        overfetch=1,
        git_commit=None,
    )
    failing = [Retrieval((), 1.0, error="down") for _ in GOLDEN.questions]
    down = build_record(
        GOLDEN,
        "down",
        "test",
        {},
        score_run(GOLDEN.questions, failing, deep),
        deep,
        overfetch=1,
        git_commit=None,
    )
    comparison = compare_records([Side("base", base), Side("down", down)], **STATS)
    kept, gone = comparison.systems
    assert list(kept.judged) == ["judged@1", "judged@3", "judged@10"]
    assert kept.judged == {"judged@1": 1.0, "judged@3": 1.0, "judged@10": 1.0}
    # Every question errored: judged@k is undefined everywhere, so no share, not NaN.
    assert gone.judged == {"judged@1": None, "judged@3": None, "judged@10": None}
    assert gone.errored == COUNT


def test_a_metric_undefined_on_every_shared_question_has_no_test() -> None:
    unanswerable = GoldenQuestionSet(
        name="none",
        questions=tuple(
            GoldenQuestion(id=f"n{index}", question=f"nothing {index}", expected=[])
            for index in range(8)
        ),
    )

    def empty_handed(found: int, model: str) -> ResultRecord:
        retrievals = [Retrieval(("x",) if i < found else (), 1.0) for i in range(8)]
        scores = score_run(unanswerable.questions, retrievals, SCORING)
        return build_record(
            unanswerable, model, "test", {}, scores, SCORING, overfetch=1, git_commit=None
        )

    comparison = compare_records(
        [Side("quiet", empty_handed(0, "quiet")), Side("chatty", empty_handed(3, "chatty"))],
        **STATS,
    )
    found = deltas(comparison.pairs[0])
    rr = found["rr"]
    assert (rr.n, rr.baseline, rr.difference, rr.ci, rr.p_value) == (0, None, None, None, None)
    assert (rr.verdict, rr.significant, rr.wins, rr.ties, rr.losses) == (None, None, 0, 0, 0)
    # hit@1 is defined for no-answer questions: 1 when nothing came back.
    hit1 = found["hit@1"]
    assert (hit1.n, hit1.losses, hit1.ties, hit1.difference) == (8, 3, 5, -3 / 8)


def test_the_confidence_level_reaches_the_paired_interval() -> None:
    wide = compare_records([Side("base", BASE), Side("worse", WORSE)], **STATS)
    narrow = compare_records(
        [Side("base", BASE), Side("worse", WORSE)], resamples=400, confidence=0.8, seed=5
    )
    for metric in ("hit@1", "rr"):
        expected = paired_test(
            np.array([value for value in _values(BASE, metric)]),
            np.array([value for value in _values(WORSE, metric)]),
            resamples=400,
            confidence=0.8,
            seed=5,
        )
        at_80 = deltas(narrow.pairs[0])[metric].ci
        at_95 = deltas(wide.pairs[0])[metric].ci
        assert at_80 == (expected.low, expected.high)
        assert at_80 is not None and at_95 is not None
        assert at_95[0] < at_80[0] and at_80[1] < at_95[1]


def _values(record: ResultRecord, metric: str) -> list[float]:
    return [float(outcome.scores[metric]) for outcome in record.outcomes]  # type: ignore[arg-type]


def test_a_move_of_exactly_the_tie_tolerance_is_a_tie() -> None:
    # paired.TIE (1e-12): differences no larger are ties, as sums of a few floats may
    # differ in their last bits; twice that is a move.
    from retrievalkit.stats.paired import TIE

    def with_rr(record: ResultRecord, values: dict[str, float]) -> ResultRecord:
        outcomes = [
            attrs.evolve(
                outcome,
                scores={**outcome.scores, "rr": values.get(outcome.question_id, 0.0)},
            )
            for outcome in record.outcomes
        ]
        return attrs.evolve(record, outcomes=outcomes)

    base = with_rr(BASE, {})
    moved = with_rr(WORSE, {"q00": TIE, "q01": -TIE, "q02": 2 * TIE, "q03": -2 * TIE})
    rr = deltas(compare_records([Side("base", base), Side("moved", moved)], **STATS).pairs[0])["rr"]
    assert (rr.wins, rr.ties, rr.losses) == (1, COUNT - 2, 1)
    changed = compare_records([Side("base", base), Side("moved", moved)], **STATS).pairs[0]
    assert [change.question_id for change in changed.changed] == ["q02", "q03"]


def test_metrics_come_in_report_order_and_pairing_follows_the_question_ids() -> None:
    comparison = compare_records([Side("base", BASE), Side("worse", WORSE)], **STATS)
    pair = comparison.pairs[0]
    ranked = [
        "hit@1",
        "hit@3",
        "recall@1",
        "recall@3",
        "precision@1",
        "precision@3",
        "ndcg@1",
        "ndcg@3",
        "ap@1",
        "ap@3",
        "rr",
    ]
    # The set has a grade-0 label: bpref, infap and the condensed variants come too.
    assert [delta.metric for delta in pair.metrics] == [
        *ranked,
        "bpref",
        "infap",
        "judged@1",
        "judged@3",
        *[f"{name}:condensed" for name in ranked],
    ]
    # The candidate's outcomes in another order pair with the same questions: every
    # number, the bootstrap interval included, is the same.
    deep = ScoringOptions(ks=(1, 3, 10), resamples=200)
    retrievals = [Retrieval((q.expected[0],), 1.0) for q in GOLDEN.questions]
    deeper = build_record(
        GOLDEN,
        "deep",
        "test",
        {},
        score_run(GOLDEN.questions, retrievals, deep),
        deep,
        overfetch=1,
        git_commit=None,
    )
    for sides in ([BASE, deeper], [deeper, BASE]):
        both = compare_records([Side("a", sides[0]), Side("b", sides[1])], **STATS)
        assert "hit@10" not in [delta.metric for delta in both.pairs[0].metrics]
    shuffled = attrs.evolve(WORSE, outcomes=list(reversed(WORSE.outcomes)))
    again = compare_records([Side("base", BASE), Side("worse", shuffled)], **STATS).pairs[0]
    assert again.metrics == pair.metrics


def test_the_questions_that_changed_most_stop_at_ten_by_default() -> None:
    many = run(range(12), "many")
    pair = compare_records([Side("base", BASE), Side("many", many)], **STATS).pairs[0]
    assert [change.question_id for change in pair.changed] == [f"q{i:02d}" for i in range(10)]


def test_a_question_undefined_on_one_side_is_not_a_change() -> None:
    outcomes = [
        attrs.evolve(outcome, scores={**outcome.scores, "rr": None})
        if outcome.question_id == "q00"
        else outcome
        for outcome in WORSE.outcomes
    ]
    undefined = attrs.evolve(WORSE, outcomes=outcomes)
    pair = compare_records([Side("base", BASE), Side("worse", undefined)], **STATS).pairs[0]
    assert [change.question_id for change in pair.changed] == [f"q{i:02d}" for i in range(1, 10)]
    assert deltas(pair)["rr"].n == COUNT - 1


def test_each_candidate_lists_its_own_changed_questions() -> None:
    sides = [Side("base", BASE), Side("worse", WORSE), Side("slightly", SLIGHTLY)]
    worse, slightly = compare_records(sides, **STATS).pairs
    assert (worse.candidate, slightly.candidate) == ("worse", "slightly")
    assert [change.question_id for change in worse.changed] == [f"q{i:02d}" for i in range(10)]
    assert [change.question_id for change in slightly.changed] == ["q10", "q11", "q12", "q13"]
    assert {change.candidate for change in worse.changed + slightly.changed} == {0.5}


@pytest.mark.parametrize("limit", [1, 2, 3])
def test_changed_limit_keeps_the_largest_moves(limit: int) -> None:
    # rr moves by -1 on the errored q05 and q06, by -0.5 on q00..q02: largest first, by id.
    failing = run(range(3), "failing", errored=(5, 6))
    pair = compare_records(
        [Side("base", BASE), Side("failing", failing)], changed_limit=limit, **STATS
    ).pairs[0]
    expected = ["q05", "q06", "q00"][:limit]
    assert [change.question_id for change in pair.changed] == expected


def test_the_set_name_is_the_first_systems() -> None:
    renamed = attrs.evolve(WORSE, set="renamed")
    comparison = compare_records([Side("base", BASE), Side("worse", renamed)], **STATS)
    assert comparison.set_name == "thirty"
    backwards = compare_records([Side("worse", renamed), Side("base", BASE)], **STATS)
    assert backwards.set_name == "renamed"
