"""``retrievalkit drift``: compare two retrievers on a query log, without labels."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from retrievalkit.cli.commands import SUMMARIES
from retrievalkit.cli.commands.options import add_common, console, fraction, load_config
from retrievalkit.errors import EXIT_OK, EXIT_REGRESSION, InputError

NAME, HELP = SUMMARIES["drift"]


def configure(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--log",
        metavar="FILE",
        help='the query log: JSON Lines ({"query": ..., "count"?: ...}), or CSV/TSV with a '
        "query column (and optionally count)",
    )
    source.add_argument(
        "--set", metavar="NAME_OR_FILE", help="a golden set's questions as the log (labels unused)"
    )
    parser.add_argument("--retriever", required=True, metavar="CANDIDATE", help="the candidate")
    baseline = parser.add_mutually_exclusive_group(required=True)
    baseline.add_argument("--against", metavar="BASELINE", help="the baseline retriever")
    baseline.add_argument(
        "--against-run",
        metavar="RUN_ID",
        help="a stored run as the baseline: its rankings and latencies are replayed, "
        "nothing is asked again (the log's queries that are not its questions are left out)",
    )
    parser.add_argument(
        "--k", type=int, default=None, help="overlap@k, Jaccard@k, QPP depth (default 10)"
    )
    parser.add_argument(
        "--depth", type=int, default=None, help="documents asked for each query (default 50)"
    )
    parser.add_argument(
        "--rbo-p", type=fraction, default=None, metavar="P", help="RBO's persistence (default 0.9)"
    )
    parser.add_argument(
        "--sample", type=int, default=None, metavar="N", help="a weighted sample of N queries"
    )
    parser.add_argument(
        "--seed", type=int, default=None, help="the sample's and bootstrap's seed (default 0)"
    )
    parser.add_argument(
        "--resamples", type=int, default=None, help="bootstrap resamples (default 1000)"
    )
    parser.add_argument(
        "--concurrency", type=int, default=None, help="queries asked at once (default 1)"
    )
    parser.add_argument("--timeout", type=float, default=None, metavar="SECONDS", help="per query")
    parser.add_argument(
        "--fail-on-drift",
        action="store_true",
        help="exit 1 when --min-rbo or --max-zero-result-increase (or [drift]) is crossed",
    )
    parser.add_argument("--min-rbo", type=fraction, default=None, metavar="X")
    parser.add_argument("--max-zero-result-increase", type=fraction, default=None, metavar="X")
    parser.add_argument("--no-save", action="store_true", help="keep no drift record in the store")
    parser.add_argument("--junit-xml", metavar="FILE", help="write the drift gate as JUnit XML")
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    from retrievalkit.api import drift, load_set
    from retrievalkit.render.drift import drift_lines, drift_markdown, write_drift_junit
    from retrievalkit.render.summary import to_json_text

    config = load_config(args)
    log = load_set(args.set, config=config) if args.set is not None else args.log
    if args.log is not None and not Path(args.log).exists():
        raise InputError("query log not found", source=args.log, field="--log")
    result = drift(
        log,
        args.retriever,
        args.against,
        against_run=args.against_run,
        k=args.k,
        depth=args.depth,
        rbo_p=args.rbo_p,
        sample=args.sample,
        seed=args.seed,
        resamples=args.resamples,
        concurrency=args.concurrency,
        timeout=args.timeout,
        min_rbo=args.min_rbo,
        max_zero_result_increase=args.max_zero_result_increase,
        save=not args.no_save,
        store=args.store,
        config=config,
    )
    if args.junit_xml:
        write_drift_junit(result, Path(args.junit_xml))
    if args.format == "json":
        sys.stdout.write(to_json_text(result.to_dict()) + "\n")
    elif args.format == "markdown":
        sys.stdout.write(drift_markdown(result))
    else:
        from rich.console import Group

        from retrievalkit.render.terminal import plain

        console(args).print(Group(*[plain(line) for line in drift_lines(result)]))
    if args.fail_on_drift and not result.passed:
        return EXIT_REGRESSION
    return EXIT_OK
