"""Many systems at once: ``--all-pairs`` and ``--control`` with Holm over the whole family
of pairs and metrics, and the paired effect size d_z with its exact interval."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from scipy.stats import nct
from statsmodels.stats.multitest import multipletests

import retrievalkit as rk
from retrievalkit.errors import InputError
from retrievalkit.metrics.scoring import ScoringOptions, score_run
from retrievalkit.model.records import ResultRecord
from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet, Retrieval
from retrievalkit.pipeline.engine.record import build_record
from retrievalkit.pipeline.gating.comparison import Side, compare_records
from retrievalkit.render.comparison import comparison_document, render_comparison_markdown
from retrievalkit.stats.effect_size import paired_effect_size


def golden(count: int) -> GoldenQuestionSet:
    return GoldenQuestionSet(
        name="many",
        questions=tuple(
            GoldenQuestion(
                id=f"q{index:02d}",
                question=f"question {index}",
                expected=[f"d{index}"],
                grades={f"d{index}": 1, "judged-miss": 0},
            )
            for index in range(count)
        ),
    )


SCORING = ScoringOptions(ks=(1, 3), resamples=200)
STATS: dict[str, Any] = {"resamples": 400, "confidence": 0.95, "seed": 5}
GOLDEN = golden(30)


def run(second_for: Sequence[int], model: str, gold: GoldenQuestionSet = GOLDEN) -> ResultRecord:
    """The relevant document at rank 2 for ``second_for``, else at rank 1."""
    retrievals = []
    for question in gold.questions:
        relevant = question.expected[0]
        if int(question.id[1:]) in second_for:
            retrievals.append(Retrieval(("judged-miss", relevant), 1.0))
        else:
            retrievals.append(Retrieval((relevant, "judged-miss"), 1.0))
    scores = score_run(gold.questions, retrievals, SCORING)
    return build_record(gold, model, "test", {}, scores, SCORING, overfetch=1, git_commit=None)


BASE = run((), "base")
WORSE = run(range(10), "worse")
SLIGHTLY = run((*range(10, 14), 0, 1), "slightly")
SIDES = [Side("base", BASE), Side("worse", WORSE), Side("slightly", SLIGHTLY)]


def test_all_pairs_compares_every_pair_and_holm_runs_over_pairs_and_metrics() -> None:
    comparison = compare_records(SIDES, pairing="all-pairs", **STATS)
    assert [(pair.baseline, pair.candidate) for pair in comparison.pairs] == [
        ("base", "worse"),
        ("base", "slightly"),
        ("worse", "slightly"),
    ]
    assert (comparison.pairing, comparison.correction) == ("all-pairs", "holm")
    assert comparison.family == "pairs and metrics"
    deltas = [delta for pair in comparison.pairs for delta in pair.metrics]
    tested = [delta for delta in deltas if delta.p_value is not None]
    assert len(tested) > len(comparison.pairs)  # several metrics in one family
    _, expected, _, _ = multipletests([delta.p_value for delta in tested], method="holm")
    assert [delta.p_adjusted for delta in tested] == pytest.approx(list(expected))
    assert all(delta.p_holm == delta.p_adjusted for delta in deltas)
    alpha = 1 - STATS["confidence"]
    for delta in tested:
        assert delta.p_adjusted is not None
        if delta.verdict != "unresolvable":
            assert delta.significant == (delta.p_adjusted < alpha)
    document = comparison_document(comparison)
    first = document["pairs"][0]["metrics"][0]
    assert {"p_value", "p_adjusted", "effect_size"} <= set(first)
    assert document["correction"] == "holm" and document["pairing"] == "all-pairs"
    markdown = render_comparison_markdown(comparison)
    assert "Holm-corrected over every pair and metric" in markdown
    assert "d_z [CI]" in markdown and "## slightly against worse" in markdown


def test_the_family_is_larger_than_per_metric_holm() -> None:
    """Over pairs and metrics each adjusted p is at least the per-metric Holm one."""
    family = compare_records(SIDES, pairing="control", control="base", **STATS)
    per_metric = compare_records(SIDES, **STATS)
    assert per_metric.family == "candidates"
    for wide, narrow in zip(family.pairs, per_metric.pairs, strict=True):
        assert (wide.baseline, wide.candidate) == (narrow.baseline, narrow.candidate)
        for one, other in zip(wide.metrics, narrow.metrics, strict=True):
            if one.p_adjusted is not None and other.p_holm is not None:
                assert one.p_adjusted >= other.p_holm - 1e-12


def test_control_compares_each_system_with_the_named_one() -> None:
    comparison = compare_records(SIDES, pairing="control", control="slightly", **STATS)
    assert [(pair.baseline, pair.candidate) for pair in comparison.pairs] == [
        ("slightly", "base"),
        ("slightly", "worse"),
    ]
    by_run_id = compare_records(SIDES, pairing="control", control=WORSE.run_id, **STATS)
    assert [pair.baseline for pair in by_run_id.pairs] == ["worse", "worse"]
    with pytest.raises(InputError, match="no system 'nobody'") as caught:
        compare_records(SIDES, pairing="control", control="nobody", **STATS)
    assert caught.value.field == "--control"


def test_runs_on_other_questions_are_refused_naming_the_run() -> None:
    other = golden(29)
    short = run((), "short", other)
    with pytest.raises(InputError, match=f"run {short.run_id} \\(short\\)") as caught:
        compare_records(
            [*SIDES, Side("short", short)],
            pairing="all-pairs",
            allow_different_sets=True,
            **STATS,
        )
    assert caught.value.field == "--run"


def test_all_pairs_and_control_together_are_refused() -> None:
    with pytest.raises(InputError, match="two ways of pairing"):
        rk.compare([BASE, WORSE], all_pairs=True, control="base")
    result = rk.compare([BASE, WORSE, SLIGHTLY], all_pairs=True)
    assert len(result.pairs) == 3 and result.correction == "holm"


def test_d_z_is_mean_over_sd_with_the_noncentral_t_interval() -> None:
    """Worked example: d = (1, 2, 3, 4, 5) has mean 3, sd sqrt(2.5), d_z = 1.8974; the
    bounds are the noncentrality parameters that put t = d_z sqrt(5) = 4.2426 at the
    97.5 % and 2.5 % points of the noncentral t with 4 degrees of freedom, over sqrt(5)."""
    differences = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    effect = paired_effect_size(differences, 0.95)
    assert effect is not None and effect.kind == "d_z"
    assert effect.value == pytest.approx(3 / math.sqrt(2.5))
    assert effect.ci is not None
    low, high = effect.ci
    t = effect.value * math.sqrt(5)
    assert nct.cdf(t, 4, low * math.sqrt(5)) == pytest.approx(0.975, abs=1e-7)
    assert nct.cdf(t, 4, high * math.sqrt(5)) == pytest.approx(0.025, abs=1e-7)
    assert paired_effect_size(np.array([0.5, 0.5, 0.5]), 0.95) is None
    assert paired_effect_size(np.array([0.5]), 0.95) is None


def test_d_z_interval_covers_the_true_effect_as_often_as_it_states() -> None:
    """Seeded: 600 samples of 15 normal differences with true d_z 0.5; the 90 % interval
    should cover 0.5 in 90 % of them (binomial sd 1.2 points; bounds +-4 points)."""
    rng = np.random.default_rng(11)
    covered = 0
    trials = 600
    for _ in range(trials):
        sample = rng.normal(0.5, 1.0, 15)
        effect = paired_effect_size(sample, 0.90)
        assert effect is not None and effect.ci is not None
        covered += effect.ci[0] <= 0.5 <= effect.ci[1]
    assert 0.86 <= covered / trials <= 0.94
    # Large n: close to the normal approximation d +- z sqrt(1/n + d^2 / 2n).
    sample = rng.normal(0.3, 1.0, 2000)
    effect = paired_effect_size(sample, 0.95)
    assert effect is not None and effect.ci is not None
    half = 1.959964 * math.sqrt(1 / 2000 + effect.value**2 / 4000)
    assert effect.ci == pytest.approx((effect.value - half, effect.value + half), abs=2e-3)
