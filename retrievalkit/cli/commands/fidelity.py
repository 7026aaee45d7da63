"""``retrievalkit fidelity``: how much of a reference retriever's top k a candidate returns."""

from __future__ import annotations

import argparse
import sys

from retrievalkit.cli.commands import SUMMARIES
from retrievalkit.cli.commands.options import add_common, console, fraction, load_config, positive
from retrievalkit.errors import EXIT_OK

NAME, HELP = SUMMARIES["fidelity"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--set", required=True, metavar="NAME_OR_FILE", help="the questions to ask (labels unused)"
    )
    parser.add_argument(
        "--retriever", required=True, metavar="APPROX", help="the candidate (e.g. an ANN index)"
    )
    parser.add_argument(
        "--reference", required=True, metavar="EXACT", help="the reference (e.g. exact search)"
    )
    parser.add_argument("--k", type=positive, default=10, help="depth compared (default 10)")
    parser.add_argument(
        "--persistence",
        type=fraction,
        default=0.9,
        metavar="P",
        help="rank-biased overlap's persistence p: weight of deeper ranks (default 0.9)",
    )
    add_common(parser, store=False)


def run(args: argparse.Namespace) -> int:
    from retrievalkit.api import fidelity, load_set
    from retrievalkit.render.summary import to_json_text

    config = load_config(args)
    golden = load_set(args.set, config=config)
    report = fidelity(
        golden,
        args.retriever,
        args.reference,
        k=args.k,
        persistence=args.persistence,
        config=config,
    )
    questions = golden.questions
    if args.format == "json":
        from retrievalkit.formats.convert import unstructure

        sys.stdout.write(to_json_text(unstructure(report)) + "\n")
        return EXIT_OK
    lines = [
        f"{report.candidate} against {report.reference} on {golden.name}: "
        f"{len(questions)} questions, k={args.k}, p={args.persistence:g}",
    ]
    for name, estimate in report.overall.items():
        if estimate.mean is None:
            lines.append(f"  {name}: undefined (the reference returned nothing)")
        else:
            lines.append(
                f"  {name}: {estimate.mean:.3f} [{estimate.low:.3f}, {estimate.high:.3f}] "
                f"over {estimate.n} questions"
            )
    worst = sorted(
        (row for row in report.questions if row.overlap is not None),
        key=lambda row: (row.overlap, row.question_id),
    )[:5]
    if worst:
        lines.append(
            "  lowest overlap: "
            + ", ".join(f"{row.question_id} ({row.overlap:.2f})" for row in worst)
        )
    errors = [row for row in report.questions if row.error]
    if errors:
        lines.append(
            f"  {len(errors)} questions errored, e.g. {errors[0].question_id}: {errors[0].error}"
        )
    from retrievalkit.render.terminal import plain, printable

    if args.format == "markdown":
        sys.stdout.write("```\n" + "".join(printable(line) + "\n" for line in lines) + "```\n")
        return EXIT_OK
    from rich.console import Group

    console(args).print(Group(*[plain(line) for line in lines]))
    return EXIT_OK
