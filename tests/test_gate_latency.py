"""Latency as a gated measurement: the run's quantiles, compare's paired ratios, the
``latency.pNN`` checks of the gate, their thresholds, and their calibration.

Runs are built from chosen latencies (`Retrieval(ranking, latency_ms)`), never timed:
what is asserted follows from the numbers given, worked out in each test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import retrievalkit as rk
from retrievalkit.errors import InputError
from retrievalkit.formats.config import find_config
from retrievalkit.metrics.scoring import ScoringOptions, pair_questions, score_run
from retrievalkit.model.comparisons import LatencyChange
from retrievalkit.model.records import ResultRecord
from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet
from retrievalkit.pipeline.engine.evaluator import Retrieval
from retrievalkit.pipeline.engine.record import build_record
from retrievalkit.pipeline.gating.comparison import Side, compare_records
from retrievalkit.pipeline.gating.gate import Verdict, compare_runs
from retrievalkit.pipeline.gating.latency import (
    LATENCY_RESAMPLES,
    answered_latencies,
    latency_changes,
    latency_checks,
)
from retrievalkit.pipeline.gating.thresholds import Thresholds
from retrievalkit.render.ci_output import junit_xml
from retrievalkit.render.comparison import comparison_document, render_comparison_markdown
from retrievalkit.render.markdown import render_markdown
from retrievalkit.render.summary import EvalReport, summary, to_json_text
from retrievalkit.stats.latency import (
    RATIO_METHOD,
    order_statistic_ranks,
    paired_ratio,
    paired_ratios,
)

COUNT = 200
QUESTIONS = [
    GoldenQuestion(id=f"q{i:03d}", question=f"question {i}", expected=[f"d{i}"])
    for i in range(COUNT)
]
GOLDEN = GoldenQuestionSet(name="timed", questions=QUESTIONS)
SCORING = ScoringOptions(ks=(1, 3), resamples=200)
STATS: dict[str, Any] = {"resamples": 400, "confidence": 0.95, "seed": 5}
#: Whole milliseconds: times 1.5 or 2 they stay exact through the scorer's 3 decimals.
BASE = np.random.default_rng(3).lognormal(3.0, 0.5, COUNT).round() + 1.0


def record(latencies: Sequence[float], errored: Sequence[int] = ()) -> ResultRecord:
    """Every question found at rank 1 (``errored`` ones fail), each with its latency."""
    answers = [
        Retrieval((), float(ms), "boom") if i in errored else Retrieval((f"d{i}", "x"), float(ms))
        for i, ms in enumerate(latencies)
    ]
    scores = score_run(GOLDEN.questions, answers, SCORING)
    return build_record(GOLDEN, "sys", "test", {}, scores, SCORING, overfetch=1)


def gate(candidate: ResultRecord, baseline: ResultRecord, **options: Any) -> Verdict:
    return compare_runs(
        candidate.outcomes, GOLDEN.content_hash, baseline, {"hit@1": 0.0}, **{**STATS, **options}
    )


def test_without_a_latency_threshold_the_gate_is_what_it_was() -> None:
    baseline, slower = record(BASE), record(BASE * 3)
    verdict = gate(slower, baseline)
    assert verdict.latency == () and not verdict.regressed
    assert not gate(slower, baseline, latency_thresholds={}).latency


def test_a_uniform_slowdown_is_its_ratio_exactly_and_fails_past_the_threshold() -> None:
    """Every latency times 1.5: each quantile (linear interpolation) and each resampled
    quantile scale by 1.5 too, so the ratio and both ends of its interval are 1.5."""
    baseline, slower = record(BASE), record(BASE * 1.5)
    verdict = gate(slower, baseline, latency_thresholds={"p95": 0.2, "p50": 0.6})
    checks = {item.check: item for item in verdict.latency}
    assert set(checks) == {"latency.p50", "latency.p95"}
    p95 = checks["latency.p95"]
    assert p95.ratio == pytest.approx(1.5) and p95.ci == pytest.approx((1.5, 1.5))
    assert p95.baseline == pytest.approx(float(np.quantile(BASE, 0.95)))
    assert p95.regressed and p95.n == COUNT
    assert not checks["latency.p50"].regressed  # 1.5 is within 1 + 0.6
    assert verdict.regressed and verdict.latency_failures == (p95,)
    assert not verdict.failures  # no metric moved


def test_require_significant_asks_the_whole_interval_above_the_threshold() -> None:
    change = LatencyChange("p95", 40.0, 50.0, 1.25, (1.1, 1.4), "paired bootstrap", 300)
    loose, _ = latency_checks((change,), {"p95": 0.2}, require_significant=False, questions=300)
    strict, _ = latency_checks((change,), {"p95": 0.2}, require_significant=True, questions=300)
    assert loose[0].regressed and not strict[0].regressed and strict[0].significant is False
    clear = LatencyChange("p95", 40.0, 50.0, 1.3, (1.21, 1.4), "paired bootstrap", 300)
    (checked,), _ = latency_checks((clear,), {"p95": 0.2}, require_significant=True, questions=300)
    assert checked.regressed and checked.significant is True


def test_errored_questions_are_left_out_of_the_latency() -> None:
    """Question 0 errors in the candidate after 10^6 ms: left out, the p99 ratio is the
    one of the other 199 questions, both runs untouched otherwise (ratio 1)."""
    times = BASE.copy()
    times[0] = 1e6
    verdict = gate(record(times, errored=[0]), record(BASE), latency_thresholds={"p99": 0.0})
    (p99,) = verdict.latency
    assert p99.n == COUNT - 1 and p99.ratio == pytest.approx(1.0)
    assert not p99.regressed


def test_a_question_either_run_errored_on_is_left_out() -> None:
    """The baseline errs on question 1, the candidate on question 2: both are left out,
    the other 198 latencies kept in order."""
    baseline, candidate = record(BASE, errored=[1]), record(BASE * 2, errored=[2])
    before, after = answered_latencies(
        baseline.outcomes, candidate.outcomes, pair_questions(baseline.outcomes, candidate.outcomes)
    )
    kept = np.delete(BASE, [1, 2])
    assert np.array_equal(before, kept) and np.array_equal(after, kept * 2)


def test_the_changes_are_the_stats_paired_ratios_with_the_quantiles_of_each_run() -> None:
    """Each change is `paired_ratios` at the confidence, seed and resamples asked (at most
    LATENCY_RESAMPLES), beside each run's own quantile."""
    rng = np.random.default_rng(11)
    before = rng.lognormal(3.0, 0.5, 150)
    after = before * rng.lognormal(0.1, 0.3, 150)
    changes = latency_changes(before, after, resamples=300, confidence=0.9, seed=7)
    expected = paired_ratios(before, after, ("p50", "p95", "p99"), level=0.9, resamples=300, seed=7)
    assert [change.statistic for change in changes] == ["p50", "p95", "p99"]
    for change, q in zip(changes, (0.5, 0.95, 0.99), strict=True):
        found = expected[change.statistic]
        assert change.ratio == pytest.approx(found["ratio"])
        assert change.ci == pytest.approx(found["ci"])
        assert change.ci[0] < change.ci[1]
        assert change.baseline == pytest.approx(np.quantile(before, q))
        assert change.candidate == pytest.approx(np.quantile(after, q))
        assert change.method == RATIO_METHOD and change.n == 150
    capped = latency_changes(
        before, after, resamples=5 * LATENCY_RESAMPLES, confidence=0.95, seed=3
    )
    at_most = paired_ratios(
        before, after, ("p50", "p95", "p99"), resamples=LATENCY_RESAMPLES, seed=3
    )
    assert [change.ci for change in capped] == [
        pytest.approx(at_most[c.statistic]["ci"]) for c in capped
    ]


def test_a_threshold_without_a_change_is_unchecked_saying_why() -> None:
    thresholds = {"p50": 0.1, "p95": 0.2}
    checks, unchecked = latency_checks((), thresholds, require_significant=False, questions=0)
    assert checks == ()
    assert unchecked == (
        "latency.p50: no question is in both runs",
        "latency.p95: no question is in both runs",
    )
    _, unchecked = latency_checks((), thresholds, require_significant=False, questions=12)
    reason = "no question was answered (without an error) in both runs"
    assert unchecked == (f"latency.p50: {reason}", f"latency.p95: {reason}")
    zero = [LatencyChange(name, 0.0, 5.0, None, None, RATIO_METHOD, 9) for name in ("p50", "p95")]
    _, unchecked = latency_checks(tuple(zero), thresholds, require_significant=False, questions=9)
    assert [line.split(":")[0] for line in unchecked] == ["latency.p50", "latency.p95"]
    assert unchecked[1] == (
        "latency.p95: the baseline's p95 latency is 0 ms (did it record latency? a run built "
        "from outcomes without latency_ms has none)"
    )


def test_a_check_carries_its_change_unchanged() -> None:
    change = LatencyChange("p99", 40.0, 52.0, 1.3, (1.1, 1.4), RATIO_METHOD, 300)
    (check,), _ = latency_checks((change,), {"p99": 0.2}, require_significant=False, questions=300)
    assert check.ci == change.ci and isinstance(check.ci, tuple)
    assert (check.statistic, check.baseline, check.candidate, check.ratio, check.n) == (
        "p99",
        40.0,
        52.0,
        1.3,
        300,
    )


def test_a_baseline_without_latency_cannot_be_checked_and_fails_the_gate() -> None:
    verdict = gate(record(BASE), record(np.zeros(COUNT)), latency_thresholds={"p95": 0.2})
    assert verdict.latency == ()
    assert verdict.unchecked and verdict.unchecked[0].startswith("latency.p95: ")
    assert verdict.regressed and verdict.note is not None and "1 of 2 thresholds" in verdict.note


def test_the_verdict_reaches_the_json_junit_and_step_summary() -> None:
    baseline, slower = record(BASE), record(BASE * 1.5)
    verdict = gate(slower, baseline, latency_thresholds={"p95": 0.2})
    report = EvalReport(slower, tuple(QUESTIONS), verdict, None)
    document = json.loads(to_json_text(summary(report)))
    (check,) = document["regression"]["latency"]
    assert check["check"] == "latency.p95" and check["regressed"] is True
    assert check["ratio"] == pytest.approx(1.5) and check["threshold"] == 0.2
    cases = {
        case.get("name"): case
        for case in ElementTree.fromstring(junit_xml(report)).iter("testcase")
    }
    assert cases["latency.p95"].find("failure") is not None
    assert cases["hit@1"].find("failure") is None
    markdown = render_markdown(report)
    assert "latency.p95: " in markdown and "ratio 1.500x" in markdown
    assert "allowed increase +20%" in markdown and "REGRESSION against" in markdown


def test_the_run_reports_its_quantiles_with_order_statistic_intervals() -> None:
    """p95 of 200 latencies: its interval is the order statistics at the binomial ranks."""
    run = record(BASE, errored=[5])
    kept = np.sort(np.delete(BASE, 5))
    latency = summary(EvalReport(run, tuple(QUESTIONS), None, None))["latency"]
    low, high = order_statistic_ranks(len(kept), 0.95, 0.95)
    assert latency["p95"]["value"] == pytest.approx(float(np.quantile(kept, 0.95)))
    assert latency["p95"]["ci"] == [kept[low - 1], kept[high - 1]]
    assert latency["p95"]["method"] == "order-statistic (binomial)"
    assert latency["mean"]["method"] == "percentile bootstrap"
    assert set(latency) >= {"p50", "p95", "p99", "mean"} and latency["questions"] == COUNT - 1
    assert "## Latency" in render_markdown(EvalReport(run, tuple(QUESTIONS), None, None))


def test_compare_shows_the_paired_ratio_of_each_quantile() -> None:
    sides = [Side("before", record(BASE)), Side("after", record(BASE * 2))]
    compared = compare_records(sides, **STATS)
    document = comparison_document(compared)
    rows = {row["statistic"]: row for row in document["pairs"][0]["latency"]}
    assert set(rows) == {"p50", "p95", "p99"}
    for row in rows.values():
        assert row["ratio"] == pytest.approx(2.0) and row["ci"] == pytest.approx([2.0, 2.0])
    assert "### Latency" in render_comparison_markdown(compared)
    assert "2.000x" in str(compared)


def test_thresholds_take_latency_and_refuse_what_is_not_a_statistic() -> None:
    assert Thresholds(latency={"p95": 0.2}).latency == {"p95": 0.2}
    assert Thresholds().latency == {}
    with pytest.raises(InputError) as error:
        Thresholds(latency={"p97": 0.2})
    assert error.value.field == "latency.p97"
    with pytest.raises(InputError, match="relative increase"):
        Thresholds(latency={"p95": -0.1})
    with pytest.raises(InputError, match="relative increase"):
        Thresholds(latency={"p95": True})


def test_the_configuration_takes_regression_latency(tmp_path: Path) -> None:
    path = tmp_path / "retrievalkit.toml"
    path.write_text("[regression.latency]\np95 = 0.20\np99 = 1\n", encoding="utf-8")
    config = find_config(str(path))
    assert Thresholds.from_config(config).latency == {"p95": 0.2, "p99": 1.0}
    assert Thresholds.from_config(config, {"p95": 0.5}).latency == {"p95": 0.5, "p99": 1.0}
    path.write_text("[regression.latency]\np90 = 0.2\n", encoding="utf-8")
    with pytest.raises(InputError) as error:
        find_config(str(path))
    assert error.value.field == "regression.latency.p90" and error.value.source == str(path)


def test_the_python_api_gates_latency(tmp_path: Path) -> None:
    store = rk.open_store(f"sqlite:///{tmp_path / 'runs.sqlite3'}")
    store.save(record(BASE))
    candidate = record(BASE * 1.3)
    verdict = rk.gate(candidate, store, rk.Thresholds(latency={"p95": 0.2}))
    assert [item.check for item in verdict.latency_failures] == ["latency.p95"]
    assert not rk.gate(candidate, store, rk.Thresholds(latency={"p95": 0.5})).regressed


def _timed(questions: np.ndarray, rng: np.random.Generator, slowdown: float = 1.0) -> np.ndarray:
    """One run's latencies of these questions: each question's own time, 15 % lognormal
    timing noise, and 1 % of questions hit by a 3x pause (independently in each run)."""
    noise = rng.lognormal(0.0, 0.15, len(questions))
    pauses = np.where(rng.random(len(questions)) < 0.01, 3.0, 1.0)
    return slowdown * questions * noise * pauses


def test_latency_gate_calibration() -> None:
    """Seeded simulation of 200 baseline/candidate pairs of 300 questions drawn from a
    recorded-like distribution (lognormal body, heavy tail): at ``p95 = 0.2`` (the
    default, observed-ratio decision), an identical rerun passes in >= 95 % and a real
    30 % slowdown fails in >= 80 %. The decision without require_significant reads only
    the observed ratio, so a few trials confirm 200 resamples decide as the default
    2,000 do."""
    rng = np.random.default_rng(38)
    body = np.concatenate([rng.lognormal(3.0, 0.4, 900), rng.lognormal(4.2, 0.3, 100)])
    trials, passed, caught = 200, 0, 0
    for trial in range(trials):
        questions = rng.choice(body, 300)
        baseline = _timed(questions, rng)
        for slowdown in (1.0, 1.3):
            candidate = _timed(questions, rng, slowdown)
            resamples = 2000 if trial < 3 else 200
            changes = latency_changes(
                baseline, candidate, resamples=resamples, confidence=0.95, seed=trial
            )
            (check,), _ = latency_checks(
                changes, {"p95": 0.2}, require_significant=False, questions=300
            )
            if trial < 3:
                fewer = latency_changes(baseline, candidate, resamples=200, confidence=0.95, seed=1)
                assert (
                    latency_checks(fewer, {"p95": 0.2}, require_significant=False, questions=300)[
                        0
                    ][0].regressed
                    == check.regressed
                )
            if slowdown == 1.0:
                passed += not check.regressed
            else:
                caught += check.regressed
    assert passed / trials >= 0.95
    assert caught / trials >= 0.80


def test_order_statistic_ranks_at_a_hundred_thousand_questions() -> None:
    """Against scipy.stats.binom at n = 10^5 (the ranks by the old definition: the
    largest l with B(l - 1) <= 2.5 %, the smallest u with B(u - 1) >= 97.5 %)."""
    from scipy import stats

    n = 100_000
    cdf = stats.binom.cdf(np.arange(n + 1), n, 0.99)
    lower = int(np.nonzero(cdf <= 0.025)[0].max()) + 1
    upper = int(np.nonzero(cdf >= 0.975)[0].min()) + 1
    assert order_statistic_ranks(n, 0.99) == (lower, upper)


def test_paired_ratio_refuses_an_unknown_statistic() -> None:
    with pytest.raises(ValueError, match="unknown latency statistic"):
        paired_ratio(BASE, BASE, "p90")


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    return subprocess.run(
        [sys.executable, "-m", "retrievalkit", *args],
        cwd=cwd,
        env={**clean, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def test_eval_takes_max_latency_increase_and_refuses_a_bad_one(tmp_path: Path) -> None:
    """The real command line, on a replayed run file: the check is named in the JSON and
    the JUnit report (its outcome depends on real timing, so only its presence is asserted),
    and a statistic that is not one is exit 2 naming the option."""
    questions = [
        {"id": f"q{i}", "question": f"question {i}", "expected": [f"d{i}"]} for i in range(8)
    ]
    (tmp_path / "golden.jsonl").write_text(
        "".join(json.dumps(q) + "\n" for q in questions), encoding="utf-8"
    )
    (tmp_path / "run.txt").write_text(
        "".join(f"q{i} Q0 d{i} 1 9 tag\n" for i in range(8)), encoding="utf-8"
    )
    (tmp_path / "retrievalkit.toml").write_text(
        '[retrievers.prod]\nplugin = "run"\npath = "run.txt"\nqueries = "golden.jsonl"\n',
        encoding="utf-8",
    )
    first = _cli("eval", "--set", "golden.jsonl", "--retriever", "prod", "-q", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    second = _cli(
        "eval", "--set", "golden.jsonl", "--retriever", "prod", "-q", "--format", "json",
        "--max-latency-increase", "p95=100", "--max-latency-increase", "p50=100",
        "--junit-xml", "gate.xml", cwd=tmp_path,
    )  # fmt: skip
    assert second.returncode == 0, second.stderr
    document = json.loads(second.stdout)
    assert set(document["latency"]) >= {"p50", "p95", "p99", "mean"}
    named = [item["check"] for item in document["regression"]["latency"]] + [
        reason.partition(":")[0] for reason in document["regression"]["unchecked"]
    ]
    assert sorted(named) == ["latency.p50", "latency.p95"]
    cases = [
        case.get("name", "") for case in ElementTree.parse(tmp_path / "gate.xml").iter("testcase")
    ]
    assert any(name.startswith("latency.p95") for name in cases)
    bad = _cli(
        "eval", "--set", "golden.jsonl", "--retriever", "prod", "-q",
        "--max-latency-increase", "p97=0.2", cwd=tmp_path,
    )  # fmt: skip
    assert bad.returncode == 2
    assert "--max-latency-increase" in bad.stderr and "p97" in bad.stderr
