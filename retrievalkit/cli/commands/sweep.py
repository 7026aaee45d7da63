"""``retrievalkit sweep NAME --set S``: tune a retriever over a grid, confirm the winner."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from retrievalkit.cli.commands import SUMMARIES
from retrievalkit.cli.commands.options import (
    add_asking_options,
    add_common,
    add_interval_options,
    console,
    executor_settings,
    load_config,
    store_url,
)
from retrievalkit.errors import EXIT_INTERRUPTED, EXIT_OK, InputError

NAME, HELP = SUMMARIES["sweep"]

#: The files ``--output-dir`` receives.
SWEEP_FILES = ("sweep.json", "report.md")
PROGRESS_NAME = "sweep-progress.jsonl"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME", help="the [sweeps.NAME] table of the configuration")
    parser.add_argument(
        "--set", required=True, metavar="NAME_OR_FILE", help="the golden set to tune and confirm on"
    )
    add_asking_options(
        parser,
        k_help="cut-offs (default 1,3,5,10, or [eval] k; the selected metric's is always added)",
    )
    add_interval_options(parser)
    parser.add_argument(
        "--output-dir",
        metavar="DIR",
        help="also write sweep.json and report.md into DIR (the progress file then lives there)",
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="start afresh: forget the answers an interrupted run of this sweep left",
    )
    add_common(parser)


def progress_path(args: argparse.Namespace, url: str) -> Path:
    """Where the answers of an unfinished sweep are kept: ``--output-dir``, else beside a
    file store (``sqlite:///`` or ``jsonl:///``), else ``.retrievalkit/``."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", args.name)
    if args.output_dir:
        return Path(args.output_dir) / PROGRESS_NAME
    for scheme in ("sqlite:///", "jsonl:///"):
        if url.startswith(scheme):
            return Path(url[len(scheme) :]).parent / f"sweep-{safe}.progress.jsonl"
    return Path(".retrievalkit") / f"sweep-{safe}.progress.jsonl"


def run(args: argparse.Namespace) -> int:
    from retrievalkit.api import sweep
    from retrievalkit.formats.limits import check_path
    from retrievalkit.render.summary import to_json_text
    from retrievalkit.render.sweep import render_sweep_markdown, sweep_document, sweep_renderable

    config = load_config(args)
    if args.name not in config.sweeps:
        raise InputError(
            f"no sweep '{args.name}' in {config.source or 'any config file'} (sweeps: "
            f"{', '.join(sorted(config.sweeps)) or 'none'})",
            field="NAME",
            hint="add a [sweeps.NAME] table with retriever and grid to retrievalkit.toml",
        )
    if args.output_dir:
        check_path(args.output_dir, field="--output-dir")
        try:
            Path(args.output_dir).mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise InputError(
                f"cannot create it: {error.strerror}", source=args.output_dir, field="--output-dir"
            ) from None
    progress = progress_path(args, store_url(args, config))
    if args.fresh and progress.exists():
        progress.unlink()
    try:
        result = sweep(
            args.set,
            args.name,
            k=args.k or None,
            overfetch=args.overfetch,
            resamples=args.resamples,
            confidence=args.confidence,
            concurrency=args.concurrency,
            timeout=args.timeout,
            repeat=args.repeat,
            warmup=args.warmup,
            **({} if args.max_error_rate is None else {"max_error_rate": args.max_error_rate}),
            config=config,
            progress_file=progress,
            **executor_settings(args),
        )
    except KeyboardInterrupt as stopped:
        from retrievalkit.cli.interrupts import Interrupted, exit_code_for, signal_received

        print(
            f"retrievalkit: interrupted; the answers so far are kept in {progress}: run the same "
            "command again to resume (--fresh to start over)",
            file=sys.stderr,
        )
        signum = stopped.signum if isinstance(stopped, Interrupted) else signal_received()
        return exit_code_for(signum) if signum else EXIT_INTERRUPTED
    document = sweep_document(result)
    if args.output_dir:
        directory = Path(args.output_dir)
        (directory / "sweep.json").write_text(to_json_text(document) + "\n", encoding="utf-8")
        (directory / "report.md").write_text(render_sweep_markdown(result), encoding="utf-8")
    if args.format == "json":
        sys.stdout.write(to_json_text(document) + "\n")
    elif args.format == "markdown":
        sys.stdout.write(render_sweep_markdown(result))
    else:
        console(args).print(sweep_renderable(result))
    return EXIT_OK
