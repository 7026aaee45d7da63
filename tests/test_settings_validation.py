"""Generated settings: the Python API refuses exactly what the command line refuses, in
the same words, and a gate that has nothing it can compare fails instead of passing.

Each bad value is drawn from its class (cut-offs out of range, non-finite or negative
seconds, shares outside 0 to 1, metric names in any spelling), handed once to
`retrievalkit.evaluate` / `retrievalkit.gate` and once to `retrievalkit eval` on the
command line, and both must give `InputError` with one message (exit code 2).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import retrievalkit as rk
from retrievalkit.cli.main import main
from retrievalkit.errors import InputError
from retrievalkit.formats.limits import (
    MAX_CONCURRENCY,
    MAX_K,
    MAX_OVERFETCH,
    MAX_RESAMPLES,
    MAX_TIMEOUT,
)
from retrievalkit.metrics.scoring import ScoringOptions, score_run
from retrievalkit.model.records import ResultRecord
from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet
from retrievalkit.pipeline.engine.evaluator import Retrieval
from retrievalkit.pipeline.engine.record import build_record

QUESTIONS = [
    GoldenQuestion(id=f"q{i}", question=f"question {i}", expected=[f"d{i}"]) for i in range(12)
]
GOLDEN = GoldenQuestionSet(name="settings", questions=QUESTIONS)
SCORING = ScoringOptions(ks=(1, 3), resamples=100)
GENERATED = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


class Finder:
    identifier = "finder"

    def retrieve(self, question: str, limit: int) -> list[str]:
        return [f"d{question.split()[-1]}"]


non_finite = st.sampled_from([math.nan, math.inf, -math.inf])
bad_k = st.one_of(st.integers(max_value=0), st.integers(min_value=MAX_K + 1, max_value=10**12))
bad_seconds = st.one_of(
    non_finite,
    st.floats(max_value=0.0, allow_nan=False),
    st.floats(min_value=MAX_TIMEOUT * 1.001, allow_infinity=False),
)
bad_share = st.one_of(
    non_finite,
    st.floats(max_value=-1e-9, allow_nan=False, allow_infinity=False),
    st.floats(min_value=1.0 + 1e-9, allow_nan=False, allow_infinity=False),
)


def _count(maximum: int) -> st.SearchStrategy[int]:
    return st.one_of(
        st.integers(max_value=0), st.integers(min_value=maximum + 1, max_value=maximum * 1000)
    )


#: (keyword of evaluate, flag of eval, strategy of bad values, value -> flag text)
CASES: list[tuple[str, str, st.SearchStrategy[Any]]] = [
    ("k", "--k", st.lists(bad_k, min_size=1, max_size=3).map(tuple)),
    ("overfetch", "--overfetch", _count(MAX_OVERFETCH)),
    ("concurrency", "--concurrency", _count(MAX_CONCURRENCY)),
    ("resamples", "--resamples", _count(MAX_RESAMPLES)),
    ("timeout", "--timeout", bad_seconds),
    ("max_error_rate", "--max-error-rate", bad_share),
    ("confidence", "--confidence", st.one_of(bad_share, st.sampled_from([0.0, 1.0]))),
]


def _flag_text(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(str(item) for item in value)
    return repr(value) if isinstance(value, float) else str(value)


def _cli_refusal(flag: str, text: str, capsys: pytest.CaptureFixture[str]) -> str:
    try:
        code = main(
            ["eval", "--set", "demo", "--retriever", "bm25-demo", "--no-save", f"{flag}={text}"]
        )
    except SystemExit as ended:
        code = int(ended.code or 0)
    assert code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    prefix = f"argument {flag}: "
    assert prefix in error, error
    return error.split(prefix, 1)[1].removesuffix(" (see 'retrievalkit eval --help')")


@pytest.mark.parametrize(("keyword", "flag", "values"), CASES, ids=[c[0] for c in CASES])
def test_evaluate_refuses_what_eval_refuses_with_the_same_message(
    keyword: str, flag: str, values: st.SearchStrategy[Any], capsys: pytest.CaptureFixture[str]
) -> None:
    @GENERATED
    @given(value=values)
    def check(value: Any) -> None:
        with pytest.raises(InputError) as refused:
            rk.evaluate(GOLDEN, Finder(), git_commit=None, **{keyword: value})
        assert refused.value.field == flag
        # The command line reads the number from text; the API gets what it parsed.
        parsed = _parsed(value)
        if parsed != value and not (isinstance(value, float) and math.isnan(value)):
            with pytest.raises(InputError) as refused:
                rk.evaluate(GOLDEN, Finder(), git_commit=None, **{keyword: parsed})
        assert _cli_refusal(flag, _flag_text(value), capsys) == refused.value.detail

    check()


def _parsed(value: Any) -> Any:
    return float(repr(value)) if isinstance(value, float) else value


@GENERATED
@given(
    slices=st.text(min_size=1, max_size=8),
    k=st.one_of(st.text(max_size=4), st.just(()), st.just([True])),
)
def test_a_string_or_an_empty_list_where_a_list_belongs_is_refused(slices: str, k: Any) -> None:
    with pytest.raises(InputError, match="list of names"):
        rk.evaluate(GOLDEN, Finder(), git_commit=None, slices=slices)
    with pytest.raises(InputError) as refused:
        rk.evaluate(GOLDEN, Finder(), git_commit=None, k=k)
    assert refused.value.field == "--k"


def record(missed: Iterable[int] = (), golden: GoldenQuestionSet = GOLDEN) -> ResultRecord:
    rankings = [("x",) if i in set(missed) else (f"d{i}",) for i in range(len(golden.questions))]
    scores = score_run(golden.questions, [Retrieval(r, 1.0) for r in rankings], SCORING)
    return build_record(golden, "sys", "test", {}, scores, SCORING, overfetch=1)


def _store_with(baseline: ResultRecord) -> Any:
    store = rk.open_store("memory:")
    store.save(baseline)
    return store


def _spellings(name: str) -> st.SearchStrategy[str]:
    return st.tuples(
        st.lists(st.booleans(), min_size=len(name), max_size=len(name)),
        st.sampled_from(["", " ", "  "]),
        st.sampled_from(["", " ", "\t"]),
    ).map(
        lambda t: (
            t[1] + "".join(c.upper() if up else c for c, up in zip(name, t[0], strict=True)) + t[2]
        )
    )


@GENERATED
@given(name=st.sampled_from(["hit@1", "hit@3", "rr"]).flatmap(_spellings))
def test_a_metric_in_any_spelling_is_gated_as_the_metric_it_names(name: str) -> None:
    store = _store_with(record())
    verdict = rk.gate(record(missed=range(6)), store, {name: 0.0})
    assert verdict.regressed and [item.metric for item in verdict.failures] == [
        name.strip().lower()
    ]


@GENERATED
@given(
    name=st.text(min_size=1, max_size=12).filter(lambda n: _unknown(n)),
    drop=st.one_of(bad_share, st.just(0.0)),
)
def test_an_unknown_metric_or_a_bad_drop_is_refused_never_passed(name: str, drop: float) -> None:
    store = _store_with(record())
    with pytest.raises(InputError):
        rk.gate(record(missed=range(6)), store, {name: 0.0})
    if drop != 0.0:
        with pytest.raises(InputError):
            rk.gate(record(missed=range(6)), store, {"hit@1": drop})
        with pytest.raises(InputError):
            rk.Thresholds(slices={"form=GAP": {"hit@1": drop}})


def _unknown(name: str) -> bool:
    from retrievalkit.metrics.definitions import parse_metric

    try:
        parse_metric(name)
    except ValueError:
        return True
    return False


@GENERATED
@given(store=st.one_of(st.integers(), st.none(), st.lists(st.integers()), st.builds(object)))
def test_gate_refuses_what_is_not_a_store_and_opens_a_store_url(store: Any) -> None:
    with pytest.raises(InputError) as refused:
        rk.gate(record(), store)
    assert refused.value.field == "--store"
    verdict = rk.gate(record(), "memory:x")
    assert verdict.baseline_run_id is None  # an empty store: no baseline, no AttributeError


def test_a_gate_with_no_threshold_is_refused() -> None:
    with pytest.raises(InputError, match="nothing to check"):
        rk.gate(record(), _store_with(record()), {})


NO_ANSWER = GoldenQuestionSet(
    name="settings",
    questions=[
        GoldenQuestion(id=f"q{i}", question=f"question {i}", expected=[]) for i in range(12)
    ],
)


@GENERATED
@given(
    metric=st.sampled_from(["rr", "recall@3", "ndcg@3", "precision@1", "ap@3"]),
    missed=st.sets(st.integers(0, 11)),
)
def test_a_gate_whose_metric_is_undefined_on_every_question_fails(
    metric: str, missed: set[int]
) -> None:
    baseline, candidate = record(golden=NO_ANSWER), record(missed, golden=NO_ANSWER)
    verdict = rk.gate(candidate, _store_with(baseline), {metric: 0.0})
    assert verdict.regressed and verdict.checked == ()
    (reason,) = verdict.unchecked
    assert reason.startswith(f"{metric}: undefined on every question"), reason
    assert verdict.note is not None and "could not be checked" in verdict.note


@GENERATED
@given(deeper=st.integers(4, 50), missed=st.sets(st.integers(0, 11), max_size=3))
def test_a_gate_whose_metric_the_baseline_lacks_fails_even_beside_a_passing_one(
    deeper: int, missed: set[int]
) -> None:
    baseline = record()
    options = ScoringOptions(ks=(1, 3, deeper), resamples=100)
    rankings = [("x",) if i in missed else (f"d{i}",) for i in range(12)]
    scores = score_run(GOLDEN.questions, [Retrieval(r, 1.0) for r in rankings], options)
    candidate = build_record(GOLDEN, "sys", "test", {}, scores, options, overfetch=1)
    verdict = rk.gate(candidate, _store_with(baseline), {"hit@1": 1.0, f"hit@{deeper}": 0.0})
    assert verdict.regressed and not verdict.failures
    assert [item.metric for item in verdict.checked] == ["hit@1"]
    (reason,) = verdict.unchecked
    assert "missing from the baseline" in reason


def test_the_report_says_the_gate_failed_on_what_it_could_not_check() -> None:
    from retrievalkit.render.text import verdict_lines

    verdict = rk.gate(record(golden=NO_ANSWER), _store_with(record(golden=NO_ANSWER)), {"rr": 0})
    first, *rest = verdict_lines(verdict, None, confidence=0.95)
    assert first.startswith("GATE FAILED against baseline"), first
    assert "could not be checked" in first
    assert any(line.startswith("NOT checked") for line in rest)


def test_every_command_reads_a_shared_setting_with_the_same_check_as_eval() -> None:
    """A setting offered by several commands is parsed by one type everywhere, so that
    ``--confidence 1`` is refused by sweep and power as eval refuses it."""
    import argparse
    import importlib

    from retrievalkit.cli.commands.options import at_most
    from retrievalkit.formats.limits import MAX_K

    def types(command: str) -> dict[str, Any]:
        parser = argparse.ArgumentParser()
        importlib.import_module(f"retrievalkit.cli.commands.{command}").configure(parser)
        return {a.option_strings[0]: same(a.type) for a in parser._actions if a.option_strings}

    def same(check: Any) -> Any:
        """A check, and the bound it was made with (``at_most(N)`` makes a new one each time)."""
        cells = getattr(check, "__closure__", None) or ()
        return (getattr(check, "__qualname__", check), tuple(c.cell_contents for c in cells))

    flags = {flag for _, flag, _ in CASES}
    of_eval = types("evaluate")
    for command in ("compare", "sweep", "power", "fidelity", "judge", "judge_agreement"):
        mine = types(command)
        for flag in flags & set(mine):
            if (command, flag) in (("fidelity", "--k"), ("judge", "--k")):
                # one depth, not a list of cut-offs: bounded as a cut-off is
                assert mine[flag] == same(at_most(MAX_K)), (command, flag)
                continue
            assert mine[flag] == of_eval[flag], (command, flag)
