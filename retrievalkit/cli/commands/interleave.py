"""``retrievalkit interleave credit``: credit an interleaving log's clicks to its two teams."""

from __future__ import annotations

import argparse
import sys

from retrievalkit.cli.commands import SUMMARIES
from retrievalkit.cli.commands.options import add_common, confidence_level, load_config
from retrievalkit.errors import EXIT_OK

NAME, HELP = SUMMARIES["interleave"]


def _effect(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(
            f"expected a preference above 0 and at most 1, e.g. 0.05, got {text!r}"
        )
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    text = (
        "Credit each click of a clicks log to the team that contributed the clicked "
        "document: wins, ties and losses of the first team, the preference with its "
        "interval, the exact sign test, and the impressions a preference needs."
    )
    credit = actions.add_parser(
        "credit", help="credit a clicks log's clicks to its two teams", description=text
    )
    credit.add_argument(
        "--log",
        required=True,
        metavar="CLICKS",
        help="the clicks log: JSON Lines, one impression a line (impression, query, teams, "
        "shown, clicked), as the interleave retriever writes it with clicked added",
    )
    credit.add_argument(
        "--effect",
        type=_effect,
        metavar="X",
        help="the preference (wins - losses) / impressions with clicks to find with 80%% "
        "power (default: the one seen)",
    )
    credit.add_argument(
        "--confidence",
        type=confidence_level,
        metavar="X",
        help="confidence of the intervals and the sign test, alpha = 1 - X (default 0.95, "
        "or [eval] confidence)",
    )
    add_common(credit, store=False)


def run(args: argparse.Namespace) -> int:
    from retrievalkit.api import interleave_credit
    from retrievalkit.cli.commands.options import console
    from retrievalkit.render.interleaving import (
        credit_document,
        render_credit_markdown,
        render_credit_table,
    )
    from retrievalkit.render.summary import to_json_text

    result = interleave_credit(
        args.log, effect=args.effect, confidence=args.confidence, config=load_config(args)
    )
    if args.format == "json":
        sys.stdout.write(to_json_text(credit_document(result)) + "\n")
    elif args.format == "markdown":
        sys.stdout.write(render_credit_markdown(result) + "\n")
    else:
        render_credit_table(result, console(args))
    return EXIT_OK
