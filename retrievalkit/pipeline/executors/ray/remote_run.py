"""One run with its questions asked on a Ray cluster, scored here exactly as a local run.

`retrievalkit.evaluate(..., executor="ray")` comes here: the retriever is built on every
worker from its configuration (never in this process), the questions go out in batches,
and the answers come back in the set's order to the same scorers, stage scorer and
record as a local run's (`retrievalkit.pipeline.engine.run`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from retrievalkit.formats.ids import ReturnedIds
from retrievalkit.metrics.scoring import ScoringOptions
from retrievalkit.model.values import GoldenQuestionSet
from retrievalkit.pipeline.engine.evaluator import STREAM_BATCH, Retrievals
from retrievalkit.pipeline.engine.run import RetrieverPlan, Run, finished_run
from retrievalkit.pipeline.executors.ray.ray_worker import CHUNKS, PLAIN, STAGES, Build

if TYPE_CHECKING:
    from retrievalkit.formats.config import Config
    from retrievalkit.model.values import GoldenQuestion, Retrieval
    from retrievalkit.pipeline.sweeps.sweep import Settings


def build_of(plan: RetrieverPlan) -> Build:
    """What a worker builds ``plan``'s retriever from: its name and the configuration's
    tables (secrets stay ``*_env`` names, read on the worker), or the object itself."""
    if plan.instance is not None:
        from retrievalkit.redaction import redact_options

        # An object's options only describe it: their secrets stay here, where the
        # errors coming back are scrubbed of them.
        return Build(plan.name, plan.config, redact_options(plan.options), plan.instance)
    return Build(plan.name, plan.config)


def evaluate_on_ray(
    golden: GoldenQuestionSet,
    plan: RetrieverPlan,
    scoring: ScoringOptions,
    *,
    address: str | None,
    overfetch: int,
    concurrency: int,
    timeout: float | None,
    chunk_separator: str | None,
    progress: Callable[[int], None] | None,
    git_commit: str | Literal["detect"] | None,
    now: dt.datetime | None,
    max_error_rate: float | None,
    provider: Any,
) -> Run:
    """The run of ``plan``'s retriever on ``golden``, its questions asked on Ray."""
    from retrievalkit.metrics.scoring import RunScorer
    from retrievalkit.pipeline.engine.stages import StageScorer
    from retrievalkit.pipeline.executors.ray.ray_cluster import pool

    questions = golden.questions
    depth = max(scoring.ks)
    with pool(address) as workers:
        profile = workers.prepare(plan.name, build_of(plan), label=plan.name)
        resolved = plan.build_as(profile)
        scorer = RunScorer(questions, scoring, chunks=False if profile.staged else None)
        mode = STAGES if profile.staged else PLAIN
        if not profile.staged and (chunk_separator is not None or scorer.with_chunks):
            mode = CHUNKS
        staged = StageScorer(questions, scoring) if profile.staged else None
        notes = ReturnedIds()
        for low in range(0, len(questions), STREAM_BATCH):
            window = questions[low : low + STREAM_BATCH]
            (parts,) = workers.ask(
                [(plan.name, window)],
                mode=mode,
                depth=depth,
                overfetch=overfetch,
                timeout=timeout,
                concurrency=concurrency,
                chunk_separator=chunk_separator,
                label=plan.name,
                progress=progress,
            )
            answers = _scrubbed(
                Retrievals.joined([part.retrievals for part in parts]), plan.secrets
            )
            for part in parts:
                notes.merge(part.notes())
            if staged is not None:
                stages = [stage for part in parts for stage in part.stages or ()]
                scorer.add(answers)
                staged.add(answers, stages)
            elif mode == CHUNKS:
                chunks = [ranking for part in parts for ranking in part.chunks or ()]
                scorer.add(answers, chunks)
            else:
                scorer.add(answers)
    report = None
    if staged is not None:
        report, columns = staged.finish()
        scorer.extra_columns.update(columns)
    # What the local run records: a staged run keeps neither (`staged_run`).
    extra: Mapping[str, str] | None = (
        None
        if chunk_separator is None or staged is not None
        else {"chunk_separator": chunk_separator}
    )
    return finished_run(
        golden,
        scorer,
        resolved,
        overfetch=overfetch,
        git_commit=git_commit,
        now=now,
        max_error_rate=max_error_rate,
        provider=provider,
        extra=extra,
        stages=report,
        notes=None if staged is not None else notes,
    )


class RaySweepAsker:
    """A sweep's configurations built and asked on the Ray workers of ``workers``
    (`retrievalkit.pipeline.sweeps.sweep.RemoteAsker`): each worker builds a configuration once,
    sharing stages between configurations as a local sweep does."""

    def __init__(self, workers: Any, retriever: str, sweep: str, share: bool) -> None:
        self.workers = workers
        self.retriever = retriever
        self.sweep = sweep
        self.share = share
        self.reused = 0
        """Answers the workers' shared stages gave from memory instead of asking again."""

    def ask_many(
        self,
        jobs: Sequence[tuple[str, Config, Sequence[GoldenQuestion]]],
        settings: Settings,
    ) -> list[list[Retrieval]]:
        label = f"sweep {self.sweep}"
        for key, config, _ in jobs:
            self.workers.prepare(key, Build(self.retriever, config), label=label, share=self.share)
        answered = self.workers.ask(
            [(key, questions) for key, _, questions in jobs],
            mode=PLAIN,
            depth=max(settings.ks),
            overfetch=settings.overfetch,
            timeout=settings.timeout,
            concurrency=settings.concurrency,
            chunk_separator=None,
            label=label,
        )
        secrets = _configured_secrets(jobs[0][1]) if jobs else []
        self.reused += sum(part.reused for parts in answered for part in parts)
        return [
            list(_scrubbed(Retrievals.joined([part.retrievals for part in parts]), secrets))
            for parts in answered
        ]


def _configured_secrets(config: Config) -> list[str]:
    """The secrets this process knows of the configuration (its ``*_env`` values here)."""
    from retrievalkit.redaction import secret_values

    return [value for entry in config.retrievers.values() for value in secret_values(entry.options)]


def _scrubbed(retrievals: Retrievals, secrets: Sequence[str]) -> Retrievals:
    """``retrievals`` with this process's secrets scrubbed from their errors too (the
    worker scrubbed its own): a worker's environment may hold other values."""
    if not retrievals.errors or not secrets:
        return retrievals
    from retrievalkit.redaction import scrub

    retrievals.errors = {
        position: scrub(message, secrets) for position, message in retrievals.errors.items()
    }
    return retrievals
