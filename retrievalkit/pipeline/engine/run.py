"""One run of a retriever over a set: resolving the retriever, asking, scoring, the `Run`.

The verbs of `retrievalkit.api` (`evaluate`, `gate`, `compare`...) and the pipeline steps
built on runs (the sequential gate, sweeps) share these.
"""

from __future__ import annotations

import datetime as dt
import html
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs

from retrievalkit.errors import InputError
from retrievalkit.errors import RunFailed as RunFailed
from retrievalkit.formats.numbers import bounds, number
from retrievalkit.model.outcomes import Outcomes
from retrievalkit.model.records import ResultRecord, StageReport
from retrievalkit.model.values import GoldenQuestionSet, Machine, MetricValue

if TYPE_CHECKING:
    from retrievalkit.formats.config import Config
    from retrievalkit.formats.ids import IdChanges, ReturnedIds
    from retrievalkit.metrics.scoring import RunScorer, ScoringOptions
    from retrievalkit.model.values import GoldenQuestion
    from retrievalkit.pipeline.engine.evaluator import Retrieval
    from retrievalkit.pipeline.gating.gate import Verdict
    from retrievalkit.plugins.resolution import Builder


#: The manifest's ``plugin`` for a retriever given as a Python object rather than by name.
OBJECT_PLUGIN = "python-object"


def as_config(config: Config | str | os.PathLike[str] | None) -> Config:
    from retrievalkit.formats.config import Config, find_config

    if isinstance(config, Config):
        return config
    return find_config(None if config is None else os.fspath(config))


@attrs.frozen
class Run:
    """One evaluation of a retriever on a set: the stored record and the questions.

    `metrics` are the overall means with their intervals, `slices` the same by form,
    hard class and each asked-for meta field, `outcomes` one entry per question.
    In a notebook a run shows itself as a table; `to_pandas()` and `to_arrow()` give
    one row per question (with pandas or pyarrow installed).
    """

    record: ResultRecord
    set: GoldenQuestionSet
    warnings: tuple[str, ...] = ()
    """What only the evaluation could see, e.g. questions the overfetch left short of
    distinct documents (the record's own warnings, such as chunk ids that never
    collapsed, come with every report of it)."""
    returned_ids: IdChanges | None = None
    """The returned ids the identity rule changed (`retrievalkit.formats.ids`): how many,
    and the first; None when it changed none."""

    @property
    def run_id(self) -> str:
        return self.record.run_id

    @property
    def retriever(self) -> str:
        """The retriever's name (the record's `model`)."""
        return self.record.model

    @property
    def metrics(self) -> Mapping[str, MetricValue]:
        return self.record.metrics

    @property
    def slices(self) -> Mapping[str, Mapping[str, Mapping[str, MetricValue]]]:
        return self.record.slices

    @property
    def outcomes(self) -> Outcomes:
        """The per-question outcomes, a sequence of `QuestionOutcome` held by column."""
        return self.record.outcomes

    @property
    def errored(self) -> int:
        """How many questions errored (each counts as a miss in every metric)."""
        return self.record.errored

    def rows(self) -> list[dict[str, Any]]:
        """One plain row per question: id, form, hard class, error, latency and every
        metric (None where undefined), in the set's order."""
        names = list(self.record.metrics)
        rows = []
        for outcome in self.record.outcomes:
            row: dict[str, Any] = {
                "question_id": outcome.question_id,
                "form": None if outcome.form is None else outcome.form.value,
                "hard_class": outcome.hard_class,
                "error": outcome.error,
                "latency_ms": outcome.latency_ms,
                "ranking": list(outcome.ranking),
            }
            row.update({name: outcome.scores.get(name) for name in names})
            rows.append(row)
        return rows

    def to_pandas(self) -> Any:
        """The per-question table as a `pandas.DataFrame` indexed by question id.

        Raises `ImportError` with the install command when pandas is not installed.
        """
        pandas = _optional("pandas", "to_pandas()")
        return pandas.DataFrame(self.rows()).set_index("question_id")

    def to_arrow(self) -> Any:
        """The per-question table as a `pyarrow.Table` (one row per question).

        Raises `ImportError` with the install command when pyarrow is not installed.
        """
        pyarrow = _optional("pyarrow", "to_arrow()")
        return pyarrow.Table.from_pylist(self.rows())

    def report(self, verdict: Verdict | None = None, *, saved_to: str | None = None) -> Any:
        """The `EvalReport` the command line renders for this run (with the gate's
        `verdict`, if any, and the store it was saved to)."""
        from retrievalkit.render.summary import EvalReport

        return EvalReport(
            self.record,
            self.set.questions,
            verdict,
            saved_to,
            diagnostics=self.warnings,
            returned_ids=self.returned_ids,
        )

    def to_markdown(self, verdict: Verdict | None = None) -> str:
        """The Markdown report, as `report.md` and `eval --format markdown` give it."""
        from retrievalkit.render.markdown import render_markdown

        return render_markdown(self.report(verdict))

    def write_report(
        self, directory: str | os.PathLike[str], verdict: Verdict | None = None
    ) -> list[str]:
        """Write `summary.json`, `per_question.jsonl` and `report.md` into `directory`
        (created if need be), as `eval --output-dir` does; returns the paths written."""
        from pathlib import Path

        from retrievalkit.render.report_files import write_report_files

        return [str(path) for path in write_report_files(self.report(verdict), Path(directory))]

    def _repr_html_(self) -> str:
        """The headline of the run for Jupyter: every metric with its interval."""
        e = html.escape
        record = self.record
        level = f"{record.manifest.confidence:.0%}"
        head = (
            f"<p><strong>{e(record.model)}</strong> on <strong>{e(record.set)}</strong>: "
            f"{len(record.outcomes)} questions, {record.errored} errored "
            f"(run <code>{e(record.run_id)}</code>)</p>"
        )
        rows = "".join(
            f"<tr><td>{e(name)}</td><td>{_number(value.mean)}</td>"
            f"<td>{_interval(value)}</td><td>{value.n}</td></tr>"
            for name, value in record.metrics.items()
        )
        return (
            f"{head}<table><thead><tr><th>metric</th><th>mean</th>"
            f"<th>{e(level)} interval</th><th>n</th></tr></thead><tbody>{rows}</tbody></table>"
        )


def _number(value: float | None) -> str:
    return number(value)


def _interval(value: MetricValue) -> str:
    return bounds(value.ci)


def _optional(module: str, method: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(
            f"Run.{method} needs {module}, which is not installed: pip install {module}"
        ) from None


@attrs.frozen
class ResolvedRetriever:
    """A retriever ready to ask, with what the manifest records about it."""

    name: str
    plugin: str
    options: Mapping[str, Any]
    retriever: Any
    secrets: tuple[str, ...]
    package: tuple[str, str] | None = None
    """The (name, version) of the package of its plugin, when it came from one."""


@attrs.frozen
class RetrieverPlan:
    """A retriever as named, before it is built: what the manifest records, the
    configuration it is built from, and (for one given as an object) the object."""

    name: str
    plugin: str
    options: Mapping[str, Any]
    config: Config
    secrets: tuple[str, ...]
    package: tuple[str, str] | None = None
    instance: Any = None

    def build(self, *, share: Builder | None = None) -> ResolvedRetriever:
        """The retriever, built (for a named one) in this process; with ``share``, as a
        sweep's builder hands it and its parts out."""
        if self.instance is not None:
            found = self.instance
        else:
            from retrievalkit.plugins.resolution import resolve_retriever

            found = resolve_retriever(self.name, self.config, share=share).retriever
        return self.build_as(found)

    def build_as(self, retriever: Any) -> ResolvedRetriever:
        """The plan with ``retriever`` standing for what it builds (for a retriever built
        elsewhere: what the record needs to know of it)."""
        return ResolvedRetriever(
            self.name, self.plugin, self.options, retriever, self.secrets, self.package
        )


def plan_retriever(
    retriever: Any, options: Mapping[str, Any] | None, name: str | None, config: Config
) -> RetrieverPlan:
    """`resolve_retriever` up to building: checks the name (or object), gathers the secrets."""
    from retrievalkit.redaction import secret_values

    instance = None
    if isinstance(retriever, str):
        from retrievalkit.formats.config import RetrieverConfig
        from retrievalkit.plugins.resolution import plan_retriever

        if options is not None:
            from retrievalkit.pipeline.engine.arguments import check_plugin_options

            options = check_plugin_options(options)
            # Options given here configure the plugin of that name for this call.
            named = name or retriever
            config = attrs.evolve(
                config,
                retrievers={
                    **config.retrievers,
                    named: RetrieverConfig(named, retriever, dict(options)),
                },
            )
            retriever = named
        from retrievalkit.plugins.registry import RETRIEVERS, find_one

        plugin, used = plan_retriever(retriever, config)
        label = retriever
        entry = find_one(RETRIEVERS, plugin)
        package: tuple[str, str] | None = (entry.package, entry.version)
    else:
        if not callable(getattr(retriever, "retrieve", None)):
            raise InputError(
                f"{type(retriever).__name__} has no retrieve(question, limit) method",
                field="retriever",
                hint="give a retriever object, a [retrievers.NAME] or a retriever plugin's name",
            )
        instance, plugin, used = retriever, OBJECT_PLUGIN, dict(options or {})
        label = name or str(getattr(retriever, "identifier", "") or type(retriever).__name__)
        package = None
    # Every configured secret, not only this retriever's: a composed one (fusion) holds
    # its parts' clients, whose errors may quote their credentials.
    hidden = sorted(
        {
            value
            for each in (used, *(c.options for c in config.retrievers.values()))
            for value in secret_values(each)
        },
        key=lambda value: (-len(value), value),
    )
    return RetrieverPlan(label, plugin, used, config, tuple(hidden), package, instance)


def resolve_retriever(
    retriever: Any,
    options: Mapping[str, Any] | None,
    name: str | None,
    config: Config,
    *,
    share: Builder | None = None,
) -> ResolvedRetriever:
    return plan_retriever(retriever, options, name, config).build(share=share)


def check_slice_fields(golden: GoldenQuestionSet, slices: Sequence[str]) -> None:
    from retrievalkit.metrics.scoring import STANDARD_SLICES

    fields = sorted({key for question in golden.questions for key in question.meta})
    for field in slices:
        if field not in STANDARD_SLICES and field not in fields:
            raise InputError(
                f"no question of the set has a meta field '{field}'",
                field="--slice",
                hint=f"its meta fields: {', '.join(fields) or 'none'}; form and hard_class "
                "are always reported",
            )


def checked_clusters(golden: GoldenQuestionSet, cluster_by: str | None) -> str | None:
    """``cluster_by`` checked against the set (an `InputError` names what to do)."""
    from retrievalkit.pipeline.engine.clustering import check_set_clusters, checked_cluster_by

    field = checked_cluster_by(cluster_by)
    if field is not None:
        check_set_clusters(golden.questions, field, where="--cluster-by")
    return field


def staged_run(
    golden: GoldenQuestionSet,
    scorer: RunScorer,
    resolved: ResolvedRetriever,
    *,
    overfetch: int,
    timeout: float | None,
    progress: Callable[[int], None] | None,
    git_commit: str | Literal["detect"] | None,
    now: dt.datetime | None,
    max_error_rate: float | None,
    provider: Any,
    concurrency: int = 1,
    repeat: int = 1,
    warmup: int = 0,
    machine: Machine | None = None,
) -> Run:
    """A run of a retriever that reports its stages: its answer scored as any run's, and
    every stage scored beside it (`retrievalkit.pipeline.engine.stages`); ``concurrency``
    questions (or groups of them) are asked at once, after ``warmup`` questions asked
    and discarded, each ``repeat`` times (its latency the median)."""
    from retrievalkit.formats.ids import ReturnedIds
    from retrievalkit.pipeline.engine.evaluator import STREAM_BATCH
    from retrievalkit.pipeline.engine.stages import StageScorer, ask_stages
    from retrievalkit.pipeline.engine.warmup import warm_up_retriever

    questions = scorer.questions
    staged = StageScorer(questions, scorer.options)
    notes = ReturnedIds()
    if warmup:
        warm_up_retriever(
            resolved.retriever,
            questions,
            warmup,
            depth=max(scorer.options.ks),
            overfetch=overfetch,
            timeout=timeout,
            concurrency=concurrency,
        )
    for low in range(0, len(questions), STREAM_BATCH):
        answers, stages = ask_stages(
            resolved.retriever,
            questions[low : low + STREAM_BATCH],
            depth=max(scorer.options.ks),
            overfetch=overfetch,
            timeout=timeout,
            secrets=resolved.secrets,
            progress=progress,
            concurrency=concurrency,
            notes=notes,
            repeat=repeat,
        )
        scorer.add(answers)
        staged.add(answers, stages)
    report, columns = staged.finish()
    scorer.extra_columns.update(columns)
    return finished_run(
        golden,
        scorer,
        resolved,
        overfetch=overfetch,
        git_commit=git_commit,
        now=now,
        max_error_rate=max_error_rate,
        provider=provider,
        stages=report,
        notes=notes,
        machine=machine,
    )


def scored_run(
    golden: GoldenQuestionSet,
    questions: Sequence[GoldenQuestion],
    retrievals: Sequence[Retrieval],
    resolved: ResolvedRetriever,
    scoring: ScoringOptions,
    *,
    overfetch: int,
    git_commit: str | Literal["detect"] | None,
    now: dt.datetime | None,
    max_error_rate: float | None,
    provider: Any = None,
    extra: Mapping[str, str] | None = None,
    stages: Sequence[Mapping[str, Sequence[str]] | None] | None = None,
    notes: ReturnedIds | None = None,
    machine: Machine | None = None,
) -> Run:
    """Score the retrievals of ``questions`` (the set's, or those a sequential run asked)
    into a run of ``golden``; raise `RunFailed` past ``max_error_rate``. ``stages`` (each
    question's stage rankings, None for one that errored) scores every stage beside the
    answer, as a staged run of the whole set does; ``notes``, the returned ids the identity
    rule changed while they were asked."""
    from retrievalkit.metrics.scoring import RunScorer
    from retrievalkit.pipeline.engine.evaluator import STREAM_BATCH, Retrievals
    from retrievalkit.pipeline.engine.stages import StageScorer

    scorer = RunScorer(questions, scoring)
    staged = None if stages is None else StageScorer(questions, scoring)
    for low in range(0, len(questions), STREAM_BATCH):
        batch = retrievals[low : low + STREAM_BATCH]
        scorer.add(batch)
        if staged is not None and stages is not None:
            staged.add(Retrievals.of(batch), stages[low : low + STREAM_BATCH])
    report = None
    if staged is not None:
        report, columns = staged.finish()
        scorer.extra_columns.update(columns)
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
        notes=notes,
        machine=machine,
    )


def priced(run: Run, costs: Mapping[str, Mapping[str, float]]) -> Run:
    """``run`` with ``costs`` (model -> price of 1,000 tokens) in its manifest, so that its
    record prices its tokens wherever it is read again, and a warning naming each model
    whose tokens have no price (`retrievalkit.metrics.cost`)."""
    from retrievalkit.metrics.cost import record_costs, unpriced_warning

    if costs:
        manifest = attrs.evolve(
            run.record.manifest, costs={model: dict(price) for model, price in costs.items()}
        )
        run = attrs.evolve(run, record=attrs.evolve(run.record, manifest=manifest))
    warning = unpriced_warning(record_costs(run.record))
    if warning is not None:
        run = attrs.evolve(run, warnings=(*run.warnings, warning))
    return run


def finished_run(
    golden: GoldenQuestionSet,
    scorer: RunScorer,
    resolved: ResolvedRetriever,
    *,
    overfetch: int,
    git_commit: str | Literal["detect"] | None,
    now: dt.datetime | None,
    max_error_rate: float | None,
    provider: Any = None,
    extra: Mapping[str, str] | None = None,
    stages: StageReport | None = None,
    notes: ReturnedIds | None = None,
    machine: Machine | None = None,
) -> Run:
    """The run of ``golden`` whose questions ``scorer`` has scored (the set's, or those a
    sequential run asked); raise `RunFailed` past ``max_error_rate``. ``machine`` is the
    record `machine_at_start` made before the first question: its end load is read here."""
    from retrievalkit.embedders import embedding_of
    from retrievalkit.pipeline.engine.machine import machine_at_end
    from retrievalkit.pipeline.engine.record import build_record
    from retrievalkit.pipeline.engine.record import git_commit as commit_of_working_directory
    from retrievalkit.redaction import scrub

    scoring = scorer.options
    scores = scorer.finish()
    short = scorer.short_of_documents(overfetch)
    packages = dict([resolved.package] if resolved.package else [])
    if provider is not None:
        packages[provider.package] = provider.version
    identifier = getattr(resolved.retriever, "identifier", None)
    backend, model_id = embedding_of(resolved.retriever)
    record = build_record(
        golden,
        resolved.name,
        resolved.plugin,
        resolved.options,
        scores,
        scoring,
        overfetch=overfetch,
        git_commit=commit_of_working_directory() if git_commit == "detect" else git_commit,
        now=now,
        extra={
            **{
                key: scrub(value, resolved.secrets)
                for key, value in _describe(resolved.retriever).items()
            },
            **(extra or {}),
        },
        embedding_backend=backend,
        embedding_model_id=model_id,
        plugin_packages=packages,
        retriever_identifier=identifier if isinstance(identifier, str) and identifier else None,
        machine=None if machine is None else machine_at_end(machine),
    )
    if stages is not None:
        record = attrs.evolve(record, stages=stages)
    changes = None if notes is None else notes.changes(scorer.questions)
    returned = None if changes is None else changes.warning()
    from retrievalkit.pipeline.engine.clustering import partial_clusters_warning

    clustered = partial_clusters_warning(scorer.questions, scoring.cluster_by)
    noted = (short, returned, clustered)
    warnings = (*golden.warnings, *(w for w in noted if w is not None))
    run = Run(record, golden, warnings, changes)
    errored, total = scores.outcomes.errored, len(scorer.questions)
    if max_error_rate is not None and errored and errored / total > max_error_rate:
        from collections import Counter

        # The most frequent reason (ties: the first in order) is the example given.
        errors = scores.outcomes.errors
        counted = Counter(errors[index] for index in sorted(errors) if errors[index])
        example = counted.most_common(1)[0][0]
        everything = " on every question" if errored == total else ""
        raise RunFailed(
            f"retriever '{resolved.name}' failed{everything} ({errored} of {total} "
            f"questions errored, e.g. {example}); the run was not saved and does not become "
            "a baseline (raise --max-error-rate to accept some errors)",
            run,
        )
    return run


def _describe(retriever: object) -> dict[str, str]:
    """What a composed retriever says about its parts, for the manifest."""
    describe = getattr(retriever, "describe", None)
    return {str(key): str(value) for key, value in describe().items()} if callable(describe) else {}
