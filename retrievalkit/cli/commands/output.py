"""Write an evaluation report where the user asked: stdout in a format, and --output-dir."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from retrievalkit.cli.commands.options import console
from retrievalkit.render.report_files import OUTPUT_FILES as OUTPUT_FILES
from retrievalkit.render.report_files import write_output_file as write_output_file
from retrievalkit.render.report_files import write_report_files

if TYPE_CHECKING:
    # Only a type here: importing the renderer pulls numpy into every start-up.
    from retrievalkit.render.summary import EvalReport


def emit_report(
    report: EvalReport, args: argparse.Namespace, *, ci: bool = False, failed: str | None = None
) -> None:
    """Print the report and write --output-dir; with ``ci``, also the CI-native outputs.

    Those are --junit-xml, the GitHub job summary and annotations; ``failed`` says why
    the evaluation could not be carried out, for the JUnit report.
    """
    from retrievalkit.render.markdown import render_markdown
    from retrievalkit.render.summary import summary, to_json_text

    if args.output_dir:
        directory = Path(args.output_dir)
        try:
            write_report_files(report, directory)
        except OSError as error:
            from retrievalkit.formats.files import output_error

            raise output_error(error, directory, "--output-dir", "the report") from None
    if ci:
        _ci_outputs(report, args, failed)
    if args.format == "json":
        sys.stdout.write(to_json_text(summary(report)) + "\n")
    elif args.format == "markdown":
        sys.stdout.write(render_markdown(report))
    else:
        from retrievalkit.render.summary import header_line
        from retrievalkit.render.table import PLAIN_LISTING, eval_renderable, question_listing
        from retrievalkit.render.terminal import plain

        output = console(args)
        if args.quiet or len(report.record.outcomes) <= PLAIN_LISTING:
            output.print(eval_renderable(report, per_question=not args.quiet, width=output.width))
            return
        output.print(plain(header_line(report), style="bold"))
        output.file.write(question_listing(report.record))
        output.print(eval_renderable(report, per_question=False, header=False))


def _ci_outputs(report: EvalReport, args: argparse.Namespace, failed: str | None) -> None:
    import os

    from retrievalkit.render.ci_output import (
        on_github_actions,
        workflow_annotations,
        write_junit_xml,
        write_step_summary,
    )

    junit = getattr(args, "junit_xml", None)
    if junit:
        write_junit_xml(report, Path(junit), failed=failed)
    write_step_summary(report)
    if on_github_actions(os.environ):
        # Workflow commands are read from stdout; JSON output keeps stdout for the document.
        stream = sys.stderr if args.format == "json" else sys.stdout
        for line in workflow_annotations(report):
            print(line, file=stream, flush=True)
