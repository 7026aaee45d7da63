"""CI-native outputs of an evaluation: JUnit XML, the GitHub job summary and annotations.

JUnit XML is what GitLab, Jenkins, Azure and GitHub test reporters read: each gated
metric (and each gated slice, and each latency check such as ``latency.p95``) becomes
one test case, a regression a failed one whose
failure carries the verdict's text, a threshold that could not be checked a skipped one.
On GitHub Actions the Markdown report is appended to ``$GITHUB_STEP_SUMMARY`` and each
regression becomes an ``::error`` workflow command, which GitHub shows as an annotation.
"""

from __future__ import annotations

import os
import re
import socket
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from retrievalkit.pipeline.gating.gate import MetricComparison
    from retrievalkit.render.summary import EvalReport

#: Characters XML 1.0 cannot carry at all, even escaped: dropped from every text.
_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml_text(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def case_name(item: MetricComparison) -> str:
    """``hit@3``, or ``hit@3 [hard_class=near-duplicate]`` for a slice threshold."""
    return item.metric if item.slice is None else f"{item.metric} [{item.slice}]"


def junit_xml(report: EvalReport, *, failed: str | None = None) -> str:
    """The gate as a JUnit test suite: one test case per gated metric and slice.

    ``failed`` is the reason an evaluation could not be carried out (too many errors):
    it becomes one errored test case, so the CI shows the run as broken, not as passed.
    """
    from retrievalkit.render.text import check_line, comparison_line, verdict_lines

    record = report.record
    verdict = report.verdict
    suite_name = f"retrievalkit eval {record.set} × {record.model}"
    classname = f"retrievalkit.{record.set}.{record.model}"
    cases: list[ElementTree.Element] = []
    verdict_text = "\n".join(
        verdict_lines(verdict, report.baseline_note, confidence=record.manifest.confidence)
    )

    def case(name: str) -> ElementTree.Element:
        element = ElementTree.Element("testcase", name=_xml_text(name))
        element.set("classname", _xml_text(classname))
        element.set("time", "0")
        cases.append(element)
        return element

    if failed is not None:
        broken = case("evaluation")
        error = ElementTree.SubElement(broken, "error", type="EvaluationError")
        error.set("message", _xml_text(failed))
        error.text = _xml_text(failed)
    elif verdict is None:
        skipped = ElementTree.SubElement(case("regression gate"), "skipped")
        skipped.set("message", _xml_text(verdict_text))
    else:
        for item in verdict.checked:
            element = case(case_name(item))
            if item.regressed:
                failure = ElementTree.SubElement(element, "failure", type="regression")
                failure.set("message", _xml_text(comparison_line(item, record.manifest.confidence)))
                failure.text = _xml_text(verdict_text)
            else:
                out = ElementTree.SubElement(element, "system-out")
                out.text = _xml_text(comparison_line(item, record.manifest.confidence))
        for check in verdict.ratio_checks:
            element = case(check.check)
            line = check_line(check, record.manifest.confidence)
            if check.regressed:
                failure = ElementTree.SubElement(element, "failure", type="regression")
                failure.set("message", _xml_text(line))
                failure.text = _xml_text(verdict_text)
            else:
                out = ElementTree.SubElement(element, "system-out")
                out.text = _xml_text(line)
        for reason in verdict.unchecked:
            # A threshold the gate could not check fails it (see Verdict.note).
            name, _, _ = reason.partition(": ")
            failure = ElementTree.SubElement(
                case(f"{name} (not checked)"), "failure", type="unchecked"
            )
            failure.set("message", _xml_text(reason))
            failure.text = _xml_text(verdict_text)
    suite = ElementTree.Element("testsuite", name=_xml_text(suite_name))
    counts = {
        "tests": len(cases),
        "failures": sum(1 for c in cases if c.find("failure") is not None),
        "errors": sum(1 for c in cases if c.find("error") is not None),
        "skipped": sum(1 for c in cases if c.find("skipped") is not None),
    }
    for key, value in counts.items():
        suite.set(key, str(value))
    suite.set("time", "0")
    suite.set("timestamp", record.manifest.created_at.removesuffix("Z"))
    suite.set("hostname", _xml_text(socket.gethostname() or "localhost"))
    properties = ElementTree.SubElement(suite, "properties")
    for name, text in _properties(report).items():
        ElementTree.SubElement(properties, "property", name=name, value=_xml_text(text))
    suite.extend(cases)
    root = ElementTree.Element("testsuites", name="retrievalkit")
    for key in ("tests", "failures", "errors"):
        root.set(key, str(counts[key]))
    root.set("time", "0")
    root.append(suite)
    ElementTree.indent(root)
    body = ElementTree.tostring(root, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"


def _properties(report: EvalReport) -> dict[str, str]:
    record = report.record
    found = {
        "run_id": record.run_id,
        "set": record.set,
        "set_hash": record.manifest.set_hash,
        "retriever": record.model,
        "retrievalkit_version": record.manifest.retrievalkit_version,
    }
    if report.verdict is not None and report.verdict.baseline_run_id is not None:
        found["baseline_run_id"] = report.verdict.baseline_run_id
    return found


def write_junit_xml(report: EvalReport, path: Path, *, failed: str | None = None) -> None:
    from retrievalkit.formats.files import output_error, write_file

    try:
        if path.parent != Path():
            path.parent.mkdir(parents=True, exist_ok=True)
        write_file(path, junit_xml(report, failed=failed))
    except OSError as error:
        raise output_error(error, path, "--junit-xml", "the JUnit report") from None


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_annotations(report: EvalReport) -> list[str]:
    """One ``::error`` workflow command per regressed metric, slice, latency or cost check."""
    from retrievalkit.render.text import check_line, comparison_line

    if report.verdict is None or not report.verdict.regressed:
        return []
    record = report.record
    title = _escape_property(f"retrievalkit regression: {record.set} × {record.model}")
    return (
        [
            f"::error title={title}::"
            + _escape_data(
                f"{comparison_line(item, record.manifest.confidence)} "
                f"against {report.verdict.baseline_run_id}"
            )
            for item in report.verdict.failures
        ]
        + [
            f"::error title={title}::"
            + _escape_data(
                f"{check_line(item, record.manifest.confidence)} "
                f"against {report.verdict.baseline_run_id}"
            )
            for item in report.verdict.ratio_failures
        ]
        + [
            f"::error title={title}::"
            + _escape_data(f"not checked, which fails the gate: {reason}")
            for reason in report.verdict.unchecked
        ]
    )


def on_github_actions(environ: Mapping[str, str]) -> bool:
    return environ.get("GITHUB_ACTIONS") == "true"


#: Question rows in the job summary: GitHub refuses a step summary over 1 MiB (a
#: 100,000-question table is about 10 MB), and the verdict comes after the table.
STEP_SUMMARY_QUESTIONS = 1000
#: What one report may add to the job summary, under GitHub's 1 MiB: rows of long ids
#: can pass it before `STEP_SUMMARY_QUESTIONS` rows do.
STEP_SUMMARY_BYTES = 900 * 1024


def step_summary_markdown(report: EvalReport) -> str:
    """The Markdown report with as many question rows as fit `STEP_SUMMARY_BYTES`.

    At most `STEP_SUMMARY_QUESTIONS` rows, halved until the whole report fits; the
    report says how many questions it leaves out.
    """
    from retrievalkit.render.markdown import render_markdown

    limit = STEP_SUMMARY_QUESTIONS
    while True:
        text = render_markdown(report, question_limit=limit)
        if limit == 0 or len(text.encode("utf-8")) <= STEP_SUMMARY_BYTES:
            return text
        limit //= 2


def write_step_summary(report: EvalReport, environ: Mapping[str, str] | None = None) -> bool:
    """Append the Markdown report to ``$GITHUB_STEP_SUMMARY`` when that variable is set.

    The question table stops after `STEP_SUMMARY_QUESTIONS` rows, or fewer when long
    ids would take it past `STEP_SUMMARY_BYTES`, and says how many more there are.
    """

    environ = os.environ if environ is None else environ
    target = environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return False
    from retrievalkit.formats.files import append_whole, output_error

    try:
        # All of it or nothing: half a summary would break the Markdown of the next step.
        append_whole(Path(target), step_summary_markdown(report) + "\n")
    except OSError as error:
        raise output_error(error, target, "GITHUB_STEP_SUMMARY", "the job summary") from None
    return True
