"""``retrievalkit history``: the runs of a set and retriever, what changed between them, pruning."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from retrievalkit.cli.commands import SUMMARIES
from retrievalkit.cli.commands.options import (
    add_common,
    console,
    load_config,
    open_configured_store,
    positive,
)
from retrievalkit.errors import EXIT_OK, InputError

if TYPE_CHECKING:
    from retrievalkit.stores import ResultStore

NAME, HELP = SUMMARIES["history"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--set", metavar="NAME", help="the set name")
    parser.add_argument("--retriever", metavar="NAME", help="the retriever name")
    parser.add_argument(
        "--verify",
        action="store_true",
        help="read every stored run whole (of this --set and --retriever, if given) and check "
        "it against the digest written when it was saved; list each damaged run (exit code 3 "
        "if any)",
    )
    parser.add_argument(
        "--limit", type=positive, default=20, metavar="N", help="show at most N runs (default 20)"
    )
    parser.add_argument(
        "--prune",
        action="store_true",
        help="delete the runs of this set and retriever past the newest --keep N; the pinned "
        "baseline is never deleted",
    )
    parser.add_argument(
        "--keep", type=positive, metavar="N", help="with --prune: how many newest runs to keep"
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="with --prune: list what would be deleted, delete nothing",
    )
    parser.add_argument(
        "--metric",
        action="append",
        default=[],
        metavar="NAME",
        help="also show this metric for each run (repeatable), e.g. ndcg@10, or a stage's: "
        "stage.rerank:rr",
    )
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    from retrievalkit.cli.interrupts import say_untouched
    from retrievalkit.model.records import GRADER
    from retrievalkit.pipeline.gating.history import build_history, runs_to_prune
    from retrievalkit.render.history import (
        history_renderable,
        history_rows,
        prune_line,
        render_history_markdown,
    )
    from retrievalkit.render.summary import to_json_text
    from retrievalkit.stores import pinned_run_id

    if args.prune and not args.dry_run:
        say_untouched("nothing was deleted")
    if args.verify:
        if args.prune or args.keep is not None or args.dry_run:
            raise InputError("--verify reads runs, it does not prune", field="--verify")
        return _verify(args)
    for option, value in (("--set", args.set), ("--retriever", args.retriever)):
        if value is None:
            raise InputError(
                "history needs --set and --retriever (or --verify, to check every run)",
                field=option,
            )
    if args.prune and args.keep is None:
        raise InputError(
            "--prune needs to know how many runs to keep",
            field="--keep",
            hint="e.g. --prune --keep 10",
        )
    if not args.prune and (args.keep is not None or args.dry_run):
        option = "--keep" if args.keep is not None else "--dry-run"
        raise InputError("only means something with --prune", field=option, hint="add --prune")
    from retrievalkit.metrics.definitions import canonical_metric_name

    metrics = []
    for name in args.metric:
        try:
            metrics.append(canonical_metric_name(name))
        except ValueError as error:
            raise InputError(str(error), field="--metric") from None
    config = load_config(args)
    store = open_configured_store(args, config)
    if args.prune and not args.dry_run:
        say_untouched(f"nothing was deleted from {store.url}")
    runs = store.runs(args.set, args.retriever, GRADER)
    pinned = pinned_run_id(store, args.set, args.retriever, GRADER)
    pruned: list[str] = []
    if args.prune:
        pruned = runs_to_prune(runs, keep=args.keep, pinned=pinned)
        if not args.dry_run:
            if pruned:
                code = _prune(store, pruned)
                if code is not None:
                    return code
            runs = [record for record in runs if record.run_id not in set(pruned)]
    history = build_history(
        runs,
        set_name=args.set,
        retriever=args.retriever,
        store=store.url,
        pinned=pinned,
        limit=args.limit,
        pruned=pruned,
        pruning=args.prune,
        dry_run=args.dry_run,
        metrics=metrics,
    )
    note = prune_line(history)
    if note is not None:
        print(f"retrievalkit: {note}", file=sys.stderr)
    if args.format == "json":
        sys.stdout.write(to_json_text(history_rows(history)) + "\n")
        return EXIT_OK
    if not history.entries:
        print(f"no runs of {args.set} × {args.retriever} in {store.url}", file=sys.stderr)
        return EXIT_OK
    if args.format == "markdown":
        sys.stdout.write(render_history_markdown(history))
        return EXIT_OK
    console(args).print(history_renderable(history))
    return EXIT_OK


def _prune(store: ResultStore, pruned: list[str]) -> int | None:
    """Delete ``pruned`` whole, with the stop signals held back meanwhile; the exit code
    when one arrived (the message says what was deleted), else None."""
    from retrievalkit.cli.interrupts import exit_code_for, interrupts_deferred, note_kept
    from retrievalkit.stores import deleting

    deleter = deleting(store, "prune runs")
    with interrupts_deferred() as deferred:
        try:
            deleted = deleter.delete(pruned)
        except BaseException as error:
            if not deferred.received:
                raise
            print(
                f"retrievalkit: interrupted while pruning; nothing was deleted from {store.url} "
                f"({type(error).__name__}: {error})",
                file=sys.stderr,
            )
            return exit_code_for(deferred.signum)
        note_kept(f"{deleted} runs were deleted from {store.url} (pruned, whole)")
    if deferred.received:
        print(
            f"retrievalkit: interrupted while pruning; {deleted} runs were deleted from "
            f"{store.url} (pruned, whole)",
            file=sys.stderr,
        )
        return exit_code_for(deferred.signum)
    return None


def _verify(args: argparse.Namespace) -> int:
    """``history --verify``: every run read whole and checked; one line a run, its state."""
    from retrievalkit.errors import EXIT_EVALUATION_FAILED, one_line
    from retrievalkit.render.summary import to_json_text
    from retrievalkit.stores import DAMAGED, NO_DIGEST, verify_store

    config = load_config(args)
    store = open_configured_store(args, config)
    checks = verify_store(store)
    if args.set is not None or args.retriever is not None:
        # A run whose key cannot be read is listed whatever the key asked for.
        checks = [
            check
            for check in checks
            if check.key is None
            or (args.set in (None, check.key[0]) and args.retriever in (None, check.key[1]))
        ]
    damaged = [check for check in checks if check.state == DAMAGED]
    old = [check for check in checks if check.state == NO_DIGEST]
    if args.format == "json":
        rows = [
            {"run_id": c.run_id, "where": c.where, "state": c.state, "detail": c.detail}
            for c in checks
        ]
        sys.stdout.write(to_json_text({"store": store.url, "runs": rows}) + "\n")
    else:
        for check in checks:
            text = check.state + (f": {check.detail}" if check.detail else "")
            if check.state == NO_DIGEST:
                text += " (saved before runs carried a digest: read whole, nothing to compare)"
            print(one_line(f"{check.run_id}  {text}"))
    print(
        f"retrievalkit: {len(checks)} runs checked in {store.url}: "
        f"{len(checks) - len(damaged) - len(old)} intact, {len(old)} with no digest, "
        f"{len(damaged)} damaged",
        file=sys.stderr,
    )
    return EXIT_EVALUATION_FAILED if damaged else EXIT_OK
