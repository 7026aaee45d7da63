"""``retrievalkit compare``: run or load two or more systems and compare them per question."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from retrievalkit.cli.commands import SUMMARIES
from retrievalkit.cli.commands.options import (
    add_asking_options,
    add_cluster_by,
    add_common,
    add_interval_options,
    add_metric,
    console,
    evaluation_settings,
    load_config,
    open_configured_store,
)
from retrievalkit.errors import EXIT_OK, InputError

if TYPE_CHECKING:
    from retrievalkit.api import Run
    from retrievalkit.formats.labels import Label, LabelEffect, PairedCorrection
    from retrievalkit.model.records import ResultRecord
    from retrievalkit.model.values import GoldenQuestionSet
    from retrievalkit.pipeline.gating.comparison import Comparison
    from retrievalkit.stores import ResultStore

NAME, HELP = SUMMARIES["compare"]


def _retriever(text: str) -> tuple[str, str]:
    return ("retriever", text)


def _run(text: str) -> tuple[str, str]:
    return ("run", text)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--set",
        metavar="NAME_OR_FILE",
        help="the golden set to run the retrievers on (needed with --retriever; with --run only, "
        "it supplies question texts and the runs must have been made on it)",
    )
    parser.add_argument(
        "--retriever",
        dest="systems",
        action="append",
        type=_retriever,
        metavar="NAME",
        help="a retriever to run on --set (repeatable); the first system given is the baseline",
    )
    parser.add_argument(
        "--run",
        dest="systems",
        action="append",
        type=_run,
        metavar="RUN_ID",
        help="a stored run (repeatable, mixable with --retriever in any order)",
    )
    parser.add_argument(
        "--allow-different-sets",
        action="store_true",
        help="compare runs made on different versions of a set, on the question ids they share",
    )
    parser.add_argument(
        "--changed-by",
        metavar="METRIC",
        help="order 'the questions that changed most' by this metric (default rr)",
    )
    parser.add_argument(
        "--changed",
        type=int,
        default=10,
        metavar="N",
        help="how many of the questions that changed most to list per pair (default 10)",
    )
    add_asking_options(
        parser,
        k_help="cut-offs for the retrievers run now (default: [eval] k of the configuration, "
        "else 1,3,5,10, plus the cut-off of every gated metric; 1 and 3 are always added)",
    )
    add_interval_options(parser)
    parser.add_argument(
        "--no-save", action="store_true", help="do not save the runs of the retrievers run now"
    )
    parser.add_argument(
        "--extra-labels",
        action="append",
        default=[],
        metavar="FILE",
        help="also show each system's judged share and metrics with these labels merged in "
        "(e.g. from retrievalkit judge; repeatable); with human rows (judge = human) for a "
        "sample of the questions, also each pair's judge-corrected (PPI) difference",
    )
    parser.add_argument(
        "--label-next",
        type=int,
        default=0,
        metavar="N",
        help="with --extra-labels holding human rows: list the N questions without human "
        "labels whose labels would narrow each pair's judge-corrected interval of the "
        "--changed-by metric most",
    )
    pairing = parser.add_mutually_exclusive_group()
    pairing.add_argument(
        "--all-pairs",
        action="store_true",
        help="compare every pair of systems, Holm-adjusting the p-values over all pairs and "
        "metrics (the runs must share their questions)",
    )
    pairing.add_argument(
        "--control",
        metavar="NAME",
        help="compare every system with this one (a label, run id or retriever name), "
        "Holm-adjusting over all pairs and metrics",
    )
    parser.add_argument(
        "--correction",
        metavar="METHOD",
        help="how the p-values of many comparisons are adjusted: holm (the default) or "
        "tukey (randomised Tukey HSD over the systems, 10,000 seeded permutations)",
    )
    add_cluster_by(parser)
    add_metric(parser)
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    from retrievalkit.api import Run, compare, load_set
    from retrievalkit.cli.commands.evaluate import check_can_save, warn_about_labels
    from retrievalkit.formats.labels import label_effect, read_extra_labels
    from retrievalkit.pipeline.engine.arguments import check_correction
    from retrievalkit.pipeline.engine.record import git_commit
    from retrievalkit.pipeline.gating.comparison import DEFAULT_CHANGED_BY

    config = load_config(args)
    systems: list[tuple[str, str]] = args.systems or []
    _check_systems(args, systems)
    # The retrievers run now are evaluated exactly as `eval` would, so their records are
    # the ones eval stores (and can serve as its baselines).
    settings = evaluation_settings(args, config)
    # Refused before any retriever runs, not after all of them.
    check_correction(args.correction, cluster_by=settings.get("cluster_by"))
    store = open_configured_store(args, config)
    extra_labels = read_extra_labels(args.extra_labels)
    _check_label_next(args, extra_labels)
    golden = load_set(args.set, config=config) if args.set else None
    if golden is not None:
        ids = [question.id for question in golden.questions]
        warn_about_labels(args, extra_labels, ids, f"set {golden.name}")
    evaluating = any(kind == "retriever" for kind, _ in systems)
    commit = git_commit() if evaluating else None
    if evaluating and not args.no_save:
        # Refused before any retriever runs, as eval does, not after all of them.
        check_can_save(args, store, config)
    runs, labels, fresh = _gathered_runs(systems, store, golden, settings, commit)
    comparison = compare(
        runs,
        labels=labels,
        allow_different_sets=args.allow_different_sets,
        resamples=settings["resamples"],
        confidence=settings["confidence"],
        changed_by=args.changed_by or DEFAULT_CHANGED_BY,
        changed=args.changed,
        question_texts=({} if golden is None else {q.id: q.question for q in golden.questions}),
        saved_to=[None if kind == "run" or args.no_save else store.url for kind, _ in systems],
        cluster_by=settings.get("cluster_by"),
        questions=None if golden is None else golden.questions,
        all_pairs=args.all_pairs,
        control=args.control,
        correction=args.correction,
    )
    if not args.no_save:
        interrupted = _save_fresh(fresh, store)
        if interrupted is not None:
            return interrupted
    records = [run.record if isinstance(run, Run) else run for run in runs]
    if golden is None:
        asked = [o.question_id for record in records for o in record.outcomes]
        warn_about_labels(args, extra_labels, list(dict.fromkeys(asked)), "the compared runs")
    effects = {
        label: label_effect(
            record.outcomes, record.manifest.ks, extra_labels, sources=args.extra_labels
        )
        for label, record in zip(labels, records, strict=True)
        if args.extra_labels
    }
    paired = _paired_corrections(
        args, comparison, dict(zip(labels, records, strict=True)), extra_labels, settings
    )
    _write_comparison(args, comparison, effects, paired)
    return EXIT_OK


def _check_systems(args: argparse.Namespace, systems: Sequence[tuple[str, str]]) -> None:
    """Refuse, before anything is loaded, fewer than two systems, a negative
    ``--changed``, and retrievers to run without a ``--set`` to run them on."""
    if len(systems) < 2:
        raise InputError(
            f"compare needs at least two systems, got {len(systems)}",
            field="--retriever/--run",
            hint="e.g. --set demo --retriever bm25-demo --retriever my-bm25, or --run ID --run ID",
        )
    if args.changed < 0:
        raise InputError(f"must be 0 or more, got {args.changed}", field="--changed")
    if any(kind == "retriever" for kind, _ in systems) and not args.set:
        raise InputError(
            "the retrievers need a set to run on",
            field="--set",
            hint="add --set NAME_OR_FILE, or compare stored runs with --run RUN_ID",
        )


def _gathered_runs(
    systems: Sequence[tuple[str, str]],
    store: ResultStore,
    golden: GoldenQuestionSet | None,
    settings: Mapping[str, Any],
    commit: str | None,
) -> tuple[list[Run | ResultRecord], list[str], list[ResultRecord]]:
    """Each system in order: a ``--run`` read from ``store``, a ``--retriever`` evaluated
    on ``golden`` as ``eval`` would; with the label each is shown under (made unique) and
    the records of the runs made now, still to be saved."""
    from retrievalkit.api import evaluate
    from retrievalkit.cli.commands.evaluate import warn_returned_ids
    from retrievalkit.cli.streams import plugin_ground

    runs: list[Run | ResultRecord] = []
    labels: list[str] = []
    fresh: list[ResultRecord] = []
    used: set[str] = set()
    for index, (kind, name) in enumerate(systems, start=1):
        if kind == "run":
            record = store.get(name)
            if record is None:
                raise InputError(
                    f"no run {name} in {store.url}",
                    field="--run",
                    hint="retrievalkit history --set S --retriever R lists the stored runs",
                )
            runs.append(record)
            label = record.model if record.model not in used else f"{record.model}@{name}"
        else:
            assert golden is not None
            with plugin_ground():
                result = evaluate(golden, name, git_commit=commit, **settings)
            runs.append(result)
            fresh.append(result.record)
            label = name if name not in used else f"{name} #{index}"
            warn_returned_ids(result.returned_ids, f"{label}: ")
        used.add(label)
        labels.append(label)
    return runs, labels, fresh


def _save_fresh(fresh: Sequence[ResultRecord], store: ResultStore) -> int | None:
    """Save the runs made now, each whole even when interrupted: then the exit code of
    the signal (after saying what was saved), else None."""
    from retrievalkit.cli.interrupts import exit_code_for, interrupts_deferred, note_saved

    with interrupts_deferred() as deferred:
        for record in fresh:
            store.save(record)
            note_saved(record.run_id, store.url)
    if not deferred.received:
        return None
    saved = ", ".join(record.run_id for record in fresh)
    print(
        f"retrievalkit: interrupted while saving; runs {saved} were saved whole to {store.url}",
        file=sys.stderr,
    )
    return exit_code_for(deferred.signum)


def _write_comparison(
    args: argparse.Namespace,
    comparison: Comparison,
    effects: Mapping[str, LabelEffect],
    paired: Sequence[tuple[tuple[str, str], PairedCorrection | None, dict[str, list[str]]]],
) -> None:
    """The comparison in ``--format``, with the effect of the extra labels and each pair's
    judge-corrected difference (and, in JSON, the questions to label next)."""
    from retrievalkit.render.comparison import (
        comparison_document,
        comparison_renderable,
        render_comparison_markdown,
    )
    from retrievalkit.render.extra_labels import (
        effects_document,
        effects_markdown,
        effects_renderable,
        paired_data,
        paired_markdown,
        paired_renderable,
    )
    from retrievalkit.render.summary import to_json_text

    if args.format == "json":
        document = comparison_document(comparison)
        if effects:
            document["extra_labels"] = effects_document(effects)
        for index, (_, correction, next_up) in enumerate(paired):
            if correction is not None:
                document["pairs"][index]["ppi"] = paired_data(correction)
                if next_up:
                    metric, questions = next(iter(next_up.items()))
                    document["pairs"][index]["label_next"] = {
                        "metric": metric,
                        "questions": questions,
                    }
        sys.stdout.write(to_json_text(document) + "\n")
    elif args.format == "markdown":
        sys.stdout.write(
            render_comparison_markdown(comparison)
            + effects_markdown(effects)
            + "".join(
                paired_markdown(names, correction, next_up)
                for names, correction, next_up in paired
                if correction is not None
            )
        )
    else:
        output = console(args)
        output.print(comparison_renderable(comparison))
        output.print(effects_renderable(effects))
        for names, correction, next_up in paired:
            if correction is not None:
                output.print(paired_renderable(names, correction, next_up))


def _paired_corrections(
    args: argparse.Namespace,
    comparison: Comparison,
    by_label: Mapping[str, ResultRecord],
    extra_labels: Iterable[Label],
    settings: Mapping[str, Any],
) -> list[tuple[tuple[str, str], PairedCorrection | None, dict[str, list[str]]]]:
    """Each pair's judge-corrected difference (None without human labels) and, with
    ``--label-next``, the questions to label next for its ``--changed-by`` metric."""
    from retrievalkit.formats.labels import paired_correction

    paired = []
    for pair in comparison.pairs if args.extra_labels else ():
        candidate, baseline = by_label[pair.candidate], by_label[pair.baseline]
        ks = sorted(set(candidate.manifest.ks) & set(baseline.manifest.ks))
        correction = paired_correction(
            candidate.outcomes,
            baseline.outcomes,
            ks or candidate.manifest.ks,
            extra_labels,
            confidence=settings["confidence"],
            resamples=settings["resamples"],
        )
        next_up = (
            {pair.changed_by: correction.label_next(pair.changed_by, args.label_next)}
            if correction is not None and args.label_next
            else {}
        )
        paired.append(((pair.baseline, pair.candidate), correction, next_up))
    return paired


def _check_label_next(args: argparse.Namespace, extra_labels: Iterable[Label]) -> None:
    """``--label-next`` ranks questions for human labels: it needs some to rank by."""
    if args.label_next < 0:
        raise InputError(f"must be 0 or more, got {args.label_next}", field="--label-next")
    if args.label_next and not args.extra_labels:
        raise InputError(
            "--label-next ranks questions for human labels beside a judge's",
            field="--label-next",
            hint="add --extra-labels FILE with the judge's rows and the human rows "
            "(judge = human) graded so far",
        )
    if args.label_next and not any(label.is_human for label in extra_labels):
        raise InputError(
            "--label-next needs human labels to rank questions by, and "
            f"{', '.join(args.extra_labels)} has none",
            field="--label-next",
            hint="label a random sample of the questions first (judge = human rows, e.g. "
            "from retrievalkit serve's judging queue)",
        )
