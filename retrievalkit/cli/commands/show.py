"""``retrievalkit show``: show a stored run."""

from __future__ import annotations

import argparse

from retrievalkit.cli.commands import SUMMARIES
from retrievalkit.cli.commands.options import add_common, load_config, stored_run
from retrievalkit.cli.commands.output import emit_report
from retrievalkit.errors import EXIT_OK

NAME, HELP = SUMMARIES["show"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID", help="the run id printed by eval or history")
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    from retrievalkit.render.summary import EvalReport
    from retrievalkit.stores import read_whole

    config = load_config(args)
    store, record = stored_run(args, config)
    # Every part of the run is read and checked against its digest: a damaged run is named
    # (exit code 3), never shown in part.
    read_whole(record)
    report = EvalReport(record, (), None, store.url, baseline_note="(stored run)", read_back=True)
    args.output_dir = None
    args.quiet = False
    emit_report(report, args)
    return EXIT_OK
