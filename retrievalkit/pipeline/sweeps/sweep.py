"""Sweep a retriever's options over a grid: choose on tuning questions, confirm on held-out ones.

Choosing the best of many configurations on some questions biases its score on those
questions upward (the choice itself picks the lucky ones), so the winner is confirmed
on questions the choice never saw: a seeded held-out share (``confirm``, stratified by
form, whole clusters kept together), against the configured retriever with the paired
test; or, with ``folds``, by cross-validation (each fold scored by the configuration
chosen on the other folds). Every configuration of the grid is reported with its
metrics, intervals and latency, its paired difference from the configured retriever on
the tuning questions with Holm-adjusted p-values over the grid, and whether it lies on
the quality-latency Pareto front.

Large grids are tuned by successive halving: every configuration on a small prefix of
the tuning questions, the best third on three times as many, and so on, until the
survivors answer the whole tuning share. Answers are kept by configuration and question
(and in a progress file, when one is given), so a question is never asked twice of one
configuration and an interrupted sweep resumes where it stopped.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import itertools
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import numpy as np

from retrievalkit.errors import EvaluationError, InputError
from retrievalkit.formats.config import Config, RetrieverConfig
from retrievalkit.formats.sweep_table import SweepConfig
from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet, MetricValue, Retrieval
from retrievalkit.pipeline.engine.shared_answers import SharedRetrievers, referenced, retriever_key
from retrievalkit.pipeline.sweeps import sweep_split

if TYPE_CHECKING:
    from retrievalkit.metrics.scoring import ScoringOptions
    from retrievalkit.pipeline.engine.run import ResolvedRetriever, Run

#: Grids with more configurations than this are tuned by successive halving (unless
#: the table says ``halving = false``).
HALVING_ABOVE = 32
#: Successive halving keeps the best 1 / ETA of the configurations each round.
ETA = 3
#: The fewest tuning questions a halving round asks (or all, if there are fewer).
MIN_ROUND_QUESTIONS = 30
#: The time every record of a sweep is stamped with: its records are never stored, and
#: a fixed stamp keeps a sweep's numbers independent of when it ran.
_STAMP = dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc)
PROGRESS_FORMAT = "retrievalkit-sweep-progress/1"


@attrs.frozen
class Configuration:
    """One point of the grid, as evaluated on the tuning questions it reached."""

    options: Mapping[str, Any]
    """The grid's options and the values of this point (as the grid names them)."""
    metrics: Mapping[str, MetricValue]
    latency_ms: Mapping[str, float | None]
    """``p50`` and ``p95`` of the per-question latency, in milliseconds."""
    questions: int
    errored: int = 0
    round: int = 0
    """The last successive-halving round it took part in (0 without halving)."""
    difference: float | None = None
    """Its mean of the selected metric minus the configured retriever's, on its questions."""
    low: float | None = None
    high: float | None = None
    p_value: float | None = None
    p_holm: float | None = None
    """``p_value`` Holm-adjusted over every configuration of the grid."""
    pareto: bool = False


@attrs.frozen
class Confirmation:
    """The winner against the configured retriever on questions the choice never saw."""

    metric: str
    n: int
    baseline: float | None
    candidate: float | None
    difference: float | None
    low: float | None
    high: float | None
    p_value: float | None
    p_floor: float | None
    discordant: int
    verdict: str | None
    """``significant``, ``not significant`` or ``unresolvable`` (`retrievalkit.stats.paired`)."""


@attrs.frozen
class Winner:
    options: Mapping[str, Any]
    index: int
    """Its position among the configurations."""
    tuning: MetricValue
    """Its score on the tuning questions: biased upward by the choice."""
    held_out: MetricValue
    """The score on questions the choice never saw (with folds: the cross-validated one)."""
    confirmation: Confirmation
    configured: bool = False
    """Whether the winning options are those the retriever is configured with."""
    folds: tuple[Mapping[str, Any], ...] = ()
    """With folds: the options chosen on the other folds, for each fold."""


@attrs.frozen
class HalvingRound:
    round: int
    configurations: int
    questions: int


@attrs.frozen
class SweepResult:
    """What `run_sweep` found; rendered by `retrievalkit.render.sweep`."""

    name: str
    set_name: str
    set_hash: str
    retriever: str
    select: str
    method: str
    """``confirm`` (a held-out share) or ``folds`` (cross-validation)."""
    confidence: float
    seed: int
    questions: int
    tuning_questions: int
    held_out_questions: int
    folds: int | None
    units: str
    """``cluster`` when whole clusters were kept together, else ``question``."""
    configured: Configuration
    """The configured retriever on the tuning questions (all questions with folds)."""
    configurations: tuple[Configuration, ...]
    winner: Winner
    pareto: tuple[int, ...]
    """Positions of the configurations on the quality-latency front, fastest first."""
    halving: tuple[HalvingRound, ...] = ()
    reused_answers: int = 0
    """Answers of a shared stage given from memory instead of asking again."""
    resumed_answers: int = 0
    """Answers read back from the progress file of an interrupted sweep."""


@attrs.frozen
class Settings:
    """How every configuration is evaluated (as `retrievalkit.evaluate` would)."""

    ks: tuple[int, ...]
    overfetch: int
    resamples: int
    confidence: float
    concurrency: int = 1
    timeout: float | None = None
    max_error_rate: float | None = 0.0
    repeat: int = 1
    """Times each question is asked (its latency the median, its ranking the first)."""
    warmup: int = 0
    """Questions asked and discarded before each configuration's."""


#: What asks questions: (resolved retriever, questions, settings) -> one Retrieval each.
Asker = Callable[["ResolvedRetriever", Sequence[GoldenQuestion], Settings], list[Retrieval]]


class RemoteAsker(Protocol):
    """Asks configurations' questions elsewhere (on Ray), building each retriever there:
    for each (retriever key, configuration, questions), one Retrieval a question."""

    def ask_many(
        self,
        jobs: Sequence[tuple[str, Config, Sequence[GoldenQuestion]]],
        settings: Settings,
    ) -> list[list[Retrieval]]: ...

    @property
    def reused(self) -> int:
        """Answers shared stages gave from memory instead of asking again, so far."""
        ...


def ask_locally(
    resolved: ResolvedRetriever, questions: Sequence[GoldenQuestion], settings: Settings
) -> list[Retrieval]:
    """The questions asked in this process, as `retrievalkit.evaluate` asks them."""
    from retrievalkit.pipeline.engine.evaluator import evaluate_questions

    return evaluate_questions(
        resolved.retriever,
        questions,
        depth=max(settings.ks),
        overfetch=settings.overfetch,
        concurrency=settings.concurrency,
        timeout=settings.timeout,
        secrets=resolved.secrets,
        repeat=settings.repeat,
        warmup=settings.warmup,
    )


def grid_points(spec: SweepConfig) -> list[dict[str, Any]]:
    """Every configuration of the grid, the first option varying slowest."""
    names = list(spec.grid)
    return [
        dict(zip(names, values, strict=True)) for values in itertools.product(*spec.grid.values())
    ]


def apply_options(config: Config, spec: SweepConfig, options: Mapping[str, Any]) -> Config:
    """The configuration with one grid point's options set.

    ``opt`` sets an option of the swept retriever; ``part.opt`` the option of the
    configured retriever ``part`` that it uses (a fusion's part, a rerank's first
    stage); ``table.key`` a key of a table option (``reranker_options.batch``).
    """
    retrievers = {
        name: RetrieverConfig(name, entry.plugin, _deep_copy(entry.options))
        for name, entry in config.retrievers.items()
    }
    swept = spec.retriever
    if swept not in retrievers:
        retrievers[swept] = RetrieverConfig(swept, swept, {})
    reached = referenced(swept, config)
    for key, value in options.items():
        head, dot, rest = key.partition(".")
        if dot and head in reached and head in retrievers:
            target, path = head, rest.split(".")
        else:
            target, path = swept, key.split(".")
            if dot and not isinstance(retrievers[swept].options.get(head), Mapping):
                raise _grid_error(spec, key, reached)
        holder = retrievers[target].options
        for part in path[:-1]:
            holder = holder.setdefault(part, {})
            if not isinstance(holder, dict):
                raise _grid_error(spec, key, reached)
        holder[path[-1]] = value
    return attrs.evolve(config, retrievers=retrievers)


def _grid_error(spec: SweepConfig, key: str, reached: Sequence[str]) -> InputError:
    return InputError(
        f"grid option '{key}' names neither a retriever that '{spec.retriever}' uses nor a "
        "table option of it",
        field=f"sweeps.{spec.name}.grid.{key}",
        hint=f"the retrievers it uses: {', '.join(reached[1:]) or 'none'}; write PART.OPTION",
    )


def _deep_copy(options: Mapping[str, Any]) -> dict[str, Any]:
    return {
        key: _deep_copy(value) if isinstance(value, Mapping) else value
        for key, value in options.items()
    }


class Progress:
    """The answers of a sweep so far, appended to a JSON Lines file as they come.

    The first line names the format and what the answers depend on (the set's content,
    the depth and the overfetch); each later line holds one configuration's answers to
    some questions, keyed by the configuration's `retriever_key`. A file for other
    inputs is started afresh; a last line cut short by a crash is ignored.
    """

    def __init__(self, path: Path | None, identity: str) -> None:
        self.path = path
        self.answers: dict[str, dict[str, Retrieval]] = {}
        self.resumed = 0
        if path is None:
            return
        if path.is_file() and self._read(path, identity):
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        header = {"format": PROGRESS_FORMAT, "identity": identity}
        path.write_text(json.dumps(header, sort_keys=True) + "\n", encoding="utf-8")

    def _read(self, path: Path, identity: str) -> bool:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        try:
            header = json.loads(lines[0]) if lines else {}
        except json.JSONDecodeError:
            return False
        if header != {"format": PROGRESS_FORMAT, "identity": identity}:
            return False
        for line in lines[1:]:
            try:
                entry = json.loads(line)
                answers = {
                    question: Retrieval(tuple(ranking), float(latency), error, int(returned))
                    for question, (ranking, latency, error, returned) in entry["answers"].items()
                }
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                continue  # the line a crash cut short
            self.answers.setdefault(str(entry["key"]), {}).update(answers)
            self.resumed += len(answers)
        return True

    def add(self, key: str, answers: Mapping[str, Retrieval]) -> None:
        self.answers.setdefault(key, {}).update(answers)
        if self.path is None:
            return
        line = {
            "key": key,
            "answers": {
                question: [list(r.ranking), r.latency_ms, r.error, r.returned]
                for question, r in answers.items()
            },
        }
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(line, sort_keys=True) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def finish(self) -> None:
        """The sweep is done: its results are in its report, the file goes."""
        if self.path is not None:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()


def progress_identity(golden: GoldenQuestionSet, settings: Settings) -> str:
    """What every remembered answer depends on besides its configuration."""
    text = json.dumps(
        [golden.content_hash, max(settings.ks), settings.overfetch], separators=(",", ":")
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class _Evaluations:
    """Asks configurations questions (each once) and scores them into runs."""

    def __init__(
        self,
        golden: GoldenQuestionSet,
        spec: SweepConfig,
        settings: Settings,
        progress: Progress,
        share: bool,
        asker: Asker,
        remote: RemoteAsker | None = None,
    ) -> None:
        from retrievalkit.metrics.definitions import normalise_ks, requested_metrics
        from retrievalkit.metrics.scoring import ScoringOptions

        self.golden = golden
        self.spec = spec
        self.settings = settings
        self.progress = progress
        self.shared = SharedRetrievers() if share else None
        self.asker = asker
        self.remote = remote
        self.scoring: ScoringOptions = ScoringOptions(
            ks=normalise_ks(settings.ks),
            resamples=settings.resamples,
            confidence=settings.confidence,
            seed=spec.seed,
            # A sweep that selects by a metric computed only on request computes it.
            metrics=requested_metrics([spec.select]),
        )
        self._resolved: dict[str, ResolvedRetriever] = {}

    def _retriever(self, key: str, config: Config) -> ResolvedRetriever:
        from retrievalkit.pipeline.engine.run import resolve_retriever

        found = self._resolved.get(key)
        if found is None:
            found = resolve_retriever(self.spec.retriever, None, None, config, share=self.shared)
            self._resolved[key] = found
        return found

    def prefetch(
        self, points: Sequence[tuple[str, Config]], questions: Sequence[GoldenQuestion]
    ) -> None:
        """Ask every configuration of ``points`` its missing ``questions`` at once, when
        the questions are asked elsewhere (all of them spread over the workers together);
        a local sweep asks each in turn as `retrievals` needs it."""
        if self.remote is None:
            return
        jobs: list[tuple[str, Config, list[GoldenQuestion]]] = []
        seen: set[str] = set()
        for key, config in points:
            have = self.progress.answers.get(key, {})
            missing = [question for question in questions if question.id not in have]
            if missing and key not in seen:
                seen.add(key)
                jobs.append((key, config, missing))
        if jobs:
            answered = self.remote.ask_many(jobs, self.settings)
            for (key, _, missing), answers in zip(jobs, answered, strict=True):
                self.progress.add(key, {q.id: r for q, r in zip(missing, answers, strict=True)})

    def retrievals(
        self, key: str, config: Config, questions: Sequence[GoldenQuestion]
    ) -> list[Retrieval]:
        have = self.progress.answers.get(key, {})
        missing = [question for question in questions if question.id not in have]
        if missing and self.remote is not None:
            self.prefetch([(key, config)], questions)
            have = self.progress.answers[key]
        elif missing:
            resolved = self._retriever(key, config)
            if self.shared is not None:
                self.shared.charges(())  # forget what an earlier asking left behind
            answered = self.asker(resolved, missing, self.settings)
            if self.shared is not None:
                charges = self.shared.charges([question.question for question in missing])
                answered = [
                    attrs.evolve(retrieval, latency_ms=retrieval.latency_ms + charge)
                    for retrieval, charge in zip(answered, charges, strict=True)
                ]
            self.progress.add(key, {q.id: r for q, r in zip(missing, answered, strict=True)})
            have = self.progress.answers[key]
        return [have[question.id] for question in questions]

    def run(
        self, key: str, config: Config, questions: Sequence[GoldenQuestion], label: str
    ) -> tuple[Run, list[Retrieval]]:
        from retrievalkit.errors import RunFailed
        from retrievalkit.pipeline.engine.run import ResolvedRetriever, scored_run

        retrievals = self.retrievals(key, config, questions)
        placeholder = ResolvedRetriever(label, "sweep", {}, None, ())
        try:
            run = scored_run(
                GoldenQuestionSet(self.golden.name, questions),
                questions,
                retrievals,
                placeholder,
                self.scoring,
                overfetch=self.settings.overfetch,
                git_commit=None,
                now=_STAMP,
                max_error_rate=self.settings.max_error_rate,
            )
        except RunFailed as error:
            raise EvaluationError(f"sweep '{self.spec.name}', {label}: {error}") from None
        return run, retrievals


def _latency(retrievals: Sequence[Retrieval]) -> dict[str, float | None]:
    if not retrievals:
        return {"p50": None, "p95": None}
    values = np.array([retrieval.latency_ms for retrieval in retrievals], dtype=np.float64)
    return {
        "p50": round(float(np.percentile(values, 50)), 3),
        "p95": round(float(np.percentile(values, 95)), 3),
    }


def _label(options: Mapping[str, Any]) -> str:
    return "configuration " + ", ".join(f"{key}={value!r}" for key, value in options.items())


def _score(run: Run, metric: str) -> float:
    value = run.metrics[metric].mean
    return -math.inf if value is None else value


@attrs.define
class _Point:
    """A configuration while the sweep runs."""

    options: dict[str, Any]
    config: Config
    key: str
    questions: list[GoldenQuestion] = attrs.field(factory=list)
    run: Run | None = None
    retrievals: list[Retrieval] = attrs.field(factory=list)
    round: int = 0


def _rounds(configurations: int, questions: int) -> list[tuple[int, int]]:
    """(configurations, questions) of each successive-halving round."""
    counts = [configurations]
    while counts[-1] > ETA:
        counts.append(math.ceil(counts[-1] / ETA))
    last = len(counts) - 1
    return [
        (count, min(questions, max(MIN_ROUND_QUESTIONS, questions // ETA ** (last - index))))
        for index, count in enumerate(counts)
    ]


def run_sweep(
    golden: GoldenQuestionSet,
    spec: SweepConfig,
    config: Config,
    settings: Settings,
    *,
    progress_file: Path | None = None,
    share: bool = True,
    asker: Asker = ask_locally,
    remote: RemoteAsker | None = None,
) -> SweepResult:
    """Evaluate every configuration of ``spec``'s grid on ``golden`` and confirm the best.

    ``share`` builds each distinct retriever once and answers a question asked again of
    a shared stage from memory (`retrievalkit.pipeline.engine.shared_answers`); the results
    are those of asking again. ``progress_file`` keeps the answers so far for a resumed
    sweep. ``asker`` asks a configuration's questions (in this process by default);
    ``remote`` instead builds and asks every configuration elsewhere (a Ray cluster), the
    configurations of a halving round or of the grid all at once.
    """
    from retrievalkit.metrics.definitions import parse_metric
    from retrievalkit.pipeline.sweeps import sweep_checks

    sweep_checks.check_spec(spec, config)
    metric = parse_metric(spec.select)
    ks = settings.ks if metric.k is None else tuple(sorted({*settings.ks, metric.k}))
    settings = attrs.evolve(settings, ks=ks)
    if spec.retriever not in config.retrievers:
        from retrievalkit.plugins.registry import RETRIEVERS, find

        if spec.retriever not in {plugin.name for plugin in find(RETRIEVERS)}:
            raise InputError(
                f"sweep '{spec.name}' tunes '{spec.retriever}', which is neither a "
                "[retrievers.NAME] of the configuration nor a retriever plugin",
                field=f"sweeps.{spec.name}.retriever",
                hint=f"configured: {', '.join(sorted(config.retrievers)) or 'none'}",
            )
    questions = list(golden.questions)
    if len(questions) < 2:
        raise InputError(
            f"sweep '{spec.name}' needs at least 2 questions, the set has {len(questions)}",
            field="--set",
        )
    sweep_checks.check_options(spec, config)
    points = [
        _Point(options, applied, retriever_key(spec.retriever, applied))
        for options in grid_points(spec)
        for applied in [apply_options(config, spec, options)]
    ]
    sweep_checks.check_split(spec, config, questions, settings.confidence)
    base_key = retriever_key(spec.retriever, config)
    progress = Progress(progress_file, progress_identity(golden, settings))
    work = _Evaluations(golden, spec, settings, progress, share, asker, remote)
    if remote is None:
        _start_every_configuration(work, spec, config, base_key, points, len(questions))
    select = metric.name
    halving: list[HalvingRound] = []
    if spec.folds is not None:
        result_parts = _cross_validate(golden, spec, config, base_key, points, work, select)
    else:
        result_parts = _confirm(golden, spec, config, base_key, points, work, select, halving)
    configured_run, configured_retrievals, winner, tuning_count, held_count = result_parts
    configured = Configuration(
        {},
        dict(configured_run.metrics),
        _latency(configured_retrievals),
        len(configured_retrievals),
        configured_run.errored,
    )
    configurations = _compared(points, configured_run, select, settings, spec.seed)
    front = _pareto(configurations, select)
    configurations = tuple(
        attrs.evolve(each, pareto=index in front) for index, each in enumerate(configurations)
    )
    progress.finish()
    return SweepResult(
        name=spec.name,
        set_name=golden.name,
        set_hash=golden.content_hash,
        retriever=spec.retriever,
        select=select,
        method="folds" if spec.folds is not None else "confirm",
        confidence=settings.confidence,
        seed=spec.seed,
        questions=len(questions),
        tuning_questions=tuning_count,
        held_out_questions=held_count,
        folds=spec.folds,
        units="cluster" if sweep_split.clustered(questions) else "question",
        configured=configured,
        configurations=configurations,
        winner=winner,
        pareto=tuple(sorted(front, key=lambda i: (configurations[i].latency_ms["p50"] or 0.0, i))),
        halving=tuple(halving),
        reused_answers=_reused(work),
        resumed_answers=progress.resumed,
    )


def _start_every_configuration(
    work: _Evaluations,
    spec: SweepConfig,
    config: Config,
    base_key: str,
    points: Sequence[_Point],
    questions: int,
) -> None:
    """Build the configured retriever, then every configuration's, before any question is
    asked: one that cannot start stops the sweep now, named with its options (exit code 2),
    not after the others were asked. A configuration whose every answer was read back from
    the progress file is not built again."""
    from retrievalkit.errors import RetrievalkitError
    from retrievalkit.pipeline.sweeps.sweep_checks import configuration_error

    if len(work.progress.answers.get(base_key, {})) < questions:
        work._retriever(base_key, config)
    for point in points:
        if len(work.progress.answers.get(point.key, {})) >= questions:
            continue
        try:
            work._retriever(point.key, point.config)
        except RetrievalkitError as error:
            raise configuration_error(spec, config, point.options, error) from None


def _best(points: Sequence[_Point], select: str) -> int:
    """The position of the highest score; ties go to the earlier configuration."""
    scores = [_score(point.run, select) if point.run else -math.inf for point in points]
    return max(range(len(points)), key=lambda index: (scores[index], -index))


def _run_of(point: _Point) -> Run:
    assert point.run is not None, "evaluated before it is ranked"
    return point.run


def _evaluate(work: _Evaluations, point: _Point, questions: list[GoldenQuestion]) -> None:
    point.questions = questions
    point.run, point.retrievals = work.run(
        point.key, point.config, questions, _label(point.options)
    )


def _confirm(
    golden: GoldenQuestionSet,
    spec: SweepConfig,
    config: Config,
    base_key: str,
    points: list[_Point],
    work: _Evaluations,
    select: str,
    halving: list[HalvingRound],
) -> tuple[Run, list[Retrieval], Winner, int, int]:
    from retrievalkit.stats.paired import paired_test, verdict

    assert spec.confirm is not None
    questions = list(golden.questions)
    tuning, held = sweep_split.split(questions, spec.confirm, spec.seed)
    if not tuning or not held:
        raise InputError(
            f"sweep '{spec.name}': {len(questions)} questions are too few to hold out "
            f"{spec.confirm:.0%} of them",
            field=f"sweeps.{spec.name}.confirm",
            hint="use a larger set, or another share",
        )
    tuning_questions = [questions[i] for i in tuning]
    held_questions = [questions[i] for i in held]
    configured_run, configured_retrievals = work.run(
        base_key, config, tuning_questions, "the configured retriever"
    )
    use_halving = spec.halving if spec.halving is not None else len(points) > HALVING_ABOVE
    if use_halving and len(points) > 1:
        order = sweep_split.tuning_order(questions, tuning, spec.seed)
        alive = list(range(len(points)))
        for number, (count, size) in enumerate(_rounds(len(points), len(tuning))):
            if number:
                ranked = sorted(alive, key=lambda i: (-_score(_run_of(points[i]), select), i))
                alive = ranked[:count]
            prefix: set[int] = set()
            for unit in order:
                if len(prefix) >= size:
                    break
                prefix.update(unit)
            chosen = [questions[i] for i in sorted(prefix)]
            work.prefetch([(points[i].key, points[i].config) for i in sorted(alive)], chosen)
            for index in sorted(alive):
                _evaluate(work, points[index], chosen)
                points[index].round = number
            halving.append(HalvingRound(number, len(alive), len(chosen)))
        best = max(alive, key=lambda i: (_score(_run_of(points[i]), select), -i))
    else:
        work.prefetch([(point.key, point.config) for point in points], tuning_questions)
        for point in points:
            _evaluate(work, point, tuning_questions)
        best = _best(points, select)
    winner_point = points[best]
    held_run, _ = work.run(winner_point.key, winner_point.config, held_questions, "the winner")
    base_held, _ = work.run(base_key, config, held_questions, "the configured retriever")
    test = paired_test(
        base_held.outcomes.values(select),
        held_run.outcomes.values(select),
        resamples=work.settings.resamples,
        confidence=work.settings.confidence,
        seed=spec.seed,
    )
    assert winner_point.run is not None
    confirmation = Confirmation(
        select,
        test.n,
        test.baseline,
        test.candidate,
        test.difference,
        test.low,
        test.high,
        test.p_value,
        test.p_floor,
        test.discordant,
        verdict(test.p_value, test.p_floor, 1.0 - work.settings.confidence),
    )
    winner = Winner(
        winner_point.options,
        best,
        winner_point.run.metrics[select],
        held_run.metrics[select],
        confirmation,
        configured=winner_point.key == base_key,
    )
    return configured_run, configured_retrievals, winner, len(tuning), len(held)


def _cross_validate(
    golden: GoldenQuestionSet,
    spec: SweepConfig,
    config: Config,
    base_key: str,
    points: list[_Point],
    work: _Evaluations,
    select: str,
) -> tuple[Run, list[Retrieval], Winner, int, int]:
    from retrievalkit.stats.intervals import sample_intervals
    from retrievalkit.stats.paired import paired_test, verdict

    assert spec.folds is not None
    questions = list(golden.questions)
    if spec.folds > len(sweep_split.units(questions)):
        raise InputError(
            f"sweep '{spec.name}': {spec.folds} folds for {len(sweep_split.units(questions))} "
            "questions or clusters",
            field=f"sweeps.{spec.name}.folds",
        )
    fold_of = np.array(sweep_split.folds(questions, spec.folds, spec.seed))
    configured_run, configured_retrievals = work.run(
        base_key, config, questions, "the configured retriever"
    )
    work.prefetch([(point.key, point.config) for point in points], questions)
    for point in points:
        _evaluate(work, point, questions)
    values = np.array([point.run.outcomes.values(select) for point in points if point.run])
    chosen: list[int] = []
    cross = np.full(len(questions), np.nan)
    for fold in range(spec.folds):
        inside = fold_of != fold
        counts = (~np.isnan(values[:, inside])).sum(axis=1)
        sums = np.nansum(values[:, inside], axis=1)
        means = np.where(counts > 0, sums / np.maximum(counts, 1), -np.inf)
        pick = int(np.argmax(means))  # the first of equal means
        chosen.append(pick)
        cross[~inside] = values[pick, ~inside]
    best = _best(points, select)
    test = paired_test(
        configured_run.outcomes.values(select),
        cross,
        resamples=work.settings.resamples,
        confidence=work.settings.confidence,
        seed=spec.seed,
    )
    defined = cross[~np.isnan(cross)]
    if defined.size:
        low, high, kind = sample_intervals(
            defined[None, :],
            resamples=work.settings.resamples,
            confidence=work.settings.confidence,
            seed=spec.seed,
        )
        held_out = MetricValue(
            float(defined.mean()), (float(low[0]), float(high[0])), int(defined.size), str(kind[0])
        )
    else:
        held_out = MetricValue(None, None, 0)
    confirmation = Confirmation(
        select,
        test.n,
        test.baseline,
        test.candidate,
        test.difference,
        test.low,
        test.high,
        test.p_value,
        test.p_floor,
        test.discordant,
        verdict(test.p_value, test.p_floor, 1.0 - work.settings.confidence),
    )
    winner_run = points[best].run
    assert winner_run is not None
    winner = Winner(
        points[best].options,
        best,
        winner_run.metrics[select],
        held_out,
        confirmation,
        configured=points[best].key == base_key,
        folds=tuple(points[pick].options for pick in chosen),
    )
    return configured_run, configured_retrievals, winner, len(questions), len(questions)


def _compared(
    points: Sequence[_Point], configured: Run, select: str, settings: Settings, seed: int
) -> tuple[Configuration, ...]:
    """Every evaluated configuration against the configured retriever, Holm over the grid."""
    from retrievalkit.stats.paired import holm, paired_test

    base_values = configured.outcomes.values(select)
    position = {outcome.question_id: i for i, outcome in enumerate(configured.outcomes)}
    tests = []
    for point in points:
        assert point.run is not None
        rows = [position[question.id] for question in point.questions]
        tests.append(
            paired_test(
                base_values[rows],
                point.run.outcomes.values(select),
                resamples=settings.resamples,
                confidence=settings.confidence,
                seed=seed,
            )
        )
    adjusted = holm([test.p_value for test in tests])
    return tuple(
        Configuration(
            dict(point.options),
            dict(point.run.metrics),
            _latency(point.retrievals),
            len(point.questions),
            point.run.errored,
            point.round,
            test.difference,
            test.low,
            test.high,
            test.p_value,
            p_holm,
        )
        for point, test, p_holm in zip(points, tests, adjusted, strict=True)
        if point.run is not None
    )


def _pareto(configurations: Sequence[Configuration], select: str) -> set[int]:
    """The configurations no other beats on both quality and p50 latency."""
    points = [
        (index, each.metrics[select].mean, each.latency_ms["p50"])
        for index, each in enumerate(configurations)
        if each.metrics[select].mean is not None and each.latency_ms["p50"] is not None
    ]
    front = set()
    for index, quality, latency in points:
        assert quality is not None and latency is not None
        dominated = any(
            other_q is not None
            and other_l is not None
            and other_q >= quality
            and other_l <= latency
            and (other_q > quality or other_l < latency)
            for _, other_q, other_l in points
        )
        if not dominated:
            front.add(index)
    return front


def _reused(work: _Evaluations) -> int:
    """Answers shared stages gave from memory: in this process and on the Ray workers."""
    local = work.shared.reused if work.shared is not None else 0
    return local + (work.remote.reused if work.remote is not None else 0)
