"""``retrievalkit pool``: the unjudged (question, document) pairs of stored runs to label next."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from retrievalkit.cli.commands import SUMMARIES
from retrievalkit.cli.commands.options import (
    add_common,
    at_most,
    load_config,
    open_configured_store,
    positive,
)
from retrievalkit.errors import EXIT_OK, InputError
from retrievalkit.formats.limits import MAX_K

NAME, HELP = SUMMARIES["pool"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--set",
        required=True,
        metavar="NAME_OR_FILE",
        help="the golden set the runs were made on: its labels say what is judged, its "
        "questions give the texts",
    )
    parser.add_argument(
        "--run",
        dest="runs",
        action="append",
        required=True,
        metavar="RUN_ID",
        help="a stored run to pool (repeatable; two or more for the dcg and precision priorities)",
    )
    parser.add_argument(
        "--depth",
        type=at_most(MAX_K),
        default=10,
        help="pool each run's top DEPTH documents (10)",
    )
    parser.add_argument(
        "--budget",
        type=positive,
        metavar="N",
        help="write the N best pairs only (default: every unjudged pair)",
    )
    parser.add_argument(
        "--priority",
        default="dcg",
        metavar="PRIORITY",
        # Checked by rk.pool, which names the priorities it offers (importing them here
        # would cost every start-up the pool module's imports).
        help="dcg (default): how much the runs' DCG@depth difference would change were the "
        "document relevant, summed over pairs of runs; precision: the same for "
        "precision@depth; depth: the best rank any run gave it, ties by number of runs",
    )
    parser.add_argument(
        "--extra-labels",
        action="append",
        default=[],
        metavar="FILE",
        help="labels files (from judge or serve) whose pairs count as judged too (repeatable)",
    )
    parser.add_argument(
        "--output",
        required=True,
        metavar="FILE",
        help="the pool to write (JSON Lines, one pair a line, best first); replaced whole",
    )
    add_common(parser, fmt=False)


def _checked_output(output: Path) -> None:
    if output.is_dir():
        raise InputError(f"{output} is a folder", field="--output", hint="name a file to write")
    if not output.parent.is_dir():
        raise InputError(
            f"the folder {output.parent} does not exist",
            field="--output",
            hint="create it, or write the pool elsewhere",
        )


def run(args: argparse.Namespace) -> int:
    from retrievalkit.api import pool
    from retrievalkit.cli.commands.collisions import check_run_outputs, read_files, store_at
    from retrievalkit.cli.commands.options import store_url
    from retrievalkit.formats.files import output_error, write_file
    from retrievalkit.render.pool import pool_summary

    output = Path(args.output)
    _checked_output(output)
    config = load_config(args)
    given = args.set if Path(args.set).exists() else None
    labels = [("--extra-labels", path) for path in args.extra_labels]
    read, outputs = read_files(config, ("--set", given), *labels), [("--output", output)]
    # Before the store is opened (which may write beside it), and after, from its path.
    check_run_outputs(outputs, store_at(store_url(args, config)), read)
    store = open_configured_store(args, config)
    check_run_outputs(outputs, store, read)
    result = pool(
        args.set,
        args.runs,
        depth=args.depth,
        budget=args.budget,
        priority=args.priority,
        extra_labels=args.extra_labels,
        store=store,
        config=config,
    )
    for warning in result.warnings:
        print(f"pool: warning: {warning}", file=sys.stderr)
    try:
        write_file(output, result.to_jsonl())
    except OSError as error:
        raise output_error(error, output, "--output", "the pool") from None
    for line in pool_summary(result, str(output)):
        print(line)
    return EXIT_OK
