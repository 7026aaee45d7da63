"""Every stage of a staged retriever scored in one run, each question's miss put down to a stage.

A retriever MAY offer ``retrieve_stages(question, limit) -> Mapping[str, Sequence[str]]``
(and ``retrieve_many_stages(questions, limit)`` for batches): its stages in order, each
a ranking of document ids, the last being its answer (what ``retrieve`` returns).
Composites report their parts' stages under dotted names: a ``rerank`` over a
``hybrid`` named ``engine`` reports ``engine.bm25``, ``engine.dense``,
``engine.fusion`` and ``rerank``.

Each stage is scored as a run of its own (same cut-offs, intervals and collapse of
duplicate ids), each stage's per-question values are kept as outcome columns named
``stage.NAME:METRIC`` (so that the gate and ``history`` reach them like any metric),
and each stage gets the paired difference from the stage before it.

**Attribution.** At cut-off ``k`` (the run's largest), a stage *has* a question when an
expected document is in its top ``k``. A stage whose last name part is ``fusion`` or
``rerank`` *consumes* the stages before it under the same prefix: the answer (last
stage) of each group of earlier stages, back to the previous consuming stage of that
prefix. A question the answer misses is

- ``not retrieved`` when no stage returned an expected document at any depth;
- ``lost in fusion`` / ``demoted by reranker`` at the first consuming stage that does
  not have it although one of its inputs did;
- ``ranked below k`` when some stage returned it, but never in a top ``k``.

A question the answer has is ``rescued by fusion`` / ``rescued by reranker`` at the
last consuming stage that has it while none of its inputs did. A nested stage's label
names it: ``lost in fusion (engine.fusion)``. Errored and no-answer questions get none.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt

from retrievalkit.formats.ids import ReturnedIds
from retrievalkit.metrics.names import STAGE_PREFIX as STAGE_PREFIX
from retrievalkit.metrics.names import split_stage_metric as split_stage_metric
from retrievalkit.metrics.names import stage_metric as stage_metric
from retrievalkit.metrics.scoring import RunScorer, ScoringOptions
from retrievalkit.model.records import ResultRecord, StageDelta, StageReport
from retrievalkit.model.values import GoldenQuestion
from retrievalkit.pipeline.engine.evaluator import (
    Retrievals,
    SharedProgress,
    call_with_timeout,
    describe_retriever_error,
    distinct_ranking,
    in_threads,
    shared_usage,
    with_median_latency,
)
from retrievalkit.redaction import scrub
from retrievalkit.stats.paired import paired_test, verdict
from retrievalkit.usage import Meter, metered

#: Stage names whose stage consumes the stages before it, and the words their labels use.
CONSUMING = {
    "fusion": ("lost in fusion", "rescued by fusion"),
    "rerank": ("demoted by reranker", "rescued by reranker"),
}
NOT_RETRIEVED = "not retrieved"
BELOW_K = "ranked below k"
_BATCH = 64


def record_mean(record: ResultRecord, name: str) -> float | None:
    """The mean of ``name`` in ``record``: a metric of its table, or a stage's
    (``stage.rerank:rr``); None when the run has no such metric or stage."""
    split = split_stage_metric(name)
    if split is None:
        value = record.metrics.get(name)
    else:
        stage, metric = split
        value = None if record.stages is None else record.stages.metrics.get(stage, {}).get(metric)
    return None if value is None else value.mean


def has_stages(retriever: Any) -> bool:
    """Whether ``retriever`` reports its stages (``retrieve_stages``)."""
    return callable(getattr(retriever, "retrieve_stages", None))


def nest(prefix: str, stages: Mapping[str, Sequence[str]]) -> dict[str, Sequence[str]]:
    """A part's stages under its name, for a composite's own ``retrieve_stages``."""
    return {f"{prefix}.{name}": ranking for name, ranking in stages.items()}


def part_stages(part: Any, question: str, limit: int) -> dict[str, Sequence[str]]:
    """The stages of one part of a composite (a resolved retriever with ``name`` and
    ``retriever``): its own stages nested under its name, or its ranking as one stage."""
    if has_stages(part.retriever):
        return nest(part.name, part.retriever.retrieve_stages(question, limit))
    return {part.name: list(part.retriever.retrieve(question, limit))}


def answer_of(stages: Mapping[str, Sequence[str]]) -> list[str]:
    """The last stage's ranking: the composite's answer."""
    if not stages:
        return []
    return list(list(stages.values())[-1])


def _checked(
    answer: Any,
    limit: int,
    depth: int,
    order: list[str] | None,
    notes: ReturnedIds | None = None,
    question: str | None = None,
) -> dict[str, tuple[str, ...]]:
    """Each stage's distinct ids (every one returned, for attribution at any depth), after
    checking every stage as the evaluator checks a ranking, ids compared as the answer's
    are (`retrievalkit.formats.ids`, counted in ``notes``); ``order`` is the first
    question's stage names, which every question must repeat."""
    if not isinstance(answer, Mapping) or not answer:
        raise ValueError(
            f"retrieve_stages returned {type(answer).__name__} instead of a non-empty mapping "
            "of stage name to ids"
        )
    names = [str(name) for name in answer]
    if order is not None and names != order:
        raise ValueError(
            f"retrieve_stages reported stages {', '.join(names)}, not those of the first "
            f"question ({', '.join(order)})"
        )
    stages: dict[str, tuple[str, ...]] = {}
    for position, (name, ids) in enumerate(answer.items()):
        last = position == len(answer) - 1
        # Only the answer is held to the limit: a leg may be asked deeper than the answer.
        if last:
            stages[str(name)] = distinct_ranking(ids, limit, depth, notes, question)
        else:
            # A leg may be asked deeper than the answer: all its distinct ids are kept.
            size = len(ids) if hasattr(ids, "__len__") else 0
            stages[str(name)] = distinct_ranking(ids, size, size, notes, question)
    return stages


def ask_stages(
    retriever: Any,
    questions: Sequence[GoldenQuestion],
    *,
    depth: int,
    overfetch: int,
    timeout: float | None = None,
    secrets: Sequence[str] = (),
    progress: Callable[[int], None] | None = None,
    concurrency: int = 1,
    notes: ReturnedIds | None = None,
    repeat: int = 1,
) -> tuple[Retrievals, list[dict[str, tuple[str, ...]] | None]]:
    """The answer (last stage) of every question, and each question's stages (None for
    one that errored), asked one question at a time or with ``retrieve_many_stages`` in
    groups of 64, ``concurrency`` questions (or groups) at once. ``timeout`` bounds each
    question as in `retrievalkit.pipeline.engine.evaluator`; ``notes`` counts the returned
    ids (of any stage) the identity rule changed. With ``repeat`` above 1 the questions
    are asked that many times: the first answers and stages are kept, each question's
    latency is the median of its asks."""
    if repeat > 1:
        tell = None if progress is None else SharedProgress(progress, repeat)
        again = partial(
            ask_stages,
            retriever,
            questions,
            depth=depth,
            overfetch=overfetch,
            timeout=timeout,
            secrets=secrets,
            progress=tell,
            concurrency=concurrency,
        )
        first, kept = again(notes=notes)
        asks = [first.latency_ms, *(again()[0].latency_ms for _ in range(repeat - 1))]
        return with_median_latency(first, asks), kept
    limit = depth * overfetch
    batched = callable(getattr(retriever, "retrieve_many_stages", None))
    order: list[str] | None = None
    rankings: list[tuple[str, ...]] = []
    latency: list[float] = []
    returned: list[int] = []
    errors: dict[int, str] = {}
    stages: list[dict[str, tuple[str, ...]] | None] = []

    def describe(error: BaseException) -> str:
        return scrub(describe_retriever_error(error), secrets)

    texts = [question.question for question in questions]
    groups = (
        [texts[low : low + _BATCH] for low in range(0, len(texts), _BATCH)]
        if batched
        else [[t] for t in texts]
    )
    fetch = partial(_fetch_group, retriever, batched=batched, limit=limit, timeout=timeout)

    # Asked ``concurrency`` groups at once; checked below in the set's order, so the
    # stage names every question must repeat are the first question's either way.
    fetched = None
    usage: list[Any] = []
    if concurrency > 1:
        fetched = _fetched_concurrently(fetch, groups, concurrency, progress)
    for number, group in enumerate(groups):
        answers, each, spent = fetched[number] if fetched is not None else fetch(group)
        usage += spent if spent is not None else [None] * len(group)
        for text, answer in zip(group, answers, strict=True):
            position = len(rankings)
            try:
                if isinstance(answer, BaseException):
                    raise answer
                checked = _checked(answer, limit, depth, order, notes, text)
            except KeyboardInterrupt:
                raise
            except BaseException as error:
                errors[position] = describe(error)
                rankings.append(())
                returned.append(0)
                stages.append(None)
            else:
                if order is None:
                    order = list(checked)
                final = list(answer.values())[-1]
                rankings.append(checked[order[-1]])
                returned.append(len(final))
                stages.append(checked)
            latency.append(each)
        if progress is not None and fetched is None:
            progress(len(group))
    return Retrievals(rankings, latency, returned, errors, usage), stages


def _fetch_group(
    retriever: Any, group: list[str], *, batched: bool, limit: int, timeout: float | None
) -> tuple[list[Any], float, list[Any] | None]:
    """A group's answers (an exception in place of each answer it cost), the milliseconds
    each question took, and each question's tokens (`shared_usage`): one
    ``retrieve_many_stages`` call when ``batched``, else ``retrieve_stages`` of its one
    question, bounded by ``timeout`` per question."""
    meter = Meter()
    start = time.perf_counter()
    try:
        bound = None if timeout is None else timeout * len(group)
        if batched:
            asked = list(group)
            answers: list[Any] = call_with_timeout(
                metered(meter, partial(retriever.retrieve_many_stages, asked, limit)), bound
            )
            answers = list(answers)
            if len(answers) != len(group):
                raise ValueError(
                    f"retrieve_many_stages returned {len(answers)} answers for "
                    f"{len(group)} questions"
                )
        else:
            text = group[0]
            answers = [
                call_with_timeout(
                    metered(meter, partial(retriever.retrieve_stages, text, limit)), bound
                )
            ]
    except KeyboardInterrupt:
        raise  # an interrupted run, whoever raised it
    except BaseException as error:  # SystemExit too: the group's error outcomes
        answers = [error] * len(group)
    each = (time.perf_counter() - start) * 1000.0 / len(group)
    return answers, each, shared_usage(meter, len(group))


def _fetched_concurrently(
    fetch: Callable[[list[str]], tuple[list[Any], float, list[Any] | None]],
    groups: list[list[str]],
    concurrency: int,
    progress: Callable[[int], None] | None,
) -> list[tuple[list[Any], float, list[Any] | None]]:
    """``fetch`` of every group from ``concurrency`` daemon threads, as the evaluator asks
    concurrently, in the groups' order; a group that raised holds its error for each question."""
    return in_threads(
        fetch,
        groups,
        concurrency,
        failed=lambda group, error: ([error] * len(group), 0.0, None),
        done=progress,
        name="retrievalkit-stages",
    )


def _inputs(order: Sequence[str]) -> dict[int, list[int]]:
    """For each consuming stage (by position), the positions of the stages it consumes."""
    inputs: dict[int, list[int]] = {}
    for position, name in enumerate(order):
        prefix, _, own = name.rpartition(".")
        if own not in CONSUMING:
            continue
        scope = f"{prefix}." if prefix else ""
        groups: dict[str, int] = {}
        for earlier in range(position - 1, -1, -1):
            other = order[earlier]
            if not other.startswith(scope):
                continue
            rest = other[len(scope) :]
            if rest in CONSUMING:  # the previous consuming stage of this prefix: its input
                groups.setdefault(rest, earlier)
                break
            groups.setdefault(rest.split(".", 1)[0], earlier)
        inputs[position] = sorted(groups.values())
    return inputs


def _label(order: Sequence[str], position: int, which: int) -> str:
    name = order[position]
    base = CONSUMING[name.rpartition(".")[2]][which]
    return base if "." not in name else f"{base} ({name})"


def attribute(
    order: Sequence[str], has: Sequence[bool], found: Sequence[bool], answered: bool
) -> str | None:
    """The attribution label of one question (see the module documentation): ``has``
    says for each stage whether an expected document is in its top k, ``found`` whether
    it returned one at all; ``answered`` whether the question is answerable and did not
    error."""
    if not answered:
        return None
    inputs = _inputs(order)
    if not has[-1]:
        for position, consumed in sorted(inputs.items()):
            if not has[position] and any(has[i] for i in consumed):
                return _label(order, position, 0)
        return BELOW_K if any(found) else NOT_RETRIEVED
    rescued = [
        position
        for position, consumed in inputs.items()
        if has[position] and consumed and not any(has[i] for i in consumed)
    ]
    return _label(order, max(rescued), 1) if rescued else None


class StageScorer:
    """Scores each stage of a staged run as a run of its own, and attributes misses."""

    def __init__(self, questions: Sequence[GoldenQuestion], options: ScoringOptions) -> None:
        self.questions = questions
        self.options = options
        self.k = max(options.ks)
        self.order: list[str] = []
        self.scorers: dict[str, RunScorer] = {}
        self.has: list[list[bool]] = []
        self.found: list[list[bool]] = []
        self.answered: list[bool] = []
        self.done = 0

    def add(
        self, answers: Retrievals, stages: Sequence[Mapping[str, Sequence[str]] | None]
    ) -> None:
        """The stages of the next questions (None for one that errored)."""
        if not self.order:
            self.order = next((list(each) for each in stages if each is not None), [])
            self.scorers = {
                name: RunScorer(self.questions, self.options, chunks=False) for name in self.order
            }
            # Questions before the first answered one all errored.
            for scorer in self.scorers.values():
                if self.done:
                    scorer.add(
                        Retrievals(
                            [()] * self.done,
                            [0.0] * self.done,
                            [0] * self.done,
                            dict.fromkeys(range(self.done), "errored"),
                        )
                    )
        low = self.done
        questions = self.questions[low : low + len(stages)]
        for name in self.order:
            rankings = [() if each is None else tuple(each[name])[: self.k] for each in stages]
            errors = {offset: message for offset, message in answers.errors.items()}
            self.scorers[name].add(
                Retrievals(rankings, list(answers.latency_ms), [len(r) for r in rankings], errors)
            )
        for question, each, offset in zip(questions, stages, range(len(stages)), strict=True):
            relevant = {doc for doc, grade in question.judgments().items() if grade >= 1}
            self.answered.append(
                each is not None and bool(relevant) and offset not in answers.errors
            )
            self.has.append(
                [
                    each is not None and not relevant.isdisjoint(each[name][: self.k])
                    for name in self.order
                ]
            )
            self.found.append(
                [each is not None and not relevant.isdisjoint(each[name]) for name in self.order]
            )
        self.done += len(stages)

    def finish(self) -> tuple[StageReport | None, dict[str, npt.NDArray[np.float64]]]:
        """The stage report, and each stage's per-question columns by `stage_metric` name."""
        if not self.order:
            return None, {}
        options = self.options
        finished = {name: scorer.finish() for name, scorer in self.scorers.items()}
        columns: dict[str, npt.NDArray[np.float64]] = {}
        for name, scores in finished.items():
            for metric in scores.metrics:
                columns[stage_metric(name, metric)] = scores.outcomes.values(metric)
        deltas: dict[str, dict[str, StageDelta]] = {}
        for before, after in zip(self.order, self.order[1:], strict=False):
            table: dict[str, StageDelta] = {}
            for metric in finished[after].metrics:
                if metric.startswith("judged@"):
                    continue
                paired = paired_test(
                    columns[stage_metric(before, metric)],
                    columns[stage_metric(after, metric)],
                    resamples=options.resamples,
                    confidence=options.confidence,
                    seed=options.seed,
                )
                table[metric] = StageDelta(
                    paired.difference,
                    None
                    if paired.low is None or paired.high is None
                    else (paired.low, paired.high),
                    paired.p_value,
                    paired.n,
                    verdict(paired.p_value, paired.p_floor, 1.0 - options.confidence),
                )
            deltas[after] = table
        labels: dict[str, str] = {}
        counts: dict[str, int] = {}
        for question, has, found, answered in zip(
            self.questions, self.has, self.found, self.answered, strict=True
        ):
            label = attribute(self.order, has, found, answered)
            if label is not None:
                labels[question.id] = label
                counts[label] = counts.get(label, 0) + 1
        report = StageReport(
            order=tuple(self.order),
            metrics={name: scores.metrics for name, scores in finished.items()},
            deltas=deltas,
            attribution_k=self.k,
            attribution=dict(sorted(counts.items())),
            questions=labels,
        )
        return report, columns
