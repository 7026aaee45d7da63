"""What each page of ``retrievalkit serve`` shows, computed from the store through the Python API.

Every function here returns plain values for a template (never HTML): the history of a
(set, retriever) key, a paired comparison of two runs, one question across runs, and a
run's judging queue. Runs are immutable once stored, so what is computed from a run
(its record, its queue, a verdict against a given baseline) is kept for later requests.
The judging view grades any `JudgingQueue`: a run's, or the pool file served with
``--queue``.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from retrievalkit.errors import InputError, RetrievalkitError
from retrievalkit.serve.charts import TrendPoint, trend_chart
from retrievalkit.serve.judging_queue import (
    Claims,
    JudgingQueue,
    LabelsFile,
    PoolQueue,
    QueueItem,
    RunQueue,
    agreement_pairs,
    next_item,
)

if TYPE_CHECKING:
    from retrievalkit.formats.config import Config
    from retrievalkit.formats.corpus import CorpusDocument
    from retrievalkit.model.outcomes import Outcomes
    from retrievalkit.model.records import ResultRecord
    from retrievalkit.model.values import GoldenQuestion, MetricValue, QuestionOutcome
    from retrievalkit.pipeline.gating.comparison import Comparison
    from retrievalkit.pipeline.gating.gate import Verdict
    from retrievalkit.pipeline.gating.stage_comparison import StageComparison
    from retrievalkit.pipeline.gating.thresholds import Thresholds
    from retrievalkit.stores import ResultStore

#: Runs kept in memory at once (a 100k-question run's columns are tens of MB).
CACHED_RUNS = 8
#: Rows of the history table that get a gate verdict (each is a paired comparison).
VERDICT_ROWS = 5
#: Characters of a document's text shown in a ranking (the judging view shows it whole).
SNIPPET = 300
#: Runs offered to compare with (the newest of the set).
COMPARE_CHOICES = 200
#: The rankings of the question view stop here.
QUESTION_DEPTH = 20
#: Questions listed in a comparison's stage view (those whose stage changed first).
STAGE_QUESTIONS = 100
#: Rows of the history table unless the page asks for more.
HISTORY_ROWS = 20
#: Keys whose default history page is computed as the server starts (the newest first).
WARM_KEYS = 8
#: Keys whose newest run's comparison with its baseline and judging queue are computed as
#: the server starts (each run a 100k-question set reads is tens of MB).
WARM_RUNS = 2
#: The judging queue's depth unless the page asks for another.
QUEUE_DEPTH = 10
#: What the pages compute with, imported as the server starts (after it listens).
WARM_MODULES = (
    "numpy",
    "retrievalkit.api",
    "retrievalkit.formats.labels",
    "retrievalkit.pipeline.gating.comparison",
    "retrievalkit.pipeline.gating.gate",
    "retrievalkit.pipeline.gating.history",
    "retrievalkit.pipeline.authoring.judging",
    "retrievalkit.pipeline.gating.stage_comparison",
    "retrievalkit.render.stages",
    "retrievalkit.stats.power",
    "scipy.special",
)

log = logging.getLogger("retrievalkit.serve")

T = TypeVar("T")


class NotFound(Exception):
    """A run, key or question the URL names is not in the store; the message is safe to show."""


class _Cache(OrderedDict[Any, Any]):
    """A small least-recently-used cache, safe across the server's threads: a value being
    computed is computed once, the other requests for it wait for it."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size
        self.lock = threading.Lock()
        self.pending: dict[Any, threading.Event] = {}

    def get_or(self, key: Any, make: Callable[[], T]) -> T:
        while True:
            with self.lock:
                if key in self:
                    self.move_to_end(key)
                    found: T = self[key]
                    return found
                waiting = self.pending.get(key)
                if waiting is None:
                    done = self.pending[key] = threading.Event()
                    break
            waiting.wait()  # then take its value, or compute it if that failed
        try:
            value = make()
            with self.lock:
                self[key] = value
                while len(self) > self.size:
                    self.popitem(last=False)
            return value
        finally:
            with self.lock:
                del self.pending[key]
            done.set()


@attrs.define
class Site:
    """The store and files one server shows, and what it remembers between requests."""

    store: ResultStore
    config: Config
    labels: LabelsFile
    thresholds: Thresholds | None = None
    """The gate's thresholds; None: the configuration's, read when a verdict is first shown."""
    corpus: Path | None = None
    claims: Claims = attrs.field(factory=Claims)
    read_only: str | None = None
    """Why the store can only be read, or None."""
    pool: PoolQueue | None = None
    """The pool file served with ``--queue``, graded at /judge without a run; or None."""
    _runs: _Cache = attrs.field(factory=lambda: _Cache(CACHED_RUNS))
    _sets: _Cache = attrs.field(factory=lambda: _Cache(4))
    _corpora: _Cache = attrs.field(factory=lambda: _Cache(2))
    _queues: _Cache = attrs.field(factory=lambda: _Cache(4))
    _verdicts: _Cache = attrs.field(factory=lambda: _Cache(256))
    _comparisons: _Cache = attrs.field(factory=lambda: _Cache(8))
    _stage_views: _Cache = attrs.field(factory=lambda: _Cache(8))
    _histories: _Cache = attrs.field(factory=lambda: _Cache(16))
    _key_runs: _Cache = attrs.field(factory=lambda: _Cache(16))
    _held: _Cache = attrs.field(factory=lambda: _Cache(256))

    def key_marker(self, set_name: str, retriever: str) -> tuple[int, str] | None:
        """(runs, newest run id) of a key, for a store that counts its keys from an index
        (`retrievalkit.stores.store_keys`); None for any other store or an unknown key."""
        from retrievalkit.model.records import GRADER
        from retrievalkit.stores import store_keys

        if not callable(getattr(self.store, "keys", None)):
            return None
        return next(
            (
                (key.runs, key.newest_run_id)
                for key in store_keys(self.store)
                if (key.set_name, key.model, key.grader) == (set_name, retriever, GRADER)
            ),
            None,
        )

    def runs_of(self, set_name: str, retriever: str) -> list[ResultRecord]:
        """The runs of a key, newest first: read once while the key gains no run (its
        summaries only; a run's outcomes are read when a page needs them)."""
        marker = self.key_marker(set_name, retriever)
        if marker is None:
            return self.store.runs(set_name, retriever)
        runs: list[ResultRecord] = self._key_runs.get_or(
            (set_name, retriever, marker), lambda: self.store.runs(set_name, retriever)
        )
        return runs

    def gate_thresholds(self) -> Thresholds:
        """The thresholds of the gate verdicts (importing the gate only when first asked)."""
        if self.thresholds is None:
            from retrievalkit.pipeline.gating.thresholds import Thresholds

            self.thresholds = Thresholds.from_config(self.config)
        return self.thresholds

    def record(self, run_id: str) -> ResultRecord:
        def load() -> ResultRecord:
            found = self.store.get(run_id)
            if found is None:
                raise NotFound(f"no run {run_id} in {self.store.url}")
            return found

        try:
            return self._runs.get_or(run_id, load)
        except InputError as error:  # a run id the store refuses to look up
            raise NotFound(str(error)) from None

    def questions(self, record: ResultRecord) -> Mapping[str, GoldenQuestion]:
        """The run's questions by id from its set, or {} when the set cannot be found here."""

        def load() -> Mapping[str, GoldenQuestion]:
            from retrievalkit.api import load_set

            try:
                golden = load_set(record.set, config=self.config)
            except (RetrievalkitError, OSError):
                return {}
            return {question.id: question for question in golden.questions}

        return self._sets.get_or(record.set, load)

    def corpus_path(self, record: ResultRecord) -> Path | None:
        """Where the run's document texts are: --corpus, else the retriever's own corpus."""
        if self.corpus is not None:
            return self.corpus
        configured = self.config.retrievers.get(record.model)
        for options in (
            configured.options if configured else {},
            record.manifest.retriever_options,
        ):
            value = options.get("corpus")
            if isinstance(value, str) and value and value != "***":
                return Path(value)
        if record.manifest.plugin.endswith("-demo"):
            from retrievalkit.demo import DEMO_CORPUS

            return DEMO_CORPUS
        return None

    def documents(self, record: ResultRecord | None) -> Mapping[str, CorpusDocument]:
        """The documents of the run's corpus (`corpus_path`); with no run, of --corpus."""
        path = self.corpus if record is None else self.corpus_path(record)
        if path is None:
            return {}

        def load() -> Mapping[str, CorpusDocument]:
            from retrievalkit.corpora.providers import documents_by_id, open_corpus

            try:
                return documents_by_id(open_corpus(path, None, {}))
            except (RetrievalkitError, OSError):
                return {}

        return self._corpora.get_or(str(path), load)

    def holds(self, run_id: str | None) -> bool:
        """Whether the store has the run ``run_id``: asked once a run (stored runs are
        never changed, so the answer is kept)."""
        if not run_id:
            return False

        def look() -> bool:
            try:
                self.record(run_id)
            except NotFound:
                return False
            return True

        held: bool = self._held.get_or(run_id, look)
        return held

    def pool_record(self) -> ResultRecord | None:
        """The first run the served pool names that the store holds (where the documents'
        corpus is found, and the questions' set), or None."""
        for run_id in self.pool.run_ids if self.pool is not None else ():
            if self.holds(run_id):
                return self.record(run_id)
        return None

    def queue(self, record: ResultRecord, k: int, sample: int) -> RunQueue:
        return self._queues.get_or(
            (record.run_id, k, sample),
            lambda: RunQueue(record.outcomes, k=k, sample=sample, seed=record.manifest.seed),
        )


def warm_up(site: Site) -> None:
    """Run in a thread once the server listens: compute the default history page of the
    store's newest keys (their runs' summaries, their newest runs' verdicts), import what
    the other pages compute with, and read the keys' sets, so that a first view is
    answered from memory. A request for a page being computed here waits for it rather
    than computing it again; a failure is left for that page to report. Last, the newest
    run of the newest keys (`WARM_RUNS`) is read and its comparison with its baseline and
    its default judging queue computed: the pages a new run is opened on."""
    import importlib

    from retrievalkit.model.records import GRADER
    from retrievalkit.stores import store_keys

    keys = []
    if callable(getattr(site.store, "keys", None)):  # else listing them reads every run
        try:
            keys = [key for key in store_keys(site.store) if key.grader == GRADER]
            keys.sort(key=lambda key: key.newest_created_at or "", reverse=True)
            for key in keys[:WARM_KEYS]:
                history_view(site, key.set_name, key.model, None, "", HISTORY_ROWS)
        except Exception:
            log.debug("warm-up: history stopped", exc_info=True)
    for name in WARM_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:  # an optional part; its page says what to install
            log.debug("warm-up: no %s", name)
    try:
        for key in keys[:WARM_KEYS]:  # the sets whose questions the other views show
            runs = site.runs_of(key.set_name, key.model)
            if runs:
                site.questions(runs[0])
    except Exception:
        log.debug("warm-up: sets stopped", exc_info=True)
    if site.pool is not None:
        try:
            found = site.pool_record()
            site.documents(found)
            if found is not None:
                site.questions(found)
        except Exception:
            log.debug("warm-up: the pool's run stopped", exc_info=True)
    for key in keys[:WARM_RUNS]:
        try:
            newest = site.record(site.runs_of(key.set_name, key.model)[0].run_id)
            site.queue(newest, QUEUE_DEPTH, 0)
            if baseline_of(site, newest) is not None:
                compare_view(site, newest.run_id, None)
        except Exception:
            log.debug("warm-up: run %s stopped", key, exc_info=True)


# ---------------------------------------------------------------- the store's keys


def keys_view(site: Site) -> dict[str, Any]:
    """Every (set, retriever) of the store with its run count and newest run."""
    from retrievalkit.model.records import GRADER
    from retrievalkit.stores import store_keys

    return {"keys": [key for key in store_keys(site.store) if key.grader == GRADER]}


def drift_view(site: Site, drift_id: str) -> dict[str, Any]:
    """The store's drift records (``retrievalkit drift``), newest first, and the one
    ``drift_id`` names (the newest without one) with its measures and moved queries."""
    from retrievalkit.pipeline.drift.engine import DriftResult
    from retrievalkit.render.drift import measure_rows

    reader = getattr(site.store, "drifts", None)
    records = [DriftResult.from_dict(data) for data in reader()] if callable(reader) else []
    chosen = None
    if records:
        chosen = (
            next((r for r in records if r.drift_id == drift_id), None) if drift_id else records[0]
        )
    if drift_id and chosen is None:
        raise NotFound(f"no drift record {drift_id} in {site.store.url}")
    return {
        "drifts": records,
        "chosen": chosen,
        "rows": measure_rows(chosen) if chosen is not None else [],
        "k": chosen.settings.get("k") if chosen is not None else None,
    }


# ---------------------------------------------------------------- history


@attrs.frozen
class VerdictCell:
    text: str
    regressed: bool | None
    """None when there was nothing to compare with."""
    baseline: str | None


def _metric_value(record: ResultRecord, metric: str, slice_name: str) -> MetricValue | None:
    if not slice_name:
        return record.metrics.get(metric)
    field, _, label = slice_name.partition("=")
    return record.slices.get(field, {}).get(label, {}).get(metric)


def _verdict(
    site: Site, record: ResultRecord, baseline: ResultRecord | None, kind: str
) -> VerdictCell:
    if baseline is None:
        return VerdictCell("no baseline", None, None)

    def compute() -> VerdictCell:
        from retrievalkit.pipeline.gating.gate import compare_runs

        manifest = record.manifest
        thresholds = site.gate_thresholds()
        verdict: Verdict = compare_runs(
            record.outcomes,
            manifest.set_hash,
            baseline,
            thresholds.metrics,
            resamples=manifest.resamples,
            confidence=manifest.confidence,
            seed=manifest.seed,
            require_significant=thresholds.require_significant,
            baseline_kind=kind,
            latency_thresholds=thresholds.latency,
            candidate_machine=manifest.machine,
            cost_thresholds=thresholds.cost,
            candidate_costs=manifest.costs,
        )
        if verdict.regressed:
            from retrievalkit.formats.numbers import ratio

            dropped = ", ".join(
                [
                    f"{item.metric} {item.difference:+.3f}"
                    for item in verdict.failures
                    if item.difference is not None
                ]
                + [f"{item.check} {ratio(item.ratio)}" for item in verdict.ratio_failures]
            )
            return VerdictCell(f"regressed: {dropped}", True, baseline.run_id)
        return VerdictCell(f"passed against the {kind}", False, baseline.run_id)

    key = (record.run_id, baseline.run_id, repr(site.gate_thresholds()))
    return site._verdicts.get_or(key, compute)


def history_view(
    site: Site, set_name: str, retriever: str, metric: str | None, slice_name: str, limit: int
) -> dict[str, Any]:
    """The runs of a key: one metric's mean and interval over time, and a table of runs.

    With a store that counts its keys from an index (`retrievalkit.stores.store_keys`),
    the page is kept until the key gains a run or its pin moves.
    """
    from retrievalkit.stores import pinned_run_id

    pinned = pinned_run_id(site.store, set_name, retriever)
    marker = site.key_marker(set_name, retriever)
    if marker is None:
        return _history(site, set_name, retriever, metric, slice_name, limit, pinned)
    return site._histories.get_or(
        (set_name, retriever, marker, pinned, metric, slice_name, limit),
        lambda: _history(site, set_name, retriever, metric, slice_name, limit, pinned),
    )


def _history(
    site: Site,
    set_name: str,
    retriever: str,
    metric: str | None,
    slice_name: str,
    limit: int,
    pinned: str | None,
) -> dict[str, Any]:
    from retrievalkit.metrics.definitions import TREND, headline
    from retrievalkit.pipeline.gating.history import build_history

    runs = site.runs_of(set_name, retriever)
    if not runs:
        raise NotFound(f"no runs of {set_name} × {retriever} in {site.store.url}")
    history = build_history(
        runs,
        set_name=set_name,
        retriever=retriever,
        store=site.store.url,
        pinned=pinned,
        limit=len(runs),
    )
    newest = runs[0]
    metrics = headline(newest.metrics) or sorted(newest.metrics)
    chosen = metric if metric and metric in newest.metrics else (metrics[0] if metrics else "hit@1")
    slices = [
        f"{field}={label}"
        for field in sorted(newest.slices)
        for label in sorted(newest.slices[field])
    ]
    if slice_name and slice_name not in slices:
        slice_name = ""
    points = []
    for record in reversed(runs):  # oldest first, left to right
        value = _metric_value(record, chosen, slice_name)
        points.append(
            TrendPoint(
                run_id=record.run_id,
                created_at=record.manifest.created_at,
                mean=None if value is None else value.mean,
                ci=None if value is None else value.ci,
                pinned=record.run_id == pinned,
            )
        )
    by_id = {record.run_id: record for record in runs}
    pinned_record = by_id.get(pinned) if pinned else None
    rows = []
    for index, entry in enumerate(history.entries[:limit]):
        record = runs[index]
        if index < VERDICT_ROWS:
            if pinned_record is not None and pinned_record.run_id != record.run_id:
                verdict = _verdict(site, record, pinned_record, "pinned baseline")
            else:
                older = runs[index + 1] if index + 1 < len(runs) else None
                verdict = _verdict(site, record, older, "run before it")
        else:
            verdict = VerdictCell("", None, None)
        previous = runs[index + 1].run_id if index + 1 < len(runs) else None
        rows.append({"entry": entry, "verdict": verdict, "previous": previous})
    return {
        "set_name": set_name,
        "retriever": retriever,
        "metric": chosen,
        "metrics": metrics,
        "trend": TREND,
        "slice": slice_name,
        "slices": slices,
        "chart": trend_chart(points, title=chosen + (f" [{slice_name}]" if slice_name else "")),
        "rows": rows,
        "total": len(runs),
        "limit": limit,
        "pinned": pinned,
        "thresholds": dict(site.gate_thresholds().metrics),
    }


# ---------------------------------------------------------------- compare


def baseline_of(site: Site, record: ResultRecord) -> ResultRecord | None:
    """The run a run of this key is gated against, chosen as the gate chooses it
    (`choose_baseline`): the pinned one, else the one stored before it; a pin naming a
    run the store lost is the gate's error. Read through the site's cache of runs."""
    from retrievalkit.model.records import GRADER
    from retrievalkit.pipeline.gating.baselines import choose_baseline

    def fetch(run_id: str) -> ResultRecord | None:
        try:
            return site.record(run_id)
        except NotFound:
            return None

    return choose_baseline(
        site.store,
        record.set,
        record.model,
        grader=record.grader,
        exclude=record.run_id,
        fetch=fetch,
        # The site keeps the runs of the plain grader's keys.
        runs=(lambda: site.runs_of(record.set, record.model)) if record.grader == GRADER else None,
    ).record


def runs_of_set(site: Site, record: ResultRecord) -> list[ResultRecord]:
    """The runs of ``record``'s set, newest first: from the runs of each of the set's keys
    (kept between requests) when the store counts its keys, else from every run."""
    from retrievalkit.model.records import GRADER
    from retrievalkit.stores import store_keys

    if not callable(getattr(site.store, "keys", None)):
        return [each for each in site.store.all_runs() if each.set == record.set]
    found = [
        each
        for key in store_keys(site.store)
        if key.set_name == record.set and key.grader == GRADER
        for each in site.runs_of(key.set_name, key.model)
    ]
    return sorted(found, key=lambda each: each.manifest.created_at, reverse=True)


def compare_view(site: Site, run_id: str, other: str | None) -> dict[str, Any]:
    """A run against another (or against its baseline): paired differences and moved questions."""
    from retrievalkit.api import compare

    candidate = site.record(run_id)
    baseline = site.record(other) if other else baseline_of(site, candidate)
    if baseline is None:
        raise NotFound(f"run {run_id} has no baseline to compare with; choose another run")
    labels = [f"{baseline.model} {baseline.run_id}", f"{candidate.model} {candidate.run_id}"]
    questions = site.questions(candidate)
    texts = candidate.outcomes.known_texts()
    texts.update({qid: question.question for qid, question in questions.items()})

    def paired() -> Comparison:
        try:
            return compare(
                [baseline, candidate],
                labels=labels,
                allow_different_sets=True,
                question_texts=texts,
            )
        except InputError as error:
            raise NotFound(str(error)) from None

    comparison = site._comparisons.get_or((baseline.run_id, candidate.run_id), paired)
    stages = site._stage_views.get_or(
        (baseline.run_id, candidate.run_id),
        lambda: stage_view(baseline, candidate, texts),
    )
    choices = [
        (record.run_id, f"{record.model} {record.run_id}")
        for record in runs_of_set(site, candidate)
    ][:COMPARE_CHOICES]
    return {
        "choices": choices,
        "baseline": baseline,
        "candidate": candidate,
        "comparison": comparison,
        "pair": comparison.pairs[0] if comparison.pairs else None,
        "stages": stages,
        "stage_questions": STAGE_QUESTIONS,
    }


def stage_view(
    baseline: ResultRecord, candidate: ResultRecord, texts: Mapping[str, str]
) -> StageComparison | None:
    """The stages of two runs side by side (`retrievalkit.pipeline.gating.stage_comparison`), with
    the metrics and the paired test settings ``compare`` uses; None when neither has stages."""
    from retrievalkit.pipeline.gating.stage_comparison import compare_stages
    from retrievalkit.render.stages import stage_metrics
    from retrievalkit.stats.intervals import DEFAULT_SEED

    shown = candidate.stages or baseline.stages
    return compare_stages(
        baseline,
        candidate,
        resamples=baseline.manifest.resamples,
        confidence=baseline.manifest.confidence,
        seed=DEFAULT_SEED,
        question_texts=texts,
        metrics=None if shown is None else stage_metrics(shown),
    )


# ---------------------------------------------------------------- one question


def outcome_at(outcomes: Outcomes, index: int) -> QuestionOutcome:
    """One question's outcome, read from the columns at its position only: its document
    ids alone are decoded (indexing ``Outcomes`` decodes every id of the run first, which
    a 100k-question run feels)."""
    import math

    from retrievalkit.model.values import QuestionOutcome

    offsets, codes, grades = outcomes.judgments
    low, high = int(offsets[index]), int(offsets[index + 1])
    scores: dict[str, float | None] = {}
    for name in outcomes.metric_names:
        value = float(outcomes.values(name)[index])
        scores[name] = None if math.isnan(value) else value
    return QuestionOutcome(
        question_id=outcomes.question_ids[index],
        ranking=outcomes.ranking(index),
        scores=scores,
        latency_ms=float(outcomes.latency_ms[index]),
        error=outcomes.errors.get(index),
        form=outcomes.forms[index],
        hard_class=outcomes.hard_classes[index],
        judgments=dict(
            zip(
                outcomes.document_names(codes[low:high].tolist()),
                grades[low:high].tolist(),
                strict=True,
            )
        ),
    )


@attrs.frozen
class RankedDocument:
    rank: int
    document_id: str
    title: str
    snippet: str
    expected: bool
    grade: int | None
    """The set's grade (1 for an expected document without grades), None if unjudged."""
    human: int | None
    """The grade people gave in the labels file, if any."""


@attrs.frozen
class RunRanking:
    record: ResultRecord
    documents: tuple[RankedDocument, ...]
    error: str | None
    scores: Mapping[str, float | None]


def question_view(
    site: Site, run_id: str, question_id: str, others: Sequence[str]
) -> dict[str, Any]:
    """One question: its text, form, class and labels, and each run's ranking of it."""
    record = site.record(run_id)
    records = [record, *(site.record(other) for other in others if other != run_id)]
    question = site.questions(record).get(question_id)
    human = site.labels.human()
    rankings = []
    outcome = None
    for each in records:
        try:
            found = outcome_at(each.outcomes, each.outcomes.index_of(question_id))
        except ValueError:
            continue
        outcome = outcome or found
        documents = site.documents(each)
        ranked = []
        for rank, document_id in enumerate(found.ranking[:QUESTION_DEPTH], start=1):
            document = documents.get(document_id)
            label = human.get((question_id, document_id))
            ranked.append(
                RankedDocument(
                    rank=rank,
                    document_id=document_id,
                    title=document.title if document else "",
                    snippet=_snippet(document.text) if document else "",
                    expected=document_id in found.expected,
                    grade=found.judgments.get(document_id),
                    human=None if label is None else label.grade,
                )
            )
        rankings.append(RunRanking(each, tuple(ranked), found.error, dict(found.scores)))
    if outcome is None:
        raise NotFound(f"no question {question_id} in run {run_id}")
    return {
        "record": record,
        "question_id": question_id,
        "question": question,
        "question_text": question_text(question, record, question_id),
        "outcome": outcome,
        "rankings": rankings,
        "labels": sorted(outcome.judgments.items()),
        "has_corpus": site.corpus_path(record) is not None,
    }


def question_text(
    question: GoldenQuestion | None, record: ResultRecord, question_id: str
) -> str | None:
    """What the question asks: from its set when the set is found here, else as the run
    stored it, else None."""
    if question is not None:
        return question.question
    outcomes = record.outcomes
    try:
        position = outcomes.index_of(question_id)
    except ValueError:
        return None
    return outcomes.question_texts[position]


def _snippet(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SNIPPET else text[: SNIPPET - 1] + "…"


# ---------------------------------------------------------------- judging


@attrs.frozen
class Judging:
    """What the judging view grades: a run's queue, or the served pool."""

    queue: JudgingQueue
    record: ResultRecord | None
    """The run judged; for a pool, the first run it names that the store holds (or None)."""
    run_id: str
    """The run judged, "" for the pool (what the page's links and forms carry)."""
    pool: PoolQueue | None


def judging(site: Site, run_id: str, k: int, sample: int) -> Judging:
    """The queue /judge grades: the run ``run_id`` names, else the served pool."""
    if not run_id and site.pool is not None:
        return Judging(site.pool, site.pool_record(), "", site.pool)
    record = site.record(run_id)
    return Judging(site.queue(record, k, sample), record, run_id, None)


def judge_view(
    site: Site,
    run_id: str,
    *,
    k: int,
    sample: int,
    grader: str,
    question_id: str | None = None,
    document_id: str | None = None,
) -> dict[str, Any]:
    """The next document to grade in a queue (a run's, or the pool's without a run; or the
    one named), with progress."""
    from retrievalkit.pipeline.authoring.judging import agreement, relevance_agreement

    chosen = judging(site, run_id, k, sample)
    queue, record = chosen.queue, chosen.record
    human = site.labels.human()
    item: QueueItem | None
    if question_id and document_id:
        item = queue.find(question_id, document_id)
        if item is None:
            where = f"the pool {chosen.pool.name}" if chosen.pool else run_id
            raise NotFound(f"{question_id} / {document_id} is not in the judging queue of {where}")
    else:
        item = next_item(queue, human, site.claims, grader)
    if item is not None and grader:
        site.claims.claim(item.pair, grader)
    progress = site.labels.progress(queue)
    question = document = None
    outcome = None
    text = None
    if item is not None:
        document = site.documents(record).get(item.document_id)
        if record is not None:
            question = site.questions(record).get(item.question_id)
        if chosen.pool is None and record is not None:
            outcome = outcome_at(record.outcomes, record.outcomes.index_of(item.question_id))
            text = question_text(question, record, item.question_id)
        else:
            text = item.question
    model = {pair: label.grade for pair, label in site.labels.model_grades().items()}
    in_queue = {pair: label for pair, label in human.items() if queue.find(*pair)}
    model_pairs = agreement_pairs(in_queue, model)
    set_pairs = [
        (label.grade, found.set_grade)
        for label in in_queue.values()
        if (found := queue.find(*label.pair)) is not None and found.set_grade is not None
    ]
    mine = [label for label in site.labels.labels() if label.is_human and label.model == grader]
    question_run = None
    if item is not None:
        question_run = run_id or (item.run_id if site.holds(item.run_id) else None)
    return {
        "record": record,
        "run_id": chosen.run_id,
        "pool": chosen.pool,
        "k": k,
        "sample": sample,
        "grader": grader,
        "item": item,
        "question": question,
        "question_text": text,
        "question_run": question_run,
        "document": document,
        "outcome": outcome,
        "progress": progress,
        "current": human.get(item.pair) if item is not None else None,
        "model_grade": model.get(item.pair) if item is not None else None,
        "model_agreement": (
            agreement(model_pairs),
            relevance_agreement(model_pairs),
            len(model_pairs),
        )
        if model_pairs
        else None,
        "set_agreement": (agreement(set_pairs), relevance_agreement(set_pairs), len(set_pairs))
        if set_pairs
        else None,
        "recent": list(reversed(mine[-5:])),
        "labels_path": str(site.labels.path),
        "writable": site.labels.writable(),
        "has_corpus": (site.corpus if record is None else site.corpus_path(record)) is not None,
    }


#: What each grade means: the scale ``retrievalkit judge`` asks a model to use.
GRADE_NAMES = (
    "does not help answer it",
    "contains part of the answer",
    "answers most of it",
    "answers it fully",
)
