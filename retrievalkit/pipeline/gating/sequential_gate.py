"""``eval --sequential``: ask questions in a seeded random order and stop once the gate is settled.

The decision rules (betting confidence sequences, the whole-set rule) are
`retrievalkit.stats.sequential`; this module resolves the retriever and the baseline,
asks, scores and gates the questions asked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from retrievalkit.errors import InputError
from retrievalkit.stats.intervals import DEFAULT_SEED
from retrievalkit.stats.sequential import (
    SequentialResult,
    run_sequentially,
)

if TYPE_CHECKING:
    from retrievalkit.model.values import GoldenQuestionSet
    from retrievalkit.pipeline.engine.run import Run
    from retrievalkit.pipeline.gating.gate import Verdict
    from retrievalkit.pipeline.gating.thresholds import Thresholds
    from retrievalkit.stores import ResultStore


def evaluate_sequentially(
    golden: GoldenQuestionSet,
    retriever: Any,
    store: ResultStore,
    thresholds: Thresholds,
    *,
    baseline: str | None = None,
    k: Sequence[int],
    overfetch: int,
    slices: Sequence[str] = (),
    confidence: float,
    resamples: int,
    concurrency: int = 1,
    timeout: float | None = None,
    max_error_rate: float | None = 0.0,
    git_commit: str | None = None,
    seed: int = DEFAULT_SEED,
    config: Any = None,
    metrics: Sequence[str] = (),
    cluster_by: str | None = None,
    repeat: int = 1,
    warmup: int = 0,
    costs: Mapping[str, Mapping[str, float]] | None = None,
) -> tuple[Run, Verdict, SequentialResult]:
    """Ask ``golden``'s questions in a seeded random order until the gate is settled.

    The run holds the questions asked (its manifest says how many, under
    ``extra["sequential"]``); the verdict's ``regressed`` is the sequential decision
    (``undecided`` fails). The pipeline's retrieval, scoring and record steps are those
    of `retrievalkit.api.evaluate` (``warmup`` questions asked first and discarded, each
    question asked ``repeat`` times, its latency the median). With ``cluster_by`` whole
    clusters of related questions are asked and weighed as one draw, and the run's intervals and the
    verdict's paired tests treat them as the unit.
    """
    from retrievalkit.formats.ids import ReturnedIds
    from retrievalkit.metrics.definitions import normalise_ks, requested_metrics
    from retrievalkit.metrics.scoring import ScoringOptions, score_run, slice_label
    from retrievalkit.pipeline.engine.evaluator import (
        Retrieval,
        Retrievals,
        evaluate_questions,
    )
    from retrievalkit.pipeline.engine.machine import machine_at_start
    from retrievalkit.pipeline.engine.run import (
        as_config,
        checked_clusters,
        priced,
        resolve_retriever,
        scored_run,
    )
    from retrievalkit.pipeline.engine.stages import StageScorer, ask_stages, has_stages
    from retrievalkit.pipeline.engine.warmup import warm_up_retriever
    from retrievalkit.pipeline.gating.baselines import choose_baseline
    from retrievalkit.pipeline.gating.gate import compare_runs, settle_sequentially, split_slice
    from retrievalkit.stats.clusters import questions_clusters
    from retrievalkit.stats.power import gated_metrics

    cluster_by = checked_clusters(golden, cluster_by)
    resolved = resolve_retriever(retriever, None, None, as_config(config))
    choice = choose_baseline(store, golden.name, resolved.name, explicit=baseline)
    if choice.record is None:
        raise InputError(
            f"--sequential decides against a baseline, and {golden.name} × {resolved.name} "
            f"has no run in {store.url}",
            field="--sequential",
            hint="run eval once without --sequential to store a baseline",
        )
    questions = golden.questions
    gates = []
    for slice_name, metric, threshold in gated_metrics(thresholds.metrics, thresholds.slices):
        if slice_name is None:
            members = [question.id for question in questions]
        else:
            field, label = split_slice(slice_name)
            members = [q.id for q in questions if slice_label(q, field) == label]
        gates.append((slice_name, metric, threshold, members))
    before = {
        metric: {
            outcome.question_id: float(value)
            for outcome in choice.record.outcomes
            if (value := outcome.scores.get(metric)) is not None
        }
        for metric in {metric for _, metric, _, _ in gates}
    }
    scoring = ScoringOptions(
        ks=normalise_ks(k),
        resamples=resamples,
        confidence=confidence,
        slices=tuple(slices),
        metrics=requested_metrics(metrics),
        cluster_by=cluster_by,
    )
    quick = attrs.evolve(scoring, resamples=1, cluster_by=None)
    answered: dict[int, Retrieval] = {}
    notes = ReturnedIds()
    staged = has_stages(resolved.retriever)
    stages_of: dict[int, dict[str, tuple[str, ...]] | None] = {}

    def ask(indices: list[int]) -> list[dict[str, float | None]]:
        chosen = [questions[index] for index in indices]
        answers: Sequence[Retrieval]
        if staged:
            # A retriever that reports its stages has each scored, as in a whole run.
            answers, stages = ask_stages(
                resolved.retriever,
                chosen,
                depth=max(scoring.ks),
                overfetch=overfetch,
                timeout=timeout,
                secrets=resolved.secrets,
                concurrency=concurrency,
                notes=notes,
                repeat=repeat,
            )
            stages_of.update(zip(indices, stages, strict=True))
        else:
            answers = evaluate_questions(
                resolved.retriever,
                chosen,
                depth=max(scoring.ks),
                overfetch=overfetch,
                concurrency=concurrency,
                timeout=timeout,
                secrets=resolved.secrets,
                notes=notes,
                repeat=repeat,
            )
        answered.update(zip(indices, answers, strict=True))
        scores = [dict(outcome.scores) for outcome in score_run(chosen, answers, quick).outcomes]
        if staged:
            # Each stage's values too, so that a threshold on stage.S:METRIC is gated.
            by_stage = StageScorer(chosen, quick)
            by_stage.add(Retrievals.of(answers), [stages_of[index] for index in indices])
            for name, column in by_stage.finish()[1].items():
                for values, value in zip(scores, column.tolist(), strict=True):
                    values[name] = None if value != value else value  # NaN: undefined
        return scores

    machine = machine_at_start(concurrency=concurrency, repeat=repeat, warmup=warmup)
    if warmup:
        warm_up_retriever(
            resolved.retriever,
            questions,
            warmup,
            depth=max(scoring.ks),
            overfetch=overfetch,
            concurrency=concurrency,
            timeout=timeout,
        )
    asked, result = run_sequentially(
        [question.id for question in questions],
        ask,
        gates,
        before,
        alpha=1.0 - confidence,
        batch=concurrency,
        seed=seed,
        clusters=None if cluster_by is None else questions_clusters(questions, cluster_by).tolist(),
    )
    kept = sorted(asked)
    run = scored_run(
        golden,
        [questions[index] for index in kept],
        [answered[index] for index in kept],
        resolved,
        scoring,
        overfetch=overfetch,
        git_commit=git_commit,
        now=None,
        max_error_rate=max_error_rate,
        extra={"sequential": f"{result.decision} after {result.asked} of {result.total} questions"},
        stages=[stages_of[index] for index in kept] if staged else None,
        notes=notes,
        machine=machine,
    )
    run = priced(run, costs or {})
    verdict = compare_runs(
        run.record.outcomes,
        golden.content_hash,
        choice.record,
        thresholds.metrics,
        resamples=resamples,
        confidence=confidence,
        seed=scoring.seed,
        require_significant=thresholds.require_significant,
        slice_thresholds=thresholds.slices,
        questions=[questions[index] for index in kept],
        baseline_kind=choice.kind,
        cluster_by=cluster_by,
        latency_thresholds=thresholds.latency,
        candidate_machine=run.record.manifest.machine,
        cost_thresholds=thresholds.cost,
        candidate_costs=run.record.manifest.costs,
    )
    return run, settle_sequentially(verdict, result), result
