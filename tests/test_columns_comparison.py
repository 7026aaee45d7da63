"""The gate and compare read metric columns matched by question id: the same numbers as
matching every question's outcome by id, whatever order, extra, missing or repeated ids."""

from __future__ import annotations

import datetime as dt

import attrs
import numpy as np
import pytest
from test_streaming import random_case

import retrievalkit as rk
from retrievalkit.metrics.scoring import ScoringOptions, score_run
from retrievalkit.model.outcomes import Outcomes
from retrievalkit.model.records import ResultRecord
from retrievalkit.model.values import QuestionOutcome
from retrievalkit.pipeline.engine.record import build_record
from retrievalkit.pipeline.gating.gate import compare_runs
from retrievalkit.stats.intervals import DEFAULT_SEED
from retrievalkit.stats.paired import paired_test

KS = (1, 3, 5, 10)
SCORING = ScoringOptions(ks=KS, resamples=60)
STATS = {"resamples": 60, "confidence": 0.95, "seed": 3}
NOW = dt.datetime(2026, 11, 30, tzinfo=dt.timezone.utc)


def run_of(seed: int, count: int) -> ResultRecord:
    questions, retrievals = random_case(seed, count)
    golden = rk.GoldenQuestionSet("columns", questions)
    scores = score_run(questions, retrievals, SCORING)
    return build_record(golden, "r", "p", {}, scores, SCORING, overfetch=3, now=NOW)


def by_id(outcomes: list[QuestionOutcome], metric: str) -> dict[str, float]:
    """The old lookup: question id -> value (the last outcome of an id wins)."""
    return {
        o.question_id: np.nan if o.scores.get(metric) is None else float(o.scores[metric])  # type: ignore[arg-type]
        for o in outcomes
    }


def shuffled(record: ResultRecord, seed: int) -> list[QuestionOutcome]:
    """The outcomes reordered, a tenth dropped, and some repeated with other values."""
    rng = np.random.default_rng(seed)
    outcomes = list(record.outcomes)
    kept = [outcomes[i] for i in rng.permutation(len(outcomes)) if rng.random() > 0.1]
    repeats = [
        attrs.evolve(o, scores={**o.scores, "hit@1": 1.0 - (o.scores["hit@1"] or 0.0)})
        for o in kept[:15]
    ]
    return kept[:40] + repeats + kept[40:]


@pytest.mark.parametrize("columns", [True, False])
def test_the_gate_pairs_questions_by_id_as_a_lookup_by_id_did(columns: bool) -> None:
    baseline = run_of(1, 700)
    candidate_outcomes = shuffled(run_of(2, 700), 5)
    candidate = Outcomes.from_outcomes(candidate_outcomes) if columns else candidate_outcomes
    thresholds = {"hit@1": 0.0, "rr": 0.01, "ndcg@10": 0.0, "recall@7": 0.0}
    verdict = compare_runs(candidate, "h", baseline, thresholds, **STATS)
    before_ids = {o.question_id for o in baseline.outcomes}
    shared = [o.question_id for o in candidate_outcomes if o.question_id in before_ids]
    assert verdict.shared_questions == len(shared) > 500
    checked = {item.metric: item for item in verdict.checked}
    for metric in ("hit@1", "rr", "ndcg@10"):
        before, after = by_id(list(baseline.outcomes), metric), by_id(candidate_outcomes, metric)
        left = np.array([before[i] for i in shared])
        right = np.array([after[i] for i in shared])
        expected = paired_test(left, right, **STATS)
        item = checked[metric]
        assert (item.baseline, item.candidate, item.difference) == (
            expected.baseline,
            expected.candidate,
            expected.difference,
        )
        assert item.ci == (expected.low, expected.high)
        assert (item.p_value, item.n, item.discordant) == (
            expected.p_value,
            expected.n,
            expected.discordant,
        )
    assert verdict.unchecked == (
        "recall@7: the run did not compute it (was it asked for, e.g. a k of --k?)",
    )


def test_a_slice_gate_takes_labels_from_the_set_else_from_the_outcomes() -> None:
    baseline = run_of(3, 600)
    candidate = run_of(4, 600)
    questions = rk.GoldenQuestionSet("columns", random_case(4, 600)[0]).questions
    # The set given holds only half the questions; the rest take the outcome's labels.
    relabelled = tuple(
        attrs.evolve(q, hard_class="near-duplicate") if i % 2 else q
        for i, q in enumerate(questions[:300])
    )
    slices = {"hard_class=near-duplicate": {"rr": 0.0}, "form=GAP": {"hit@3": 0.0}}
    verdict = compare_runs(
        candidate.outcomes,
        "h",
        baseline,
        {},
        slice_thresholds=slices,
        questions=relabelled,
        **STATS,
    )
    labels = {q.id: q.hard_class for q in relabelled}
    near = [
        o.question_id
        for o in candidate.outcomes
        if labels.get(o.question_id, o.hard_class) == "near-duplicate"
    ]
    gap = [
        o.question_id for o in candidate.outcomes if o.form is not None and o.form.value == "GAP"
    ]
    for name, metric, members in (
        ("hard_class=near-duplicate", "rr", near),
        ("form=GAP", "hit@3", gap),
    ):
        before, after = (
            by_id(list(baseline.outcomes), metric),
            by_id(list(candidate.outcomes), metric),
        )
        expected = paired_test(
            np.array([before[i] for i in members]), np.array([after[i] for i in members]), **STATS
        )
        (item,) = [c for c in verdict.checked if c.slice == name]
        assert (item.difference, item.p_value, item.n, item.ci) == (
            expected.difference,
            expected.p_value,
            expected.n,
            (expected.low, expected.high),
        )


def test_compare_pairs_and_lists_changes_as_by_id() -> None:
    first, second = run_of(6, 500), run_of(7, 500)
    moved = attrs.evolve(second, outcomes=shuffled(second, 9))
    comparison = rk.compare(
        [first, moved], labels=["a", "b"], changed=25, allow_different_sets=True
    )
    ids = [o.question_id for o in moved.outcomes]
    shared = [o.question_id for o in first.outcomes if o.question_id in set(ids)]
    assert comparison.shared_questions == len(shared)
    (pair,) = comparison.pairs
    for delta in pair.metrics:
        before = by_id(list(first.outcomes), delta.metric)
        after = by_id(list(moved.outcomes), delta.metric)
        left = np.array([before[i] for i in shared])
        right = np.array([after[i] for i in shared])
        expected = paired_test(left, right, resamples=first.manifest.resamples, seed=DEFAULT_SEED)
        assert (delta.difference, delta.p_value, delta.n) == (
            expected.difference,
            expected.p_value,
            expected.n,
        )
        both = ~np.isnan(left) & ~np.isnan(right)
        assert delta.wins == int((right[both] - left[both] > 1e-12).sum())
    before, after = by_id(list(first.outcomes), "rr"), by_id(list(moved.outcomes), "rr")
    changes = sorted(
        (
            (-abs(after[i] - before[i]), i)
            for i in shared
            if not np.isnan(after[i] - before[i]) and abs(after[i] - before[i]) > 1e-12
        ),
    )[:25]
    assert [change.question_id for change in pair.changed] == [i for _, i in changes]
    assert [abs(change.difference) for change in pair.changed] == [-size for size, _ in changes]
