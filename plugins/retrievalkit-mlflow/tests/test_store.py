"""The MLflow store against MLflow's real tracking stores (SQLite and files) in tmp_path."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
import retrievalkit as rk
from hypothesis import given, settings
from hypothesis import strategies as st
from mlflow import MlflowClient
from retrievalkit.plugin_api import InputError, StoreError, dump_columns, dump_summary
from retrievalkit.testing import check_store

from retrievalkit_mlflow import MlflowStore, parse_target
from retrievalkit_mlflow.names import Names, metric_name

REPO = Path(__file__).resolve().parents[3]
DOCS = REPO / "docs" / "mlflow.md"


def sqlite_url(folder: Path, experiment: str = "retrievalkit") -> str:
    return f"mlflow+sqlite:///{folder / 'mlflow.db'}?experiment={experiment}"


def client_for(store: MlflowStore) -> MlflowClient:
    return MlflowClient(tracking_uri=store.target.tracking_uri)


def mlflow_run(store: MlflowStore, run_id: str) -> Any:
    found = client_for(store).search_runs(
        [store.experiment_id], f"tags.`retrievalkit.run_id` = '{run_id}'"
    )
    assert len(found) == 1
    return found[0]


def cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "retrievalkit", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_COLOR": "1", **env},
        check=False,
    )


@pytest.mark.parametrize("backend", ["sqlite", "file"])
def test_the_store_contract_holds_on_both_local_backends(backend: str, tmp_path: Path) -> None:
    """Whole runs, newest first, keys apart, duplicates refused, reopening, pins, deletion."""
    url = sqlite_url(tmp_path) if backend == "sqlite" else f"mlflow+file:///{tmp_path / 'mlruns'}"
    store = check_store(url)
    assert isinstance(store, MlflowStore)
    # What the check saved is real MLflow data: another client sees the runs.
    runs = client_for(store).search_runs([store.experiment_id])
    assert runs and all(run.data.tags["retrievalkit.grader"] for run in runs)


def test_a_run_is_logged_with_intervals_slices_parameters_tags_and_report(
    tmp_path: Path,
) -> None:
    store = MlflowStore.from_url(sqlite_url(tmp_path))
    run = rk.evaluate("demo", "bm25-demo", git_commit="0123abc", resamples=200)
    record = run.record
    store.save(record)
    logged = mlflow_run(store, record.run_id)
    metrics, params, tags = logged.data.metrics, logged.data.params, logged.data.tags
    assert logged.info.status == "FINISHED"
    for name, value in record.metrics.items():
        key = metric_name(name)
        if value.mean is None:
            assert key not in metrics
            continue
        assert metrics[key] == pytest.approx(value.mean)
        assert metrics[f"{key}.n"] == value.n
        if value.ci is not None:
            assert (metrics[f"{key}.lo"], metrics[f"{key}.hi"]) == pytest.approx(value.ci)
            assert metrics[f"{key}.lo"] <= metrics[key] <= metrics[f"{key}.hi"]
    assert "ndcg_at_10.lo" in metrics and "hit_at_3" in metrics
    # Slices: every defined mean of every slice, under FIELD/LABEL/METRIC.
    slice_count = 0
    for field, labels in record.slices.items():
        for label, table in labels.items():
            for name, value in table.items():
                key = f"{field}/{label}/{metric_name(name)}"
                if value.mean is None:
                    assert key not in metrics
                else:
                    slice_count += 1
                    assert metrics[key] == pytest.approx(value.mean)
    assert slice_count > 0 and any(key.startswith("form/GAP/") for key in metrics)
    assert metrics["pass_rate"] == pytest.approx(record.pass_rate)
    assert metrics["questions"] == len(record.outcomes)
    # The manifest as parameters.
    manifest = record.manifest
    assert params["retriever"] == manifest.retriever == "bm25-demo"
    assert params["set_hash"] == manifest.set_hash
    assert params["seed"] == str(manifest.seed)
    assert json.loads(params["ks"]) == list(manifest.ks)
    assert params["retriever_options_hash"] == manifest.retriever_options_hash
    # Tags to find and group runs by.
    assert tags["retrievalkit.set"] == "demo"
    assert tags["retrievalkit.retriever"] == "bm25-demo"
    assert tags["mlflow.source.git.commit"] == "0123abc"
    # The report files, and the stored record they are read back from.
    artifacts = {
        item.path for item in client_for(store).list_artifacts(logged.info.run_id, "report")
    }
    assert artifacts == {"report/summary.json", "report/per_question.jsonl", "report/report.md"}
    folder = client_for(store).download_artifacts(logged.info.run_id, "report", str(tmp_path))
    summary = json.loads((Path(folder) / "summary.json").read_text())
    assert summary["metrics"]["ndcg@10"]["mean"] == pytest.approx(record.metrics["ndcg@10"].mean)
    lines = (Path(folder) / "per_question.jsonl").read_text().splitlines()
    assert [json.loads(line)["question_id"] for line in lines] == [
        outcome.question_id for outcome in record.outcomes
    ]
    assert record.run_id in (Path(folder) / "report.md").read_text()
    # Read back whole, outcomes included, by a store opened afresh.
    again = MlflowStore.from_url(sqlite_url(tmp_path)).get(record.run_id)
    assert again is not None
    assert dump_summary(again) == dump_summary(record)
    assert dump_columns(again) == dump_columns(record)
    assert [o.ranking for o in again.outcomes] == [o.ranking for o in record.outcomes]


def test_eval_gates_against_the_baseline_read_back_from_mlflow(tmp_path: Path) -> None:
    """Two `eval`s: the second finds the first in MLflow and tags its verdict."""
    url = sqlite_url(tmp_path, "gate")
    first = cli("eval", "--set", "demo", "--retriever", "bm25-demo", "--store", url,
                "--format", "json", "--quiet", cwd=tmp_path)  # fmt: skip
    assert first.returncode == 0, first.stderr
    second = cli("eval", "--set", "demo", "--retriever", "bm25-demo", "--store", url,
                 "--format", "json", "--quiet", "--output-dir", "out", cwd=tmp_path)  # fmt: skip
    assert second.returncode == 0, second.stderr
    first_id = json.loads(first.stdout)["run_id"]
    second_id = json.loads(second.stdout)["run_id"]
    store = MlflowStore.from_url(url)
    assert [run.run_id for run in store.runs("demo", "bm25-demo")] == [second_id, first_id]
    tags = mlflow_run(store, second_id).data.tags
    assert tags["retrievalkit.verdict"] == "passed"
    assert tags["retrievalkit.baseline_run_id"] == first_id
    assert tags["retrievalkit.verdict.failures"] == ""
    assert mlflow_run(store, first_id).data.tags["retrievalkit.verdict"] == "not compared"
    # The report logged after the verdict is the one --output-dir wrote, bar the questions'
    # texts (not in a stored run): the same metrics, the same comparison.
    logged = client_for(store).download_artifacts(
        mlflow_run(store, second_id).info.run_id, "report/summary.json", str(tmp_path)
    )
    mine = json.loads((tmp_path / "out" / "summary.json").read_text())
    theirs = json.loads(Path(logged).read_text())
    assert theirs["metrics"] == mine["metrics"]
    assert theirs["regression"] == mine["regression"]
    assert theirs["regression"]["baseline_run_id"] == first_id
    # history and show read the runs from MLflow.
    history = cli("history", "--set", "demo", "--retriever", "bm25-demo", "--store", url,
                  cwd=tmp_path)  # fmt: skip
    assert history.returncode == 0, history.stderr
    assert first_id in history.stdout and second_id in history.stdout


class Silent:
    """A retriever that answers nothing."""

    identifier = "silent"

    def retrieve(self, question: str, limit: int) -> list[str]:
        return []


def test_a_regression_is_tagged_with_the_metrics_that_dropped(tmp_path: Path) -> None:
    store = MlflowStore.from_url(sqlite_url(tmp_path))
    golden = rk.load_set("demo")
    good = rk.evaluate(golden, "bm25-demo", git_commit=None)
    store.save(good.record)
    worse_record = rk.evaluate(golden, Silent(), name="bm25-demo", git_commit=None).record
    verdict = rk.gate(worse_record, store)
    store.save(worse_record)
    store.save_verdict(worse_record, verdict)
    tags = mlflow_run(store, worse_record.run_id).data.tags
    assert verdict.regressed
    assert tags["retrievalkit.verdict"] == "regressed"
    assert {"hit@1", "hit@3"} <= set(tags["retrievalkit.verdict.failures"].split(", "))


def test_secrets_reach_no_parameter_tag_or_artifact(tmp_path: Path) -> None:
    store = MlflowStore.from_url(sqlite_url(tmp_path))
    record = rk.evaluate("demo", "bm25-demo", git_commit=None).record
    manifest = attrs.evolve(
        record.manifest,
        retriever_options={
            "url": "https://reader:pw-in-url-7f3@search.example.com/kb",
            "api_key": "sk-live-4b2f9",
            "credentials": {"user": "me", "pass": "nested-91c"},
            "index": "kb",
        },
        extra={"token": "tok-77aa1"},
    )
    store.save(attrs.evolve(record, manifest=manifest))
    logged = mlflow_run(store, record.run_id)
    folder = Path(client_for(store).download_artifacts(logged.info.run_id, "", str(tmp_path / "a")))
    texts = [json.dumps(logged.data.params), json.dumps(logged.data.tags)]
    texts += [path.read_text() for path in folder.rglob("*") if path.is_file()]
    for secret in ("pw-in-url-7f3", "sk-live-4b2f9", "nested-91c", "tok-77aa1"):
        assert not any(secret in text for text in texts), secret
    assert logged.data.params["retriever_options.index"] == "kb"
    assert logged.data.params["retriever_options.api_key"] == "***"


def test_runs_of_the_experiment_logged_by_others_are_left_alone(tmp_path: Path) -> None:
    store = MlflowStore.from_url(sqlite_url(tmp_path))
    client = client_for(store)
    foreign = client.create_run(store.experiment_id, tags={"team": "training"})
    client.log_metric(foreign.info.run_id, "loss", 0.5)
    client.set_terminated(foreign.info.run_id)
    # A half-logged run (a save killed midway) is never FINISHED: reads skip it.
    record = rk.evaluate("demo", "bm25-demo", git_commit=None).record
    half = client.create_run(store.experiment_id, tags={"retrievalkit.run_id": record.run_id})
    assert half.info.status == "RUNNING"
    assert store.all_runs() == [] and store.get(record.run_id) is None
    store.save(record)
    assert [run.run_id for run in store.all_runs()] == [record.run_id]
    assert store.delete([record.run_id]) == 1
    assert store.get(record.run_id) is None
    assert client.get_run(foreign.info.run_id).info.lifecycle_stage == "active"


def test_a_failed_save_leaves_no_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = MlflowStore.from_url(sqlite_url(tmp_path))
    record = rk.evaluate("demo", "bm25-demo", git_commit=None).record

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(store.client, "log_artifacts", refuse)
    with pytest.raises(StoreError, match=r"could not save run .*disk full"):
        store.save(record)
    assert store.get(record.run_id) is None
    monkeypatch.undo()
    store.save(record)  # and the same run can be saved once the fault is gone
    assert store.get(record.run_id) is not None


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mlflow+sqlite:///{tmp}/no/such/folder/mlflow.db", "does not exist"),
        ("mlflow+sqlite:///{tmp}/mlflow.db?experimnt=x", "unknown parameter 'experimnt'"),
        ("mlflow+sqlite:///{tmp}/mlflow.db?experiment=", "empty experiment"),
        ("mlflow+http:127.0.0.1", "not of the form mlflow+http://HOST"),
        ("mlflow+http://h?artifacts=/x", "only the file and SQLite backends"),
        ("mlflow:sqlite:///x.db", "MLFLOW_TRACKING_URI"),
    ],
)
def test_bad_urls_are_one_line_naming_the_fix(url: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(InputError, match=re.escape(message)):
        parse_target(url.format(tmp=tmp_path))


def test_mlflow_without_a_tracking_uri_says_which_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises(InputError, match="MLFLOW_TRACKING_URI"):
        rk.open_store("mlflow:")


def test_relative_paths_follow_the_store_convention(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    target = parse_target("mlflow+sqlite:///runs.db?experiment=e1")
    assert target.tracking_uri == f"sqlite:///{tmp_path / 'runs.db'}"
    assert target.artifact_location == (tmp_path / "mlartifacts").as_uri()
    assert target.experiment == "e1"
    assert parse_target(f"mlflow+file:///{tmp_path}/mlruns").tracking_uri == (
        (tmp_path / "mlruns").as_uri()
    )
    assert parse_target("mlflow+file:///mlruns").tracking_uri == (tmp_path / "mlruns").as_uri()


def test_an_unreachable_server_is_one_line_with_the_password_hidden(
    tmp_path: Path,
) -> None:
    result = cli("eval", "--set", "demo", "--retriever", "bm25-demo", "--store",
                 "mlflow+http://me:hunter2-9@127.0.0.1:9/", "--quiet", cwd=tmp_path,
                 # MLflow retries a refused connection for minutes by default.
                 MLFLOW_HTTP_REQUEST_MAX_RETRIES="0",
                 MLFLOW_HTTP_REQUEST_TIMEOUT="20")  # fmt: skip
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1, result.stderr
    assert "could not open the tracking store" in errors[0]
    assert "hunter2-9" not in result.stderr + result.stdout


def test_the_documented_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = DOCS.read_text(encoding="utf-8")
    python = re.search(r"```python\n(.*?)```", text, re.S)
    bash = re.search(r"```bash\nretrievalkit eval (.*?)\n", text, re.S)
    assert python and bash
    monkeypatch.chdir(tmp_path)
    printed: list[Any] = []
    exec(compile(python.group(1), str(DOCS), "exec"), {"print": lambda *a: printed.append(a)})
    ndcg, low, high = printed[0]
    assert low <= ndcg <= high and not math.isnan(ndcg)
    assert printed[1] == ("passed",)
    assert printed[2] == (["report/per_question.jsonl", "report/report.md", "report/summary.json"],)
    arguments = [part.strip('"') for part in bash.group(1).split()]
    result = cli("eval", *arguments, "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    store = MlflowStore.from_url("mlflow+sqlite:///mlflow.db?experiment=search-quality")
    assert len(store.runs("demo", "bm25-demo")) == 3
    assert (tmp_path / "mlartifacts").is_dir() and not (tmp_path / "mlruns").exists()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=30), min_size=1, max_size=8, unique=True))
def test_any_labels_give_names_mlflow_accepts_and_keeps_apart(labels: list[str]) -> None:
    from mlflow.utils.validation import _validate_metric_name

    names = Names()
    given_names = [names.name("meta.topic", label, "hit@3") for label in labels]
    for name in given_names:
        _validate_metric_name(name)  # raises on a name MLflow refuses
        assert re.fullmatch(r"[A-Za-z0-9_.\- /]+", name) and len(name) <= 250
    assert len(set(given_names)) == len(labels)
