"""The command line, run as a real subprocess: outputs, stores, regressions and exit codes."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

import by_hand
import pytest

import retrievalkit
from retrievalkit.demo import DEMO_CORPUS

if TYPE_CHECKING:
    from conftest import PluginSites, RunCli

DEMO = ("eval", "--set", "demo", "--retriever", "bm25-demo")
DEFAULT_STORE = Path(".retrievalkit") / "results.sqlite3"


def stored_run_ids(path: Path) -> list[str]:
    """Run ids in an SQLite store, read with plain sqlite3 rather than through retrievalkit."""
    connection = sqlite3.connect(path)
    try:
        return [row[0] for row in connection.execute("SELECT run_id FROM runs ORDER BY seq")]
    finally:
        connection.close()


def json_out(stdout: str) -> Any:
    return json.loads(stdout)  # fails unless stdout is exactly one JSON document


def test_eval_demo_saves_to_the_default_store(cli: RunCli, tmp_path: Path) -> None:
    result = cli(*DEMO, "--quiet")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / DEFAULT_STORE).is_file()
    assert len(stored_run_ids(tmp_path / DEFAULT_STORE)) == 1
    assert "hit@1" in result.stdout


def strip_volatile(summary: dict[str, Any]) -> dict[str, Any]:
    """What differs between two runs of the same inputs by design: ids, times, latency,
    and the machine's load averages (the rest of its record is the same)."""
    stable = {
        key: value
        for key, value in summary.items()
        if key
        not in ("run_id", "latency_ms", "latency", "regression", "saved_to", "not_saved_reason")
    }
    stable["manifest"] = {k: v for k, v in summary["manifest"].items() if k != "created_at"}
    machine = stable["manifest"]["machine"] = dict(summary["manifest"]["machine"])
    del machine["load_at_start"], machine["load_at_end"]
    return stable


def canonical(document: Any) -> bytes:
    return json.dumps(document, sort_keys=True, indent=2).encode("utf-8")


def test_two_runs_write_identical_summaries(cli: RunCli, tmp_path: Path) -> None:
    first = cli(*DEMO, "--output-dir", "out1", "--format", "json")
    second = cli(*DEMO, "--output-dir", "out2", "--format", "json")
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    one = json.loads((tmp_path / "out1" / "summary.json").read_text(encoding="utf-8"))
    two = json.loads((tmp_path / "out2" / "summary.json").read_text(encoding="utf-8"))
    assert one["run_id"] != two["run_id"]
    assert canonical(strip_volatile(one)) == canonical(strip_volatile(two))
    assert one == json_out(first.stdout)

    assert one["regression"] is None
    verdict = two["regression"]
    assert verdict["regressed"] is False
    assert verdict["baseline_run_id"] == one["run_id"]

    for directory in ("out1", "out2"):
        assert (tmp_path / directory / "report.md").read_text(encoding="utf-8").strip()
    lines = [
        [
            {k: v for k, v in json.loads(line).items() if k != "latency_ms"}
            for line in (tmp_path / d / "per_question.jsonl").read_text("utf-8").splitlines()
        ]
        for d in ("out1", "out2")
    ]
    assert lines[0] == lines[1]
    assert len(lines[0]) == one["questions"]
    assert stored_run_ids(tmp_path / DEFAULT_STORE) == [one["run_id"], two["run_id"]]


def test_json_output_follows_the_contract(cli: RunCli) -> None:
    result = cli(*DEMO, "--format", "json")
    assert result.returncode == 0, result.stderr
    summary = json_out(result.stdout)
    for key in (
        "run_id", "set", "retriever", "questions", "errored", "metrics", "slices", "record",
        "regression", "manifest",
    ):  # fmt: skip
        assert key in summary
    assert summary["set"] == "demo"
    assert summary["retriever"] == "bm25-demo"
    assert summary["questions"] == 75
    assert summary["errored"] == 0
    for name in ("hit@1", "hit@3", "hit@5", "hit@10", "recall@10", "ndcg@10", "ap@10", "rr"):
        value = summary["metrics"][name]
        assert set(value) == {"mean", "ci", "n"}
        low, high = value["ci"]
        assert low <= value["mean"] <= high
    assert summary["metrics"]["hit@1"]["n"] == 75
    rankings = by_hand.demo_rankings()
    answerable = sum(1 for question, _ in rankings if question.expected)
    assert answerable < 75  # the demo set has no-answer questions: recall leaves them out
    assert summary["metrics"]["recall@1"]["n"] == answerable
    for k in (1, 3, 10):
        assert summary["metrics"][f"hit@{k}"]["mean"] == pytest.approx(
            by_hand.hit_rate(rankings, k)
        )
    assert {"MATCH", "GAP"} <= set(summary["slices"]["form"])
    assert "normal" in summary["slices"]["hard_class"]
    record = summary["record"]
    assert record["set"] == "demo"
    assert record["model"] == "bm25-demo"
    assert record["grader"] == "retrieval_hit_rate"
    assert record["pass_rate"] == summary["metrics"]["hit@1"]["mean"]
    assert record["mean_score"] == summary["metrics"]["hit@3"]["mean"]
    assert summary["regression"] is None
    manifest = summary["manifest"]
    assert manifest["set_name"] == "demo"
    assert len(manifest["set_hash"]) == 64
    assert manifest["retrievalkit_version"] == retrievalkit.__version__
    assert manifest["ks"] == [1, 3, 5, 10]


def write_weak_config(directory: Path, extra: str = "") -> None:
    (directory / "retrievalkit.toml").write_text(
        "[retrievers.weak]\n"
        'plugin = "bm25"\n'
        f"corpus = {json.dumps(str(DEMO_CORPUS))}\n"
        'doc_id_separator = "#"\n' + extra,
        encoding="utf-8",
    )


WEAK = ("eval", "--set", "demo", "--retriever", "weak", "--format", "json")


@pytest.fixture
def weak_baseline(cli: RunCli, tmp_path: Path) -> dict[str, Any]:
    """A stored run of 'weak' with stemming, then 'weak' reconfigured without it."""
    write_weak_config(tmp_path)
    first = cli(*WEAK)
    assert first.returncode == 0, first.stderr
    write_weak_config(tmp_path, 'stemmer = ""\n')  # the same name, a worse analyzer
    return json_out(first.stdout)


def test_a_regression_fails_with_the_flag(
    cli: RunCli, tmp_path: Path, weak_baseline: dict[str, Any]
) -> None:
    result = cli(*WEAK, "--fail-on-regression")
    assert result.returncode == 1, result.stderr
    summary = json_out(result.stdout)
    verdict = summary["regression"]
    assert verdict["regressed"] is True
    assert verdict["baseline_run_id"] == weak_baseline["run_id"]
    failed = {item["metric"]: item for item in verdict["failures"]}
    assert "hit@1" in failed
    assert failed["hit@1"]["baseline"] == weak_baseline["metrics"]["hit@1"]["mean"]
    assert failed["hit@1"]["candidate"] < failed["hit@1"]["baseline"]
    assert summary["record"]["model"] == "weak"


def test_a_regression_without_the_flag_exits_0_and_says_so(
    cli: RunCli, weak_baseline: dict[str, Any]
) -> None:
    result = cli(*WEAK)
    assert result.returncode == 0, result.stderr
    assert "regression" in result.stderr
    assert json_out(result.stdout)["regression"]["regressed"] is True


def test_thresholds_and_an_explicit_baseline(
    cli: RunCli, tmp_path: Path, weak_baseline: dict[str, Any]
) -> None:
    lenient = cli(*WEAK, "--fail-on-regression", "--max-top1-drop", "0.5", "--max-top3-drop", "0.5")
    assert lenient.returncode == 0, lenient.stderr
    assert json_out(lenient.stdout)["regression"]["regressed"] is False
    pinned = cli(*WEAK, "--baseline", weak_baseline["run_id"], "--no-save")
    assert pinned.returncode == 0, pinned.stderr
    assert json_out(pinned.stdout)["regression"]["baseline_run_id"] == weak_baseline["run_id"]
    unknown = cli(*WEAK, "--baseline", "20000101T000000Z-00000000")
    assert unknown.returncode == 2
    assert "--baseline" in unknown.stderr


def test_a_retriever_failing_everywhere_exits_3_and_saves_nothing(
    cli: RunCli, plugin_sites: PluginSites, tmp_path: Path
) -> None:
    result = cli(
        "eval", "--set", "demo", "--retriever", "tiny-failing", "--format", "json",
        sites=[plugin_sites.main],
    )  # fmt: skip
    assert result.returncode == 3, result.stderr
    assert "ConnectionError: backend unreachable" in result.stderr
    assert "not saved" in result.stderr
    summary = json_out(result.stdout)
    assert summary["errored"] == summary["questions"] == 75
    assert summary["saved_to"] is None
    assert summary["metrics"]["hit@1"]["mean"] == 0.0
    assert stored_run_ids(tmp_path / DEFAULT_STORE) == []


def test_an_allowed_error_rate_saves_the_run(
    cli: RunCli, plugin_sites: PluginSites, tmp_path: Path
) -> None:
    result = cli(
        "eval", "--set", "tiny", "--retriever", "tiny-failing", "--max-error-rate", "1",
        "--format", "json", sites=[plugin_sites.main],
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = json_out(result.stdout)
    assert summary["errored"] == 4
    assert summary["metrics"]["hit@1"]["mean"] == 0.0  # even the no-answer question misses
    assert stored_run_ids(tmp_path / DEFAULT_STORE) == [summary["run_id"]]


@pytest.mark.parametrize(
    ("arguments", "mentions"),
    [
        ((*DEMO, "--k", "0"), "--k"),
        ((*DEMO, "--k", "1,x"), "--k"),
        ((*DEMO, "--format", "yaml"), "--format"),
        ((*DEMO, "--concurrency", "0"), "--concurrency"),
        (("eval", "--set", "missing.jsonl", "--retriever", "bm25-demo"), "missing.jsonl"),
        (("eval", "--set", "nope", "--retriever", "bm25-demo"), "unknown set 'nope'"),
        (("eval", "--retriever", "bm25-demo"), "--set"),
        (("frobnicate",), "frobnicate"),
        (("show", "no-such-run"), "no-such-run"),
        ((*DEMO, "--store", "nosuch:///x"), "nosuch"),
        ((*DEMO, "--config", "absent.toml"), "absent.toml"),
    ],
)
def test_bad_usage_exits_2(cli: RunCli, arguments: tuple[str, ...], mentions: str) -> None:
    result = cli(*arguments)
    assert result.returncode == 2, result.stderr
    assert mentions in result.stderr
    assert result.stderr.startswith("retrievalkit: error:")


def test_a_bad_set_file_names_file_line_and_field(cli: RunCli, tmp_path: Path) -> None:
    good = {"id": "q1", "question": "How do I get a library card?", "expected": ["d1"]}
    bad = {"id": "q2", "question": "Late fees?", "form": "SIDEWAYS", "expected": []}
    (tmp_path / "golden.jsonl").write_text(
        json.dumps(good) + "\n" + json.dumps(bad) + "\n", encoding="utf-8"
    )
    for command in (
        ("validate", "--set", "golden.jsonl"),
        ("eval", "--set", "golden.jsonl", "--retriever", "bm25-demo"),
    ):
        result = cli(*command)
        assert result.returncode == 2
        assert "golden.jsonl, line 2, field 'form'" in result.stderr
    assert not (tmp_path / DEFAULT_STORE).exists() or stored_run_ids(tmp_path / DEFAULT_STORE) == []


def test_a_bad_config_names_file_and_key(cli: RunCli, tmp_path: Path) -> None:
    (tmp_path / "retrievalkit.toml").write_text("[regression]\nmax_top1_dorp = 0.1\n", "utf-8")
    result = cli(*DEMO)
    assert result.returncode == 2
    assert "retrievalkit.toml" in result.stderr
    assert "regression.max_top1_dorp" in result.stderr


def test_validate_the_demo(cli: RunCli) -> None:
    result = cli("validate", "--set", "demo")
    assert result.returncode == 0, result.stderr
    assert "75" in result.stdout
    as_json = cli("validate", "--set", "demo", "--format", "json")
    assert as_json.returncode == 0, as_json.stderr
    assert isinstance(json_out(as_json.stdout), dict)


def test_history_and_show(cli: RunCli, tmp_path: Path) -> None:
    runs = [json_out(cli(*DEMO, "--format", "json").stdout)["run_id"] for _ in range(2)]
    assert stored_run_ids(tmp_path / DEFAULT_STORE) == runs
    history = cli("history", "--set", "demo", "--retriever", "bm25-demo", "--format", "json")
    assert history.returncode == 0, history.stderr
    rows = json_out(history.stdout)
    assert [row["run_id"] for row in rows] == list(reversed(runs))
    assert rows[0]["questions"] == 75 and rows[0]["errored"] == 0

    table = cli("history", "--set", "demo", "--retriever", "bm25-demo")
    assert table.returncode == 0, table.stderr
    assert runs[0] in table.stdout and runs[1] in table.stdout

    shown = cli("show", runs[0], "--format", "json")
    assert shown.returncode == 0, shown.stderr
    stored = json_out(shown.stdout)
    assert stored["run_id"] == runs[0]
    assert stored["record"]["pass_rate"] == rows[1]["hit@1"]
    assert cli("show", runs[1]).returncode == 0

    other = cli("history", "--set", "demo", "--retriever", "nobody", "--format", "json")
    assert other.returncode == 0 and json_out(other.stdout) == []


def test_version(cli: RunCli) -> None:
    result = cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"retrievalkit {retrievalkit.__version__}"


def test_no_command_prints_help_and_exits_2(cli: RunCli) -> None:
    result = cli()
    assert result.returncode == 2
    assert "eval" in result.stdout
