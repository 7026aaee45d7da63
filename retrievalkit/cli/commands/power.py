"""``retrievalkit power``: the smallest drop a set can detect, and the questions a drop needs."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from retrievalkit.cli.commands import SUMMARIES
from retrievalkit.cli.commands.options import (
    add_common,
    confidence_level,
    fraction,
    load_config,
    store_url,
)
from retrievalkit.errors import EXIT_OK, InputError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from retrievalkit.model.records import ResultRecord
    from retrievalkit.model.values import GoldenQuestionSet, QuestionOutcome
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
    parser.add_argument(
        "--cluster-by",
        metavar="FIELD",
        help="not available yet for power: the question counts it gives assume independent "
        "questions (see docs/power.md)",
    )
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    from retrievalkit.cli.commands.options import console
    from retrievalkit.pipeline.gate import DEFAULT_THRESHOLDS, check_slices
    from retrievalkit.plugins.resolution import resolve_set
    from retrievalkit.render.power import render_power_markdown, render_power_table
    from retrievalkit.stats.intervals import DEFAULT_CONFIDENCE
    from retrievalkit.stats.power import set_power

    if args.cluster_by is not None:
        raise InputError(
            "power does not model clusters yet: its question counts assume independent "
            "questions, and related questions would need more",
            field="--cluster-by",
            hint="drop --cluster-by; with clusters of m related questions, count clusters "
            "instead of questions as a rough guide",
        )
    config = load_config(args)
    confidence = args.confidence if args.confidence is not None else config.eval.confidence
    confidence = confidence or DEFAULT_CONFIDENCE
    if not 0.0 < confidence < 1.0:
        raise InputError("must be between 0 and 1, e.g. 0.95", field="--confidence")
    if args.drop is not None and not 0.0 < args.drop <= 1.0:
        raise InputError("must be above 0 and at most 1, e.g. 0.03", field="--drop")
    thresholds = dict(DEFAULT_THRESHOLDS)
    thresholds.update(config.regression.thresholds)
    slice_thresholds = {k: dict(v) for k, v in config.regression.slices.items()}
    golden = resolve_set(args.set, config)
    check_slices(slice_thresholds, golden.questions, source=config.source, set_name=golden.name)

    outcomes, baseline, evidence = None, None, "the set alone"
    if args.run or args.retriever:
        outcomes, baseline, evidence = _evidence(args, config, golden, thresholds, slice_thresholds)
    report: PowerReport = set_power(
        golden,
        thresholds,
        slice_thresholds,
        alpha=1.0 - confidence,
        drop=args.drop,
        outcomes=outcomes,
        baseline=None if baseline is None else baseline.outcomes,
        evidence=evidence,
    )
    if args.format == "json":
        from retrievalkit.formats.convert import to_json

        print(to_json(report, indent=2))
    elif args.format == "markdown":
        print(render_power_markdown(report))
    else:
        render_power_table(report, console(args))
    return EXIT_OK


def _evidence(
    args: argparse.Namespace,
    config: object,
    golden: GoldenQuestionSet,
    thresholds: dict[str, float],
    slice_thresholds: dict[str, dict[str, float]],
) -> tuple[Sequence[QuestionOutcome], ResultRecord | None, str]:
    """The run's outcomes, its baseline (or None) and a line saying where they came from."""
    from retrievalkit.formats.config import Config
    from retrievalkit.pipeline.baselines import choose_baseline
    from retrievalkit.stores import open_store, pinned_run_id

    assert isinstance(config, Config)
    store = open_store(store_url(args, config))
    if args.run:
        record = store.get(args.run)
        if record is None:
            raise InputError(
                f"no run {args.run} in {store.url}",
                field="--run",
                hint="retrievalkit history --set S --retriever R lists the stored runs",
            )
        if record.set != golden.name:
            raise InputError(
                f"run {args.run} is a run of the set '{record.set}', not of '{golden.name}'",
                field="--run",
                hint=f"name a run of '{golden.name}'",
            )
        pinned = pinned_run_id(store, record.set, record.model, record.grader)
        baseline = None
        if pinned is not None and pinned != record.run_id:
            baseline = store.get(pinned)
        if baseline is None:
            older = [
                other
                for other in store.runs(record.set, record.model, record.grader)
                if other.manifest.created_at <= record.manifest.created_at
                and other.run_id != record.run_id
            ]
            baseline = older[0] if older else None
        where = f"run {record.run_id}"
        return record.outcomes, baseline, _described(where, baseline)
    outcomes, model = _evaluate(args.retriever, config, golden, thresholds, slice_thresholds)
    choice = choose_baseline(store, golden.name, model)
    where = f"retriever {model}, evaluated now"
    return outcomes, choice.record, _described(where, choice.record)


def _described(where: str, baseline: ResultRecord | None) -> str:
    if baseline is None:
        return f"{where}; no baseline stored, so the candidate is assumed independent of it"
    return f"{where} against baseline {baseline.run_id}"


def _evaluate(
    name: str,
    config: object,
    golden: GoldenQuestionSet,
    thresholds: dict[str, float],
    slice_thresholds: dict[str, dict[str, float]],
) -> tuple[Sequence[QuestionOutcome], str]:
    from retrievalkit.formats.config import Config
    from retrievalkit.metrics.definitions import DEFAULT_KS, normalise_ks
    from retrievalkit.metrics.scoring import ScoringOptions, score_run
    from retrievalkit.pipeline.evaluator import DEFAULT_OVERFETCH, evaluate_questions
    from retrievalkit.plugins.resolution import resolve_retriever
    from retrievalkit.redaction import secret_values

    assert isinstance(config, Config)
    gated = {*thresholds, *(m for metrics in slice_thresholds.values() for m in metrics)}
    cutoffs = {int(k) for _, _, k in (m.partition("@") for m in gated) if k.isdigit()}
    ks = normalise_ks((*(config.eval.k or DEFAULT_KS), *cutoffs))
    resolved = resolve_retriever(name, config)
    retrievals = evaluate_questions(
        resolved.retriever,
        golden.questions,
        depth=max(ks),
        overfetch=config.eval.overfetch or DEFAULT_OVERFETCH,
        concurrency=config.eval.concurrency or 1,
        timeout=config.eval.timeout,
        secrets=sorted(secret_values(resolved.options)),
    )
    scores = score_run(golden.questions, retrievals, ScoringOptions(ks=ks, resamples=0))
    return scores.outcomes, resolved.name
