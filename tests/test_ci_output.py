"""CI-native outputs of ``eval``: JUnit XML (checked against the JUnit schema), the GitHub
job summary and ``::error`` annotations, driven through the real command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
import xmlschema

#: Jenkins' JUnit schema (as maintained for the xUnit plugin, MIT licensed).
SCHEMA = xmlschema.XMLSchema(Path(__file__).parent / "fixtures" / "junit-10.xsd")

QUESTIONS = [
    {"id": "q1", "question": "renew a passport", "form": "MATCH", "expected": ["d1"]},
    {"id": "q2", "question": "lost id card", "form": "GAP", "expected": ["d2"]},
    {"id": "q3", "question": "fishing licence", "form": "GAP", "expected": ["d3"]},
    {"id": "q4", "question": "parking permit", "form": "MATCH", "expected": ["d4"]},
]


def write_run(path: Path, rankings: dict[str, list[str]]) -> None:
    lines = [
        f"{qid} Q0 {doc} {rank} {10 - rank} tag"
        for qid, docs in rankings.items()
        for rank, doc in enumerate(docs, start=1)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    return subprocess.run(
        [sys.executable, "-m", "retrievalkit", *args],
        cwd=cwd,
        env={**clean, "NO_COLOR": "1", **(env or {})},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A set of four questions answered by a replayed run file, with a baseline saved."""
    (tmp_path / "golden.jsonl").write_text(
        "".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8"
    )
    (tmp_path / "retrievalkit.toml").write_text(
        '[retrievers.prod]\nplugin = "run"\npath = "run.txt"\nqueries = "golden.jsonl"\n'
        '[regression.slices."form=GAP"]\n"hit@3" = 0.0\n',
        encoding="utf-8",
    )
    write_run(tmp_path / "run.txt", {q["id"]: [q["expected"][0], "dx"] for q in QUESTIONS})
    baseline = cli("eval", "--set", "golden.jsonl", "--retriever", "prod", "-q", cwd=tmp_path)
    assert baseline.returncode == 0, baseline.stderr
    return tmp_path


def parse(path: Path) -> ElementTree.Element:
    SCHEMA.validate(str(path))  # raises with the offending element if invalid
    return ElementTree.parse(path).getroot()


def test_a_regression_is_a_failed_test_case_per_metric_and_slice(project: Path) -> None:
    # q2 and q3 (both GAP) lose their document: hit@1, hit@3 and the GAP slice drop.
    write_run(
        project / "run.txt",
        {"q1": ["d1"], "q2": ["dx", "dy", "dz", "dw"], "q3": ["dy"], "q4": ["d4"]},
    )
    junit = project / "reports" / "retrieval.xml"
    summary = project / "summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    result = cli(
        "eval", "--set", "golden.jsonl", "--retriever", "prod", "-q", "--fail-on-regression",
        "--junit-xml", str(junit), cwd=project,
        env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)},
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    root = parse(junit)
    (suite,) = root.findall("testsuite")
    cases = {case.get("name"): case for case in suite.findall("testcase")}
    assert set(cases) == {"hit@1", "hit@3", "hit@3 [form=GAP]"}
    for case in cases.values():
        failure = case.find("failure")
        assert failure is not None, ElementTree.tostring(case)
        assert failure.get("message", "").startswith(case.get("name", "").split(" ")[0])
        assert "REGRESSION against baseline" in (failure.text or "")
    assert (
        cases["hit@1"]
        .find("failure")
        .get("message", "")
        .startswith(  # type: ignore[union-attr]
            "hit@1: 1.000 -> 0.500"
        )
    )
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "3", "0")
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["set"] == "golden" and properties["retriever"] == "prod"

    text = summary.read_text(encoding="utf-8")
    assert text.startswith("earlier step\n"), "the summary is appended to, never overwritten"
    assert "# retrievalkit evaluation: golden × prod" in text
    assert "REGRESSION against baseline" in text

    errors = [line for line in result.stdout.splitlines() if line.startswith("::error ")]
    assert len(errors) == 3, result.stdout
    assert all("title=retrievalkit regression%3A golden × prod::" in line for line in errors)
    assert any("::hit@3 [form=GAP, 2 questions]: 1.000 -> 0.000" in line for line in errors)


def test_no_regression_passes_and_nothing_is_annotated(project: Path) -> None:
    junit = project / "ok.xml"
    result = cli(
        "eval", "--set", "golden.jsonl", "--retriever", "prod", "--format", "json",
        "--junit-xml", str(junit), cwd=project, env={"GITHUB_ACTIONS": "true"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    json.loads(result.stdout)  # annotations never mix into the JSON document
    assert "::error" not in result.stdout + result.stderr
    suite = parse(junit).find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    assert len(cases) == 3 and all(len(case.findall("failure")) == 0 for case in cases)
    assert suite.get("failures") == "0"


def test_the_first_run_is_a_skipped_gate_and_a_failed_run_an_error(tmp_path: Path) -> None:
    first = cli(
        "eval", "--set", "demo", "--retriever", "bm25-demo", "-q", "--no-save",
        "--junit-xml", "first.xml", cwd=tmp_path,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    (case,) = parse(tmp_path / "first.xml").iter("testcase")
    assert case.get("name") == "regression gate"
    assert "first run" in (case.find("skipped").get("message") or "")  # type: ignore[union-attr]

    # A run file for a different set: every question errors, the evaluation fails (code 3).
    (tmp_path / "golden.jsonl").write_text(
        "".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8"
    )
    (tmp_path / "other.tsv").write_text("z1\tsomething else entirely\n", encoding="utf-8")
    write_run(tmp_path / "run.txt", {"z1": ["d1"]})
    (tmp_path / "retrievalkit.toml").write_text(
        '[retrievers.broken]\nplugin = "run"\npath = "run.txt"\nqueries = "other.tsv"\n',
        encoding="utf-8",
    )
    failed = cli(
        "eval", "--set", "golden.jsonl", "--retriever", "broken", "-q",
        "--junit-xml", "failed.xml", cwd=tmp_path,
    )  # fmt: skip
    assert failed.returncode == 3, failed.stderr
    (case,) = parse(tmp_path / "failed.xml").iter("testcase")
    error = case.find("error")
    assert error is not None and "the run was not saved" in (error.get("message") or "")


def test_control_characters_in_names_still_give_valid_xml(tmp_path: Path) -> None:
    from retrievalkit.metrics.scoring import ScoringOptions, score_run
    from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet
    from retrievalkit.pipeline.engine.record import build_record
    from retrievalkit.render.ci_output import junit_xml
    from retrievalkit.render.summary import EvalReport

    golden = GoldenQuestionSet(
        name="odd\x01<set>&",
        questions=(GoldenQuestion(id="q1", question="a", expected=("d1",)),),
    )
    scoring = ScoringOptions(ks=(1, 3), resamples=50, confidence=0.95, seed=1)
    from retrievalkit.pipeline.engine.evaluator import evaluate_questions

    class One:
        identifier = "one"

        def retrieve(self, question: str, limit: int) -> list[str]:
            return ["d1"]

    retrievals = evaluate_questions(One(), golden.questions, depth=3, overfetch=1)
    record = build_record(
        golden, "r\x1b]8;;", "one", {}, score_run(golden.questions, retrievals, scoring), scoring,
        overfetch=1, git_commit=None,
    )  # fmt: skip
    path = tmp_path / "odd.xml"
    path.write_text(junit_xml(EvalReport(record, golden.questions, None, None)), encoding="utf-8")
    suite = parse(path).find("testsuite")
    assert suite is not None and "<set>&" in (suite.get("name") or "")
