"""`retrievalkit drift` and `rk.drift`: query logs, weighted intervals, the gate, the records."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

import retrievalkit as rk
from retrievalkit.errors import InputError
from retrievalkit.formats.query_log import read_log, sample_log
from retrievalkit.stats.weighted import mean_intervals, weighted_mean

# --- the query log -----------------------------------------------------------------------


def test_a_json_lines_log_merges_duplicates_with_their_counts(tmp_path: Path) -> None:
    path = tmp_path / "queries.jsonl"
    path.write_text(
        '{"query": "opening hours", "count": 3, "ts": "2026-01-01"}\n'
        "\n"
        '{"query": " late fees ", "id": "q2"}\n'
        '{"question": "opening hours"}\n',
        encoding="utf-8",
    )
    log = read_log(path)
    assert log.queries == ("opening hours", "late fees")
    assert log.weights.tolist() == [4.0, 1.0]
    assert log.lines == 5


@pytest.mark.parametrize(("suffix", "delimiter"), [(".csv", ","), (".tsv", "\t")])
def test_a_table_log_needs_a_query_column(tmp_path: Path, suffix: str, delimiter: str) -> None:
    path = tmp_path / f"queries{suffix}"
    path.write_text(
        f"ts{delimiter}Query{delimiter}count\n1{delimiter}wifi{delimiter}2\n2{delimiter}wifi{delimiter}\n",
        encoding="utf-8",
    )
    log = read_log(path)
    assert log.queries == ("wifi",) and log.weights.tolist() == [3.0]
    path.write_text(f"text{delimiter}count\nwifi{delimiter}2\n", encoding="utf-8")
    with pytest.raises(InputError, match=rf"queries\{suffix}, line 1: the header names no 'query'"):
        read_log(path)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b'{"query": "a"}\n{"query": \n', r"line 2: not valid JSON"),
        (b'{"query": "a"}\n["a"]\n', r"line 2: each line must be a JSON object"),
        (b'{"q": "a"}\n', r"line 1: has no 'query' field"),
        (b'{"query": "a", "count": 0}\n', r"line 1, field 'count': count must be a whole"),
        (b'{"query": "a", "count": 1.5}\n', r"line 1, field 'count'"),
        (b'{"query": "   "}\n', r"line 1, field 'query': the query must be a non-empty"),
        (b'{"query": "a"}\n{"query": "\xff"}\n', r"line 2"),
        (b"\n\n", r"holds no query"),
    ],
)
def test_a_bad_log_names_its_file_and_line(tmp_path: Path, content: bytes, expected: str) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(content)
    with pytest.raises(InputError, match=expected) as caught:
        read_log(path)
    assert "log.jsonl" in str(caught.value)


def test_a_sample_is_weighted_and_reproducible(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text(
        '{"query": "popular", "count": 900}\n'
        + "".join(f'{{"query": "rare {index}"}}\n' for index in range(100)),
        encoding="utf-8",
    )
    log = read_log(path)
    first, again, other = (sample_log(log, 200, seed) for seed in (1, 1, 2))
    assert first.queries == again.queries and first.weights.tolist() == again.weights.tolist()
    assert (first.queries, first.weights.tolist()) != (other.queries, other.weights.tolist())
    assert first.weights.sum() == 200
    # 90 % of the traffic is one query: its share of the sample is near 0.9 (binomial sd 0.02).
    share = first.weights[first.queries.index("popular")] / 200
    assert 0.8 < share < 0.97
    assert sample_log(log, 5000, 1) is log


# --- weighted intervals --------------------------------------------------------------------


def test_weighted_means_are_those_of_the_expanded_log() -> None:
    rng = np.random.default_rng(3)
    values = rng.normal(size=40)
    weights = rng.integers(1, 6, size=40).astype(float)
    expanded = np.repeat(values, weights.astype(int))
    assert weighted_mean(values, weights) == pytest.approx(expanded.mean())


def test_the_weighted_interval_covers_the_traffic_mean_about_95_percent_of_the_time() -> None:
    """A seeded simulation: logs of 60 distinct queries drawn from a population whose
    traffic-weighted mean is known; the 95 % interval should cover it in 88-99 % of 200."""
    rng = np.random.default_rng(11)
    covered = 0
    trials = 200
    for trial in range(trials):
        values = rng.beta(2, 5, size=60)
        weights = rng.integers(1, 4, size=60).astype(float)
        truth = 2 / 7
        _, ci = mean_intervals({"x": values}, weights, resamples=400, seed=trial)["x"]
        assert ci is not None
        covered += ci[0] <= truth <= ci[1]
    assert 0.88 * trials <= covered <= 0.99 * trials


# --- rk.drift -------------------------------------------------------------------------------


class Listed:
    """A retriever answering from a table (query -> ids), with scores."""

    def __init__(self, answers: dict[str, Sequence[str]], name: str) -> None:
        self.answers = answers
        self.name = name

    def retrieve(self, question: str, limit: int) -> list[str]:
        return list(self.answers.get(question, ()))[:limit]

    def retrieve_scored(self, question: str, limit: int) -> list[tuple[str, float]]:
        ids = self.retrieve(question, limit)
        return [(doc, float(len(ids) - rank)) for rank, doc in enumerate(ids)]


def _log(tmp_path: Path) -> Path:
    path = tmp_path / "log.jsonl"
    path.write_text(
        '{"query": "a", "count": 3}\n{"query": "b"}\n{"query": "c<script>"}\n', encoding="utf-8"
    )
    return path


def test_drift_against_itself_is_no_drift(tmp_path: Path) -> None:
    answers = {"a": ["d1", "d2", "d3"], "b": ["d2", "d4"], "c<script>": []}
    result = rk.drift(
        _log(tmp_path),
        Listed(answers, "one"),
        Listed(answers, "one"),
        save=False,
        min_rbo=0.99,
        resamples=200,
    )
    data = result.to_dict()
    assert data["rbo"]["value"] == pytest.approx(1.0)
    assert data["overlap@10"]["value"] == pytest.approx(1.0)
    assert data["zero_result_rate"]["baseline"] == pytest.approx(1 / 5)
    assert data["zero_result_rate"]["difference"] == 0.0
    assert set(data["qpp"]) == {"nqc@10", "wig@10"}
    assert result.passed and result.gated


def test_the_gate_fails_on_lost_results_and_low_overlap(tmp_path: Path) -> None:
    baseline = {"a": ["d1", "d2", "d3"], "b": ["d2", "d4"], "c<script>": ["d9"]}
    candidate = {"a": ["d3", "d7"], "b": [], "c<script>": ["d9"]}
    result = rk.drift(
        _log(tmp_path),
        Listed(candidate, "new"),
        Listed(baseline, "old"),
        save=False,
        min_rbo=0.9,
        max_zero_result_increase=0.1,
        resamples=200,
    )
    data = result.to_dict()
    # b (weight 1 of 5) lost every result: the zero-result rate rose by 0.2.
    assert data["zero_result_rate"]["difference"] == pytest.approx(0.2)
    assert len(result.failures) == 2
    assert result.failures[0].startswith("rbo = ")
    # The moved queries are ordered by RBO, lowest first; "b" scores 0.
    assert result.moved[0]["query"] == "b" and result.moved[0]["rbo"] == 0.0
    low, high = data["rbo"]["ci"]
    assert low <= data["rbo"]["value"] <= high


def test_a_failing_retriever_is_counted_not_lost(tmp_path: Path) -> None:
    class Broken:
        def retrieve(self, question: str, limit: int) -> list[str]:
            if question == "b":
                raise RuntimeError("index offline")
            return ["d1"]

    result = rk.drift(_log(tmp_path), Broken(), Listed({"a": ["d1"]}, "x"), save=False)
    assert result.measures["errors"] == {"baseline": 0, "candidate": 1}
    assert result.measures["qpp"] is None  # the candidate gives no scores


@pytest.mark.parametrize("scheme", ["sqlite", "jsonl"])
def test_a_drift_record_is_kept_beside_the_runs(tmp_path: Path, scheme: str) -> None:
    url = f"{scheme}:///" + str(tmp_path / f"store.{'sqlite3' if scheme == 'sqlite' else 'jsonl'}")
    run = rk.evaluate("demo", "bm25-demo", resamples=50, git_commit=None)
    store = rk.open_store(url)
    store.save(run.record)
    answers = {"a": ["d1", "d2"], "b": ["d2"], "c<script>": ["d3"]}
    first = rk.drift(_log(tmp_path), Listed(answers, "x"), Listed(answers, "x"), store=url)
    second = rk.drift(_log(tmp_path), Listed({}, "y"), Listed(answers, "x"), store=url)
    kept = rk.drift_records(url)
    assert [record.drift_id for record in kept] == [second.drift_id, first.drift_id]
    assert kept[1].measures["rbo"] == first.measures["rbo"]
    again = rk.open_store(url)
    assert [record.run_id for record in again.all_runs()] == [run.run_id]
    if scheme == "jsonl":
        lines = (tmp_path / "store.jsonl").read_text(encoding="utf-8").splitlines()
        assert len(lines) == 1 and json.loads(lines[0])["run_id"] == run.run_id
    else:
        with sqlite3.connect(tmp_path / "store.sqlite3") as connection:
            assert connection.execute("SELECT count(*) FROM runs").fetchone() == (1,)


def test_a_store_without_drift_records_has_none(tmp_path: Path) -> None:
    assert rk.drift_records("sqlite:///" + str(tmp_path / "empty.sqlite3")) == []
    assert rk.drift_records("jsonl:///" + str(tmp_path / "empty.jsonl")) == []


def test_the_drift_section_of_the_configuration(tmp_path: Path) -> None:
    config = tmp_path / "retrievalkit.toml"
    config.write_text("[drift]\nmin_rbo = 0.99\nk = 2\n", encoding="utf-8")
    baseline = {"a": ["d1", "d2", "d3"], "b": ["d2"], "c<script>": ["d3"]}
    candidate = {"a": ["d2", "d1", "d5"], "b": ["d2"], "c<script>": ["d3"]}
    result = rk.drift(
        _log(tmp_path), Listed(candidate, "n"), Listed(baseline, "o"), save=False, config=config
    )
    assert "overlap@2" in result.to_dict()
    assert result.failures and "--min-rbo 0.99" in result.failures[0]
    config.write_text("[drift]\nmin_rbo = 2\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"line 2, field 'drift.min_rbo'"):
        rk.load_config(config)


# --- the command line ------------------------------------------------------------------------


def test_the_command_gates_and_writes_json_and_junit(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "log.jsonl"
    log.write_text(
        '{"query": "When is Baby Rhyme Time?", "count": 4}\n{"query": "wifi"}\n', encoding="utf-8"
    )
    found = cli(
        "drift", "--log", str(log), "--retriever", "bm25-demo", "--against", "bm25-demo",
        "--format", "json", "--fail-on-drift", "--min-rbo", "0.9", "--resamples", "100",
        "--junit-xml", "drift.xml",
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    data = json.loads(found.stdout)
    assert {"rbo", "overlap@10", "jaccard@10", "zero_result_rate", "latency", "qpp"} <= set(data)
    assert set(data["rbo"]) >= {"value", "ci"}
    assert set(data["zero_result_rate"]) == {"baseline", "candidate", "difference", "ci"}
    assert set(data["latency"]) == {"p50", "p95", "p99", "mean"}
    for entry in data["latency"].values():
        assert {"baseline", "candidate", "difference", "ci", "ratio", "ratio_ci"} <= set(entry)
        assert entry["difference"] == pytest.approx(entry["candidate"] - entry["baseline"])
        assert entry["ci"][0] <= entry["ci"][1]
    assert "<failure" not in (tmp_path / "drift.xml").read_text(encoding="utf-8")
    assert rk.drift_records(f"sqlite:///{tmp_path}/.retrievalkit/results.sqlite3")


def test_the_command_exits_1_past_a_limit_and_2_on_a_bad_log(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    config = tmp_path / "retrievalkit.toml"
    config.write_text(
        '[retrievers.tuned]\nplugin = "bm25"\n'
        f"corpus = {json.dumps(str(Path(rk.__file__).parent / 'demo' / 'corpus.jsonl'))}\n"
        "k1 = 1.6\nb = 0.9\n",
        encoding="utf-8",
    )
    found = cli(
        "drift", "--set", "demo", "--retriever", "tuned", "--against", "bm25-demo",
        "--fail-on-drift", "--min-rbo", "0.95", "--no-save", "--resamples", "100",
        "--junit-xml", "drift.xml", "--format", "markdown",
    )  # fmt: skip
    assert found.returncode == 1, found.stderr
    assert "Drift gate: failed" in found.stdout
    assert "<failure" in (tmp_path / "drift.xml").read_text(encoding="utf-8")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"query": "a"}\n{"query": 3}\n', encoding="utf-8")
    found = cli("drift", "--log", str(bad), "--retriever", "bm25-demo", "--against", "bm25-demo")
    assert found.returncode == 2
    assert "bad.jsonl, line 2, field 'query'" in found.stderr


# --- a stored run as the baseline ------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["sqlite", "jsonl"])
def test_against_run_replays_the_stored_rankings(tmp_path: Path, scheme: str) -> None:
    """BM25 is deterministic, so a stored run of bm25-demo and bm25-demo asked again give
    the same top 10: overlap@10 and jaccard@10 against the replay equal those against the
    live retriever. The run stores no retrieval scores, so there are no predictors; a log
    query that is not a question of the run is left out and counted."""
    url = f"{scheme}:///" + str(tmp_path / f"store.{'sqlite3' if scheme == 'sqlite' else 'jsonl'}")
    run = rk.evaluate("demo", "bm25-demo", resamples=50, git_commit=None)
    rk.open_store(url).save(run.record)
    golden = rk.load_set("demo")
    texts = [question.question for question in golden.questions[:12]]
    log = tmp_path / "log.jsonl"
    log.write_text(
        "".join(
            json.dumps({"query": text, "count": 1 + i % 4}) + "\n" for i, text in enumerate(texts)
        )
        + json.dumps({"query": "not a question of the demo set", "count": 50})
        + "\n",
        encoding="utf-8",
    )
    options = {"resamples": 100, "save": False, "store": url}
    replay = rk.drift(log, "bm25-demo", against_run=run.run_id, **options)
    live = rk.drift(log, "bm25-demo", "bm25-demo", **options)
    assert replay.baseline == f"run {run.run_id} (bm25-demo)"
    assert replay.queries == 12 and replay.settings["left_out"] == 1
    assert live.queries == 13
    assert replay.logged == sum(1 + i % 4 for i in range(12))
    assert replay.measures["overlap@10"]["value"] == pytest.approx(1.0)
    assert replay.measures["jaccard@10"]["value"] == pytest.approx(1.0)
    assert replay.measures["qpp"] is None
    # against another candidate, the replay and the live baseline agree on the top 10
    config = tmp_path / "retrievalkit.toml"
    config.write_text(
        '[retrievers.tuned]\nplugin = "bm25"\n'
        f"corpus = {json.dumps(str(Path(rk.__file__).parent / 'demo' / 'corpus.jsonl'))}\n"
        "k1 = 1.6\nb = 0.9\n",
        encoding="utf-8",
    )
    moved_replay = rk.drift(log, "tuned", against_run=run.run_id, config=config, **options)
    inside = tmp_path / "inside.jsonl"
    inside.write_text("".join(log.read_text(encoding="utf-8").splitlines(True)[:12]), "utf-8")
    moved_live = rk.drift(inside, "tuned", "bm25-demo", config=config, **options)
    for name in ("overlap@10", "jaccard@10"):
        assert moved_replay.measures[name]["value"] < 1.0
        found, expected = moved_replay.measures[name], moved_live.measures[name]
        assert found["value"] == pytest.approx(expected["value"])
        assert found["ci"] == pytest.approx(expected["ci"])


def test_against_run_refuses_what_it_cannot_replay(tmp_path: Path) -> None:
    url = "sqlite:///" + str(tmp_path / "store.sqlite3")
    run = rk.evaluate("demo", "bm25-demo", resamples=50, git_commit=None)
    rk.open_store(url).save(run.record)
    log = _log(tmp_path)
    with pytest.raises(InputError, match="no run nope") as missing:
        rk.drift(log, "bm25-demo", against_run="nope", store=url, save=False)
    assert missing.value.field == "--against-run"
    with pytest.raises(InputError, match="exactly one"):
        rk.drift(log, "bm25-demo", "bm25-demo", against_run=run.run_id, store=url, save=False)
    with pytest.raises(InputError, match="exactly one"):
        rk.drift(log, "bm25-demo", store=url, save=False)
    other = tmp_path / "other.jsonl"
    other.write_text('{"query": "nothing the demo set asks"}\n', encoding="utf-8")
    with pytest.raises(InputError, match="is a question of run"):
        rk.drift(other, "bm25-demo", against_run=run.run_id, store=url, save=False)


def test_the_command_replays_a_stored_run_and_refuses_two_baselines(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    evaluated = cli("eval", "--set", "demo", "--retriever", "bm25-demo", "--format", "json")
    assert evaluated.returncode == 0, evaluated.stderr
    run_id = json.loads(evaluated.stdout)["run_id"]
    found = cli(
        "drift", "--set", "demo", "--retriever", "bm25-demo", "--against-run", run_id,
        "--format", "json", "--resamples", "50", "--no-save",
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    data = json.loads(found.stdout)
    assert data["baseline"] == f"run {run_id} (bm25-demo)"
    assert data["settings"]["against_run"] == run_id and data["settings"]["left_out"] == 0
    assert data["overlap@10"]["value"] == pytest.approx(1.0)
    missing = cli("drift", "--set", "demo", "--retriever", "bm25-demo", "--against-run", "nope")
    assert missing.returncode == 2 and "--against-run" in missing.stderr
    both = cli(
        "drift", "--set", "demo", "--retriever", "bm25-demo", "--against", "bm25-demo",
        "--against-run", run_id,
    )  # fmt: skip
    assert both.returncode == 2 and "not allowed with" in both.stderr
