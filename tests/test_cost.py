"""Cost as a measurement: ``[costs]`` prices, the run's ``cost`` with its interval, the
paired cost ratio of ``compare``, and the gate's ``cost.per_question`` check.

Runs are built from chosen token counts (`Retrieval(..., usage=...)`): every number
asserted follows from the counts and prices given, worked out in each test.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

import retrievalkit as rk
from retrievalkit.errors import InputError
from retrievalkit.formats.config import Config, ModelPrice, find_config
from retrievalkit.metrics.cost import question_costs, run_cost
from retrievalkit.metrics.scoring import ScoringOptions, score_run
from retrievalkit.model.records import ResultRecord
from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet, Retrieval
from retrievalkit.pipeline.engine.record import build_record
from retrievalkit.pipeline.engine.settings import EvalSettings
from retrievalkit.pipeline.gating.gate import Verdict, compare_runs
from retrievalkit.render.ci_output import junit_xml, step_summary_markdown
from retrievalkit.render.summary import EvalReport, summary, to_json_text
from retrievalkit.render.text import verdict_lines

COUNT = 200
QUESTIONS = [
    GoldenQuestion(id=f"q{i:03d}", question=f"question {i}", expected=[f"d{i}"])
    for i in range(COUNT)
]
GOLDEN = GoldenQuestionSet(name="priced", questions=QUESTIONS)
SCORING = ScoringOptions(ks=(1, 3), resamples=400, seed=5)
PRICES = {"embed": {"input": 0.02, "output": 0.0}, "rerank": {"input": 1.0, "output": 2.0}}
#: Each question's embedding tokens: 20 to 400, as questions of different lengths.
TOKENS = np.random.default_rng(7).integers(20, 400, COUNT)


def record(
    embed: Sequence[int] | None = TOKENS,
    rerank: Sequence[int] | None = None,
    prices: dict[str, Any] | None = None,
) -> ResultRecord:
    """Every question found at rank 1, with the given tokens a question."""
    answers = []
    for i in range(COUNT):
        usage = {}
        if embed is not None:
            usage["embed"] = (int(embed[i]), 0)
        if rerank is not None:
            usage["rerank"] = (int(rerank[i]), 1)
        answers.append(Retrieval((f"d{i}", "x"), 1.0, usage=usage or None))
    scores = score_run(GOLDEN.questions, answers, SCORING)
    built = build_record(GOLDEN, "sys", "test", {}, scores, SCORING, overfetch=1)
    manifest = attrs.evolve(built.manifest, costs=PRICES if prices is None else prices)
    return attrs.evolve(built, manifest=manifest)


# --- [costs] in the configuration --------------------------------------------------------


def test_the_configuration_takes_prices_per_model(tmp_path: Path) -> None:
    path = tmp_path / "retrievalkit.toml"
    path.write_text(
        '[costs."text-embedding-3-small"]\ninput = 0.00002\n\n'
        '[costs."gpt-4.1-mini"]\ninput = 0.0004\noutput = 0.0016\n',
        encoding="utf-8",
    )
    config = find_config(str(path))
    assert config.costs == {
        "text-embedding-3-small": ModelPrice(0.00002, 0.0),
        "gpt-4.1-mini": ModelPrice(0.0004, 0.0016),
    }
    settings = EvalSettings.resolve(config)
    assert settings.costs["gpt-4.1-mini"] == {"input": 0.0004, "output": 0.0016}
    # A given price wins for its model; the others stay the configuration's.
    given = EvalSettings.resolve(config, costs={"gpt-4.1-mini": 0.001})
    assert given.costs["gpt-4.1-mini"] == {"input": 0.001, "output": 0.0}
    assert given.costs["text-embedding-3-small"]["input"] == 0.00002
    assert EvalSettings.resolve(config, **given.arguments()) == given


@pytest.mark.parametrize(
    "text, field, line, message",
    [
        ('[costs."m"]\ninput = -1\n', 'costs."m".input', 2, "a number >= 0"),
        ('[costs."m"]\ninput = "cheap"\n', 'costs."m".input', 2, "a number >= 0"),
        # nan is refused by the reader before any section looks at it.
        ('[costs."m"]\ninput = 1\noutput = nan\n', "costs.m.output", 3, "finite number"),
        ('[costs."m"]\ninput = 1\nper = 1000\n', 'costs."m".per', 3, "unknown key"),
        ('[costs."m"]\noutput = 1\n', 'costs."m"', 1, "needs input"),
        ("[costs]\nm = 0.1\n", 'costs."m"', 2, "must be a table"),
        ('costs = "free"\n', "costs", 1, "must be a table"),
    ],
)
def test_bad_prices_name_the_file_line_and_key(
    tmp_path: Path, text: str, field: str, line: int, message: str
) -> None:
    path = tmp_path / "retrievalkit.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=message) as error:
        find_config(str(path))
    assert error.value.field == field
    assert error.value.source == str(path) and error.value.line == line


def test_bad_prices_given_to_the_api_name_the_argument() -> None:
    with pytest.raises(InputError) as error:
        EvalSettings.resolve(Config(), costs={"m": {"in": 1}})
    assert error.value.field == "costs.m"
    with pytest.raises(InputError) as error:
        EvalSettings.resolve(Config(), costs={"m": -0.5})
    assert error.value.field == "costs.m.input"
    with pytest.raises(InputError, match="must map model names"):
        rk.evaluate(GOLDEN, Found(), costs=["m"])  # type: ignore[arg-type]


class Found:
    """Each question's expected document first; 10 tokens of ``embed`` each."""

    def retrieve(self, question: str, limit: int) -> list[str]:
        rk.record_usage("embed", 10)
        return [f"d{question.split()[-1]}"]


# --- the run's cost -----------------------------------------------------------------------


def test_the_run_json_gives_the_cost_per_question_with_its_bootstrap_interval() -> None:
    """Embedding tokens at 0.02 per 1,000 and reranking 1 input + 2 output per 1,000: a
    question of t embedding tokens and r rerank tokens (1 output) costs
    t x 0.00002 + r x 0.001 + 0.002. The interval is checked against scipy's percentile
    bootstrap of the mean (other draws: they agree to a small part of the width)."""
    from scipy import stats

    rerank = np.arange(COUNT) % 5
    run = record(TOKENS, rerank)
    cost = summary(EvalReport(run, tuple(QUESTIONS), None, None))["cost"]
    each = TOKENS * 0.00002 + rerank * 0.001 + 0.002
    assert cost["per_question"]["value"] == pytest.approx(each.mean())
    assert cost["total"] == pytest.approx(each.sum())
    assert cost["per_question"]["method"] == "percentile bootstrap"
    assert cost["tokens"] == {
        "embed": {"input": int(TOKENS.sum()), "output": 0},
        "rerank": {"input": int(rerank.sum()), "output": COUNT},
    }
    assert cost["prices"] == PRICES and cost["unpriced"] == [] and cost["questions"] == COUNT
    low, high = cost["per_question"]["ci"]
    scipy_ci = stats.bootstrap(
        (each,), np.mean, method="percentile", n_resamples=20_000, random_state=1
    ).confidence_interval
    width = scipy_ci.high - scipy_ci.low
    assert abs(low - scipy_ci.low) < 0.1 * width and abs(high - scipy_ci.high) < 0.1 * width
    # The document is valid JSON (no NaN) and the terminal table says it in one line.
    json.loads(to_json_text(summary(EvalReport(run, tuple(QUESTIONS), None, None))))


def test_equal_costs_have_a_degenerate_interval() -> None:
    """100 tokens each at 0.02 per 1,000: every question costs 0.002, every resample too."""
    cost = run_cost(record(np.full(COUNT, 100), prices={"embed": {"input": 0.02}}))
    assert cost is not None
    assert cost["per_question"]["value"] == pytest.approx(0.002)
    assert cost["per_question"]["ci"] == pytest.approx([0.002, 0.002])
    assert cost["total"] == pytest.approx(0.4)


def test_a_run_without_tokens_has_no_cost_and_an_unpriced_model_is_named() -> None:
    assert run_cost(record(None)) is None
    partly = record(TOKENS, np.ones(COUNT, dtype=int), prices={"embed": {"input": 0.02}})
    cost = run_cost(partly)
    assert cost is not None and cost["unpriced"] == ["rerank"]
    assert cost["per_question"]["value"] == pytest.approx((TOKENS * 0.00002).mean())
    warnings = EvalReport(partly, tuple(QUESTIONS), None, None).warnings
    assert any("no price for rerank" in w and '[costs."rerank"]' in w for w in warnings)
    nothing = run_cost(record(TOKENS, prices={}))
    assert nothing is not None and nothing["per_question"] is None and nothing["total"] is None
    assert nothing["tokens"]["embed"]["input"] == int(TOKENS.sum())


def test_evaluate_keeps_the_prices_and_tells_of_unpriced_models() -> None:
    """10 embed tokens a question at 0.5 per 1,000: 0.005 a question."""
    run = rk.evaluate(GOLDEN, Found(), k=[1], resamples=50, costs={"embed": 0.5})
    assert run.record.manifest.costs == {"embed": {"input": 0.5, "output": 0.0}}
    cost = run_cost(run.record)
    assert cost is not None and cost["total"] == pytest.approx(COUNT * 0.005)
    assert not any(w.startswith("cost:") for w in run.warnings)
    unpriced = rk.evaluate(GOLDEN, Found(), k=[1], resamples=50)
    assert [w for w in unpriced.warnings if w.startswith("cost:")] == [
        "cost: no price for embed: its tokens count for nothing in the run's cost; "
        'add [costs."embed"] input = PRICE (per 1,000 tokens) to retrievalkit.toml'
    ]


def test_question_costs_leave_out_nothing_but_unpriced_models() -> None:
    costs = question_costs(record(TOKENS).outcomes, {"embed": {"input": 1.0, "output": 5.0}})
    assert costs is not None and costs.values is not None
    np.testing.assert_allclose(costs.values, TOKENS / 1000)


# --- compare ------------------------------------------------------------------------------


def test_compare_gives_the_paired_cost_ratio_a_worked_example() -> None:
    """Every question's tokens doubled: each resample's mean doubles too, so the ratio
    and both ends of its interval are exactly 2."""
    from retrievalkit.pipeline.gating.comparison import Side, compare_records
    from retrievalkit.render.comparison import comparison_document, render_comparison_markdown

    sides = [Side("before", record(TOKENS)), Side("after", record(TOKENS * 2))]
    compared = compare_records(sides, resamples=400, confidence=0.95, seed=5)
    (pair,) = comparison_document(compared)["pairs"]
    assert pair["cost"]["ratio"] == pytest.approx(2.0)
    assert pair["cost"]["ci"] == pytest.approx([2.0, 2.0])
    assert pair["cost"]["baseline"] == pytest.approx((TOKENS * 0.00002).mean())
    assert pair["cost"]["n"] == COUNT
    assert "### Cost" in render_comparison_markdown(compared) and "2.000x" in str(compared)
    without = compare_records(
        [Side("before", record(None)), Side("after", record(TOKENS))],
        resamples=400,
        confidence=0.95,
        seed=5,
    )
    assert without.pairs[0].cost is None


def test_the_cost_ratio_interval_agrees_with_scipys_paired_bootstrap() -> None:
    """The candidate's tokens are the baseline's times a noisy factor around 1.2: our
    paired percentile interval of mean(candidate) / mean(baseline) against scipy's
    (``paired=True``, other draws, 20,000 resamples)."""
    from scipy import stats

    from retrievalkit.pipeline.gating.cost import cost_change

    rng = np.random.default_rng(11)
    before = TOKENS * 0.00002
    after = before * rng.lognormal(np.log(1.2), 0.4, COUNT)
    change = cost_change(before, after, resamples=1000, confidence=0.95, seed=3)
    assert change.ratio == pytest.approx(after.mean() / before.mean())
    reference = stats.bootstrap(
        (before, after),
        lambda b, a: np.mean(a) / np.mean(b),
        paired=True,
        vectorized=False,
        method="percentile",
        n_resamples=20_000,
        random_state=2,
    ).confidence_interval
    assert change.ci is not None
    width = reference.high - reference.low
    assert abs(change.ci[0] - reference.low) < 0.1 * width
    assert abs(change.ci[1] - reference.high) < 0.1 * width


# --- the gate -----------------------------------------------------------------------------


def gate(candidate: ResultRecord, baseline: ResultRecord, **options: Any) -> Verdict:
    return compare_runs(
        candidate.outcomes,
        GOLDEN.content_hash,
        baseline,
        {"hit@1": 0.0},
        candidate_record=candidate,
        resamples=400,
        confidence=0.95,
        seed=5,
        **options,
    )


def test_a_uniform_increase_is_its_ratio_and_fails_past_the_threshold() -> None:
    """Tokens 3t against 2t: the ratio and its interval are exactly 1.5, past 1 + 0.1."""
    verdict = gate(record(TOKENS * 3), record(TOKENS * 2), cost_thresholds={"per_question": 0.1})
    (check,) = verdict.cost
    assert check.check == "cost.per_question" and check.ratio == pytest.approx(1.5)
    assert check.ci == pytest.approx((1.5, 1.5)) and check.regressed and check.significant
    assert verdict.regressed and verdict.cost_failures == (check,) and not verdict.failures
    passing = gate(record(TOKENS * 3), record(TOKENS * 2), cost_thresholds={"per_question": 0.6})
    assert not passing.regressed and not passing.cost[0].regressed
    # Without a cost threshold the gate is what it was.
    assert gate(record(TOKENS * 3), record(TOKENS * 2)).cost == ()


def test_require_significant_asks_the_whole_interval_above_the_threshold() -> None:
    """An observed ratio of 1.15 past 1 + 0.1 whose interval [1.05, 1.25] reaches below
    it: a regression, but not a significant one."""
    from retrievalkit.model.comparisons import CostChange
    from retrievalkit.pipeline.gating.cost import cost_checks

    change = CostChange("per_question", 0.001, 0.00115, 1.15, (1.05, 1.25), "paired bootstrap", 99)
    (loose,), _ = cost_checks(change, {"per_question": 0.1}, require_significant=False)
    (strict,), _ = cost_checks(change, {"per_question": 0.1}, require_significant=True)
    assert loose.regressed and not strict.regressed and strict.significant is False
    clear = attrs.evolve(change, ci=(1.11, 1.2))
    (checked,), _ = cost_checks(clear, {"per_question": 0.1}, require_significant=True)
    assert checked.regressed and checked.significant is True


def test_a_baseline_without_cost_skips_the_check_with_a_warning_never_a_failure() -> None:
    verdict = gate(record(TOKENS * 5), record(None), cost_thresholds={"per_question": 0.1})
    assert verdict.cost == () and not verdict.regressed and not verdict.unchecked
    (warning,) = [w for w in verdict.warnings if w.startswith("cost.")]
    assert "the baseline run recorded no tokens" in warning and "not a failure" in warning
    unpriced = gate(
        record(TOKENS * 5), record(TOKENS, prices={}), cost_thresholds={"per_question": 0.1}
    )
    assert not unpriced.regressed and any("have no price" in w for w in unpriced.warnings)
    text = "\n".join(verdict_lines(verdict, None, confidence=0.95))
    assert "cost (a warning, never a failure):" in text


def test_the_cost_verdict_reaches_the_json_junit_and_step_summary() -> None:
    dearer = record(TOKENS * 3)
    verdict = gate(dearer, record(TOKENS * 2), cost_thresholds={"per_question": 0.1})
    report = EvalReport(dearer, tuple(QUESTIONS), verdict, None)
    document = json.loads(to_json_text(summary(report)))
    (check,) = document["regression"]["cost"]
    assert check["check"] == "cost.per_question" and check["regressed"] is True
    assert check["ratio"] == pytest.approx(1.5) and check["threshold"] == 0.1
    cases = {
        case.get("name"): case
        for case in ElementTree.fromstring(junit_xml(report)).iter("testcase")
    }
    assert cases["cost.per_question"].find("failure") is not None
    markdown = step_summary_markdown(report)
    assert "cost.per_question: " in markdown and "ratio 1.500x" in markdown
    assert "allowed increase +10%" in markdown and "## Cost" in markdown


def test_thresholds_take_cost_and_refuse_what_is_not_a_statistic(tmp_path: Path) -> None:
    assert rk.Thresholds(cost={"per_question": 0.1}).cost == {"per_question": 0.1}
    with pytest.raises(InputError) as error:
        rk.Thresholds(cost={"total": 0.1})
    assert error.value.field == "cost.total"
    with pytest.raises(InputError, match="relative increase"):
        rk.Thresholds(cost={"per_question": -0.1})
    path = tmp_path / "retrievalkit.toml"
    path.write_text("[regression.cost]\nper_question = 0.25\n", encoding="utf-8")
    config = find_config(str(path))
    assert rk.Thresholds.from_config(config).cost == {"per_question": 0.25}
    given = rk.Thresholds.from_config(config, cost={"per_question": 0.5})
    assert given.cost == {"per_question": 0.5}
    path.write_text("\n[regression.cost]\nper_token = 0.2\n", encoding="utf-8")
    with pytest.raises(InputError) as error:
        find_config(str(path))
    assert error.value.field == "regression.cost.per_token" and error.value.line == 3


def test_the_python_api_gates_cost(tmp_path: Path) -> None:
    store = rk.open_store(f"sqlite:///{tmp_path / 'runs.sqlite3'}")
    baseline = record(TOKENS * 10)
    store.save(baseline)
    dearer = record(TOKENS * 13)
    verdict = rk.gate(dearer, store, rk.Thresholds(cost={"per_question": 0.2}))
    assert [item.check for item in verdict.cost_failures] == ["cost.per_question"]
    assert not rk.gate(dearer, store, rk.Thresholds(cost={"per_question": 0.5})).regressed
    # The stored baseline keeps its prices and tokens: read back, it is priced as it ran.
    stored = store.get(baseline.run_id)
    assert stored is not None and stored.manifest.costs == PRICES
    assert run_cost(stored) == run_cost(baseline)
