"""``retrievalkit eval``: evaluate a retriever on a set, save the run, gate on regressions."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrievalkit.cli.commands import SUMMARIES
from retrievalkit.cli.commands.options import (
    add_asking_options,
    add_cluster_by,
    add_common,
    add_interval_options,
    add_metric,
    console,
    cost_increase,
    evaluation_settings,
    fraction,
    latency_increase,
    load_config,
    open_configured_store,
    store_place,
    store_url,
    thresholds,
)
from retrievalkit.cli.commands.output import emit_report
from retrievalkit.errors import (
    EXIT_OK,
    EXIT_REGRESSION,
    EvaluationError,
    InputError,
    RetrievalkitError,
    StoreBusyError,
    StoreError,
)
from retrievalkit.formats.limits import check_path

if TYPE_CHECKING:
    from retrievalkit.api import Run
    from retrievalkit.formats.config import Config
    from retrievalkit.formats.ids import IdChanges
    from retrievalkit.formats.labels import ExtraLabels
    from retrievalkit.model.records import ResultRecord
    from retrievalkit.model.values import GoldenQuestionSet
    from retrievalkit.pipeline.gating.gate import Verdict
    from retrievalkit.pipeline.gating.thresholds import Thresholds
    from retrievalkit.render.summary import EvalReport
    from retrievalkit.stores import ResultStore

NAME, HELP = SUMMARIES["evaluate"]


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
    add_asking_options(
        parser,
        k_help="cut-offs for the per-k metrics (default 1,3,5,10; 1 and 3 are always added)",
    )
    parser.add_argument(
        "--chunk-separator",
        metavar="SEP",
        help="the retriever returns chunk ids (doc-7#3 with SEP '#'): document metrics score "
        "their documents, chunk metrics (chunk_rr, ...) the raw chunk ranking against "
        "expected_chunks (default: [eval] chunk_separator)",
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
        "--max-latency-increase",
        type=latency_increase,
        action="append",
        metavar="STAT=X",
        help="gate latency too: the candidate's STAT (p50, p95 or p99) may be at most X above "
        "the baseline's, as a relative increase (p95=0.2: 20 %%), by the paired ratio over the "
        "questions both runs answered (repeatable; also [regression.latency]; default: latency "
        "is not gated)",
    )
    parser.add_argument(
        "--max-cost-increase",
        type=cost_increase,
        metavar="X",
        help="gate cost too: the candidate's mean cost per question may be at most X above "
        "the baseline's, as a relative increase (0.1: 10 %%), by the paired ratio over the "
        "questions both runs asked, each run priced by its [costs]; a baseline without a "
        "cost skips the check with a warning (also [regression.cost] per_question; default: "
        "cost is not gated)",
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
        help="a drop past its threshold is a regression only when it is also significant "
        "(paired sign-flip p-value below 1 - confidence; also: [regression] "
        "require_significant = true)",
    )
    parser.add_argument(
        "--sequential",
        action="store_true",
        help="ask the questions in a seeded random order and stop as soon as anytime-valid "
        "confidence sequences settle every threshold (pass) or one (regression); a set "
        "asked whole is decided by the paired test, as --require-significant decides. "
        "Needs a baseline; a run that stopped early is not saved",
    )
    parser.add_argument("--no-save", action="store_true", help="do not save the run")
    add_cluster_by(parser)
    add_metric(parser)
    parser.add_argument(
        "--slice",
        action="append",
        default=[],
        metavar="FIELD",
        help="also break results down by this meta field (repeatable); form and hard_class "
        "are always reported",
    )
    add_interval_options(parser)
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


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:  # a name no file system takes: loading the set names it
        return False


def check_not_overwriting(
    outputs: Sequence[Path],
    store: object,
    inputs: Sequence[tuple[str, str | None]],
    *,
    field: str,
    config: Config | None = None,
) -> None:
    """Refuse outputs that would overwrite the store (or the files kept beside it), an
    input file or each other; ``field`` names the option that chose the outputs."""
    from retrievalkit.cli.commands.collisions import check_run_outputs, read_files

    check_run_outputs([(field, output) for output in outputs], store, read_files(config, *inputs))


def check_before_running(
    args: argparse.Namespace,
    store: object,
    config: Config | None = None,
    inputs: Sequence[tuple[str, str | None]] = (),
) -> None:
    """Refuse now what would only fail after the whole evaluation: --output-dir, the store.

    ``inputs`` are (option, file) pairs read for this run (the set, the configuration,
    extra labels), which --output-dir must not overwrite either.
    """
    from retrievalkit.cli.commands.collisions import (
        check_run_outputs,
        check_store_is_no_input,
        outputs_of,
        read_files,
    )

    if args.output_dir:
        check_path(args.output_dir, field="--output-dir")
    read = read_files(config, *inputs)
    check_store_is_no_input(store, read, store_place(args, config) if config is not None else None)
    check_run_outputs(outputs_of(args), store, read)
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
    if not args.no_save:
        check_can_save(args, store, config)


def check_can_save(args: argparse.Namespace, store: object, config: Config | None) -> None:
    """Refuse now a store the run could not be saved to: read-only (exit 2), or locked
    by another process (exit 3), rather than after the whole evaluation."""
    from retrievalkit.stores import read_only_reason

    path = getattr(store, "path", None)
    reason = read_only_reason(path) if isinstance(path, Path) else None
    if reason is not None:
        raise InputError(
            f"cannot save to {getattr(store, 'url', path)}: {reason}",
            hint="choose another --store, or run with --no-save",
            **(store_place(args, config) if config is not None else {"field": "--store"}),
        )
    probe = getattr(store, "check_can_write", None)
    if callable(probe):
        probe()


def run(args: argparse.Namespace) -> int:
    from retrievalkit.api import gate, load_set
    from retrievalkit.cli.collector import keeping
    from retrievalkit.formats.labels import label_effect, read_extra_labels
    from retrievalkit.pipeline.gating.gate import check_slices
    from retrievalkit.render.summary import EvalReport

    config = load_config(args)
    settings = evaluation_settings(args, config)
    gated = thresholds(args, config)
    _check_before_opening(args, config)
    store = open_configured_store(args, config)
    extra_labels = read_extra_labels(args.extra_labels)
    with keeping():  # the set lives to the end: no collection walks it
        golden = load_set(args.set, config=config)
    warn_about_labels(args, extra_labels, [q.id for q in golden.questions], f"set {golden.name}")
    check_slices(gated.slices, golden.questions, source=config.source, set_name=golden.name)
    inputs = [
        ("--set", golden.source),
        ("--config", None if config.source is None else str(config.source)),
        *(("--extra-labels", path) for path in args.extra_labels),
    ]
    check_before_running(args, store, config, inputs)
    if args.sequential:
        _check_sequential(settings)
        return _run_sequential(args, golden, store, gated, settings)
    from retrievalkit.cli.streams import plugin_ground

    result = _evaluated(args, golden, settings)
    record = result.record
    with plugin_ground():  # a store plugin is plugin code too
        verdict = gate(result, store, gated, baseline=args.baseline)
    saved_to, interrupted = _saved(args, result, golden, verdict, store)
    if interrupted is not None:
        return interrupted
    # The outcome is decided here, before anything is printed: whether a reader is still
    # there for the report (a closed pipe) or the output folder can be written changes
    # what the user sees, never the exit code of the run itself.
    regressed = verdict.regressed
    exit_code = EXIT_REGRESSION if regressed and args.fail_on_regression else EXIT_OK
    report = EvalReport(
        record,
        golden.questions,
        verdict if verdict.baseline_run_id is not None else None,
        saved_to,
        baseline_note=verdict.note,
        not_saved_reason=None if saved_to else "--no-save",
        extra_labels=(
            label_effect(
                record.outcomes, record.manifest.ks, extra_labels, sources=args.extra_labels
            )
            if args.extra_labels
            else None
        ),
        diagnostics=result.warnings,
        returned_ids=result.returned_ids,
    )
    warn_returned_ids(result.returned_ids)
    if settings.get("cluster_by") is None:
        # Only once the run succeeded: a bad input stays one line on stderr.
        _warn_related(args, golden)
    _emit_after_saving(report, args, saved_to)
    if regressed and not args.fail_on_regression:
        print(
            "retrievalkit: regression found (exit code 0 without --fail-on-regression)",
            file=sys.stderr,
        )
    return exit_code


def _check_before_opening(args: argparse.Namespace, config: Config) -> None:
    """Refuse, before the store is opened (SQLite may write beside it), a store or an
    output that is one of the input files; `check_before_running` checks again once the
    set is loaded and the store open."""
    from retrievalkit.cli.commands.collisions import (
        check_run_outputs,
        check_store_url,
        outputs_of,
        read_files,
        store_at,
    )

    early = read_files(
        config,
        ("--set", args.set if _exists(Path(args.set)) else None),
        *(("--extra-labels", path) for path in args.extra_labels),
    )
    check_store_url(store_url(args, config), early, store_place(args, config))
    check_run_outputs(outputs_of(args), store_at(store_url(args, config)), early)


def _check_sequential(settings: dict[str, Any]) -> None:
    """Drop the executor settings from a ``--sequential`` run's, refusing what it cannot
    do: ask on Ray, or score chunk ids as documents."""
    settings.pop("ray_address", None)
    if settings.pop("executor", None) is not None:
        raise InputError(
            "--sequential asks one question after another in this process",
            field="--executor",
            hint="leave --executor ray out of a sequential run",
        )
    if settings.pop("chunk_separator", None) is not None:
        raise InputError(
            "--sequential cannot score chunk ids as documents",
            field="--chunk-separator",
            hint="leave --sequential out, or give the retriever a doc_id_separator",
        )


def _evaluated(
    args: argparse.Namespace, golden: GoldenQuestionSet, settings: dict[str, Any]
) -> Run:
    """The run of ``--retriever`` on ``golden``, with a progress bar for a table on a
    terminal; a run failed by its error rate gets its report (exit 1) before the error."""
    from retrievalkit.api import evaluate
    from retrievalkit.cli.streams import plugin_ground
    from retrievalkit.errors import RunFailed
    from retrievalkit.pipeline.engine.record import git_commit
    from retrievalkit.render.summary import EvalReport

    # Only a table on a terminal shows progress: other runs never import rich for it.
    status = console(args, stderr=True) if not args.quiet and args.format == "table" else None
    try:
        from retrievalkit.render.terminal import watched

        if status is not None and watched(sys.stderr):
            from rich.progress import Progress

            with Progress(console=status, transient=True) as bar, plugin_ground():
                task = bar.add_task(
                    f"{args.retriever} on {golden.name}", total=len(golden.questions)
                )
                return evaluate(
                    golden,
                    args.retriever,
                    git_commit=git_commit(),
                    progress=lambda done: bar.advance(task, done),
                    **settings,
                )
        with plugin_ground():
            return evaluate(golden, args.retriever, git_commit=git_commit(), **settings)
    except RunFailed as failure:
        errored, total = failure.run.errored, len(golden.questions)
        emit_report(
            EvalReport(
                failure.run.record,
                golden.questions,
                None,
                None,
                baseline_note="not compared: the run failed",
                not_saved_reason=f"{errored} of {total} questions errored, over the "
                f"allowed error rate {settings['max_error_rate']:g}",
                diagnostics=failure.run.warnings,
                returned_ids=failure.run.returned_ids,
            ),
            args,
            ci=True,
            failed=str(failure),
        )
        raise


def _saved(
    args: argparse.Namespace,
    result: Run,
    golden: GoldenQuestionSet,
    verdict: Verdict,
    store: ResultStore,
) -> tuple[str | None, int | None]:
    """Save the run with its verdict (unless ``--no-save``, or in a process a plugin
    forked): where it was saved, and the exit code to stop with when interrupted while
    saving (the run then saved whole). A failed save ends in `_not_saved`."""
    from retrievalkit.cli.streams import forked_by_plugin, plugin_ground

    if args.no_save or forked_by_plugin():
        return None, None
    from retrievalkit.cli.interrupts import exit_code_for, interrupts_deferred, note_saved

    record = result.record
    failed_save: StoreError | None = None
    with interrupts_deferred() as deferred, plugin_ground():
        try:
            store.save(record)
        except StoreError as error:
            failed_save = error
        else:
            note_saved(record.run_id, store.url)
            keep_verdict(store, record, verdict)
    if failed_save is not None:
        return None, _not_saved(args, result, golden, verdict, failed_save, deferred)
    if deferred.received:
        print(
            f"retrievalkit: interrupted while saving; run {record.run_id} was saved whole "
            f"to {store.url}",
            file=sys.stderr,
        )
        return store.url, exit_code_for(deferred.signum)
    return store.url, None


def _emit_after_saving(report: EvalReport, args: argparse.Namespace, saved_to: str | None) -> None:
    """`emit_report`; when it fails after the run was saved, the error says the run WAS
    saved and only the report files are missing."""
    try:
        emit_report(report, args, ci=True)
    except RetrievalkitError as error:
        if saved_to is None:
            raise
        run_id = report.record.run_id
        if not isinstance(error, InputError):
            raise EvaluationError(
                f"{error}; the run {run_id} WAS saved to {saved_to} (only the report "
                "files are missing: retrievalkit show RUN_ID prints them again)"
            ) from None
        raise InputError(
            f"{error.detail}; the run {run_id} WAS saved to {saved_to}",
            source=error.source,
            field=error.field,
            hint="only the report files are missing: retrievalkit show RUN_ID prints them again",
        ) from None


def warn_returned_ids(changes: IdChanges | None, who: str = "") -> None:
    """On stderr too, where a CI log shows it whatever the format (``--quiet`` too, which
    only shortens the report): returned ids the identity rule changed
    (`retrievalkit.formats.ids`)."""
    if changes is not None:
        from retrievalkit.render.terminal import printable

        print(f"retrievalkit: warning: {who}{printable(changes.warning())}", file=sys.stderr)


def warn_about_labels(
    args: argparse.Namespace, labels: ExtraLabels, question_ids: Sequence[str], where: str
) -> None:
    """On stderr, before anything runs: what is odd in the ``--extra-labels`` files (none
    in a file, pairs graded twice, labels of questions not in ``where``)."""
    for warning in (*labels.warnings, *labels.unknown_questions(question_ids, where)):
        print(f"retrievalkit: warning: --extra-labels {warning}", file=sys.stderr)


def _not_saved(
    args: argparse.Namespace,
    result: Any,
    golden: GoldenQuestionSet,
    verdict: Verdict,
    error: StoreError,
    deferred: Any,
) -> int:
    """A save that failed (a full disk, a lock held too long): the report says the run was
    not saved and why, and the last line says what was written and what was not."""
    from retrievalkit.cli.interrupts import exit_code_for
    from retrievalkit.render.summary import EvalReport

    reason = f"the save failed: {error}"
    report = EvalReport(
        result.record,
        golden.questions,
        verdict if verdict.baseline_run_id is not None else None,
        None,
        baseline_note=verdict.note,
        not_saved_reason=reason,
        diagnostics=result.warnings,
    )
    written = ""
    try:
        emit_report(report, args, ci=True, failed=reason)
    except RetrievalkitError as failure:
        written = f"; the report files were not written either ({failure})"
    else:
        if args.output_dir:
            written = f"; the report in {args.output_dir} says so"
    text = f"{error}{written}"
    if deferred.received:
        print(f"retrievalkit: interrupted while saving; {text}", file=sys.stderr)
        return exit_code_for(deferred.signum)
    if "nothing was saved" not in text and "not saved" not in text:
        text += f"; run {result.record.run_id} was not saved"
    raise StoreBusyError(text) if isinstance(error, StoreBusyError) else StoreError(text)


def _warn_related(args: argparse.Namespace, golden: GoldenQuestionSet) -> None:
    """On stderr (the report stays as it was): related questions evaluated as independent."""
    from retrievalkit.pipeline.engine.related_questions import related_warning

    warning = related_warning(golden.questions)
    if warning is not None and not args.quiet:
        print(f"retrievalkit: warning: {warning}", file=sys.stderr)


def _run_sequential(
    args: argparse.Namespace,
    golden: GoldenQuestionSet,
    store: ResultStore,
    gated: Thresholds,
    settings: dict[str, Any],
) -> int:
    """``eval --sequential``: ask until the confidence sequences settle the gate."""
    from retrievalkit.cli.streams import plugin_ground
    from retrievalkit.pipeline.engine.record import git_commit
    from retrievalkit.pipeline.gating.sequential_gate import evaluate_sequentially
    from retrievalkit.render.summary import EvalReport
    from retrievalkit.stats.sequential import PASS

    with plugin_ground():
        run, verdict, result = evaluate_sequentially(
            golden,
            args.retriever,
            store,
            gated,
            baseline=args.baseline,
            git_commit=git_commit(),
            **settings,
        )
    saved_to = None
    reason = "--no-save"
    if result.asked < result.total:
        reason = (
            f"a sequential run that stopped after {result.asked} of {result.total} questions "
            "does not become a baseline"
        )
    elif not args.no_save:
        from retrievalkit.cli.interrupts import exit_code_for, interrupts_deferred, note_saved

        with interrupts_deferred() as deferred, plugin_ground():
            store.save(run.record)
            note_saved(run.record.run_id, store.url)
            keep_verdict(store, run.record, verdict)
        saved_to = store.url
        if deferred.received:
            print(
                f"retrievalkit: interrupted while saving; run {run.record.run_id} was saved "
                f"whole to {store.url}",
                file=sys.stderr,
            )
            return exit_code_for(deferred.signum)
    report = EvalReport(
        run.record,
        tuple(golden.questions[index] for index in range(len(golden.questions))
              if golden.questions[index].id in {o.question_id for o in run.record.outcomes}),
        verdict,
        saved_to,
        baseline_note=verdict.note,
        not_saved_reason=None if saved_to else reason,
        diagnostics=run.warnings,
        returned_ids=run.returned_ids,
    )  # fmt: skip
    warn_returned_ids(run.returned_ids)
    # Decided before anything is printed: a closed stdout changes what is seen, not the code.
    failed = result.decision != PASS
    exit_code = EXIT_REGRESSION if failed and args.fail_on_regression else EXIT_OK
    emit_report(report, args, ci=True)
    if failed and not args.fail_on_regression:
        print(
            f"retrievalkit: sequential gate {result.decision} (exit code 0 without "
            "--fail-on-regression)",
            file=sys.stderr,
        )
    return exit_code


def keep_verdict(store: ResultStore, record: ResultRecord, verdict: Verdict) -> None:
    """Hand the gate's verdict to a store that keeps verdicts (`VerdictStore`)."""
    from retrievalkit.stores import VerdictStore

    if isinstance(store, VerdictStore):
        store.save_verdict(record, verdict)
