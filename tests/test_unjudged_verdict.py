"""The unjudged-aware verdict of compare and the gate: judged@k beside each difference, the
condensed difference when the judged shares are far apart, and a plain word on disagreement."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import pytest

from retrievalkit.formats.convert import unstructure
from retrievalkit.metrics.scoring import ScoringOptions, as_columns, condensed_column, score_run
from retrievalkit.model.records import ResultRecord
from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet, Retrieval
from retrievalkit.pipeline.engine.record import build_record
from retrievalkit.pipeline.gating.comparison import Side, compare_records
from retrievalkit.pipeline.gating.gate import compare_runs
from retrievalkit.pipeline.gating.unjudged import JUDGED_MARGIN, LABELLING_NOTE
from retrievalkit.render.comparison import comparison_document, render_comparison_markdown
from retrievalkit.render.text import verdict_lines

COUNT = 30
STATS: dict[str, Any] = {"resamples": 400, "confidence": 0.95, "seed": 5}
SCORING = ScoringOptions(ks=(1, 3), resamples=200)


def golden(grades_zero: bool = True) -> GoldenQuestionSet:
    return GoldenQuestionSet(
        name="thirty",
        questions=tuple(
            GoldenQuestion(
                id=f"q{index:02d}",
                question=f"question {index}",
                expected=[f"d{index}"],
                grades={f"d{index}": 2, **({"judged-miss": 0} if grades_zero else {})},
            )
            for index in range(COUNT)
        ),
    )


def run(
    model: str, first: str | None, the_set: GoldenQuestionSet, second: Sequence[int] = ()
) -> ResultRecord:
    """Each question's relevant document at rank 1, or at rank 2 after ``first`` for the
    questions in ``second`` (all of them when ``second`` is empty and ``first`` given)."""
    retrievals = []
    for question in the_set.questions:
        index = int(question.id[1:])
        relevant = question.expected[0]
        if first is not None and (not second or index in second):
            retrievals.append(Retrieval((first, relevant), 1.0))
        else:
            retrievals.append(Retrieval((relevant, "judged-miss"), 1.0))
    scores = score_run(the_set.questions, retrievals, SCORING)
    return build_record(the_set, model, "test", {}, scores, SCORING, overfetch=1, git_commit=None)


def by_metric(pair: Any) -> dict[str, Any]:
    return {delta.metric: delta for delta in pair.metrics}


def test_a_loss_made_of_unjudged_documents_disagrees_with_its_condensed_result() -> None:
    """Every rank 1 of the candidate is a document nobody labelled, the relevant one below
    it: hit@1 falls from 1 to 0, judged@1 from 1.00 to 0.00. Without the unlabelled
    documents both rankings start with the relevant one: hit@1:condensed moves by 0."""
    the_set = golden()
    base, candidate = run("base", None, the_set), run("new", "never-judged", the_set)
    comparison = compare_records([Side("base", base), Side("new", candidate)], **STATS)
    deltas = by_metric(comparison.pairs[0])
    hit = deltas["hit@1"]
    assert hit.difference == -1.0 and hit.significant
    context = hit.judged
    assert (context.measure, context.baseline, context.candidate) == ("judged@1", 1.0, 0.0)
    assert context.margin == JUDGED_MARGIN
    assert context.condensed_metric == "hit@1:condensed"
    assert context.condensed_difference == 0.0 and context.condensed_verdict != "significant"
    assert context.disagree
    # rr stands beside the deepest judged@k (judged@3: 1.00 against 0.50).
    assert deltas["rr"].judged.measure == "judged@3"
    assert deltas["rr"].judged.candidate == 0.5 and deltas["rr"].judged.disagree
    said = [warning for warning in comparison.warnings if LABELLING_NOTE in warning]
    assert said and said[0].startswith("new: hit@1 and hit@1:condensed disagree")
    # JSON, Markdown and the terminal's plain text all carry it.
    document = comparison_document(comparison)
    first = document["pairs"][0]["metrics"][0]
    assert first["judged"]["condensed_metric"] == "hit@1:condensed"
    assert first["judged"]["disagree"] is True
    markdown = render_comparison_markdown(comparison)
    assert "| judged |" in markdown and "@1 1.00/0.00" in markdown
    assert "Condensed rankings (unjudged documents removed)" in markdown
    assert "it disagrees with hit@1 -1.000" in markdown
    assert "condensed: hit@1: judged@1 1.00 against 0.00" in str(comparison)


def test_a_loss_among_labelled_documents_has_no_condensed_result() -> None:
    """The candidate's rank 1 is the judged non-relevant document for ten questions: the
    judged shares are equal, so only judged@k stands beside the difference."""
    the_set = golden()
    base, worse = run("base", None, the_set), run("worse", "judged-miss", the_set, range(10))
    comparison = compare_records([Side("base", base), Side("worse", worse)], **STATS)
    for delta in comparison.pairs[0].metrics:
        if delta.metric.startswith("judged@") or delta.metric.endswith(":condensed"):
            assert delta.judged is None
            continue
        assert delta.judged is not None, delta.metric
        assert delta.judged.baseline == delta.judged.candidate == 1.0
        assert delta.judged.condensed_metric is None and not delta.judged.disagree
    assert not [warning for warning in comparison.warnings if LABELLING_NOTE in warning]


def test_the_gate_says_when_the_drop_may_come_from_the_labels() -> None:
    the_set = golden()
    base, candidate = run("base", None, the_set), run("new", "never-judged", the_set)
    verdict = compare_runs(
        candidate.outcomes,
        candidate.manifest.set_hash,
        base,
        {"hit@1": 0.0},
        resamples=200,
        confidence=0.95,
        seed=1,
    )
    (item,) = verdict.checked
    assert item.regressed and item.judged is not None and item.judged.disagree
    assert unstructure(verdict)["checked"][0]["judged"]["condensed_difference"] == 0.0
    text = "\n".join(verdict_lines(verdict, None, confidence=0.95))
    assert "judged@1 1.00 -> 0.00, hit@1:condensed difference +0.000" in text
    assert "may come from which documents were labelled" in text


def test_condensed_values_come_from_stored_rankings_when_the_run_has_none() -> None:
    """A set with grades but no grade 0 stores no condensed column; the comparison computes
    it from the stored rankings and labels, the same values a run asked for it stores."""
    the_set = golden(grades_zero=False)
    candidate = run("new", "never-judged", the_set, range(12))
    assert "hit@1:condensed" not in candidate.metrics
    computed = condensed_column(as_columns(candidate.outcomes), "rr")
    asked = ScoringOptions(ks=(1, 3), resamples=200, metrics=("rr:condensed",))
    retrievals = [Retrieval(outcome.ranking, 1.0) for outcome in as_columns(candidate.outcomes)]
    stored = score_run(the_set.questions, retrievals, asked).outcomes.values("rr:condensed")
    assert np.array_equal(computed, stored) and computed.tolist() == [1.0] * COUNT
    base = run("base", None, the_set)
    comparison = compare_records([Side("base", base), Side("new", candidate)], **STATS)
    # judged@1: 1.00 against 0.60 (12 of 30 start with an unlabelled document).
    hit = by_metric(comparison.pairs[0])["hit@1"]
    assert hit.judged.candidate == 0.6 and hit.judged.condensed_metric == "hit@1:condensed"
    assert hit.judged.condensed_difference == 0.0 and hit.judged.disagree


# --- the parts, one at a time --------------------------------------------------------------


def test_the_judged_share_beside_each_metric() -> None:
    """judged@k at the metric's own cut-off when the run has it; the deepest judged@k for a
    metric without a cut-off; none for judged@k itself, a condensed metric, a chunk metric
    or a stage's metric, nor when the run has no judged@k to stand beside it."""
    from retrievalkit.pipeline.gating.unjudged import judged_measure

    available = {"judged@1", "judged@3", "judged@10"}
    assert judged_measure("hit@3", available) == "judged@3"
    assert judged_measure("ndcg@10", available) == "judged@10"
    assert judged_measure("ndcg@5", available) is None  # no judged@5 in the run
    assert judged_measure("rr", available) == "judged@10"  # the deepest, not the last named
    assert judged_measure("bpref", {"judged@10", "judged@3"}) == "judged@10"
    assert judged_measure("rr", set()) is None
    for none in ("judged@3", "hit@3:condensed", "chunk_hit@3", "stage.rerank:hit@3"):
        assert judged_measure(none, available) is None, none


def test_when_a_condensed_result_disagrees() -> None:
    """It disagrees when it points the other way (beyond a tie of 1e-12 either side) or
    only one of the two is significant; it cannot disagree when either is undefined."""
    from retrievalkit.pipeline.gating.unjudged import _disagree

    assert _disagree(0.1, True, -0.1, True)  # opposite directions, both significant
    assert _disagree(-0.1, False, 0.1, False)
    assert not _disagree(0.1, True, 0.05, True)
    assert not _disagree(-0.1, True, -0.05, True)
    assert _disagree(0.1, True, 0.05, False)  # only the plain one significant
    assert _disagree(0.1, False, 0.05, True)  # only the condensed one
    assert _disagree(0.1, None, 0.05, True)  # no plain test: not significant
    assert not _disagree(0.1, None, 0.05, False)
    # a difference within the tie is no direction
    assert not _disagree(0.1, False, -1e-13, False)
    assert not _disagree(-1e-13, False, 0.1, False)
    assert not _disagree(1e-13, False, -0.1, False)
    assert not _disagree(-0.1, False, 1e-13, False)
    assert _disagree(2e-12, False, -2e-12, False)
    assert _disagree(-2e-12, False, 2e-12, False)
    assert not _disagree(None, True, -0.1, False)
    assert not _disagree(0.1, True, None, False)


def test_the_disagreement_warning_in_words() -> None:
    from retrievalkit.formats.numbers import NONE
    from retrievalkit.model.comparisons import JudgedContext
    from retrievalkit.pipeline.gating.unjudged import disagreement_warning

    context = JudgedContext(
        "judged@10",
        0.912,
        0.5,
        JUDGED_MARGIN,
        condensed_metric="ndcg@10:condensed",
        condensed_difference=0.0312,
        condensed_verdict="not significant",
        disagree=True,
    )
    assert disagreement_warning("new", "ndcg@10", context) == (
        "new: ndcg@10 and ndcg@10:condensed disagree (judged@10 0.91 against 0.50; "
        "condensed difference +0.031, not significant): " + LABELLING_NOTE
    )
    untested = attrs.evolve(context, condensed_verdict=None, candidate=None)
    assert disagreement_warning("new", "ndcg@10", untested) == (
        f"new: ndcg@10 and ndcg@10:condensed disagree (judged@10 0.91 against {NONE}; "
        "condensed difference +0.031, no test): " + LABELLING_NOTE
    )
    assert disagreement_warning("new", "ndcg@10", attrs.evolve(context, disagree=False)) is None
    gone = attrs.evolve(context, condensed_difference=None)
    assert disagreement_warning("new", "ndcg@10", gone) is None


def test_a_disagreement_needs_more_than_a_tie_either_way() -> None:
    """A difference of exactly the tie (1e-12) has no direction, on either side."""
    from retrievalkit.pipeline.gating.unjudged import _disagree

    assert not _disagree(1e-12, False, -0.1, False)
    assert not _disagree(0.1, False, -1e-12, False)
    assert not _disagree(-1e-12, False, 0.1, False)
    assert not _disagree(-0.1, False, 1e-12, False)


HUNDRED = 100


def _hundred(rankings: dict[int, tuple[str, ...]], ks: tuple[int, ...] = (1, 3)) -> Any:
    """100 questions, each with its relevant document ``r<i>`` and a judged non-relevant
    ``n<i>``; question i returns ``rankings[i]`` (``r<i>``, ``n<i>`` when not given; ``x``
    is a document nobody labelled). Their columns and positions, as compare passes them."""
    questions = tuple(
        GoldenQuestion(
            id=f"q{i:03d}", question=f"q {i}", expected=[f"r{i}"], grades={f"r{i}": 1, f"n{i}": 0}
        )
        for i in range(HUNDRED)
    )
    the_set = GoldenQuestionSet(name="hundred", questions=questions)
    answers = []
    for i in range(HUNDRED):
        named = rankings.get(i, ("r", "n"))
        answers.append(Retrieval(tuple(d if d == "x" else f"{d}{i}" for d in named), 1.0))
    scoring = ScoringOptions(ks=ks, resamples=200)
    scores = score_run(the_set.questions, answers, scoring)
    record = build_record(the_set, "m", "test", {}, scores, scoring, overfetch=1, git_commit=None)
    return as_columns(record.outcomes), np.arange(HUNDRED)


#: The candidate: 50 questions put an unlabelled document first (hit@1 0, condensed 1),
#: 20 the judged non-relevant one (0 either way); the baseline 15 of those put the
#: judged non-relevant first where the candidate has the relevant one (condensed +1).
CANDIDATE = {
    **{i: ("x", "r", "n") for i in range(50)},
    **{i: ("n", "r") for i in range(50, 70)},
}
BASELINE = {i: ("n", "r") for i in range(70, 85)}


def test_the_condensed_result_is_the_paired_test_of_the_condensed_columns() -> None:
    """judged@1 0.50 against 1.00: the condensed comparison is on. Its values are the
    paired test (stats.clusters.paired_test_by, clusters of two questions) of hit@1's
    condensed columns, computed here from the rankings: the baseline's is 0 for its 15
    non-relevant firsts, the candidate's 0 for its 20; with the confidence, resamples and
    seed asked for; its verdict from that test's p-value and floor at alpha = 1 -
    confidence. Whether it disagrees follows from the plain difference and verdict given."""
    from retrievalkit.pipeline.gating.unjudged import judged_context
    from retrievalkit.stats.clusters import paired_test_by
    from retrievalkit.stats.paired import verdict

    before, after = _hundred(BASELINE), _hundred(CANDIDATE)
    left = np.array([0.0 if 70 <= i < 85 else 1.0 for i in range(HUNDRED)])
    right = np.array([0.0 if 50 <= i < 70 else 1.0 for i in range(HUNDRED)])
    assert np.array_equal(condensed_column(before[0], "hit@1"), left)
    assert np.array_equal(condensed_column(after[0], "hit@1"), right)
    clusters = np.arange(HUNDRED) // 2
    options: dict[str, Any] = {"resamples": 300, "confidence": 0.9, "seed": 17}
    expected = paired_test_by(left, right, clusters=clusters, **options)
    assert expected.low is not None and expected.high is not None
    said = verdict(expected.p_value, expected.p_floor, 0.1)
    context = judged_context(
        before, after, "hit@1", difference=-0.7, significant=True, clusters=clusters, **options
    )
    assert context is not None
    assert (context.measure, context.baseline, context.candidate) == ("judged@1", 1.0, 0.5)
    assert context.margin == JUDGED_MARGIN and context.condensed_metric == "hit@1:condensed"
    assert context.condensed_baseline == pytest.approx(0.85)
    assert context.condensed_candidate == pytest.approx(0.8)
    assert context.condensed_difference == pytest.approx(-0.05)
    assert context.condensed_ci == (expected.low, expected.high)
    assert context.condensed_p_value == expected.p_value and context.condensed_verdict == said
    # Other resamples, seed, confidence or no clusters give another interval here.
    for changed in (
        {"resamples": 2000},
        {"seed": 0},
        {"confidence": 0.95},
        {"clusters": None},
    ):
        other = paired_test_by(left, right, **{"clusters": clusters, **options, **changed})
        assert (other.low, other.high) != (expected.low, expected.high), changed
    # The plain verdict agrees with the condensed one: no disagreement; else one.
    agreeing = judged_context(
        before,
        after,
        "hit@1",
        difference=-0.05,
        significant=said == "significant",
        clusters=clusters,
        **options,
    )
    assert agreeing is not None and agreeing.disagree is False
    assert context.disagree is (said != "significant")


def test_the_condensed_result_waits_for_shares_more_than_the_margin_apart() -> None:
    """judged@1 0.20 against 0.10 is exactly the margin apart: only the shares. A metric
    without a condensed variant (bpref) gets only the shares too. A side whose every
    question returned nothing has no share, and nothing more is said."""
    from retrievalkit.pipeline.gating.unjudged import judged_context

    options: dict[str, Any] = {"resamples": 200, "confidence": 0.95, "seed": 1}
    fifth = _hundred({i: ("x", "r") for i in range(80)})
    tenth = _hundred({i: ("x", "r") for i in range(90)})
    close = judged_context(fifth, tenth, "hit@1", difference=0.0, significant=False, **options)
    assert close is not None and (close.baseline, close.candidate) == (0.2, 0.1)
    assert close.margin == JUDGED_MARGIN and close.condensed_metric is None
    plain = _hundred({})
    unlabelled = _hundred({i: ("x", "r") for i in range(60)})
    bpref = judged_context(plain, unlabelled, "bpref", difference=0.0, significant=False, **options)
    assert bpref is not None and bpref.measure == "judged@3" and bpref.condensed_metric is None
    assert bpref.candidate == pytest.approx(0.7)  # 60 of 100 with one of two unlabelled
    silent = _hundred({i: () for i in range(HUNDRED)})
    for old, new, shares in ((silent, plain, (None, 1.0)), (plain, silent, (1.0, None))):
        context = judged_context(old, new, "hit@1", difference=0.5, significant=True, **options)
        assert context is not None and (context.baseline, context.candidate) == shares
        assert context.condensed_metric is None and not context.disagree


def test_the_judged_share_is_one_both_runs_have() -> None:
    """The baseline computed k 1 and 3, the candidate 10 too: rr stands beside judged@3,
    the deepest of both, not the candidate's judged@10."""
    from retrievalkit.pipeline.gating.unjudged import judged_context

    deeper = _hundred(CANDIDATE, ks=(1, 3, 10))
    context = judged_context(
        _hundred({}),
        deeper,
        "rr",
        difference=0.0,
        significant=False,
        resamples=100,
        confidence=0.95,
        seed=1,
    )
    assert context is not None and context.measure == "judged@3"
