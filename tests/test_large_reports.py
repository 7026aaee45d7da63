"""Reports of large runs: the question list written at once, the job summary kept small.

A 100,000-question run printed through rich took 22 s (every line laid out on its own),
and its Markdown, about 10 MB, is over the 1 MiB GitHub accepts as a step summary, so
the verdict after the question table was lost.
"""

from __future__ import annotations

import argparse
import io

import pytest
from rich.console import Console
from run_records import run_record

from retrievalkit.cli.commands.output import emit_report
from retrievalkit.model.records import ResultRecord
from retrievalkit.model.values import QuestionOutcome
from retrievalkit.pipeline.gating.gate import MetricComparison, Verdict
from retrievalkit.render.ci_output import STEP_SUMMARY_QUESTIONS, write_step_summary
from retrievalkit.render.summary import EvalReport
from retrievalkit.render.table import PLAIN_LISTING, _question_list, question_listing

SCORES = ("hit@1", "hit@3", "rr")


def _record(count: int) -> ResultRecord:
    outcomes = []
    for index in range(count):
        hit = float(index % 3 == 0)
        scores = {"hit@1": hit, "hit@3": 1.0 if index % 2 else hit, "rr": hit}
        if index == 7:
            outcomes.append(
                QuestionOutcome("q7", (), dict.fromkeys(SCORES, 0.0), 1.0, error="boom \x1b[2J")
            )
            continue
        outcomes.append(
            QuestionOutcome(
                f"q{index}" + ("\x1b]0;x\x07" if index == 3 else ""),
                (f"d{index}", f"d{index + 1}", "[bold]x[/bold]", "d-last"),
                scores,
                1.0,
                hard_class="normal" if index % 2 else None,
                judgments={f"d{index}": 1} if index % 5 else {},
            )
        )
    return run_record(outcomes, SCORES)


def _verdict() -> Verdict:
    item = MetricComparison(
        "hit@1", 0.9, 0.5, -0.4, (-0.6, -0.2), 0.01, threshold=0.0, regressed=True, n=2
    )
    return Verdict("20250101T000000Z-11111111", True, (item,), (item,), 2, True)


def test_the_plain_listing_is_the_list_form_rich_prints() -> None:
    record = _record(40)
    console = Console(record=True, width=4000, file=io.StringIO(), color_system=None)
    for line in _question_list(record):
        console.print(line)
    assert question_listing(record) == console.export_text()
    assert "\\x1b]0;x\\x07" in question_listing(record)  # escaped, not obeyed
    assert "    ERROR: boom \\x1b[2J" in question_listing(record)


def _args(quiet: bool = False) -> argparse.Namespace:
    return argparse.Namespace(
        output_dir=None, format="table", quiet=quiet, no_color=True, junit_xml=None
    )


def test_a_large_run_lists_every_question_between_header_and_metrics(
    capsys: pytest.CaptureFixture[str],
) -> None:
    count = PLAIN_LISTING + 201
    record = _record(count)
    emit_report(EvalReport(record, (), _verdict(), "sqlite:///x"), _args())
    shown = capsys.readouterr().out
    header, rest = shown.split("\nQuestions\n", 1)
    assert header.startswith("set big")
    listing, tail = rest.split("\nMetrics", 1)
    assert ("Questions\n" + listing + "\n") == question_listing(record)
    assert listing.count("    expected: ") == count
    assert "regression" in tail.lower()
    # --quiet still prints no question.
    emit_report(EvalReport(record, (), _verdict(), "sqlite:///x"), _args(quiet=True))
    assert "expected:" not in capsys.readouterr().out


@pytest.mark.parametrize("count", [12, STEP_SUMMARY_QUESTIONS + 1500])
def test_the_job_summary_stops_the_question_table_and_keeps_the_verdict(
    count: int, tmp_path: pytest.TempPathFactory
) -> None:
    target = tmp_path / "summary.md"  # type: ignore[operator]
    record = _record(count)
    assert write_step_summary(
        EvalReport(record, (), _verdict(), "sqlite:///x"), {"GITHUB_STEP_SUMMARY": str(target)}
    )
    text = target.read_text(encoding="utf-8")
    section = text.split("\n## Questions\n", 1)[1].split("\n## ", 1)[0]
    rows = [row for row in section.splitlines() if row.startswith("| q")]
    assert len(rows) == min(count, STEP_SUMMARY_QUESTIONS)
    assert rows[0].startswith("| q0 |")
    left_out = count - len(rows)
    assert (f"... and {left_out:,} more questions" in section) == bool(left_out)
    assert "\n## Regression\n" in text
    assert len(text.encode()) < 1024 * 1024


@pytest.mark.parametrize(("id_length", "labelled"), [(10, 2), (40, 20), (400, 20), (4000, 20)])
def test_rows_of_long_ids_still_keep_the_job_summary_under_a_mebibyte(
    id_length: int, labelled: int, tmp_path: pytest.TempPathFactory
) -> None:
    target = tmp_path / "summary.md"  # type: ignore[operator]
    count = 3000
    outcomes = [
        QuestionOutcome(
            f"q{index}",
            tuple(f"d{index}-{n}-".ljust(id_length, "x") for n in range(3)),
            {"hit@1": 0.0, "hit@3": 1.0, "rr": 0.5},
            1.0,
            judgments={f"e{index}-{n}-".ljust(id_length, "y"): 1 for n in range(labelled)},
        )
        for index in range(count)
    ]
    record = run_record(outcomes, SCORES)
    assert write_step_summary(
        EvalReport(record, (), _verdict(), "sqlite:///x"), {"GITHUB_STEP_SUMMARY": str(target)}
    )
    text = target.read_text(encoding="utf-8")
    assert len(text.encode()) < 1024 * 1024
    section = text.split("\n## Questions\n", 1)[1].split("\n## ", 1)[0]
    rows = [row for row in section.splitlines() if row.startswith("| q")]
    assert f"... and {count - len(rows):,} more questions" in section
    assert "\n## Regression\n" in text
    # Short rows stop at the row limit; long ones earlier, at the size.
    assert (len(rows) == STEP_SUMMARY_QUESTIONS) == (id_length == 10)
