"""The regression gate on chosen rankings: thresholds at their edge, slices, what it reports.

Twenty questions, ten MATCH and ten GAP, half of each in hard class ``near-duplicate``;
each expects one document ``d<i>``. A baseline finds every one at rank 1; candidates
lose chosen questions, so every expected difference is counted here by hand.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import numpy as np
import pytest

from retrievalkit.errors import InputError
from retrievalkit.metrics.scoring import ScoringOptions, score_run
from retrievalkit.model.records import ResultRecord
from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet, QuestionForm
from retrievalkit.pipeline.engine.evaluator import Retrieval
from retrievalkit.pipeline.engine.record import build_record
from retrievalkit.pipeline.gating.gate import (
    Verdict,
    check_slices,
    compare_runs,
    settle_sequentially,
    split_slice,
)
from retrievalkit.stats.paired import paired_test
from retrievalkit.stats.power import power_row, spread_of_pair, undetectable_warning
from retrievalkit.stats.sequential import FAIL, PASS, UNDECIDED, GateSequence, SequentialResult

QUESTIONS = tuple(
    GoldenQuestion(
        id=f"q{i:02d}",
        question=f"question {i}",
        form=QuestionForm.MATCH if i < 10 else QuestionForm.GAP,
        hard_class="near-duplicate" if i % 2 else "normal",
        expected=[f"d{i}"],
        meta={"topic": "even" if i % 2 == 0 else "odd"},
    )
    for i in range(20)
)
GOLDEN = GoldenQuestionSet(name="gate", questions=list(QUESTIONS))
SCORING = ScoringOptions(ks=(1, 3), resamples=200)
STATS: dict[str, Any] = {"resamples": 400, "confidence": 0.95, "seed": 5}


def record(missed: Iterable[int] = (), *, second: Iterable[int] = ()) -> ResultRecord:
    """Every question found at rank 1, except ``missed`` (not found) and ``second`` (rank 2)."""
    missed, second = set(missed), set(second)
    rankings = []
    for i in range(20):
        if i in missed:
            rankings.append(("x1", "x2", "x3"))
        elif i in second:
            rankings.append(("x1", f"d{i}", "x3"))
        else:
            rankings.append((f"d{i}", "x1", "x2"))
    scores = score_run(GOLDEN.questions, [Retrieval(r, 1.0) for r in rankings], SCORING)
    return build_record(GOLDEN, "sys", "test", {}, scores, SCORING, overfetch=1)


def gate(
    candidate: ResultRecord,
    baseline: ResultRecord,
    thresholds: Mapping[str, float],
    **options: Any,
) -> Verdict:
    return compare_runs(
        candidate.outcomes, GOLDEN.content_hash, baseline, thresholds, **{**STATS, **options}
    )


def test_a_drop_equal_to_its_threshold_passes_and_a_larger_one_fails() -> None:
    baseline, candidate = record(), record(missed=[0])  # hit@1 falls by exactly 1/20
    assert not gate(candidate, baseline, {"hit@1": 0.05}).regressed
    failed = gate(candidate, baseline, {"hit@1": 0.04})
    assert failed.regressed
    (failure,) = failed.failures
    assert failure.metric == "hit@1" and failure.threshold == 0.04
    assert failure.difference == pytest.approx(-0.05)
    assert (failure.baseline, failure.candidate, failure.n) == (1.0, 0.95, 20)


def test_the_verdict_names_its_baseline_and_what_it_compared() -> None:
    baseline, candidate = record(), record(missed=range(8))
    verdict = gate(
        candidate, baseline, {"hit@1": 0.0, "hit@3": 0.5}, baseline_kind="pinned",
        require_significant=True,
    )  # fmt: skip
    assert verdict.baseline_run_id == baseline.run_id
    assert verdict.shared_questions == 20
    assert verdict.same_set is True
    assert verdict.baseline_kind == "pinned"
    assert verdict.require_significant is True
    assert verdict.unchecked == ()
    assert [item.metric for item in verdict.checked] == ["hit@1", "hit@3"]
    assert [item.metric for item in verdict.failures] == ["hit@1"]
    hit1 = verdict.failures[0]
    assert hit1.ci is not None and hit1.ci[0] <= hit1.difference <= hit1.ci[1] < 0
    assert hit1.significant is True
    assert hit1.p_value is not None and 0 < hit1.p_value < 0.05
    assert gate(candidate, baseline, {}).baseline_kind == "newest earlier run"


def test_another_set_is_reported() -> None:
    baseline = record()
    verdict = compare_runs(record().outcomes, "another-hash", baseline, {"hit@1": 0.0}, **STATS)
    assert verdict.same_set is False


def test_a_clear_gain_is_significant_and_no_change_is_not() -> None:
    before, after = record(missed=range(10)), record()
    (gain,) = gate(after, before, {"hit@1": 0.0}).checked
    assert gain.difference == pytest.approx(0.5) and not gain.regressed
    assert gain.ci is not None and gain.ci[0] > 0 and gain.significant is True
    (same,) = gate(before, before, {"hit@1": 0.0}).checked
    assert same.difference == 0.0 and same.significant is False and not same.regressed


def test_the_interval_follows_confidence_seed_and_resamples() -> None:
    baseline, candidate = record(), record(missed=[1, 2, 3], second=[4, 5])

    def interval(**options: Any) -> tuple[float, float]:
        (item,) = gate(candidate, baseline, {"hit@1": 1.0}, **options).checked
        assert item.ci is not None
        return item.ci

    narrow, wide = interval(confidence=0.5), interval(confidence=0.99)
    assert wide[0] < narrow[0] and narrow[1] < wide[1]
    # Five discordant questions: the studentized interval, which resamples nothing, so
    # the seed and the resample count cannot move it (they move BCa's, past 30).
    (item,) = gate(candidate, baseline, {"hit@1": 1.0}).checked
    assert item.ci_method == "adjusted-t" and item.discordant == 5
    assert interval(seed=1) == interval(seed=2) and interval(resamples=50) == interval()


def test_undefined_values_are_left_out_of_the_comparison() -> None:
    questions = [*QUESTIONS[:4], GoldenQuestion(id="none", question="no answer", expected=[])]
    golden = GoldenQuestionSet(name="gate", questions=questions)

    def run(rankings: list[tuple[str, ...]]) -> ResultRecord:
        scores = score_run(golden.questions, [Retrieval(r, 1.0) for r in rankings], SCORING)
        return build_record(golden, "sys", "test", {}, scores, SCORING, overfetch=1)

    baseline = run([("d0",), ("d1",), ("d2",), ("d3",), ()])
    candidate = run([("x", "d0"), ("d1",), ("d2",), ("d3",), ("x",)])
    verdict = compare_runs(candidate.outcomes, golden.content_hash, baseline, {"rr": 0.1}, **STATS)
    (rr,) = verdict.checked
    assert rr.n == 4  # the no-answer question has no rr in either run
    assert rr.difference == pytest.approx(-0.5 / 4)
    assert rr.regressed


@pytest.mark.parametrize("by_questions", [True, False])
def test_slices_by_form_and_hard_class_gate_their_own_questions(by_questions: bool) -> None:
    # GAP questions 10-19 lose 4 of 10 at rank 1; MATCH questions lose none.
    baseline, candidate = record(), record(missed=[11, 13], second=[10, 12])
    slices = {
        "form=GAP": {"hit@1": 0.3},
        "form=MATCH": {"hit@1": 0.0},
        "hard_class=normal": {"hit@1": 0.1},
    }
    verdict = gate(
        candidate, baseline, {}, slice_thresholds=slices,
        questions=QUESTIONS if by_questions else (),
    )  # fmt: skip
    checked = {item.slice: item for item in verdict.checked}
    assert (checked["form=GAP"].n, checked["form=MATCH"].n, checked["hard_class=normal"].n) == (
        10,
        10,
        10,
    )
    assert checked["form=GAP"].difference == pytest.approx(-0.4)
    assert checked["form=MATCH"].difference == 0.0
    assert checked["hard_class=normal"].difference == pytest.approx(-0.2)  # q10 and q12
    assert [(item.slice, item.metric) for item in verdict.failures] == [
        ("form=GAP", "hit@1"),
        ("hard_class=normal", "hit@1"),
    ]


def test_a_meta_slice_needs_the_questions() -> None:
    baseline, candidate = record(), record(missed=[0, 2])
    slices = {"topic=even": {"hit@1": 0.0}}
    verdict = gate(candidate, baseline, {}, slice_thresholds=slices, questions=QUESTIONS)
    (even,) = verdict.checked
    assert even.n == 10 and even.difference == pytest.approx(-0.2) and even.regressed
    # Outcomes carry form and hard class, not meta: without the questions the slice is empty.
    blind = gate(candidate, baseline, {}, slice_thresholds=slices)
    assert blind.checked == ()
    assert blind.unchecked == ("hit@1 [topic=even]: no question of the slice is in both runs",)


def test_a_threshold_that_cannot_be_checked_is_listed_with_its_reason() -> None:
    verdict = gate(record(), record(), {"hit@7": 0.0})  # neither run was scored at k = 7
    # Nothing it could compare: the gate fails rather than pass unchecked.
    assert verdict.checked == () and verdict.regressed and verdict.note
    (reason,) = verdict.unchecked
    assert reason.startswith("hit@7: the run did not compute it")


@pytest.mark.parametrize("name", ["form", "=GAP", "form=", " = ", "form =  "])
def test_a_slice_name_without_field_or_value_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="FIELD=VALUE"):
        split_slice(name)


def test_a_slice_name_splits_at_its_first_equals_sign() -> None:
    assert split_slice(" topic = a=b ") == ("topic", "a=b")


def test_a_slice_no_question_of_the_set_has_is_refused_naming_the_values() -> None:
    check_slices({"hard_class=normal": {"hit@1": 0.0}}, QUESTIONS, source="x.toml", set_name="gate")
    with pytest.raises(InputError) as refused:
        check_slices(
            {"hard_class=near-dupe": {"hit@1": 0.0}},
            QUESTIONS,
            source="x.toml",
            set_name="gate",
        )
    assert refused.value.field == 'regression.slices."hard_class=near-dupe"'
    assert refused.value.source == "x.toml"
    assert "near-duplicate, normal" in refused.value.detail


def test_a_loss_and_a_gain_that_cancel_are_not_significant() -> None:
    (item,) = gate(record(missed=[3]), record(missed=[4]), {"hit@1": 0.0}).checked
    assert item.difference == 0.0 and item.ci is not None
    assert item.ci[0] < 0 < item.ci[1]  # one question each way: no evidence of a change
    assert item.significant is False


def test_form_slices_from_outcomes_skip_questions_without_a_form() -> None:
    questions = [*QUESTIONS[:10], *(attrs.evolve(q, form=None) for q in QUESTIONS[10:])]
    golden = GoldenQuestionSet(name="gate", questions=questions)
    rankings = [(f"d{i}",) if i != 1 else ("x",) for i in range(20)]
    scores = score_run(golden.questions, [Retrieval(r, 1.0) for r in rankings], SCORING)
    candidate = build_record(golden, "sys", "test", {}, scores, SCORING, overfetch=1)
    scores = score_run(golden.questions, [Retrieval((f"d{i}",), 1.0) for i in range(20)], SCORING)
    baseline = build_record(golden, "sys", "test", {}, scores, SCORING, overfetch=1)
    verdict = compare_runs(
        candidate.outcomes, golden.content_hash, baseline, {},
        slice_thresholds={"form=MATCH": {"hit@1": 0.0}}, **STATS,
    )  # fmt: skip
    (match,) = verdict.checked
    assert match.n == 10 and match.difference == pytest.approx(-0.1) and match.regressed


def test_every_slice_is_checked_not_only_the_first() -> None:
    with pytest.raises(InputError) as refused:
        check_slices(
            {"form=GAP": {"hit@1": 0.0}, "hard_class=nope": {"hit@1": 0.0}},
            QUESTIONS,
            source=None,
            set_name="gate",
        )
    assert refused.value.field == 'regression.slices."hard_class=nope"'


def test_the_reason_a_metric_could_not_be_checked_says_what_to_look_at() -> None:
    (reason,) = gate(record(), record(), {"hit@7": 0.0}).unchecked
    assert reason == "hit@7: the run did not compute it (was it asked for, e.g. a k of --k?)"


def test_each_comparison_carries_its_whole_paired_test() -> None:
    # Six questions lost, all one way: 6 discordant of 20, and the exact two-sided
    # sign-flip p-value is P(|sum of 6 signs| >= 6) = 2 / 2**6, which is also the floor.
    verdict = gate(record(missed=range(6)), record(), {"hit@1": 0.5, "hit@3": 0.5})
    before, after = np.ones(20), np.array([0.0] * 6 + [1.0] * 14)
    test = paired_test(before, after, **STATS)
    assert [item.metric for item in verdict.checked] == ["hit@1", "hit@3"]
    for item in verdict.checked:
        assert (item.n, item.discordant, item.threshold) == (20, 6, 0.5)
        assert item.p_value == pytest.approx(2 / 2**6)
        assert item.p_floor == pytest.approx(2 / 2**6)
        assert (item.verdict, item.significant, item.regressed) == ("significant", True, False)
        assert (item.p_method, item.p_error, item.ci_method) == (
            test.p_method,
            test.p_error,
            test.interval_method,
        )
        assert item.p_method is not None and item.ci_method is not None
        assert item.ci == (test.low, test.high)


def test_one_discordant_question_is_unresolvable_not_insignificant() -> None:
    (item,) = gate(record(missed=[7]), record(), {"hit@1": 0.0}).checked
    # One question cannot give a two-sided p-value below 1: no outcome could be significant.
    assert (item.discordant, item.p_floor) == (1, 1.0)
    assert (item.verdict, item.significant) == ("unresolvable", False)


def _warning(metric: str, slice_name: str | None, before: Any, after: Any, threshold: float) -> str:
    row = power_row(
        metric, slice_name, len(before), spread_of_pair(before, after), alpha=0.05,
        threshold=threshold,
    )  # fmt: skip
    assert row.below_detectable
    return undetectable_warning(row)


def test_a_threshold_below_what_the_set_can_detect_is_warned_about_with_its_slice() -> None:
    baseline, candidate = record(), record(missed=[0, 1])
    slices = {"hard_class=normal": {"hit@1": 0.0}}
    verdict = gate(candidate, baseline, {"hit@1": 0.0}, slice_thresholds=slices)
    everyone = (np.ones(20), np.array([0.0, 0.0] + [1.0] * 18))
    normal = (np.ones(10), np.array([0.0] + [1.0] * 9))  # q00 lost; q01 is near-duplicate
    assert verdict.warnings == (
        _warning("hit@1", None, *everyone, 0.0),
        _warning("hit@1", "hard_class=normal", *normal, 0.0),
    )
    first, second = verdict.warnings
    assert first.startswith("hit@1: the allowed drop 0.000 is below what this set can detect")
    assert "with 20 questions" in first
    assert second.startswith("hit@1 [hard_class=normal]: the allowed drop 0.000")
    assert "with 10 questions" in second


def test_a_threshold_the_set_can_detect_is_not_warned_about() -> None:
    # Dropping all 20 questions is detectable with 20 of them at 80% power.
    verdict = gate(record(missed=[0]), record(), {"hit@1": 1.0})
    assert verdict.checked and verdict.warnings == ()


def test_a_meta_slice_is_not_read_from_the_hard_class_its_value_happens_to_equal() -> None:
    # Without the questions, a meta slice has no labels, even when its value is one of the
    # hard classes the outcomes do carry.
    slices = {"topic=normal": {"hit@1": 0.0}}
    verdict = gate(record(missed=[0]), record(), {}, slice_thresholds=slices)
    assert verdict.checked == ()
    assert verdict.unchecked == ("hit@1 [topic=normal]: no question of the slice is in both runs",)


def _sequential(decision: str, *gates: tuple[str, str | None, str]) -> SequentialResult:
    return SequentialResult(
        decision=decision, asked=12, total=20, alpha=0.05, seed=5,
        gates=tuple(
            GateSequence(metric=metric, slice=where, threshold=0.0, population=20, asked=12,
                         low=None, high=None, decision=said)
            for metric, where, said in gates
        ),
    )  # fmt: skip


def test_a_sequential_decision_replaces_the_fixed_sample_verdict_gate_by_gate() -> None:
    slices = {"hard_class=normal": {"hit@1": 0.0}}
    fixed = gate(record(), record(), {"hit@1": 0.0, "hit@3": 0.0}, slice_thresholds=slices)
    assert not fixed.regressed and len(fixed.checked) == 3
    result = _sequential(
        FAIL,
        ("hit@1", None, PASS),
        ("hit@3", None, UNDECIDED),
        ("hit@1", "hard_class=normal", FAIL),
    )
    settled = settle_sequentially(fixed, result)
    assert settled.regressed and settled.sequential is result
    assert [(item.metric, item.slice) for item in settled.failures] == [
        ("hit@3", None),
        ("hit@1", "hard_class=normal"),
    ]
    assert settled.checked == fixed.checked and settled.baseline_run_id == fixed.baseline_run_id


def test_a_sequential_pass_clears_a_fixed_sample_failure_and_an_unlisted_gate_fails() -> None:
    fixed = gate(record(missed=[0, 1]), record(), {"hit@1": 0.0, "hit@3": 0.0})
    assert fixed.regressed
    passed = settle_sequentially(
        fixed, _sequential(PASS, ("hit@1", None, PASS), ("hit@3", None, PASS))
    )
    assert not passed.regressed and passed.failures == ()
    # A gate the sequential run did not decide on counts as failed, never as passed.
    partial = settle_sequentially(fixed, _sequential(FAIL, ("hit@1", None, PASS)))
    assert partial.regressed
    assert [item.metric for item in partial.failures] == ["hit@3"]
