"""The installed plugin, end to end through the ``retrievalkit`` command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def retrievalkit(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "retrievalkit", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_list_shows_all_four_plugins(tmp_path: Path) -> None:
    listing = retrievalkit("list", "--format", "json", cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    document = json.loads(listing.stdout)
    provider = "retrievalkit-example[example-csv]"
    assert {"name": "bikes", "provider": provider} in document["sets"]
    assert {"name": "tfidf", "provider": "retrievalkit-example[tfidf]"} in document["retrievers"]
    assert {"name": "rundir:", "provider": "retrievalkit-example[rundir]"} in document["stores"]
    assert {
        "name": "tfidf-explain",
        "provider": "retrievalkit-example[tfidf-explain]",
    } in document["commands"]
    assert document["broken"] == []


def test_eval_saves_to_the_rundir_store_and_history_reads_it(tmp_path: Path) -> None:
    store = f"rundir:///{tmp_path}/runs"
    evaluation = retrievalkit(
        "eval",
        "--set",
        "bikes",
        "--retriever",
        "tfidf",
        "--store",
        store,
        "--format",
        "json",
        cwd=tmp_path,
    )
    assert evaluation.returncode == 0, evaluation.stderr
    summary = json.loads(evaluation.stdout)
    assert summary["metrics"]["hit@3"]["n"] == 20
    assert summary["metrics"]["rr"]["n"] == 19, "the no-answer question is left out of rr"
    history = retrievalkit(
        "history",
        "--set",
        "bikes",
        "--retriever",
        "tfidf",
        "--store",
        store,
        "--format",
        "json",
        cwd=tmp_path,
    )
    assert history.returncode == 0, history.stderr
    assert len(json.loads(history.stdout)) == 1


def test_the_plugin_command_has_its_own_help_and_runs(tmp_path: Path) -> None:
    helped = retrievalkit("tfidf-explain", "--help", cwd=tmp_path)
    assert helped.returncode == 0
    assert "--corpus" in helped.stdout
    explained = retrievalkit("tfidf-explain", "my brakes squeal", cwd=tmp_path)
    assert explained.returncode == 0, explained.stderr
    assert "terms: brakes, squeal" in explained.stdout
    assert "bk-disc-brakes" in explained.stdout
