"""The two record-rate thresholds reach the gate under their own names, never swapped.

``max_top1_drop`` gates ``hit@1`` and ``max_top3_drop`` gates ``hit@3``. Every check
here gives them different values, on a candidate whose two rates drop by different
amounts (hit@1 by 0.30, hit@3 by 0.10, counted by hand below), so that swapping the two
settings, in the config file or on the command line, changes which metric fails.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import RunCli

from retrievalkit.errors import InputError
from retrievalkit.formats.config import RegressionConfig, find_config

QUESTIONS = 20
#: Candidate: questions 1-4 find their document at rank 2 (a top-1 miss, a top-3 hit),
#: questions 5-6 do not find it at all; the baseline finds every one at rank 1.
#: hit@1 falls from 20/20 to 14/20 (a drop of 0.30); hit@3 from 20/20 to 18/20 (0.10).
SECOND_AT_RANK_TWO = range(1, 5)
MISSED = range(5, 7)
TOP1_DROP, TOP3_DROP = 0.30, 0.10


def _golden(tmp_path: Path) -> Path:
    path = tmp_path / "golden.jsonl"
    lines = [
        json.dumps({"id": f"q{i:02d}", "question": f"question number {i}", "expected": [f"d{i}"]})
        for i in range(1, QUESTIONS + 1)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _write_run(tmp_path: Path, *, candidate: bool) -> None:
    lines = []
    for i in range(1, QUESTIONS + 1):
        ranking = [f"d{i}", "other-a", "other-b", "other-c"]
        if candidate and i in SECOND_AT_RANK_TWO:
            ranking = ["other-a", f"d{i}", "other-b", "other-c"]
        elif candidate and i in MISSED:
            ranking = ["other-a", "other-b", "other-c", "other-d"]
        for rank, doc in enumerate(ranking, start=1):
            lines.append(f"q{i:02d} Q0 {doc} {rank} {10 - rank} sys")
    (tmp_path / "run.trec").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _config(tmp_path: Path, regression: str = "") -> None:
    text = (
        '[retrievers.sys]\nplugin = "run"\npath = "run.trec"\nqueries = "golden.jsonl"\n\n'
        f'[store]\nurl = "jsonl:///{tmp_path}/runs.jsonl"\n\n{regression}'
    )
    (tmp_path / "retrievalkit.toml").write_text(text, encoding="utf-8")


def _gate(cli: RunCli, tmp_path: Path, *flags: str) -> dict[str, Any]:
    """Save a baseline run, then gate the candidate against it; the verdict as JSON."""
    _golden(tmp_path)
    _write_run(tmp_path, candidate=False)
    base = cli("eval", "--set", "golden.jsonl", "--retriever", "sys", "--format", "json")
    assert base.returncode == 0, base.stderr
    _write_run(tmp_path, candidate=True)
    done = cli(
        "eval", "--set", "golden.jsonl", "--retriever", "sys", "--format", "json",
        "--fail-on-regression", "--no-save", *flags,
    )  # fmt: skip
    summary = json.loads(done.stdout)
    verdict: dict[str, Any] = summary["regression"]
    assert done.returncode == (1 if verdict["regressed"] else 0), done.stderr
    return verdict


def _by_metric(verdict: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["metric"]: item for item in verdict["checked"]}


def test_the_hand_counted_drops_are_what_the_gate_sees(cli: RunCli, tmp_path: Path) -> None:
    _config(tmp_path, "[regression]\nmax_top1_drop = 1.0\nmax_top3_drop = 1.0\n")
    checked = _by_metric(_gate(cli, tmp_path))
    assert checked["hit@1"]["difference"] == pytest.approx(-TOP1_DROP)
    assert checked["hit@3"]["difference"] == pytest.approx(-TOP3_DROP)


@pytest.mark.parametrize(
    ("top1", "top3", "failing"),
    [(0.4, 0.05, ["hit@3"]), (0.05, 0.4, ["hit@1"])],
)
def test_config_thresholds_gate_their_own_rate(
    cli: RunCli, tmp_path: Path, top1: float, top3: float, failing: list[str]
) -> None:
    _config(tmp_path, f"[regression]\nmax_top1_drop = {top1}\nmax_top3_drop = {top3}\n")
    verdict = _gate(cli, tmp_path)
    assert [item["metric"] for item in verdict["failures"]] == failing
    checked = _by_metric(verdict)
    assert (checked["hit@1"]["threshold"], checked["hit@3"]["threshold"]) == (top1, top3)


@pytest.mark.parametrize(
    ("top1", "top3", "failing"), [("0.4", "0.05", ["hit@3"]), ("0.05", "0.4", ["hit@1"])]
)
def test_flags_gate_their_own_rate_and_override_the_config(
    cli: RunCli, tmp_path: Path, top1: str, top3: str, failing: list[str]
) -> None:
    # The config says the opposite of the flags: the flags win, each for its own rate.
    _config(tmp_path, f"[regression]\nmax_top1_drop = {top3}\nmax_top3_drop = {top1}\n")
    verdict = _gate(cli, tmp_path, "--max-top1-drop", top1, "--max-top3-drop", top3)
    assert [item["metric"] for item in verdict["failures"]] == failing
    checked = _by_metric(verdict)
    assert (checked["hit@1"]["threshold"], checked["hit@3"]["threshold"]) == (
        float(top1),
        float(top3),
    )


def test_one_flag_changes_only_its_own_rate(cli: RunCli, tmp_path: Path) -> None:
    _config(tmp_path, "[regression]\nmax_top1_drop = 0.5\nmax_top3_drop = 0.5\n")
    checked = _by_metric(_gate(cli, tmp_path, "--max-top3-drop", "0.01"))
    assert (checked["hit@1"]["threshold"], checked["hit@3"]["threshold"]) == (0.5, 0.01)


def test_the_config_file_maps_each_setting_to_its_metric(tmp_path: Path) -> None:
    path = tmp_path / "retrievalkit.toml"
    path.write_text(
        "[regression]\nmax_top1_drop = 0.125\nmax_top3_drop = 0.25\nmax_error_rate = 0.5\n"
        '[regression.metrics]\n"ndcg@10" = 0.0625\n',
        encoding="utf-8",
    )
    regression = find_config(str(path)).regression
    assert regression.thresholds == {"hit@1": 0.125, "hit@3": 0.25, "ndcg@10": 0.0625}
    assert regression.max_error_rate == 0.5


# --- the [regression] table, read in process: every key, its defaults and its errors ---------


def regression_of(tmp_path: Path, text: str) -> RegressionConfig:
    path = tmp_path / "retrievalkit.toml"
    path.write_text(text, encoding="utf-8")
    return find_config(str(path)).regression


def refusal(tmp_path: Path, text: str) -> InputError:
    with pytest.raises(InputError) as refused:
        regression_of(tmp_path, text)
    return refused.value


def test_an_empty_regression_table_sets_nothing(tmp_path: Path) -> None:
    regression = regression_of(tmp_path, "[regression]\n")
    assert regression.thresholds == {}
    assert regression.max_error_rate is None
    assert regression.require_significant is False
    assert regression.slices == {}


def test_every_regression_key_lands_where_it_belongs(tmp_path: Path) -> None:
    regression = regression_of(
        tmp_path,
        "[regression]\nmax_top3_drop = 0.25\nrequire_significant = true\nmax_error_rate = 0\n"
        '[regression.metrics]\n"rr" = 1\n"hit@1" = 0.5\n'
        '[regression.slices."form=GAP"]\n"hit@3" = 0.75\n',
    )
    assert regression.thresholds == {"hit@3": 0.25, "rr": 1.0, "hit@1": 0.5}
    assert regression.max_error_rate == 0.0
    assert regression.require_significant is True
    assert regression.slices == {"form=GAP": {"hit@3": 0.75}}


@pytest.mark.parametrize(
    ("text", "field", "line"),
    [
        ("[regression]\nmax_top1_drop = 1.5\n", "regression.max_top1_drop", 2),
        ("[regression]\nmax_top3_drop = -0.1\n", "regression.max_top3_drop", 2),
        ("[regression]\nmax_error_rate = 2\n", "regression.max_error_rate", 2),
        ("[regression]\nmax_top1_drop = true\n", "regression.max_top1_drop", 2),
        ('[regression]\nmax_top3_drop = "0.1"\n', "regression.max_top3_drop", 2),
        ('[regression.metrics]\n"ndcg@10" = 1.01\n', "regression.metrics.ndcg@10", 2),
        ('[regression.slices."form=GAP"]\n"hit@3" = 7\n', 'regression.slices."form=GAP".hit@3', 2),
    ],
)
def test_a_drop_outside_0_to_1_names_its_key_and_line(
    tmp_path: Path, text: str, field: str, line: int
) -> None:
    refused = refusal(tmp_path, text)
    assert refused.field == field
    assert refused.line == line
    assert "from 0 to 1" in refused.detail


def test_the_ends_of_0_to_1_are_allowed(tmp_path: Path) -> None:
    regression = regression_of(tmp_path, "[regression]\nmax_top1_drop = 0\nmax_top3_drop = 1\n")
    assert regression.thresholds == {"hit@1": 0.0, "hit@3": 1.0}


@pytest.mark.parametrize("metric", ["hit@0", "hit@x", "hit", "rr@3", "nosuch@3", "hit@-1"])
def test_an_unknown_metric_is_refused(tmp_path: Path, metric: str) -> None:
    refused = refusal(tmp_path, f'[regression.metrics]\n"{metric}" = 0.1\n')
    assert refused.field == f"regression.metrics.{metric}"


@pytest.mark.parametrize("metric", ["hit@1", "recall@10", "rr", "ndcg@3", "ap@100"])
def test_known_metrics_are_accepted(tmp_path: Path, metric: str) -> None:
    regression = regression_of(tmp_path, f'[regression.metrics]\n"{metric}" = 0.1\n')
    assert regression.thresholds == {metric: 0.1}


def test_metrics_must_be_a_table(tmp_path: Path) -> None:
    assert refusal(tmp_path, "[regression]\nmetrics = 0.1\n").field == "regression.metrics"


def test_require_significant_must_be_a_boolean(tmp_path: Path) -> None:
    refused = refusal(tmp_path, "[regression]\nrequire_significant = 1\n")
    assert refused.field == "regression.require_significant"


@pytest.mark.parametrize("name", ["form=", "=GAP", "form", " = "])
def test_a_slice_is_named_field_equals_value(tmp_path: Path, name: str) -> None:
    refused = refusal(tmp_path, f'[regression.slices."{name}"]\n"hit@3" = 0.1\n')
    assert refused.field == f'regression.slices."{name}"'
    assert refused.hint == 'e.g. [regression.slices."hard_class=near-duplicate"] with "hit@3" = 0.1'


@pytest.mark.parametrize(
    "body", ['[regression.slices."form=GAP"]\n', '[regression.slices]\n"form=GAP" = 0.1\n']
)
def test_a_slice_holds_a_table_of_metrics(tmp_path: Path, body: str) -> None:
    assert refusal(tmp_path, body).field == 'regression.slices."form=GAP"'


def test_a_slice_name_splits_at_its_first_equals_sign(tmp_path: Path) -> None:
    regression = regression_of(tmp_path, '[regression.slices." topic = a=b "]\n"hit@1" = 0.1\n')
    assert regression.slices == {"topic=a=b": {"hit@1": 0.1}}


@pytest.mark.parametrize(("written", "name"), [("HIT@3", "hit@3"), (" NDCG@10 ", "ndcg@10")])
def test_a_metric_is_keyed_by_its_canonical_name(tmp_path: Path, written: str, name: str) -> None:
    body = (
        f'[regression.metrics]\n"{written}" = 0.1\n'
        f'[regression.slices."form=GAP"]\n"{written}" = 0.2\n'
    )
    regression = regression_of(tmp_path, body)
    assert regression.thresholds == {name: 0.1}
    assert regression.slices == {"form=GAP": {name: 0.2}}


@pytest.mark.parametrize(
    ("body", "field", "metric"),
    [
        (
            '[regression.metrics]\n"hit@3" = 0.1\n"HIT@3" = 0.2\n',
            "regression.metrics.HIT@3",
            "hit@3",
        ),
        (
            '[regression]\nmax_top3_drop = 0.1\n[regression.metrics]\n"Hit@3" = 0.2\n',
            "regression.metrics.Hit@3",
            "hit@3",
        ),
        (  # a rate's own setting after the metric it names: the setting is the repeat
            '[regression]\nmetrics = { "hit@1" = 0.2 }\nmax_top1_drop = 0.1\n',
            "regression.max_top1_drop",
            "hit@1",
        ),
        (
            '[regression]\nmetrics = { "HIT@3" = 0.2 }\nmax_top3_drop = 0.1\n',
            "regression.max_top3_drop",
            "hit@3",
        ),
        (
            '[regression.slices."form=GAP"]\n"rr" = 0.1\n"RR" = 0.2\n',
            'regression.slices."form=GAP".RR',
            "rr",
        ),
    ],
)
def test_a_metric_given_twice_is_refused(
    tmp_path: Path, body: str, field: str, metric: str
) -> None:
    refused = refusal(tmp_path, body)
    assert refused.field == field
    assert f"{metric} is given a threshold twice" in str(refused)


def test_a_threshold_written_in_capitals_is_checked(cli: RunCli, tmp_path: Path) -> None:
    # Keyed "HIT@1 " as written, it matched no computed metric and was never checked.
    _config(tmp_path, '[regression]\nmax_top3_drop = 1.0\n[regression.metrics]\n"HIT@1 " = 0.05\n')
    verdict = _gate(cli, tmp_path)
    assert [item["metric"] for item in verdict["failures"]] == ["hit@1"]
    assert _by_metric(verdict)["hit@1"]["threshold"] == 0.05
