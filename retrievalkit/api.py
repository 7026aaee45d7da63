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
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs

from retrievalkit.api_arguments import check as check_arguments
from retrievalkit.errors import InputError
from retrievalkit.errors import RunFailed as RunFailed
from retrievalkit.model.records import ResultRecord
from retrievalkit.model.values import GoldenQuestionSet
from retrievalkit.pipeline.engine.run import OBJECT_PLUGIN as OBJECT_PLUGIN
from retrievalkit.pipeline.engine.run import Run as Run
from retrievalkit.pipeline.engine.run import (
    as_config,
    check_slice_fields,
    checked_clusters,
    finished_run,
    priced,
    resolve_retriever,
    staged_run,
)
from retrievalkit.pipeline.engine.settings import UNSET, EvalSettings, Unset
from retrievalkit.pipeline.gating.comparison import DEFAULT_CHANGED_BY
from retrievalkit.pipeline.gating.thresholds import Thresholds as Thresholds
from retrievalkit.stats.intervals import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, DEFAULT_SEED

if TYPE_CHECKING:
    from retrievalkit.formats.config import Config
    from retrievalkit.formats.ids import ReturnedIds
    from retrievalkit.formats.sweep_table import SweepConfig
    from retrievalkit.metrics.scoring import RunScorer, ScoringOptions
    from retrievalkit.model.interleaving import InterleaveCredit
    from retrievalkit.model.values import GoldenQuestion
    from retrievalkit.pipeline.authoring.pool import Pool
    from retrievalkit.pipeline.drift.engine import DriftResult
    from retrievalkit.pipeline.engine.run import ResolvedRetriever
    from retrievalkit.pipeline.gating.comparison import Comparison
    from retrievalkit.pipeline.gating.fidelity import FidelityReport
    from retrievalkit.pipeline.gating.gate import Verdict
    from retrievalkit.pipeline.sweeps.sweep import SweepResult
    from retrievalkit.stats.power import PowerReport
    from retrievalkit.stores import ResultStore


#: The manifest's ``plugin`` for a retriever given as a Python object rather than by name.
def load_config(path: str | os.PathLike[str] | None = None) -> Config:
    """The configuration `path` names, else `retrievalkit.toml` or `pyproject.toml`'s
    `[tool.retrievalkit]` in the working directory, else an empty one."""
    check_arguments("load_config", locals())
    from retrievalkit.formats.config import find_config

    return find_config(None if path is None else os.fspath(path))


def load_set(
    set: str | os.PathLike[str], *, config: Config | str | os.PathLike[str] | None = None
) -> GoldenQuestionSet:
    """A golden set by file or directory path, `[sets.NAME]` of the configuration, or the
    name a question-set plugin offers, tried in that order.

    Raises `InputError` (with the file, line and field) for a malformed set, and
    `PluginError` when the plugin that offers it fails.
    """
    check_arguments("load_set", locals())
    from retrievalkit.plugins.resolution import resolve_set

    return resolve_set(os.fspath(set), as_config(config))


def open_store(
    url: str | None = None, *, config: Config | str | os.PathLike[str] | None = None
) -> ResultStore:
    """The result store a URL names (`sqlite:///PATH`, `jsonl:///PATH`, `memory:` or a
    plugin's scheme); without one, the configuration's `[store] url`, else the default
    `sqlite:///.retrievalkit/results.sqlite3`."""
    check_arguments("open_store", locals())
    from retrievalkit.stores import DEFAULT_STORE_URL
    from retrievalkit.stores import open_store as open_by_scheme

    if url is None:
        url = as_config(config).store_url or DEFAULT_STORE_URL
    return open_by_scheme(url)


def evaluate(
    set: GoldenQuestionSet | str | os.PathLike[str],
    retriever: Any,
    *,
    k: Sequence[int] | None = None,
    overfetch: int | None = None,
    slices: Sequence[str] | None = None,
    cluster_by: str | None = None,
    confidence: float | None = None,
    resamples: int | None = None,
    seed: int = DEFAULT_SEED,
    concurrency: int | None = None,
    timeout: float | None = None,
    max_error_rate: float | Unset | None = UNSET,
    options: Mapping[str, Any] | None = None,
    name: str | None = None,
    config: Config | str | os.PathLike[str] | None = None,
    git_commit: str | Literal["detect"] | None = "detect",
    progress: Callable[[int], None] | None = None,
    now: dt.datetime | None = None,
    chunk_separator: str | None = None,
    executor: str = "local",
    ray_address: str | None = None,
    metrics: Sequence[str] | None = None,
    repeat: int | None = None,
    warmup: int | None = None,
    costs: Mapping[str, Any] | None = None,
) -> Run:
    """Ask `retriever` every question of `set` and score the answers.

    - `set`: a loaded set, or anything [`load_set`][retrievalkit.api.load_set] accepts.
    - `retriever`: a `[retrievers.NAME]` of the configuration, a retriever plugin's
      name (configured with `options`), or an object with `retrieve(question, limit)`
      (and optionally `retrieve_many(questions, limit)`); `name` is then the name the
      run is stored under (default: its `identifier`), and `options` what the manifest
      records about it (secrets redacted).
    Each argument left out (None) takes the configuration's `[eval]` value, else the
    default: `k` 1, 3, 5, 10; `overfetch` 3; `confidence` 0.95; `resamples` 2,000;
    `concurrency` 1; no `timeout`; no extra `slices`; `max_error_rate` the
    configuration's `[regression] max_error_rate`, else 0. `slices` and `metrics` add to
    the configuration's; every metric its `[regression]` gates is computed too. The
    command line resolves its options the same way
    ([`EvalSettings`][retrievalkit.pipeline.engine.settings.EvalSettings]).

    - `k`: the cut-offs (1 and 3 are always added); each question asks for
      `max(k) * overfetch` ids so that `max(k)` distinct documents remain after chunk
      ids collapse.
    - `slices`: meta fields to break the results down by, besides form and hard class.
    - `metrics`: metrics computed besides the default table, e.g. `["ndcg_exp@10"]`
      (nDCG with gain 2^grade - 1; alias `ndcg_burges@10`), which is computed only when
      named; a named metric's cut-off is added to `k`. Default: `[eval] metrics`.
    - `cluster_by`: `cluster`, `hard_class`, `expected` (questions with the same expected
      documents) or `meta.NAME`: every interval is then a cluster bootstrap, and the
      record keeps the field so that `gate` treats clusters as the unit too.
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
      directory's `retrievalkit.toml` or `pyproject.toml`, if any. Its `[eval]` table
      (`k`, `overfetch`, `resamples`, `confidence`, `slices`, `concurrency`, `timeout`,
      `chunk_separator`) gives the defaults of the arguments left out, as on the command
      line.
    - `chunk_separator`: the retriever returns chunk ids (`doc-7#3`); the document
      metrics score their documents, and for questions with `expected_chunks` the chunk
      metrics (`chunk_rr`, ...) score the raw chunk ranking (`retrievalkit.pipeline.engine.chunks`).
    - `executor`: `"local"` (this process) or `"ray"`: the questions are asked in batches
      by Ray workers on the cluster at `ray_address` (else `RAY_ADDRESS`, else a cluster
      Ray starts on this machine for the run), each building the retriever once from its
      configuration; the outcomes are those of the local run. Needs the `[ray]` extra.
    - `costs`: model -> `{"input": PRICE, "output": PRICE}`, the price of 1,000 tokens
      (a bare number is the input price), over the configuration's `[costs."MODEL"]`:
      the record keeps the prices, and the tokens each question recorded
      (`retrievalkit.record_usage`) give the run's cost.

    Returns a [`Run`][retrievalkit.pipeline.engine.run.Run]; nothing is saved
    (`store.save(run.record)`).
    """
    check_arguments("evaluate", locals())
    from retrievalkit.formats.ids import ReturnedIds, check_separators
    from retrievalkit.metrics.scoring import RunScorer
    from retrievalkit.pipeline.engine import arguments

    settings = as_config(config)
    chosen = EvalSettings.resolve(
        settings,
        k=k,
        overfetch=overfetch,
        resamples=resamples,
        confidence=confidence,
        seed=seed,
        concurrency=concurrency,
        timeout=timeout,
        max_error_rate=max_error_rate,
        slices=slices,
        metrics=metrics,
        cluster_by=cluster_by,
        chunk_separator=chunk_separator,
        repeat=repeat,
        warmup=warmup,
        costs=costs,
    )
    executor = arguments.check_executor(executor, ray_address)
    golden, provider = _golden_and_provider(set, settings)
    scoring = _scoring_options(golden, chosen)
    if isinstance(retriever, str):
        # Before the retriever is built (a corpus indexed): its labels could never be hit.
        configured = settings.retrievers.get(retriever)
        planned = options if options is not None else (configured.options if configured else {})
        check_separators(golden, planned, name or retriever)
    if executor == "ray":
        return priced(
            _evaluated_on_ray(
                golden,
                (retriever, options, name),
                settings,
                scoring,
                chosen,
                ray_address=ray_address,
                progress=progress,
                git_commit=git_commit,
                now=now,
                provider=provider,
            ),
            chosen.costs,
        )
    resolved = resolve_retriever(retriever, options, name, settings)
    check_separators(golden, resolved.options, resolved.name)
    notes = ReturnedIds()
    # Asked, judged and scored a batch at a time: a batch's answers are let go once its
    # columns are filled in, so no per-question object outlives its batch.
    scorer = RunScorer(golden.questions, scoring)
    from retrievalkit.pipeline.engine.machine import machine_at_start
    from retrievalkit.pipeline.engine.stages import has_stages

    machine = machine_at_start(
        concurrency=chosen.concurrency, repeat=chosen.repeat, warmup=chosen.warmup
    )
    if has_stages(resolved.retriever):
        # Stages rank documents: a staged run has no chunk ranking to score.
        return priced(
            staged_run(
                golden,
                RunScorer(golden.questions, scoring, chunks=False),
                resolved,
                overfetch=chosen.overfetch,
                timeout=chosen.timeout,
                progress=progress,
                git_commit=git_commit,
                now=now,
                max_error_rate=chosen.max_error_rate,
                provider=provider,
                concurrency=chosen.concurrency,
                repeat=chosen.repeat,
                warmup=chosen.warmup,
                machine=machine,
            ),
            chosen.costs,
        )
    _ask_and_score(resolved, golden.questions, scorer, chosen, notes=notes, progress=progress)
    return priced(
        finished_run(
            golden,
            scorer,
            resolved,
            overfetch=chosen.overfetch,
            git_commit=git_commit,
            now=now,
            max_error_rate=chosen.max_error_rate,
            provider=provider,
            extra=(
                None
                if chosen.chunk_separator is None
                else {"chunk_separator": chosen.chunk_separator}
            ),
            notes=notes,
            machine=machine,
        ),
        chosen.costs,
    )


def _golden_and_provider(
    set: GoldenQuestionSet | str | os.PathLike[str], config: Config
) -> tuple[GoldenQuestionSet, Any]:
    """The set `evaluate` runs on, and the question-set plugin that offered it (None for a
    file, a directory or a set built in code)."""
    from retrievalkit.formats.ids import canonical_set

    if isinstance(set, GoldenQuestionSet):
        # A set built in code gets the identity its files would: ids compared in NFC.
        return canonical_set(set), None
    from retrievalkit.plugins.resolution import resolve_set_and_provider

    return resolve_set_and_provider(os.fspath(set), config)


def _scoring_options(golden: GoldenQuestionSet, chosen: EvalSettings) -> ScoringOptions:
    """How the run is scored: cut-offs, intervals, slices and clusters (both checked
    against the set's fields) and the metrics asked for besides the default table."""
    from retrievalkit.metrics.definitions import normalise_ks, requested_metrics
    from retrievalkit.metrics.scoring import ScoringOptions

    wanted_slices = tuple(dict.fromkeys(chosen.slices))
    check_slice_fields(golden, wanted_slices)
    cluster_by = checked_clusters(golden, chosen.cluster_by)
    return ScoringOptions(
        ks=normalise_ks(chosen.k),
        resamples=chosen.resamples,
        confidence=chosen.confidence,
        seed=chosen.seed,
        slices=wanted_slices,
        cluster_by=cluster_by,
        metrics=requested_metrics(chosen.metrics),
    )


def _evaluated_on_ray(
    golden: GoldenQuestionSet,
    retriever: tuple[Any, Mapping[str, Any] | None, str | None],
    config: Config,
    scoring: ScoringOptions,
    chosen: EvalSettings,
    *,
    ray_address: str | None,
    progress: Callable[[int], None] | None,
    git_commit: str | Literal["detect"] | None,
    now: dt.datetime | None,
    provider: Any,
) -> Run:
    """`evaluate` with ``executor="ray"``: the retriever (as given, with its options and
    name) planned here and built by each Ray worker; timing options are refused."""
    from retrievalkit.formats.ids import check_separators
    from retrievalkit.pipeline.engine.run import plan_retriever
    from retrievalkit.pipeline.executors.ray.remote_run import evaluate_on_ray

    for option, value, plain in (("--repeat", chosen.repeat, 1), ("--warmup", chosen.warmup, 0)):
        if value != plain:
            raise InputError(
                "Ray workers ask each question once, with no warm-up",
                field=option,
                hint=f"leave {option} out with --executor ray, or run locally to time",
            )
    plan = plan_retriever(*retriever, config)
    check_separators(golden, plan.options, plan.name)
    return evaluate_on_ray(
        golden,
        plan,
        scoring,
        address=ray_address,
        overfetch=chosen.overfetch,
        concurrency=chosen.concurrency,
        timeout=chosen.timeout,
        chunk_separator=chosen.chunk_separator,
        progress=progress,
        git_commit=git_commit,
        now=now,
        max_error_rate=chosen.max_error_rate,
        provider=provider,
    )


def _ask_and_score(
    resolved: ResolvedRetriever,
    questions: Sequence[GoldenQuestion],
    scorer: RunScorer,
    chosen: EvalSettings,
    *,
    notes: ReturnedIds,
    progress: Callable[[int], None] | None,
) -> None:
    """Warm the retriever up, then ask it every question in batches, each batch scored
    into `scorer` as it comes (with its raw chunk rankings, when chunk metrics are scored)."""
    from retrievalkit.pipeline.engine.evaluator import STREAM_BATCH, ask_in_batches, warm_up

    depth = max(scorer.options.ks)
    if chosen.warmup:
        # The retriever itself: a chunk keeper remembers only what the run asks.
        warm_up(
            resolved.retriever,
            questions,
            chosen.warmup,
            depth=depth,
            overfetch=chosen.overfetch,
            concurrency=chosen.concurrency,
            timeout=chosen.timeout,
        )
    asked = resolved.retriever
    keeper = None
    if chosen.chunk_separator is not None or scorer.with_chunks:
        from retrievalkit.pipeline.engine.chunks import ChunkKeeper

        asked = keeper = ChunkKeeper(resolved.retriever, chosen.chunk_separator, notes)
    done = 0
    for answered in ask_in_batches(
        asked,
        questions,
        depth=depth,
        overfetch=chosen.overfetch,
        concurrency=chosen.concurrency,
        timeout=chosen.timeout,
        secrets=resolved.secrets,
        progress=progress,
        batch=STREAM_BATCH,
        notes=notes,
        repeat=chosen.repeat,
    ):
        if keeper is None:
            scorer.add(answered)
        else:
            texts = [question.question for question in questions[done : done + len(answered)]]
            scorer.add(answered, [ranking[:depth] for ranking in keeper.chunks_of(texts)])
        done += len(answered)


def gate(
    run: Run | ResultRecord,
    store: ResultStore,
    thresholds: Thresholds | Mapping[str, float] | None = None,
    *,
    baseline: str | None = None,
    cluster_by: str | None = None,
) -> Verdict:
    """Compare `run` with its baseline in `store`, question by question, and decide.

    The baseline is the run `baseline` names, else the one pinned for the run's
    (set, retriever) key, else the newest earlier run of that key (never `run`
    itself, so gating after saving works too). `thresholds` maps metric names to the
    largest allowed absolute drop (default: any drop of `hit@1` or `hit@3`), or is a
    [`Thresholds`][retrievalkit.pipeline.gating.thresholds.Thresholds] with slice thresholds.

    The verdict's `regressed` says whether a metric dropped past its threshold;
    `failures` and `checked` give each metric with both values and the paired
    interval of the difference. With no baseline yet, `baseline_run_id` is None,
    `regressed` is False and `note` says why.

    `cluster_by` (default: the field the run was evaluated with, `record.cluster_by`)
    makes every paired test treat clusters of questions as the unit.
    """
    check_arguments("gate", locals())
    from retrievalkit.pipeline.gating.baselines import choose_baseline
    from retrievalkit.pipeline.gating.gate import Verdict, check_slices, compare_runs

    if not isinstance(run, (Run, ResultRecord)):
        raise InputError(
            f"must be a Run or a ResultRecord, got {type(run).__name__}",
            field="run",
            hint="gate the Run that evaluate() returned, or a record from a store",
        )
    store = _gate_store(store)
    # Refused as evaluate and compare refuse it, even when there is no baseline to use it.
    cluster_by = _checked_cluster_field(cluster_by)
    if baseline is not None and (not isinstance(baseline, str) or not baseline.strip()):
        raise InputError(f"must be a run id, got {baseline!r}", field="--baseline")
    if not isinstance(thresholds, Thresholds):
        thresholds = Thresholds() if thresholds is None else Thresholds(thresholds)
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
    from retrievalkit.pipeline.gating.gate import retriever_changes
    from retrievalkit.stores.consistency import check_run

    # The gate compares the baseline's columns and reports its summary: both must agree.
    check_run(choice.record, ("hit@1", "hit@3", *thresholds.metrics), store.url)
    manifest = record.manifest
    verdict = compare_runs(
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
        cluster_by=_checked_cluster_field(cluster_by or record.cluster_by),
        candidate_record=record,
        latency_thresholds=thresholds.latency,
        cost_thresholds=thresholds.cost,
    )
    return attrs.evolve(verdict, retriever_changes=retriever_changes(choice.record, record))


def _gate_store(store: Any) -> ResultStore:
    """The store to find the baseline in: a store, or a URL as ``--store`` takes it."""
    if isinstance(store, (str, os.PathLike)):
        return open_store(os.fspath(store))
    if not all(callable(getattr(store, name, None)) for name in ("get", "runs")):
        raise InputError(
            f"must be a result store or a store URL, got {type(store).__name__}",
            field="--store",
            hint='e.g. rk.open_store("sqlite:///.retrievalkit/results.sqlite3") or "memory:"',
        )
    return store  # type: ignore[no-any-return]


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
    cluster_by: str | None = None,
    questions: Sequence[GoldenQuestion] | None = None,
    all_pairs: bool = False,
    control: str | None = None,
    correction: str | None = None,
) -> Comparison:
    """Compare every run after the first with the first (the baseline), paired question
    by question: differences with paired intervals and p-values, win/tie/loss counts
    and the `changed` questions whose `changed_by` value moved most.

    `labels` name the runs in the result (default: their retriever names, made
    unique); `confidence` and `resamples` default to the first run's. Runs made on
    different versions of a set are refused unless `allow_different_sets`, which
    compares the question ids they share. Question texts come from the runs' sets
    (or `question_texts`).

    `cluster_by` (`cluster`, `hard_class`, `expected`, `meta.NAME`) makes every paired
    test treat clusters of questions as the unit; labels come from `questions`, else
    from the runs' sets, else from what the records keep (`meta.NAME` needs a set).

    `all_pairs` compares every pair of runs, `control` (a label, run id or retriever
    name) every run with that one; both need the same questions in every run and
    Holm-adjust each ``p_adjusted`` over the whole family of pairs and metrics.

    `correction` ``"tukey"`` adjusts with the randomised Tukey HSD instead (10,000
    permutations seeded by `seed`): every pair of one metric over the systems at once,
    then, with `all_pairs` or `control`, Bonferroni over the metrics; ``"holm"`` or None
    (the default) is Holm's step-down.
    """
    check_arguments("compare", locals())
    from retrievalkit.pipeline.engine import arguments
    from retrievalkit.pipeline.gating.comparison import Side, compare_records

    if confidence is not None:
        confidence = arguments.check_confidence(confidence)
    if resamples is not None:
        resamples = arguments.check_resamples(resamples)
    seed = arguments.check_seed(seed)
    correction = arguments.check_correction(correction)
    if isinstance(changed, bool) or not isinstance(changed, int) or changed < 0:
        raise InputError(f"must be 0 or more, got {changed!r}", field="--changed")
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
    held: list[GoldenQuestion] = list(questions or ())
    if questions is None:
        for run in reversed(runs):
            if isinstance(run, Run):
                held = list(run.set.questions)
                break
    if saved_to is not None and len(saved_to) != len(runs):
        raise InputError(f"{len(saved_to)} store URLs for {len(runs)} runs", field="saved_to")
    places = list(saved_to) if saved_to is not None else [None] * len(records)
    first = records[0].manifest if records else None
    comparison = compare_records(
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
        cluster_by=_checked_cluster_field(cluster_by),
        questions=held,
        pairing=_pairing(all_pairs, control),
        control=control,
        correction=correction,
    )
    # What the identity rule changed in a side's ids is said here too, never silently.
    noted = [
        f"{label}: {run.returned_ids.warning()}"
        for label, run in zip(labels, runs, strict=True)
        if isinstance(run, Run) and run.returned_ids is not None
    ]
    if not noted:
        return comparison
    return attrs.evolve(comparison, warnings=(*comparison.warnings, *noted))


def _pairing(all_pairs: bool, control: str | None) -> str:
    if all_pairs and control is not None:
        raise InputError(
            "all_pairs and control are two ways of pairing the systems",
            field="--all-pairs/--control",
            hint="give one of them",
        )
    if all_pairs:
        return "all-pairs"
    return "baseline" if control is None else "control"


def power(
    set: GoldenQuestionSet | str | os.PathLike[str],
    *,
    run: str | None = None,
    retriever: Any = None,
    store: ResultStore | str | None = None,
    drop: float | None = None,
    confidence: float | None = None,
    config: Config | str | os.PathLike[str] | None = None,
    cluster_by: str | None = None,
) -> PowerReport:
    """What `set` can detect for every gated metric and slice of the configuration's
    `[regression]` (by default hit@1 and hit@3): the smallest drop the gate's paired
    test finds 80 % of the time, and with `drop` the questions that drop needs.

    - Neither `run` nor `retriever`: the worst case (every question moves by a full 1).
    - `run`: a stored run's per-question values, paired with the baseline `gate` would
      choose for it in `store` (`retrievalkit.pipeline.gating.baselines.choose_baseline`).
    - `retriever`: evaluated now with [`evaluate`][retrievalkit.api.evaluate] (nothing
      saved), paired with its key's baseline in `store` when there is one.

    `confidence` (default `[eval] confidence`, else 0.95) sets alpha = 1 - confidence.
    `cluster_by` (`cluster`, `hard_class`, `expected`, `meta.NAME`; default the stored
    run's field, else `[eval] cluster_by`) makes whole clusters of related questions the
    unit, as the gate's clustered paired test takes them: the detectable drop is that of
    the set's clusters, and the questions needed are clusters of the mean size.
    Returns a `retrievalkit.stats.power.PowerReport`; `retrievalkit power`
    prints it.
    """
    check_arguments("power", locals())
    from retrievalkit.pipeline.engine import arguments
    from retrievalkit.pipeline.gating.baselines import choose_baseline
    from retrievalkit.pipeline.gating.gate import DEFAULT_THRESHOLDS, check_slices
    from retrievalkit.stats.power import set_power

    if run is not None and retriever is not None:
        raise InputError("give a stored run or a retriever, not both", field="--run")
    if store is not None:
        store = _gate_store(store)  # what is not a store is refused before anything runs
    settings = as_config(config)
    if confidence is None:
        confidence = settings.eval.confidence or DEFAULT_CONFIDENCE
    confidence = arguments.check_confidence(confidence)
    if drop is not None and (
        isinstance(drop, bool) or not isinstance(drop, (int, float)) or not 0.0 < drop <= 1.0
    ):
        raise InputError("must be above 0 and at most 1, e.g. 0.03", field="--drop")
    thresholds = {**DEFAULT_THRESHOLDS, **settings.regression.thresholds}
    slice_thresholds = {name: dict(v) for name, v in settings.regression.slices.items()}
    golden = set if isinstance(set, GoldenQuestionSet) else load_set(set, config=settings)
    check_slices(slice_thresholds, golden.questions, source=settings.source, set_name=golden.name)
    outcomes = baseline = None
    record: ResultRecord | None = None
    evidence = "the set alone"
    if run is not None or retriever is not None:
        opened = _gate_store(store) if store is not None else open_store(config=settings)
        if run is not None:
            record = opened.get(run)
            if record is None:
                raise InputError(
                    f"no run {run} in {opened.url}",
                    field="--run",
                    hint="retrievalkit history --set S --retriever R lists the stored runs",
                )
            if record.set != golden.name:
                raise InputError(
                    f"run {run} is a run of the set '{record.set}', not of '{golden.name}'",
                    field="--run",
                    hint=f"name a run of '{golden.name}'",
                )
            where = f"run {record.run_id}"
        else:
            gated = [*thresholds, *(m for ms in slice_thresholds.values() for m in ms)]
            evaluated = evaluate(
                golden,
                retriever,
                metrics=gated,
                resamples=1,
                max_error_rate=None,
                config=settings,
                git_commit=None,
            )
            record = evaluated.record
            where = f"retriever {record.model}, evaluated now"
        choice = choose_baseline(
            opened, record.set, record.model, grader=record.grader, exclude=record.run_id
        )
        outcomes = record.outcomes
        baseline = choice.record if choice.record is not None else None
        if baseline is not None and baseline.run_id == record.run_id:
            baseline = None
        evidence = (
            f"{where} against baseline {baseline.run_id}"
            if baseline is not None
            else f"{where}; no baseline stored, so the candidate is assumed independent of it"
        )
    if cluster_by is None:
        stored = record.cluster_by if run is not None and record is not None else None
        cluster_by = stored or settings.eval.cluster_by
    return set_power(
        golden,
        thresholds,
        slice_thresholds,
        alpha=1.0 - confidence,
        drop=drop,
        outcomes=outcomes,
        baseline=None if baseline is None else baseline.outcomes,
        evidence=evidence,
        cluster_by=checked_clusters(golden, cluster_by),
    )


def _checked_cluster_field(cluster_by: str | None) -> str | None:
    from retrievalkit.pipeline.engine.clustering import checked_cluster_by

    return checked_cluster_by(cluster_by)


def pool(
    set: GoldenQuestionSet | str | os.PathLike[str],
    runs: Sequence[str | Run | ResultRecord],
    *,
    depth: int = 10,
    budget: int | None = None,
    priority: str = "dcg",
    extra_labels: Sequence[str | os.PathLike[str]] = (),
    store: ResultStore | str | None = None,
    config: Config | str | os.PathLike[str] | None = None,
) -> Pool:
    """The (question, document) pairs to label next so that a comparison of `runs` is
    settled: every pair the runs rank in their top `depth` that no label holds (the set's
    expected documents and grades, grade 0 included, and the `extra_labels` files), best
    first, at most `budget`.

    `runs` are stored run ids (looked up in `store`, default the configuration's) or
    `Run`/`ResultRecord` objects, all of `set` and scored on the same questions.
    `priority` is `"dcg"` (default: how much the question's DCG@depth difference
    between the runs would change were the document relevant rather than not, summed
    over every pair of runs; minimal test collections, Carterette, Allan & Sitaraman
    2006), `"precision"` (the same for precision@depth) or `"depth"` (depth pooling:
    1 / the best rank any run gave it, ties by the number of runs); the formulas and a
    worked example are in `retrievalkit.pipeline.authoring.pool`. No-answer questions
    are left out. Returns a `retrievalkit.pipeline.authoring.pool.Pool`;
    `retrievalkit pool` writes it as JSON Lines.
    """
    check_arguments("pool", locals())
    import sys

    from retrievalkit.formats.labels import read_extra_labels
    from retrievalkit.formats.limits import MAX_K
    from retrievalkit.pipeline.authoring.pool import (
        PRIORITIES,
        build_pool,
        check_depth,
        check_runs,
    )
    from retrievalkit.pipeline.engine.arguments import check_count

    depth = check_count(depth, field="--depth", maximum=MAX_K)
    if budget is not None:
        budget = check_count(budget, field="--budget", maximum=sys.maxsize)
    if priority not in PRIORITIES:
        raise InputError(
            f"unknown priority {priority!r}",
            field="--priority",
            hint=f"one of {', '.join(PRIORITIES)}",
        )
    if not runs:
        raise InputError("no run to pool", field="--run", hint="give two or more --run RUN_ID")
    settings = as_config(config)
    # What is not a store is refused before anything is read, whether it is used or not.
    opened: ResultStore | None = None if store is None else _gate_store(store)
    records: list[ResultRecord] = []
    for given in runs:
        if isinstance(given, Run):
            records.append(given.record)
            continue
        if isinstance(given, ResultRecord):
            records.append(given)
            continue
        if opened is None:
            opened = open_store(config=settings)
        record = opened.get(given)
        if record is None:
            raise InputError(
                f"no run {given} in {opened.url}",
                field="--run",
                hint="retrievalkit history --set S --retriever R lists the stored runs",
            )
        records.append(record)
    golden = set if isinstance(set, GoldenQuestionSet) else load_set(set, config=settings)
    warnings = check_runs(golden, records)
    check_depth(records, depth)
    try:
        labels = read_extra_labels([os.fspath(path) for path in extra_labels])
    except InputError as error:
        if error.field is not None:
            raise
        raise InputError(
            error.detail,
            source=error.source,
            line=error.line,
            field="--extra-labels",
            hint=error.hint,
        ) from None
    warnings += labels.warnings
    warnings += labels.unknown_questions([q.id for q in golden.questions], f"set {golden.name}")
    return build_pool(
        golden,
        records,
        depth=depth,
        priority=priority,
        budget=budget,
        labelled={label.pair for label in labels},
        warnings=warnings,
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
    check_arguments("fidelity", locals())
    from retrievalkit.formats.limits import MAX_K
    from retrievalkit.pipeline.engine.arguments import check_count
    from retrievalkit.pipeline.engine.evaluator import evaluate_questions
    from retrievalkit.pipeline.gating.fidelity import measure_fidelity

    k = check_count(k, field="--k", maximum=MAX_K)
    if isinstance(persistence, bool) or not (
        isinstance(persistence, (int, float)) and 0.0 < persistence < 1.0
    ):
        raise InputError("must be between 0 and 1 (exclusive), e.g. 0.9", field="--persistence")
    settings = as_config(config)
    golden = set if isinstance(set, GoldenQuestionSet) else load_set(set, config=settings)
    mine = resolve_retriever(candidate, None, None, settings)
    theirs = resolve_retriever(reference, None, None, settings)
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


def drift(
    log: Any,
    retriever: Any,
    against: Any = None,
    *,
    against_run: str | None = None,
    k: int | None = None,
    depth: int | None = None,
    rbo_p: float | None = None,
    sample: int | None = None,
    seed: int | None = None,
    resamples: int | None = None,
    confidence: float | None = None,
    concurrency: int | None = None,
    timeout: float | None = None,
    min_rbo: float | None = None,
    max_zero_result_increase: float | None = None,
    save: bool = True,
    store: str | None = None,
    config: Config | str | os.PathLike[str] | None = None,
    now: dt.datetime | None = None,
) -> DriftResult:
    """How far `retriever` (the candidate) moved from `against` (the baseline) on the
    queries of `log`, without labels: rank-biased overlap, overlap@k and Jaccard@k,
    zero-result rates, latency and score-based predictors, each weighted by how often a
    query was asked and with a bootstrap interval over queries.

    - `log`: a query log path (JSON Lines with `query` and optional `count`, or CSV/TSV
      with a `query` column), a loaded `QueryLog`, or a golden set (its questions).
    - `retriever`, `against`: as in [`evaluate`][retrievalkit.api.evaluate].
    - `against_run`: instead of `against`, the id of a run in the store whose stored
      rankings and latencies are the baseline (a replay: nothing is asked again). The
      log's queries that are not questions of that run are left out
      (`settings["left_out"]`); the run's rankings carry no retrieval scores, so `qpp`
      is None.
    - `sample`, `seed`: a reproducible weighted sample of `sample` queries of the log.
    - `min_rbo`, `max_zero_result_increase` (else `[drift]`): the limits; the result's
      `failures` names each one crossed (`retrievalkit drift --fail-on-drift` exits 1).
    - `save`: keep the result as a drift record in the store (`store`, else `[store] url`).
    """
    check_arguments("drift", locals())
    import numpy as np

    from retrievalkit.formats.query_log import QueryLog, read_log, sample_log
    from retrievalkit.pipeline.drift.engine import (
        DriftLimits,
        DriftResult,
        ask_all,
        check_limits,
        drift_id,
        measure,
        now_text,
        replayed,
    )
    from retrievalkit.pipeline.engine.settings import DriftSettings

    settings = as_config(config)
    resolved = DriftSettings.resolve(
        settings,
        k=k,
        depth=depth,
        rbo_p=rbo_p,
        resamples=resamples,
        confidence=confidence,
        seed=seed,
        concurrency=concurrency,
        timeout=timeout,
        min_rbo=min_rbo,
        max_zero_result_increase=max_zero_result_increase,
    )
    if isinstance(log, QueryLog):
        queries = log
    elif isinstance(log, GoldenQuestionSet):
        texts = tuple(dict.fromkeys(question.question.strip() for question in log.questions))
        queries = QueryLog(texts, np.ones(len(texts)), log.name, len(log.questions))
    else:
        queries = read_log(os.fspath(log))
    if sample is not None:
        queries = sample_log(queries, sample, resolved.seed)
    target = open_store(store, config=settings) if save else None
    if target is not None and not callable(getattr(target, "save_drift", None)):
        raise InputError(
            f"the store {getattr(target, 'url', store)!r} cannot keep drift records",
            field="--store",
            hint="use a sqlite:/// or jsonl:/// store, or --no-save",
        )
    if (against is None) == (against_run is None):
        raise InputError(
            "give the baseline as exactly one of a retriever and a stored run",
            field="--against",
            hint="--against NAME asks a retriever; --against-run RUN_ID replays a stored run",
        )
    left_out = 0
    if against_run is not None:
        baseline_name, answered = _stored_answers(against_run, store, settings)
        kept = [index for index, text in enumerate(queries.queries) if text in answered]
        if not kept:
            raise InputError(
                f"none of the {len(queries)} queries of {queries.source} is a question of "
                f"run {against_run}",
                field="--against-run",
                hint="replay a run of the set whose questions the log holds (--set NAME)",
            )
        left_out = len(queries) - len(kept)
        weights = queries.weights[kept]
        queries = QueryLog(
            tuple(queries.queries[index] for index in kept),
            weights,
            queries.source,
            round(float(weights.sum())),
        )
    candidate_side = resolve_retriever(retriever, None, None, settings)
    candidate_answers = ask_all(
        candidate_side.retriever,
        queries.queries,
        depth=resolved.depth,
        concurrency=resolved.concurrency,
        timeout=resolved.timeout,
        secrets=candidate_side.secrets,
    )
    if against_run is not None:
        names = [baseline_name, candidate_side.name]
        answers = [replayed(queries.queries, answered), candidate_answers]
    else:
        baseline_side = resolve_retriever(against, None, None, settings)
        names = [baseline_side.name, candidate_side.name]
        answers = [
            ask_all(
                baseline_side.retriever,
                queries.queries,
                depth=resolved.depth,
                concurrency=resolved.concurrency,
                timeout=resolved.timeout,
                secrets=baseline_side.secrets,
            ),
            candidate_answers,
        ]
    measures, moved = measure(
        queries,
        answers[0],
        answers[1],
        k=resolved.k,
        rbo_p=resolved.rbo_p,
        resamples=resolved.resamples,
        seed=resolved.seed,
        confidence=resolved.confidence,
    )
    limits = DriftLimits(resolved.min_rbo, resolved.max_zero_result_increase)
    created = now_text(now)
    result = DriftResult(
        drift_id=drift_id(queries, names[0], names[1], created),
        created_at=created,
        log=queries.source,
        queries=len(queries),
        logged=queries.lines,
        baseline=names[0],
        candidate=names[1],
        settings={
            "k": resolved.k,
            "depth": resolved.depth,
            "rbo_p": resolved.rbo_p,
            "sample": sample,
            "seed": resolved.seed,
            "resamples": resolved.resamples,
            "confidence": resolved.confidence,
            "min_rbo": resolved.min_rbo,
            "max_zero_result_increase": resolved.max_zero_result_increase,
            **({"against_run": against_run, "left_out": left_out} if against_run else {}),
        },
        measures=measures,
        moved=moved,
        failures=check_limits(measures, limits),
        gated=limits != DriftLimits(),
    )
    if target is not None:
        target.save_drift(result.to_dict())  # type: ignore[attr-defined]
    return result


def _stored_answers(
    run_id: str, store: str | None, config: Config
) -> tuple[str, dict[str, tuple[tuple[str, ...], float, str | None]]]:
    """The baseline's name and, by question text, the ranking, latency and error a
    stored run recorded for each question (the texts from the run's set)."""
    source = open_store(store, config=config)
    record = source.get(run_id)
    if record is None:
        raise InputError(
            f"no run {run_id} in {getattr(source, 'url', store)}",
            field="--against-run",
            hint="retrievalkit history lists the stored runs and their ids",
        )
    try:
        golden = load_set(record.set, config=config)
    except InputError as error:
        raise InputError(
            f"the questions of run {run_id} (set {record.set}) cannot be read: {error}",
            field="--against-run",
            hint="run from the directory (or with the --config) the run was made with",
        ) from None
    texts = {question.id: question.question.strip() for question in golden.questions}
    answered: dict[str, tuple[tuple[str, ...], float, str | None]] = {}
    for outcome in record.outcomes:
        text = texts.get(outcome.question_id)
        if text is not None:
            answered.setdefault(text, (outcome.ranking, outcome.latency_ms, outcome.error))
    return f"run {run_id} ({record.model})", answered


def drift_records(
    store: str | None = None, *, config: Config | str | os.PathLike[str] | None = None
) -> list[DriftResult]:
    """The drift records a store keeps, newest first (none in a store without any)."""
    from retrievalkit.pipeline.drift.engine import DriftResult as Result

    target = open_store(store, config=config)
    reader = getattr(target, "drifts", None)
    return [Result.from_dict(data) for data in reader()] if callable(reader) else []


def interleave_credit(
    log: str | os.PathLike[str],
    *,
    effect: float | None = None,
    confidence: float | None = None,
    config: Config | str | os.PathLike[str] | None = None,
) -> InterleaveCredit:
    """Credit the clicks of an interleaving log (JSON Lines, one impression a line, as
    the `interleave` retriever writes it with `clicked` added) to its two teams.

    Returns an [`InterleaveCredit`][retrievalkit.model.interleaving.InterleaveCredit]:
    wins, ties and losses of the first team over the impressions with clicks, the
    preference (wins - losses) / impressions with clicks and wins / (wins + losses),
    each with its interval, the exact two-sided sign test of wins against losses, and
    the impressions the sign test needs to find a preference of `effect` (default: the
    one seen) with 80 % power. `confidence` (default `[eval] confidence`, else 0.95)
    sets alpha = 1 - confidence. A malformed line is an `InputError` naming the file,
    the line and the field.
    """
    check_arguments("interleave_credit", locals())
    from pathlib import Path

    from retrievalkit.formats.clicks import read_clicks
    from retrievalkit.pipeline.engine import arguments
    from retrievalkit.pipeline.gating.interleaving import credit

    settings = as_config(config)
    if confidence is None:
        confidence = settings.eval.confidence or DEFAULT_CONFIDENCE
    confidence = arguments.check_confidence(confidence)
    if effect is not None and (
        isinstance(effect, bool) or not isinstance(effect, (int, float)) or not 0.0 < effect <= 1.0
    ):
        raise InputError(
            "must be above 0 and at most 1, e.g. 0.05 (a preference of 5 points)",
            field="--effect",
        )
    path = Path(log)
    return credit(
        read_clicks(path),
        log=os.fspath(log),
        confidence=confidence,
        effect=None if effect is None else float(effect),
    )


def sweep(
    set: GoldenQuestionSet | str | os.PathLike[str],
    sweep: str | SweepConfig,
    *,
    k: Sequence[int] | None = None,
    overfetch: int | None = None,
    resamples: int | None = None,
    confidence: float | None = None,
    concurrency: int | None = None,
    timeout: float | None = None,
    max_error_rate: float | Unset | None = UNSET,
    config: Config | str | os.PathLike[str] | None = None,
    progress_file: str | os.PathLike[str] | None = None,
    share_stages: bool = True,
    executor: str = "local",
    ray_address: str | None = None,
    repeat: int | None = None,
    warmup: int | None = None,
) -> SweepResult:
    """Tune a retriever over a grid of options and confirm the winner on held-out questions.

    - `sweep`: a `[sweeps.NAME]` of the configuration, or a
      [`SweepConfig`][retrievalkit.formats.sweep_table.SweepConfig].
    - `k`, `overfetch`, `resamples`, `confidence`, `concurrency`, `timeout`,
      `max_error_rate`, `repeat`, `warmup`: as in [`evaluate`][retrievalkit.api.evaluate]
      (left out: the configuration's `[eval]` and `[regression] max_error_rate`, else
      the defaults), for every configuration (the selected metric's cut-off is always added to `k`).
    - `progress_file`: a JSON Lines file that keeps the answers so far; a sweep of the
      same set started again resumes from it, and it is removed once the sweep is done.
    - `share_stages`: build each distinct retriever once and answer a question asked
      again of a shared stage (the same first stage under other fusion or reranking
      options) from what it answered before; the results are those of asking again.
    - `executor`, `ray_address`: as in [`evaluate`][retrievalkit.api.evaluate]; on Ray,
      every configuration is built on the workers, and the configurations of the grid (or
      of a halving round) are asked all at once, spread over the cluster.

    Returns a [`SweepResult`][retrievalkit.pipeline.sweeps.sweep.SweepResult]; nothing is saved.
    """
    check_arguments("sweep", locals())
    from pathlib import Path

    from retrievalkit.pipeline.sweeps.sweep import Settings, run_sweep

    settings = as_config(config)
    chosen = EvalSettings.resolve(
        settings,
        k=k,
        overfetch=overfetch,
        resamples=resamples,
        confidence=confidence,
        concurrency=concurrency,
        timeout=timeout,
        max_error_rate=max_error_rate,
        gated=(),
        repeat=repeat,
        warmup=warmup,
    )
    golden = set if isinstance(set, GoldenQuestionSet) else load_set(set, config=settings)
    if isinstance(sweep, str):
        spec = settings.sweeps.get(sweep)
        if spec is None:
            raise InputError(
                f"no sweep '{sweep}' in {settings.source or 'any config file'} (sweeps: "
                f"{', '.join(sorted(settings.sweeps)) or 'none'})",
                field="NAME",
                hint="add a [sweeps.NAME] table with retriever and grid",
            )
    else:
        spec = sweep
    from retrievalkit.pipeline.engine.arguments import check_executor

    executor = check_executor(executor, ray_address)
    if executor == "ray" and (chosen.repeat, chosen.warmup) != (1, 0):
        option = "--repeat" if chosen.repeat != 1 else "--warmup"
        raise InputError(
            "Ray workers ask each question once, with no warm-up",
            field=option,
            hint=f"leave {option} out with --executor ray, or sweep locally to time",
        )

    def run(remote: Any = None) -> SweepResult:
        return run_sweep(
            golden,
            spec,
            settings,
            Settings(
                ks=chosen.k,
                overfetch=chosen.overfetch,
                resamples=chosen.resamples,
                confidence=chosen.confidence,
                concurrency=chosen.concurrency,
                timeout=chosen.timeout,
                max_error_rate=chosen.max_error_rate,
                repeat=chosen.repeat,
                warmup=chosen.warmup,
            ),
            progress_file=None if progress_file is None else Path(progress_file),
            share=share_stages,
            remote=remote,
        )

    if executor == "local":
        return run()
    from retrievalkit.pipeline.executors.ray.ray_cluster import pool
    from retrievalkit.pipeline.executors.ray.remote_run import RaySweepAsker

    with pool(ray_address) as workers:
        return run(RaySweepAsker(workers, spec.retriever, spec.name, share_stages))
