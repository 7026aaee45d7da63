"""``retrievalkit eval``: evaluate a retriever on a set, save the run, gate on regressions."""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from retrievalkit.commands.options import (
    add_common,
    console,
    fraction,
    k_list,
    load_config,
    positive,
    seconds,
    store_url,
)
from retrievalkit.commands.output import emit_report
from retrievalkit.errors import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_REGRESSION,
    EvaluationError,
    InputError,
)
from retrievalkit.interrupts import interrupts_deferred
from retrievalkit.redaction import scrub, secret_values

if TYPE_CHECKING:
    from retrievalkit.model import GoldenQuestion

NAME = "eval"
HELP = (
    "Evaluate a retriever on a golden set, save the run, check for regressions against a baseline."
)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--set",
        required=True,
        metavar="NAME_OR_FILE",
        help="a golden set file (.jsonl, .toml, a BEIR directory), a [sets.NAME] of the config, "
        "or a set offered by a plugin (retrievalkit list shows them)",
    )
    parser.add_argument(
        "--retriever",
        required=True,
        metavar="NAME",
        help="a [retrievers.NAME] of the config, or a retriever plugin that needs no options",
    )
    parser.add_argument(
        "--k",
        type=k_list,
        metavar="K,K,...",
        help="cut-offs for the per-k metrics (default 1,3,5,10; 1 and 3 are always added)",
    )
    parser.add_argument(
        "--overfetch",
        type=positive,
        metavar="N",
        help="ask for max(k) * N ids, so that max(k) distinct documents remain after chunk ids "
        "collapse (default 3)",
    )
    parser.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit with code 1 when a metric dropped past its threshold",
    )
    parser.add_argument(
        "--max-top1-drop",
        type=fraction,
        metavar="X",
        help="largest allowed absolute drop of hit@1 (default 0, or [regression] in the config)",
    )
    parser.add_argument(
        "--max-top3-drop",
        type=fraction,
        metavar="X",
        help="largest allowed absolute drop of hit@3 (default 0, or [regression] in the config)",
    )
    parser.add_argument(
        "--baseline",
        metavar="RUN_ID",
        help="compare with this stored run instead of the pinned baseline (retrievalkit "
        "baseline pin) or, without one, the newest earlier run of the same set and retriever",
    )
    parser.add_argument(
        "--require-significant",
        action="store_true",
        help="a drop past its threshold is a regression only when the paired interval of the "
        "difference excludes zero (also: [regression] require_significant = true)",
    )
    parser.add_argument(
        "--max-error-rate",
        type=fraction,
        metavar="X",
        help="largest share of questions whose retrieval may fail; above it the run stops with "
        "code 3 and is not saved (default 0: any error)",
    )
    parser.add_argument("--no-save", action="store_true", help="do not save the run")
    parser.add_argument(
        "--concurrency",
        type=positive,
        metavar="N",
        help="ask N questions at once from threads, or N batches for a retriever that batches "
        "(only for thread-safe retrievers; default 1)",
    )
    parser.add_argument(
        "--timeout",
        type=seconds,
        metavar="SECONDS",
        help="record a question as a timeout error when the retriever has not answered within "
        "SECONDS (default: wait; also [eval] timeout in the config)",
    )
    parser.add_argument(
        "--slice",
        action="append",
        default=[],
        metavar="FIELD",
        help="also break results down by this meta field (repeatable); form and hard_class "
        "are always reported",
    )
    parser.add_argument(
        "--resamples",
        type=positive,
        metavar="N",
        help="bootstrap resamples for the confidence intervals (default 2000)",
    )
    parser.add_argument(
        "--confidence",
        type=fraction,
        metavar="X",
        help="confidence level of the intervals (default 0.95)",
    )
    parser.add_argument(
        "--output-dir",
        metavar="DIR",
        help="also write summary.json, per_question.jsonl and report.md into DIR",
    )
    parser.add_argument(
        "--junit-xml",
        metavar="PATH",
        help="also write the gate as JUnit XML (one test case per gated metric and slice; a "
        "regression is a failed test) for GitLab, Jenkins or GitHub test reports",
    )
    parser.add_argument(
        "--quiet", "-q", action="store_true", help="no per-question table and no progress bar"
    )
    parser.add_argument(
        "--extra-labels",
        action="append",
        default=[],
        metavar="FILE",
        help="also score the run with these labels merged in (e.g. from retrievalkit judge; "
        "repeatable) and report the judged share and metrics both ways; the saved run keeps "
        "the set's own labels",
    )
    add_common(parser)


def describe_retriever(retriever: object) -> dict[str, str]:
    """What a composed retriever says about its parts, for the manifest (secrets excluded)."""
    describe = getattr(retriever, "describe", None)
    return {str(key): str(value) for key, value in describe().items()} if callable(describe) else {}


def check_before_running(
    args: argparse.Namespace, store: object, questions: Sequence[GoldenQuestion]
) -> None:
    """Refuse now what would only fail after the whole evaluation: --slice, --output-dir, store."""
    from retrievalkit.scoring import STANDARD_SLICES
    from retrievalkit.stores import read_only_reason

    fields = sorted({key for question in questions for key in question.meta})
    for field in args.slice:
        if field not in STANDARD_SLICES and field not in fields:
            raise InputError(
                f"no question of the set has a meta field '{field}'",
                field="--slice",
                hint=f"its meta fields: {', '.join(fields) or 'none'}; form and hard_class "
                "are always reported",
            )
    if args.output_dir:
        directory = Path(args.output_dir)
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise InputError(
                "exists and is not a folder", source=str(directory), field="--output-dir"
            ) from None
        except OSError as error:
            raise InputError(
                f"cannot create the folder: {error.strerror}",
                source=str(directory),
                field="--output-dir",
            ) from None
        if not os.access(directory, os.W_OK | os.X_OK):
            raise InputError("the folder is read-only", source=str(directory), field="--output-dir")
    path = getattr(store, "path", None)
    reason = read_only_reason(path) if isinstance(path, Path) and not args.no_save else None
    if reason is not None:
        raise InputError(
            f"cannot save to {getattr(store, 'url', path)}: {reason}",
            field="--store",
            hint="choose another --store, or run with --no-save",
        )


def run(args: argparse.Namespace) -> int:
    from retrievalkit.baselines import choose_baseline
    from retrievalkit.embedders import embedding_of
    from retrievalkit.evaluator import DEFAULT_OVERFETCH, evaluate_questions
    from retrievalkit.intervals import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, DEFAULT_SEED
    from retrievalkit.labels import label_effect, read_label_files
    from retrievalkit.metrics import DEFAULT_KS, normalise_ks
    from retrievalkit.record import build_record
    from retrievalkit.regression import DEFAULT_THRESHOLDS, check_slices, compare_runs
    from retrievalkit.render.summary import EvalReport
    from retrievalkit.resolve import resolve_retriever, resolve_set
    from retrievalkit.scoring import ScoringOptions, score_run
    from retrievalkit.stores import open_store

    config = load_config(args)
    settings = config.eval
    ks = normalise_ks(args.k or settings.k or DEFAULT_KS)
    overfetch = args.overfetch or settings.overfetch or DEFAULT_OVERFETCH
    scoring = ScoringOptions(
        ks=ks,
        resamples=args.resamples or settings.resamples or DEFAULT_RESAMPLES,
        confidence=(
            args.confidence
            if args.confidence is not None
            else settings.confidence or DEFAULT_CONFIDENCE
        ),
        seed=DEFAULT_SEED,
        slices=tuple(dict.fromkeys((*settings.slices, *args.slice))),
    )
    if not 0.0 < scoring.confidence < 1.0:
        raise InputError("must be between 0 and 1, e.g. 0.95", field="--confidence")
    thresholds = dict(DEFAULT_THRESHOLDS)
    thresholds.update(config.regression.thresholds)
    if args.max_top1_drop is not None:
        thresholds["hit@1"] = args.max_top1_drop
    if args.max_top3_drop is not None:
        thresholds["hit@3"] = args.max_top3_drop
    slice_thresholds = config.regression.slices
    gated = {*thresholds, *(m for metrics in slice_thresholds.values() for m in metrics)}
    for metric in sorted(gated):
        _, _, k = metric.partition("@")
        if k and int(k) not in ks:
            ks = normalise_ks((*ks, int(k)))
            scoring = ScoringOptions(
                ks, scoring.resamples, scoring.confidence, scoring.seed, scoring.slices
            )
    max_error_rate = args.max_error_rate
    if max_error_rate is None:
        max_error_rate = config.regression.max_error_rate or 0.0

    store = open_store(store_url(args, config))
    extra_labels = read_label_files(args.extra_labels)
    golden = resolve_set(args.set, config)
    check_slices(slice_thresholds, golden.questions, source=config.source, set_name=golden.name)
    check_before_running(args, store, golden.questions)
    resolved = resolve_retriever(args.retriever, config)
    # Every configured secret, not only this retriever's: a composed one (fusion) holds
    # its parts' clients, whose errors may quote their credentials.
    hidden = sorted(
        {
            value
            for options in (resolved.options, *(c.options for c in config.retrievers.values()))
            for value in secret_values(options)
        },
        key=lambda value: (-len(value), value),
    )
    timeout = args.timeout or settings.timeout
    status = console(args, stderr=True)
    show_progress = status.is_terminal and not args.quiet and args.format == "table"
    questions = golden.questions
    if show_progress:
        from rich.progress import Progress

        with Progress(console=status, transient=True) as bar:
            task = bar.add_task(f"{resolved.name} on {golden.name}", total=len(questions))
            retrievals = evaluate_questions(
                resolved.retriever,
                questions,
                depth=max(ks),
                overfetch=overfetch,
                concurrency=args.concurrency or settings.concurrency or 1,
                timeout=timeout,
                secrets=hidden,
                progress=lambda done: bar.advance(task, done),
            )
    else:
        retrievals = evaluate_questions(
            resolved.retriever,
            questions,
            depth=max(ks),
            overfetch=overfetch,
            concurrency=args.concurrency or settings.concurrency or 1,
            timeout=timeout,
            secrets=hidden,
        )
    scores = score_run(questions, retrievals, scoring)
    backend, model_id = embedding_of(resolved.retriever)
    record = build_record(
        golden,
        resolved.name,
        resolved.plugin,
        resolved.options,
        scores,
        scoring,
        overfetch=overfetch,
        extra={
            key: scrub(value, hidden)
            for key, value in describe_retriever(resolved.retriever).items()
        },
        embedding_backend=backend,
        embedding_model_id=model_id,
    )

    errored = record.errored
    if errored and errored / len(questions) > max_error_rate:
        # The most frequent reason (ties: the first in order) is the example the message gives.
        counted = Counter(outcome.error for outcome in record.outcomes if outcome.error)
        reasons = [reason for reason, _ in counted.most_common()]
        report = EvalReport(
            record,
            questions,
            None,
            None,
            baseline_note="not compared: the run failed",
            not_saved_reason=f"{errored} of {len(questions)} questions errored, over the "
            f"allowed error rate {max_error_rate:g}",
        )
        everything = " on every question" if errored == len(questions) else ""
        failure = (
            f"retriever '{resolved.name}' failed{everything} ({errored} of {len(questions)} "
            f"questions errored, e.g. {reasons[0]}); the run was not saved and does not become "
            "a baseline (raise --max-error-rate to accept some errors)"
        )
        emit_report(report, args, ci=True, failed=failure)
        raise EvaluationError(failure)

    choice = choose_baseline(
        store, record.set, record.model, explicit=args.baseline, grader=record.grader
    )
    baseline, note = choice.record, choice.note
    require_significant = args.require_significant or config.regression.require_significant
    verdict = (
        compare_runs(
            record.outcomes,
            golden.content_hash,
            baseline,
            thresholds,
            resamples=scoring.resamples,
            confidence=scoring.confidence,
            seed=scoring.seed,
            require_significant=require_significant,
            slice_thresholds=slice_thresholds,
            questions=questions,
            baseline_kind=choice.kind,
        )
        if baseline is not None
        else None
    )
    saved_to = None
    if not args.no_save:
        with interrupts_deferred() as deferred:
            store.save(record)
        saved_to = store.url
        if deferred.received:
            print(
                f"retrievalkit: interrupted while saving; run {record.run_id} was saved whole "
                f"to {store.url}",
                file=sys.stderr,
            )
            return EXIT_INTERRUPTED
    report = EvalReport(
        record,
        questions,
        verdict,
        saved_to,
        baseline_note=note,
        not_saved_reason=None if saved_to else "--no-save",
        extra_labels=(
            label_effect(record.outcomes, ks, extra_labels, sources=args.extra_labels)
            if args.extra_labels
            else None
        ),
    )
    emit_report(report, args, ci=True)
    if verdict is not None and verdict.regressed:
        if args.fail_on_regression:
            return EXIT_REGRESSION
        print(
            "retrievalkit: regression found (exit code 0 without --fail-on-regression)",
            file=sys.stderr,
        )
    return EXIT_OK
