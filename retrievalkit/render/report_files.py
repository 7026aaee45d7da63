"""Write a run's report files (``summary.json``, ``per_question.jsonl``, ``report.md``).

``eval --output-dir`` and `retrievalkit.Run.write_report` both write through here, each
file whole: written beside its name and renamed over it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from retrievalkit.model.records import ResultRecord
    from retrievalkit.pipeline.gating.gate import Verdict
    from retrievalkit.render.summary import EvalReport


#: The files ``--output-dir`` writes.
OUTPUT_FILES = ("summary.json", "per_question.jsonl", "report.md")


def write_output_file(directory: Path, name: str, text: str) -> None:
    """Write ``directory/name`` whole, replacing whatever is there without following it."""
    from retrievalkit.formats.files import write_file

    write_file(directory / name, text)


def write_report_files(report: EvalReport, directory: Path) -> list[Path]:
    """``summary.json``, ``per_question.jsonl`` and ``report.md`` of ``report`` in
    ``directory`` (created if need be), each written whole; the paths written."""
    from retrievalkit.render.markdown import render_markdown
    from retrievalkit.render.summary import per_question_lines, summary, to_json_text

    directory.mkdir(parents=True, exist_ok=True)
    write_output_file(directory, "summary.json", to_json_text(summary(report)) + "\n")
    write_output_file(
        directory,
        "per_question.jsonl",
        "".join(line + "\n" for line in per_question_lines(report)),
    )
    write_output_file(directory, "report.md", render_markdown(report))
    return [directory / name for name in ("summary.json", "per_question.jsonl", "report.md")]


def write_record_report(
    record: ResultRecord,
    directory: Path,
    *,
    saved_to: str | None = None,
    verdict: Verdict | None = None,
) -> list[Path]:
    """The report files of a run known by its record alone (a store's copy of a saved run),
    as ``show`` renders it: without the questions' texts, which the record does not keep,
    and with the gate's verdict when one is given."""
    from retrievalkit.render.summary import EvalReport

    compared = verdict is not None and verdict.baseline_run_id is not None
    report = EvalReport(
        record,
        (),
        verdict if compared else None,
        saved_to,
        baseline_note=None if verdict is None else verdict.note,
        not_saved_reason=None if saved_to else "not saved",
    )
    return write_report_files(report, directory)
