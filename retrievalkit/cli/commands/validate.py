"""``retrievalkit validate``: check a golden set for errors and print what it holds."""

from __future__ import annotations

import argparse
import sys

from retrievalkit.cli.commands import SUMMARIES
from retrievalkit.cli.commands.options import add_common, load_config
from retrievalkit.errors import EXIT_OK

NAME, HELP = SUMMARIES["validate"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--set",
        required=True,
        metavar="NAME_OR_FILE",
        help="a golden set file, a [sets.NAME] of the config, or a plugin's set",
    )
    add_common(parser, store=False)


def run(args: argparse.Namespace) -> int:
    from retrievalkit.cli.collector import keeping
    from retrievalkit.pipeline.authoring.validation import lint_set
    from retrievalkit.plugins.resolution import resolve_set
    from retrievalkit.render.summary import to_json_text

    config = load_config(args)
    with keeping():  # the set lives to the end: no collection walks it
        golden = resolve_set(args.set, config)
    findings = lint_set(golden, {name: entry.options for name, entry in config.retrievers.items()})
    if args.format == "json":
        sys.stdout.write(to_json_text(findings) + "\n")
    else:
        from retrievalkit.render.terminal import printable

        for line in findings["summary"]:
            print(printable(line))
        for warning in findings["warnings"]:
            print(f"warning: {printable(warning)}")
    return EXIT_OK
