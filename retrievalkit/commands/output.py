"""Write an evaluation report where the user asked: stdout in a format, and --output-dir."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from retrievalkit.commands.options import console
from retrievalkit.errors import InputError

if TYPE_CHECKING:
    # Only a type here: importing the renderer pulls numpy into every start-up.
    from retrievalkit.render.summary import EvalReport


def emit_report(report: EvalReport, args: argparse.Namespace) -> None:
    from retrievalkit.render.markdown import render_markdown
    from retrievalkit.render.summary import per_question_lines, summary, to_json_text

    if args.output_dir:
        directory = Path(args.output_dir)
        try:
            directory.mkdir(parents=True, exist_ok=True)
            (directory / "summary.json").write_text(
                to_json_text(summary(report)) + "\n", encoding="utf-8"
            )
            (directory / "per_question.jsonl").write_text(
                "".join(line + "\n" for line in per_question_lines(report)), encoding="utf-8"
            )
            (directory / "report.md").write_text(render_markdown(report), encoding="utf-8")
        except OSError as error:
            raise InputError(
                f"cannot write the report: {error.strerror}",
                source=str(directory),
                field="--output-dir",
            ) from None
    if args.format == "json":
        sys.stdout.write(to_json_text(summary(report)) + "\n")
    elif args.format == "markdown":
        sys.stdout.write(render_markdown(report))
    else:
        from retrievalkit.render.table import render_table

        render_table(report, console(args), per_question=not args.quiet)
