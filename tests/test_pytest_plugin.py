"""The pytest plugin and the notebook of docs/python.md, run as a user runs them: pytest in a
child process (the plugin comes from the installed entry point) and the notebook in a real
Jupyter kernel."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from child_env import child_environment
from nbclient import NotebookClient

# Each test runs pytest or a notebook kernel in a child, each bounded at 600 s.
pytestmark = pytest.mark.timeout(900)

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "python.md"
NOTEBOOK = REPO / "docs" / "examples" / "quickstart.ipynb"


def run_pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        key: value
        for key, value in child_environment().items()
        if not key.startswith(("PYTEST_", "RETRIEVALKIT_"))
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=project,
        env={**env, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def docs_example() -> tuple[str, str]:
    text = PAGE.read_text(encoding="utf-8")
    found = re.search(r"<!-- file: (\S+) -->\n```python\n(.*?)```", text, re.S)
    assert found is not None, "docs/python.md lost its pytest example"
    return found.group(1), found.group(2)


def test_the_documented_pytest_example_saves_then_gates(tmp_path: Path) -> None:
    name, source = docs_example()
    (tmp_path / name).parent.mkdir(parents=True)
    (tmp_path / name).write_text(source, encoding="utf-8")
    (tmp_path / "baselines").mkdir()
    first = run_pytest(tmp_path, name, "--retrievalkit-save")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "2 passed" in first.stdout
    assert "retrieval gates" in first.stdout
    assert first.stdout.count("demo × bm25-demo: passed (75 questions; hit@1 ") == 2
    saved = (tmp_path / "baselines" / "runs.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(saved) == 1, "only the gate with a store saves"
    assert json.loads(saved[0])["model"] == "bm25-demo"

    second = run_pytest(tmp_path, name)
    assert second.returncode == 0, second.stdout + second.stderr
    lines = (tmp_path / "baselines" / "runs.jsonl").read_text(encoding="utf-8").splitlines()
    assert lines == saved, "without --retrievalkit-save nothing is saved"


WORSE = '''
import retrievalkit as rk

DEMO = rk.load_set("demo")
EXPECTED = {q.question: list(q.expected) for q in DEMO.questions}


class HalfBlind:
    """Answers the first half of the questions perfectly, the rest with nothing."""

    identifier = "half-blind"

    def retrieve(self, question, limit):
        position = [q.question for q in DEMO.questions].index(question)
        return EXPECTED[question][:limit] if position < len(DEMO.questions) // 2 else []


def test_perfect_then_half(retrieval_gate):
    perfect = type("Perfect", (), {
        "identifier": "half-blind",
        "retrieve": lambda self, question, limit: EXPECTED[question][:limit],
    })()
    retrieval_gate(DEMO, perfect, name="half-blind", store="jsonl:///runs.jsonl", save=True)
    retrieval_gate(DEMO, HalfBlind(), name="half-blind", store="jsonl:///runs.jsonl",
                   save=True)


def test_below_a_floor(retrieval_gate):
    retrieval_gate(DEMO, HalfBlind(), name="half-blind", minimums={"hit@3": 0.9, "rr": 0.1})
'''


def test_a_regression_or_a_missed_floor_fails_the_test_and_is_not_saved(tmp_path: Path) -> None:
    (tmp_path / "test_worse.py").write_text(WORSE, encoding="utf-8")
    result = run_pytest(tmp_path, "test_worse.py")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "2 failed" in result.stdout
    assert "RetrievalGateFailed: retrieval gate failed for demo × half-blind" in result.stdout
    assert re.search(r"REGRESSION against baseline \S+:", result.stdout)
    assert re.search(r"hit@1: 1\.000 -> 0\.\d+ \(difference -0\.\d+", result.stdout)
    assert re.search(
        r"hit@3 = 0\.\d+ is below its minimum 0\.9 \(over 75 questions\)", result.stdout
    )
    assert "rr =" not in result.stdout, "a floor that holds is not reported"
    runs = (tmp_path / "runs.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(runs) == 1, "the regressed run was not saved, so it cannot become a baseline"
    assert "FAILED (75 questions" in result.stdout


def test_the_notebook_runs_in_a_kernel(tmp_path: Path) -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": tmp_path}}
    ).execute()
    outputs = [cell.get("outputs", []) for cell in notebook.cells if cell.cell_type == "code"]
    assert not [o for cell in outputs for o in cell if o.get("output_type") == "error"]

    def result(cell: int) -> dict[str, str]:
        """The value a cell shows (its last expression); log lines may come before it."""
        found: dict[str, str] = next(
            o["data"] for o in outputs[cell] if o["output_type"] == "execute_result"
        )
        return found

    shown = result(0)
    assert "text/html" in shown, "a run displays itself as an HTML table"
    assert "<td>hit@3</td>" in shown["text/html"] and "bm25-demo" in shown["text/html"]
    printed = "".join(o["text"] for o in outputs[1] if o.get("name") == "stdout")
    assert re.fullmatch(r"hit@3 = 0\.\d{3}, 95% interval 0\.\d{3} to 0\.\d{3}, n = 75\n", printed)
    gated = result(4)["text/plain"]
    assert gated == "(False, ['hit@1', 'hit@3'])", gated
