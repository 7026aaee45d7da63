"""``retrievalkit power``: the smallest drop a set can detect, and the questions a drop needs."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from retrievalkit.cli.commands import SUMMARIES
from retrievalkit.cli.commands.options import (
    add_cluster_by,
    add_common,
    confidence_level,
    fraction,
    load_config,
    store_url,
)
from retrievalkit.errors import EXIT_OK

if TYPE_CHECKING:
    from retrievalkit.stats.power import PowerReport

NAME, HELP = SUMMARIES["power"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--set",
        required=True,
        metavar="NAME_OR_FILE",
        help="the golden set (a file, a [sets.NAME] of the config, or a plugin's set)",
    )
    evidence = parser.add_mutually_exclusive_group()
    evidence.add_argument(
        "--run",
        metavar="RUN_ID",
        help="use a stored run's per-question values, and its discordance with the baseline "
        "eval would compare it with (the pin, else the run before it)",
    )
    evidence.add_argument(
        "--retriever",
        metavar="NAME",
        help="evaluate this retriever now (nothing is saved) and use its values, and its "
        "discordance with the stored baseline of its key",
    )
    parser.add_argument(
        "--drop",
        type=fraction,
        metavar="X",
        help="also give the questions needed to detect an absolute drop of X (e.g. 0.03)",
    )
    parser.add_argument(
        "--confidence",
        type=confidence_level,
        metavar="X",
        help="confidence of the paired test, alpha = 1 - X (default 0.95, or [eval] confidence)",
    )
    add_cluster_by(parser)
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    from retrievalkit.api import power
    from retrievalkit.cli.commands.options import console
    from retrievalkit.render.power import render_power_markdown, render_power_table

    config = load_config(args)
    evidence = args.run is not None or args.retriever is not None
    report: PowerReport = power(
        args.set,
        run=args.run,
        retriever=args.retriever,
        store=store_url(args, config) if evidence else None,
        drop=args.drop,
        confidence=args.confidence,
        config=config,
        cluster_by=args.cluster_by,
    )
    if args.format == "json":
        from retrievalkit.formats.convert import to_json

        print(to_json(report, indent=2))
    elif args.format == "markdown":
        print(render_power_markdown(report))
    else:
        render_power_table(report, console(args))
    return EXIT_OK
