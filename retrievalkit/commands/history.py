"""``retrievalkit history``: list the stored runs of a set and retriever, newest first."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from retrievalkit.commands.options import add_common, console, load_config, positive, store_url
from retrievalkit.errors import EXIT_OK

NAME = "history"
HELP = "List the stored runs of a set and retriever, newest first."


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--set", required=True, metavar="NAME", help="the set name")
    parser.add_argument("--retriever", required=True, metavar="NAME", help="the retriever name")
    parser.add_argument(
        "--limit", type=positive, default=20, metavar="N", help="show at most N runs (default 20)"
    )
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    from retrievalkit.model import GRADER
    from retrievalkit.render.summary import to_json_text
    from retrievalkit.render.text import number
    from retrievalkit.stores import open_store

    config = load_config(args)
    store = open_store(store_url(args, config))
    runs = store.runs(args.set, args.retriever, GRADER)[: args.limit]
    rows: list[dict[str, Any]] = [
        {
            "run_id": run.run_id,
            "created_at": run.manifest.created_at,
            "hit@1": run.pass_rate,
            "hit@3": run.mean_score,
            "rr": run.metrics["rr"].mean if "rr" in run.metrics else None,
            "questions": len(run.outcomes),
            "errored": run.errored,
            "set_hash": run.manifest.set_hash[:12],
            "git_commit": (run.manifest.git_commit or "")[:12] or None,
        }
        for run in runs
    ]
    if args.format == "json":
        sys.stdout.write(to_json_text(rows) + "\n")
        return EXIT_OK
    if not rows:
        print(f"no runs of {args.set} × {args.retriever} in {store.url}", file=sys.stderr)
        return EXIT_OK
    header = ("run id", "created", "hit@1", "hit@3", "rr", "questions", "errored", "commit")
    table = [
        (
            row["run_id"],
            row["created_at"],
            number(row["hit@1"]),
            number(row["hit@3"]),
            number(row["rr"]),
            str(row["questions"]),
            str(row["errored"]),
            row["git_commit"] or "",
        )
        for row in rows
    ]
    if args.format == "markdown":
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(str(cell) for cell in line) + " |" for line in table]
        sys.stdout.write("\n".join(lines) + "\n")
        return EXIT_OK
    from rich.table import Table

    view = Table(title=f"{args.set} × {args.retriever} in {store.url}", title_justify="left")
    for column in header:
        view.add_column(column)
    for line in table:
        view.add_row(*[str(cell) for cell in line])
    console(args).print(view)
    return EXIT_OK
