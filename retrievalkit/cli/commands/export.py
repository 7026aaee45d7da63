"""``retrievalkit export``: a stored run as a TREC run file, qrels, or ranx JSON, for other tools.

What is exported is exactly what retrievalkit scored: each question's best distinct
documents (after chunk ids collapsed), cut at the deepest k, and the labels it was
judged against. trec_eval, pytrec_eval, ir_measures and ranx then give the same values
as retrievalkit, provided questions without results count as zero (``trec_eval -c``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from retrievalkit.cli.commands import SUMMARIES
from retrievalkit.cli.commands.options import add_common, load_config, store_url, stored_run
from retrievalkit.errors import EXIT_OK

NAME, HELP = SUMMARIES["export"]
EXPORT_FORMATS = ("trec-run", "qrels", "ranx-json")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID", help="the run id printed by eval or history")
    parser.add_argument(
        "--format",
        choices=EXPORT_FORMATS,
        default="trec-run",
        help="trec-run: 'qid Q0 docid rank score tag' lines; qrels: 'qid 0 docid grade' lines; "
        "ranx-json: one JSON object with 'run' and 'qrels' for ranx.Run/ranx.Qrels "
        "(default: trec-run)",
    )
    parser.add_argument(
        "--tag",
        metavar="TAG",
        help="run tag of the TREC run file (default: the run's retriever name)",
    )
    parser.add_argument("--output", metavar="FILE", help="write to FILE instead of stdout")
    add_common(parser, fmt=False)


def run(args: argparse.Namespace) -> int:
    from retrievalkit.formats.trec import format_qrels, format_run

    config = load_config(args)
    if args.output:
        from retrievalkit.cli.commands.collisions import check_run_outputs, read_files, store_at

        # Before the store is opened (which may write beside it), and after, from its path.
        read, outputs = read_files(config), [("--output", args.output)]
        check_run_outputs(outputs, store_at(store_url(args, config)), read)
    store, record = stored_run(args, config)
    if args.output:
        check_run_outputs(outputs, store, read)
    tag = args.tag or re.sub(r"\s+", "_", record.model)
    rankings = {outcome.question_id: list(outcome.ranking) for outcome in record.outcomes}
    # A question with nothing relevant is undefined in retrievalkit's metrics, while
    # trec_eval would score it 0: leaving it out of the qrels keeps the means equal.
    judgments = {
        outcome.question_id: dict(outcome.judgments)
        for outcome in record.outcomes
        if any(grade >= 1 for grade in outcome.judgments.values())
    }
    notes = []
    if args.format in ("qrels", "ranx-json") and len(judgments) < len(record.outcomes):
        notes.append(
            f"{len(record.outcomes) - len(judgments)} no-answer questions left out of the "
            "qrels: their metrics are undefined in retrievalkit, trec_eval would score them 0"
        )
    empty = sum(1 for ranking in rankings.values() if not ranking)
    if args.format in ("trec-run", "ranx-json") and empty:
        errored = f", {record.errored} of them errored" if record.errored else ""
        notes.append(
            f"{empty} questions have no results{errored} and so no lines; trec_eval -c "
            "counts them as zero, as retrievalkit does"
        )
    if args.format == "trec-run":
        text = format_run(rankings, tag)
    elif args.format == "qrels":
        text = format_qrels(judgments)
    else:
        # JSON holds any id (spaces, '#', any script): only the TREC formats, whose
        # columns are separated by whitespace, need ids without it.
        document = {
            "name": tag,
            "metadata": {
                "run_id": record.run_id,
                "set": record.set,
                "set_hash": record.manifest.set_hash,
                "retriever": record.model,
                "created_at": record.manifest.created_at,
            },
            "run": {
                query_id: {doc: float(len(ranking) - rank) for rank, doc in enumerate(ranking)}
                for query_id, ranking in rankings.items()
                if ranking
            },
            "qrels": judgments,
        }
        text = json.dumps(document, sort_keys=True, ensure_ascii=False) + "\n"
    if args.output:
        from retrievalkit.formats.files import output_error, write_file

        try:
            write_file(Path(args.output), text)
        except OSError as error:
            raise output_error(error, args.output, "--output", "the file") from None
    else:
        sys.stdout.write(text)
    for note in notes:
        print(f"retrievalkit: note: {note}", file=sys.stderr)
    return EXIT_OK
