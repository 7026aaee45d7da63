"""What an engine study ran into: each fixed, each with its test."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import retrievalkit as rk
from retrievalkit.render.plugin_options import REFERENCE_END, REFERENCE_START, retriever_reference
from retrievalkit.render.text import verdict_lines

REPO = Path(__file__).resolve().parents[1]
DEMO_CORPUS = REPO / "retrievalkit" / "demo" / "corpus.jsonl"
LONG = "a-retriever-with-a-rather-long-descriptive-name"


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command as a pipe sees it: not a terminal, no COLUMNS."""
    env = {key: value for key, value in __import__("os").environ.items() if key != "COLUMNS"}
    return subprocess.run(
        [sys.executable, "-m", "retrievalkit", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "retrievalkit.toml").write_text(
        f"""
[eval]
k = [1, 2, 7]

[retrievers.{LONG}]
plugin = "bm25"
corpus = "{DEMO_CORPUS}"
doc_id_separator = "#"
max_doc_words = 15

[retrievers.{LONG}-too]
plugin = "bm25"
corpus = "{DEMO_CORPUS}"
doc_id_separator = "#"
""",
        encoding="utf-8",
    )
    return tmp_path


def test_compare_never_splits_a_number_when_not_on_a_terminal(project: Path) -> None:
    args = ("compare", "--set", "demo", "--retriever", LONG, "--retriever", f"{LONG}-too")
    table = cli(*args, "--no-save", cwd=project)
    assert table.returncode == 0, table.stderr
    document = json.loads(cli(*args, "--no-save", "--format", "json", cwd=project).stdout)
    (pair,) = document["pairs"]
    words = set(table.stdout.split())
    for delta in pair["metrics"]:
        for side in ("baseline", "candidate"):
            if delta[side] is not None:
                assert f"{delta[side]:.3f}" in words, (delta["metric"], table.stdout)
    # The configuration's [eval] k is what compare uses, as its --help now says.
    assert {"hit@2", "hit@7"} <= {delta["metric"] for delta in pair["metrics"]}
    assert "hit@10" not in {delta["metric"] for delta in pair["metrics"]}
    help_text = cli("compare", "--help", cwd=project).stdout
    assert "(default 1,3,5,10)" not in help_text and "[eval] k" in " ".join(help_text.split())


def test_list_shows_a_plugins_options(project: Path) -> None:
    shown = cli("list", "rerank", cwd=project)
    assert shown.returncode == 0, shown.stderr
    assert re.search(r"candidates\s+int\s+50", shown.stdout)
    assert "first_stage" in shown.stdout and "reranker_options" in shown.stdout
    (entry,) = json.loads(cli("list", "bm25", "--format", "json", cwd=project).stdout)
    options = {option["name"]: option for option in entry["options"]}
    assert options["k1"]["default"] == "0.9" and options["corpus"]["default"] == "unset"
    assert "fields" in options
    missing = cli("list", "no-such-plugin", cwd=project)
    assert missing.returncode == 2 and "no-such-plugin" in missing.stderr


def test_the_configuration_page_holds_the_current_retriever_reference() -> None:
    page = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    held = page.split(REFERENCE_START, 1)[1].split(REFERENCE_END, 1)[0]
    assert held.strip() == retriever_reference().strip(), (
        "docs/configuration.md is out of date: put retrievalkit.render.plugin_options."
        "retriever_reference() between its retriever-options markers"
    )
    assert "| `candidates` | int | `50` |" in held


def test_the_gate_says_what_changed_in_the_retriever(project: Path, tmp_path: Path) -> None:
    store = rk.open_store(f"sqlite:///{tmp_path / 'runs.sqlite3'}")
    first = rk.evaluate(
        "demo", "bm25", options={"corpus": str(DEMO_CORPUS), "k1": 0.9}, name="kw",
        config=project / "retrievalkit.toml", git_commit=None,
    )  # fmt: skip
    store.save(first.record)
    second = rk.evaluate(
        "demo", "bm25", options={"corpus": str(DEMO_CORPUS), "k1": 1.5}, name="kw",
        config=project / "retrievalkit.toml", git_commit=None,
    )  # fmt: skip
    verdict = rk.gate(second, store)
    assert verdict.retriever_changes == ("options k1: 0.9 -> 1.5",)
    lines = verdict_lines(verdict, None, confidence=0.95)
    assert any(line.startswith("the retriever changed since the baseline") for line in lines)
    same = rk.gate(first, store, baseline=first.run_id)
    assert same.retriever_changes == ()


def test_a_comparison_shows_itself_and_a_run_writes_its_report(
    project: Path, tmp_path: Path
) -> None:
    runs = [
        rk.evaluate("demo", name, config=project / "retrievalkit.toml", git_commit=None)
        for name in (LONG, f"{LONG}-too")
    ]
    comparison = rk.compare(runs)
    markdown = comparison.to_markdown()
    assert markdown.startswith("# retrievalkit comparison") and "| hit@1 |" in markdown
    assert comparison._repr_markdown_() == markdown
    text = str(comparison)
    assert "against" in text and "hit@7" in text
    written = runs[0].write_report(tmp_path / "out")
    assert sorted(Path(path).name for path in written) == [
        "per_question.jsonl",
        "report.md",
        "summary.json",
    ]
    lines = (tmp_path / "out" / "per_question.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(runs[0].set.questions)
    assert all("meta" in json.loads(line) for line in lines)
    assert runs[0].to_markdown() == (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
