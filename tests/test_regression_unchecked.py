"""A threshold that cannot be checked against the baseline is reported, never dropped silently."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "retrievalkit", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


def test_a_metric_the_baseline_lacks_is_unchecked_and_fails_the_gate(tmp_path: Path) -> None:
    eval_demo = ("eval", "--set", "demo", "--retriever", "bm25-demo", "--quiet")
    first = run_cli(*eval_demo, "--format", "json", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    # ndcg@20 makes the candidate score to depth 20; the baseline stopped at 10.
    (tmp_path / "retrievalkit.toml").write_text(
        '[regression.metrics]\n"ndcg@20" = 0.0\n', encoding="utf-8"
    )
    second = run_cli(*eval_demo, "--format", "json", "--fail-on-regression", cwd=tmp_path)
    # A threshold the gate could not check fails it: it cannot pass what it did not compare.
    assert second.returncode == 1, second.stderr
    verdict = json.loads(second.stdout)["regression"]
    assert verdict["regressed"] is True and "could not be checked" in verdict["note"]
    assert [item for item in verdict["unchecked"] if item.startswith("ndcg@20:")], verdict
    assert {item["metric"] for item in verdict["checked"]} == {"hit@1", "hit@3"}
    baseline = json.loads(first.stdout)["run_id"]
    table = run_cli(*eval_demo, "--no-save", "--baseline", baseline, cwd=tmp_path)
    assert "NOT checked" in table.stdout and "ndcg@20" in table.stdout
