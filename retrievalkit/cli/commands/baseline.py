"""``retrievalkit baseline pin|unpin|show``: pin the run that eval compares a key with."""

from __future__ import annotations

import argparse
import sys

from retrievalkit.cli.commands import SUMMARIES
from retrievalkit.cli.commands.options import (
    add_common,
    console,
    load_config,
    open_configured_store,
)
from retrievalkit.errors import EXIT_OK, InputError

NAME, HELP = SUMMARIES["baseline"]


def configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    pin = actions.add_parser(
        "pin",
        help="pin a stored run as the baseline of its set and retriever (replaces any pin)",
        description="Pin a stored run as the baseline of its set and retriever; eval then "
        "compares with it instead of the newest earlier run, until it is unpinned.",
    )
    pin.add_argument("run_id", metavar="RUN_ID", help="the run id printed by eval or history")
    add_common(pin)
    for name, text in (
        ("unpin", "remove the pin of a set and retriever (eval goes back to the newest run)"),
        ("show", "show the pinned baseline of a set and retriever, and what eval compares with"),
    ):
        sub = actions.add_parser(name, help=text, description=text)
        sub.add_argument("--set", required=True, metavar="NAME", help="the set name")
        sub.add_argument("--retriever", required=True, metavar="NAME", help="the retriever name")
        add_common(sub)


def run(args: argparse.Namespace) -> int:
    from retrievalkit.model.records import GRADER
    from retrievalkit.pipeline.gating.baselines import baseline_status
    from retrievalkit.render.baseline import baseline_document, baseline_lines
    from retrievalkit.render.summary import to_json_text
    from retrievalkit.stores import pinning

    config = load_config(args)
    store = open_configured_store(args, config)
    if args.action == "pin":
        record = store.get(args.run_id)
        if record is None:
            raise InputError(
                f"no run {args.run_id} in {store.url}",
                field="RUN_ID",
                hint="retrievalkit history --set S --retriever R lists the stored runs; "
                "--store chooses the store",
            )
        previous = pinning(store, "pin baselines").pin(record)
        status = baseline_status(store, "pin", record.set, record.model, previous)
    elif args.action == "unpin":
        previous = pinning(store, "unpin baselines").unpin(args.set, args.retriever, GRADER)
        status = baseline_status(store, "unpin", args.set, args.retriever, previous)
    else:
        status = baseline_status(store, "show", args.set, args.retriever)
    if args.format == "json":
        sys.stdout.write(to_json_text(baseline_document(status)) + "\n")
    elif args.format == "markdown":
        from retrievalkit.render.terminal import printable

        sys.stdout.write("".join(f"- {printable(line)}\n" for line in baseline_lines(status)))
    else:
        from rich.console import Group

        from retrievalkit.render.terminal import plain

        console(args).print(Group(*[plain(line) for line in baseline_lines(status)]))
    return EXIT_OK
