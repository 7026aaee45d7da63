"""The evaluation pipeline: load a set, run a retriever on it, compare runs, gate a run, store it.

Every command that evaluates (`eval`, `compare`, `fidelity`) and the plugin test kit
are shells over these functions, so a notebook or a test suite gets exactly what the
command line gets. Everything here is exported from `retrievalkit`:

```python
import retrievalkit as rk

run = rk.evaluate("golden/support.jsonl", "bm25", k=(1, 3, 10))
print(run.metrics["hit@3"].mean, run.metrics["hit@3"].ci)
store = rk.open_store("sqlite:///.retrievalkit/results.sqlite3")
verdict = rk.gate(run, store, {"hit@1": 0.02, "hit@3": 0.02})
store.save(run.record)
assert not verdict.regressed, verdict.failures
```

A retriever is named as on the command line (a `[retrievers.NAME]` of the
configuration, or a retriever plugin) or given as an object with
`retrieve(question, limit)`. Secrets in its options never reach a record: option
values are redacted, and every configured secret is scrubbed from error texts.
"""

from __future__ import annotations

import datetime as dt
import html
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs

from retrievalkit.errors import EvaluationError, InputError
from retrievalkit.metrics.definitions import DEFAULT_KS
from retrievalkit.model.outcomes import Outcomes
from retrievalkit.model.values import GoldenQuestionSet, MetricValue, ResultRecord
from retrievalkit.pipeline.comparison import DEFAULT_CHANGED_BY
from retrievalkit.pipeline.evaluator import DEFAULT_OVERFETCH
from retrievalkit.stats.intervals import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, DEFAULT_SEED

if TYPE_CHECKING:
    from retrievalkit.formats.config import Config
    from retrievalkit.metrics.scoring import RunScorer, ScoringOptions
    from retrievalkit.model.values import GoldenQuestion
    from retrievalkit.pipeline.comparison import Comparison
    from retrievalkit.pipeline.evaluator import Retrieval
    from retrievalkit.pipeline.fidelity import FidelityReport
    from retrievalkit.pipeline.gate import Verdict
    from retrievalkit.stores import ResultStore


#: The manifest's ``plugin`` for a retriever given as a Python object rather than by name.
OBJECT_PLUGIN = "python-object"


def load_config(path: str | os.PathLike[str] | None = None) -> Config:
    """The configuration `path` names, else `retrievalkit.toml` or `pyproject.toml`'s
    `[tool.retrievalkit]` in the working directory, else an empty one."""
    from retrievalkit.formats.config import find_config

    return find_config(None if path is None else os.fspath(path))


def _config(config: Config | str | os.PathLike[str] | None) -> Config:
    from retrievalkit.formats.config import Config

    return config if isinstance(config, Config) else load_config(config)


def load_set(
    set: str | os.PathLike[str], *, config: Config | str | os.PathLike[str] | None = None
) -> GoldenQuestionSet:
    """A golden set by file or directory path, `[sets.NAME]` of the configuration, or the
    name a question-set plugin offers, tried in that order.

    Raises `InputError` (with the file, line and field) for a malformed set, and
    `PluginError` when the plugin that offers it fails.
    """
    from retrievalkit.plugins.resolution import resolve_set

    return resolve_set(os.fspath(set), _config(config))


def open_store(
    url: str | None = None, *, config: Config | str | os.PathLike[str] | None = None
) -> ResultStore:
    """The result store a URL names (`sqlite:///PATH`, `jsonl:///PATH`, `memory:` or a
    plugin's scheme); without one, the configuration's `[store] url`, else the default
    `sqlite:///.retrievalkit/results.sqlite3`."""
    from retrievalkit.stores import DEFAULT_STORE_URL
    from retrievalkit.stores import open_store as open_by_scheme

    if url is None:
        url = _config(config).store_url or DEFAULT_STORE_URL
    return open_by_scheme(url)


@attrs.frozen
class Thresholds:
    """What a gate checks: the largest allowed absolute drop of each metric, overall and
    per slice (`{"hard_class=near-duplicate": {"hit@3": 0.1}}`).

    With `require_significant`, a drop past its threshold is a regression only when
    the paired test finds the difference significant.
    """

    metrics: Mapping[str, float] = attrs.field(factory=lambda: {"hit@1": 0.0, "hit@3": 0.0})
    slices: Mapping[str, Mapping[str, float]] = attrs.field(factory=dict)
    require_significant: bool = False

    @classmethod
    def from_config(cls, config: Config, **overrides: float) -> Thresholds:
        """The configuration's `[regression]` thresholds over the defaults; `overrides`
        (metric name to drop) win over both."""
        from retrievalkit.pipeline.gate import DEFAULT_THRESHOLDS

        metrics = {**DEFAULT_THRESHOLDS, **config.regression.thresholds, **overrides}
        return cls(metrics, config.regression.slices, config.regression.require_significant)

    def metric_names(self) -> list[str]:
        """Every gated metric name, overall or in a slice, sorted."""
        return sorted({*self.metrics, *(m for ms in self.slices.values() for m in ms)})


class RunFailed(EvaluationError):
    """More questions errored than `max_error_rate` allows; `run` holds the failed run
    (for its report). A failed run must never be saved or become a baseline."""

    def __init__(self, message: str, run: Run) -> None:
        super().__init__(message)
        self.run = run


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
    return "—" if value is None else f"{value:.3f}"


def _interval(value: MetricValue) -> str:
    return "—" if value.ci is None else f"[{value.ci[0]:.3f}, {value.ci[1]:.3f}]"


def _optional(module: str, method: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(
            f"Run.{method} needs {module}, which is not installed: pip install {module}"
        ) from None


@attrs.frozen
class _Retriever:
    """A retriever ready to ask, with what the manifest records about it."""

    name: str
    plugin: str
    options: Mapping[str, Any]
    retriever: Any
    secrets: tuple[str, ...]
    package: tuple[str, str] | None = None
    """The (name, version) of the package of its plugin, when it came from one."""


def _resolve(
    retriever: Any, options: Mapping[str, Any] | None, name: str | None, config: Config
) -> _Retriever:
    from retrievalkit.redaction import secret_values

    if isinstance(retriever, str):
        from retrievalkit.formats.config import RetrieverConfig
        from retrievalkit.plugins.resolution import resolve_retriever

        if options is not None:
            # Options given here configure the plugin of that name for this call.
            instance = name or retriever
            config = attrs.evolve(
                config,
                retrievers={
                    **config.retrievers,
                    instance: RetrieverConfig(instance, retriever, dict(options)),
                },
            )
            retriever = instance
        from retrievalkit.plugins.registry import RETRIEVERS, find_one

        resolved = resolve_retriever(retriever, config)
        found, plugin, used = resolved.retriever, resolved.plugin, resolved.options
        label = resolved.name
        entry = find_one(RETRIEVERS, plugin)
        package: tuple[str, str] | None = (entry.package, entry.version)
    else:
        if not callable(getattr(retriever, "retrieve", None)):
            raise InputError(
                f"{type(retriever).__name__} has no retrieve(question, limit) method",
                field="retriever",
                hint="give a retriever object, a [retrievers.NAME] or a retriever plugin's name",
            )
        found, plugin, used = retriever, OBJECT_PLUGIN, dict(options or {})
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
    return _Retriever(label, plugin, used, found, tuple(hidden), package)


def _check_slices(golden: GoldenQuestionSet, slices: Sequence[str]) -> None:
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


def evaluate(
    set: GoldenQuestionSet | str | os.PathLike[str],
    retriever: Any,
    *,
    k: Sequence[int] = DEFAULT_KS,
    overfetch: int = DEFAULT_OVERFETCH,
    slices: Sequence[str] = (),
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    concurrency: int = 1,
    timeout: float | None = None,
    max_error_rate: float | None = 0.0,
    options: Mapping[str, Any] | None = None,
    name: str | None = None,
    config: Config | str | os.PathLike[str] | None = None,
    git_commit: str | Literal["detect"] | None = "detect",
    progress: Callable[[int], None] | None = None,
    now: dt.datetime | None = None,
) -> Run:
    """Ask `retriever` every question of `set` and score the answers.

    - `set`: a loaded set, or anything [`load_set`][retrievalkit.api.load_set] accepts.
    - `retriever`: a `[retrievers.NAME]` of the configuration, a retriever plugin's
      name (configured with `options`), or an object with `retrieve(question, limit)`
      (and optionally `retrieve_many(questions, limit)`); `name` is then the name the
      run is stored under (default: its `identifier`), and `options` what the manifest
      records about it (secrets redacted).
    - `k`: the cut-offs (1 and 3 are always added); each question asks for
      `max(k) * overfetch` ids so that `max(k)` distinct documents remain after chunk
      ids collapse.
    - `slices`: meta fields to break the results down by, besides form and hard class.
    - `confidence`, `resamples`, `seed`: the intervals; the same inputs give the same
      numbers.
    - `concurrency`: questions (or batches) asked at once; `timeout`: seconds one
      question may take before it is recorded as a timeout error.
    - `max_error_rate`: the largest share of questions allowed to error; above it
      `RunFailed` is raised (its `run` holds the failed run). `None` accepts any.
    - `git_commit`: recorded in the manifest; `"detect"` asks git for the commit of
      the working directory.
    - `progress`: called with the number of questions just answered.
    - `config`: a `Config`, or a path to a configuration file; default: the working
      directory's `retrievalkit.toml` or `pyproject.toml`, if any.

    Returns a [`Run`][retrievalkit.api.Run]; nothing is saved (`store.save(run.record)`).
    """
    from retrievalkit.metrics.definitions import normalise_ks
    from retrievalkit.metrics.scoring import RunScorer, ScoringOptions
    from retrievalkit.pipeline.evaluator import STREAM_BATCH, ask_in_batches

    if not 0.0 < confidence < 1.0:
        raise InputError("must be between 0 and 1, e.g. 0.95", field="--confidence")
    if overfetch < 1 or concurrency < 1 or resamples < 1:
        raise InputError("overfetch, concurrency and resamples must be 1 or more")
    settings = _config(config)
    provider = None
    if isinstance(set, GoldenQuestionSet):
        golden = set
    else:
        from retrievalkit.plugins.resolution import resolve_set_and_provider

        golden, provider = resolve_set_and_provider(os.fspath(set), settings)
    wanted_slices = tuple(dict.fromkeys(slices))
    _check_slices(golden, wanted_slices)
    scoring = ScoringOptions(
        ks=normalise_ks(k),
        resamples=resamples,
        confidence=confidence,
        seed=seed,
        slices=wanted_slices,
    )
    resolved = _resolve(retriever, options, name, settings)
    questions = golden.questions
    # Asked, judged and scored a batch at a time: a batch's answers are let go once its
    # columns are filled in, so no per-question object outlives its batch.
    scorer = RunScorer(questions, scoring)
    for answered in ask_in_batches(
        resolved.retriever,
        questions,
        depth=max(scoring.ks),
        overfetch=overfetch,
        concurrency=concurrency,
        timeout=timeout,
        secrets=resolved.secrets,
        progress=progress,
        batch=STREAM_BATCH,
    ):
        scorer.add(answered)
    return _finished_run(
        golden,
        scorer,
        resolved,
        overfetch=overfetch,
        git_commit=git_commit,
        now=now,
        max_error_rate=max_error_rate,
        provider=provider,
    )


def _scored_run(
    golden: GoldenQuestionSet,
    questions: Sequence[GoldenQuestion],
    retrievals: Sequence[Retrieval],
    resolved: _Retriever,
    scoring: ScoringOptions,
    *,
    overfetch: int,
    git_commit: str | Literal["detect"] | None,
    now: dt.datetime | None,
    max_error_rate: float | None,
    provider: Any = None,
    extra: Mapping[str, str] | None = None,
) -> Run:
    """Score the retrievals of ``questions`` (the set's, or those a sequential run asked)
    into a run of ``golden``; raise `RunFailed` past ``max_error_rate``."""
    from retrievalkit.metrics.scoring import RunScorer
    from retrievalkit.pipeline.evaluator import STREAM_BATCH

    scorer = RunScorer(questions, scoring)
    for low in range(0, len(questions), STREAM_BATCH):
        scorer.add(retrievals[low : low + STREAM_BATCH])
    return _finished_run(
        golden,
        scorer,
        resolved,
        overfetch=overfetch,
        git_commit=git_commit,
        now=now,
        max_error_rate=max_error_rate,
        provider=provider,
        extra=extra,
    )


def _finished_run(
    golden: GoldenQuestionSet,
    scorer: RunScorer,
    resolved: _Retriever,
    *,
    overfetch: int,
    git_commit: str | Literal["detect"] | None,
    now: dt.datetime | None,
    max_error_rate: float | None,
    provider: Any = None,
    extra: Mapping[str, str] | None = None,
) -> Run:
    """The run of ``golden`` whose questions ``scorer`` has scored (the set's, or those a
    sequential run asked); raise `RunFailed` past ``max_error_rate``."""
    from retrievalkit.embedders import embedding_of
    from retrievalkit.pipeline.record import build_record
    from retrievalkit.pipeline.record import git_commit as commit_of_working_directory
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
    )
    run = Run(record, golden, () if short is None else (short,))
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


def gate(
    run: Run | ResultRecord,
    store: ResultStore,
    thresholds: Thresholds | Mapping[str, float] | None = None,
    *,
    baseline: str | None = None,
) -> Verdict:
    """Compare `run` with its baseline in `store`, question by question, and decide.

    The baseline is the run `baseline` names, else the one pinned for the run's
    (set, retriever) key, else the newest earlier run of that key (never `run`
    itself, so gating after saving works too). `thresholds` maps metric names to the
    largest allowed absolute drop (default: any drop of `hit@1` or `hit@3`), or is a
    [`Thresholds`][retrievalkit.api.Thresholds] with slice thresholds.

    The verdict's `regressed` says whether a metric dropped past its threshold;
    `failures` and `checked` give each metric with both values and the paired
    interval of the difference. With no baseline yet, `baseline_run_id` is None,
    `regressed` is False and `note` says why.
    """
    from retrievalkit.pipeline.baselines import choose_baseline
    from retrievalkit.pipeline.gate import Verdict, check_slices, compare_runs

    if not isinstance(thresholds, Thresholds):
        thresholds = Thresholds() if thresholds is None else Thresholds(dict(thresholds))
    record = run.record if isinstance(run, Run) else run
    questions = run.set.questions if isinstance(run, Run) else ()
    if questions:
        check_slices(thresholds.slices, questions, source=None, set_name=record.set)
    choice = choose_baseline(
        store,
        record.set,
        record.model,
        explicit=baseline,
        grader=record.grader,
        exclude=record.run_id,
    )
    if choice.record is None:
        return Verdict(
            baseline_run_id=None,
            regressed=False,
            failures=(),
            checked=(),
            shared_questions=0,
            same_set=True,
            baseline_kind=choice.kind,
            require_significant=thresholds.require_significant,
            note=choice.note,
        )
    from retrievalkit.stores.consistency import check_run

    # The gate compares the baseline's columns and reports its summary: both must agree.
    check_run(choice.record, ("hit@1", "hit@3", *thresholds.metrics), store.url)
    manifest = record.manifest
    return compare_runs(
        record.outcomes,
        manifest.set_hash,
        choice.record,
        thresholds.metrics,
        resamples=manifest.resamples,
        confidence=manifest.confidence,
        seed=manifest.seed,
        require_significant=thresholds.require_significant,
        slice_thresholds=thresholds.slices,
        questions=questions,
        baseline_kind=choice.kind,
    )


def compare(
    runs: Sequence[Run | ResultRecord],
    *,
    labels: Sequence[str] | None = None,
    allow_different_sets: bool = False,
    confidence: float | None = None,
    resamples: int | None = None,
    seed: int = DEFAULT_SEED,
    changed_by: str = DEFAULT_CHANGED_BY,
    changed: int = 10,
    question_texts: Mapping[str, str] | None = None,
    saved_to: Sequence[str | None] | None = None,
) -> Comparison:
    """Compare every run after the first with the first (the baseline), paired question
    by question: differences with paired intervals and p-values, win/tie/loss counts
    and the `changed` questions whose `changed_by` value moved most.

    `labels` name the runs in the result (default: their retriever names, made
    unique); `confidence` and `resamples` default to the first run's. Runs made on
    different versions of a set are refused unless `allow_different_sets`, which
    compares the question ids they share. Question texts come from the runs' sets
    (or `question_texts`).
    """
    from retrievalkit.pipeline.comparison import Side, compare_records

    if labels is not None and len(labels) != len(runs):
        raise InputError(f"{len(labels)} labels for {len(runs)} runs", field="labels")
    records = [run.record if isinstance(run, Run) else run for run in runs]
    if labels is None:
        used: set[str] = set()
        names = []
        for record in records:
            label = record.model if record.model not in used else f"{record.model}@{record.run_id}"
            used.add(label)
            names.append(label)
        labels = names
    texts = dict(question_texts or {})
    if question_texts is None:
        for run in runs:
            if isinstance(run, Run):
                texts.update((q.id, q.question) for q in run.set.questions)
    places = list(saved_to) if saved_to is not None else [None] * len(records)
    first = records[0].manifest if records else None
    return compare_records(
        [
            Side(label, record, place)
            for label, record, place in zip(labels, records, places, strict=True)
        ],
        allow_different_sets=allow_different_sets,
        resamples=resamples or (first.resamples if first else DEFAULT_RESAMPLES),
        confidence=confidence or (first.confidence if first else DEFAULT_CONFIDENCE),
        seed=seed,
        changed_by=changed_by,
        changed_limit=changed,
        question_texts=texts,
    )


def fidelity(
    set: GoldenQuestionSet | str | os.PathLike[str],
    candidate: Any,
    reference: Any,
    *,
    k: int = 10,
    persistence: float = 0.9,
    config: Config | str | os.PathLike[str] | None = None,
) -> FidelityReport:
    """How much of `reference`'s top `k` the `candidate` returns, without labels:
    overlap@k and rank-biased overlap (persistence p), with intervals.

    Both retrievers are given as in [`evaluate`][retrievalkit.api.evaluate].
    """
    from retrievalkit.pipeline.evaluator import evaluate_questions
    from retrievalkit.pipeline.fidelity import measure_fidelity

    if not 0.0 < persistence < 1.0:
        raise InputError("must be between 0 and 1 (exclusive), e.g. 0.9", field="--persistence")
    settings = _config(config)
    golden = set if isinstance(set, GoldenQuestionSet) else load_set(set, config=settings)
    mine = _resolve(candidate, None, None, settings)
    theirs = _resolve(reference, None, None, settings)
    answers = [
        evaluate_questions(
            side.retriever, golden.questions, depth=k, overfetch=1, secrets=side.secrets
        )
        for side in (mine, theirs)
    ]
    return measure_fidelity(
        golden.questions,
        answers[0],
        answers[1],
        names=(mine.name, theirs.name),
        k=k,
        p=persistence,
    )
