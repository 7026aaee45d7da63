"""``eval --sequential``: ask questions in a seeded random order and stop once the gate is settled.

For each gated metric (and slice) the quantity the gate judges is the mean difference
D = candidate - baseline over the N questions of the set that both runs define; the
gate fails when -D exceeds the allowed drop T. Asking the questions one at a time in a
random order is sampling that finite population without replacement, so after every
answer a confidence sequence for D is updated: the betting confidence sequence of
Waudby-Smith & Ramdas (JRSS-B 2024, "Estimating means of bounded random variables by
betting"), in its without-replacement form (Waudby-Smith & Ramdas, NeurIPS 2020). It
holds at every step at once ("anytime-valid"), so stopping as soon as it settles keeps
its error rate:

- ``fail``: the whole sequence lies below -T (the drop is past the threshold);
- ``pass``: the whole sequence lies at or above -T;
- ``undecided``: the set ran out first, and an undecided gate fails.

Each gate uses alpha / (number of gates), so the chance that any settled verdict is
wrong stays below alpha = 1 - confidence. The run stops when one gate fails or all pass.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import numpy.typing as npt

from retrievalkit.errors import InputError
from retrievalkit.stats.intervals import DEFAULT_SEED

if TYPE_CHECKING:
    from retrievalkit.api import Run, Thresholds
    from retrievalkit.model.values import GoldenQuestionSet
    from retrievalkit.pipeline.gate import Verdict
    from retrievalkit.stores import ResultStore

FloatArray = npt.NDArray[np.float64]

PASS = "pass"
FAIL = "fail"
UNDECIDED = "undecided"

#: Points of the grid of candidate means (on [0, 1] after mapping D to (D + 1) / 2).
GRID_POINTS = 4001
#: Bets are capped at this share of what keeps the capital positive (Waudby-Smith & Ramdas' c).
_TRUNCATION = 0.5


class BettingSequence:
    """Hedged-capital betting confidence sequence for the mean of N values in [0, 1],
    drawn without replacement.

    For each candidate mean m, two gamblers bet that the next value lies above (below)
    the mean the remaining values must have if the population mean is m; m is ruled out
    once the hedged capital max(K+, K-) / 2 reaches 1/alpha. Bets are predictable: their
    size comes from the values seen before (the "predictable plug-in" of the paper),
    capped to keep the capital positive.

    The candidates are the cells of a grid on [0, 1], not points: a cell's capital is
    the smallest any mean inside it could have (each step's factor taken at the cell's
    worst edge), so a cell is ruled out only when every mean in it is. Without this, the
    last steps, where a small change of m moves the remaining values' mean N times as
    much, would rule out the true mean when it falls between two grid points.
    """

    def __init__(self, population: int, alpha: float, points: int = GRID_POINTS) -> None:
        self.population = population
        self.alpha = alpha
        self.edges = np.linspace(0.0, 1.0, points)
        cells = points - 1
        self._log_up = np.zeros(cells)
        self._log_down = np.zeros(cells)
        self._alive = np.ones(cells, dtype=bool)
        self._seen = 0
        self._total = 0.0
        self._squares = 0.25  # the plug-in's prior variance (1/4) and mean (1/2)
        self._running_mean = 0.5

    @property
    def seen(self) -> int:
        return self._seen

    def update(self, value: float) -> None:
        """Take the next drawn value (in [0, 1])."""
        t = self._seen + 1
        left = self.population - self._seen
        # The mean the remaining values must have, if the population mean is m: over a
        # cell it runs from ``lowest`` to ``highest``.
        remaining = (self.population * self.edges - self._total) / left
        lowest, highest = remaining[:-1], remaining[1:]
        possible = (highest >= -1e-12) & (lowest <= 1.0 + 1e-12)
        lowest = np.clip(lowest, 0.0, 1.0)
        highest = np.clip(highest, 0.0, 1.0)
        variance = self._squares / t
        size = math.sqrt(2.0 * math.log(2.0 / self.alpha) / (variance * t * math.log(1.0 + t)))
        with np.errstate(divide="ignore", invalid="ignore"):
            up = np.minimum(size, _TRUNCATION / np.maximum(highest, 1e-12))
            down = np.minimum(size, _TRUNCATION / np.maximum(1.0 - lowest, 1e-12))
            # Each gambler's worst factor over the cell: the up bet loses most at the
            # highest remaining mean, the down bet at the lowest.
            self._log_up += np.log1p(up * (value - highest))
            self._log_down += np.log1p(-down * (value - lowest))
        hedged = np.logaddexp(self._log_up, self._log_down) - math.log(2.0)
        self._alive &= possible & (hedged < math.log(1.0 / self.alpha))
        self._seen = t
        self._total += value
        self._squares += (value - self._running_mean) ** 2
        self._running_mean = (0.5 + self._total) / (t + 1)

    def bounds(self) -> tuple[float, float] | None:
        """The lowest and highest mean of the cells still alive (None: none is)."""
        alive = np.flatnonzero(self._alive)
        if alive.size == 0:
            return None
        return float(self.edges[alive[0]]), float(self.edges[alive[-1] + 1])


@attrs.frozen
class GateSequence:
    """The state of one gated metric (in one slice) when the run stopped."""

    metric: str
    slice: str | None
    threshold: float
    population: int
    """Questions of the set both runs define for this metric."""
    asked: int
    """Of those, how many had been asked."""
    low: float | None
    high: float | None
    """The confidence sequence of the mean difference (candidate - baseline)."""
    decision: str


@attrs.frozen
class SequentialResult:
    """What ``eval --sequential`` decided, and how many questions it took."""

    decision: str
    """``pass``, ``fail`` or ``undecided`` (undecided fails the gate)."""
    asked: int
    total: int
    alpha: float
    seed: int
    gates: tuple[GateSequence, ...]

    @property
    def saved(self) -> int:
        """Questions not asked: the retrieval calls saved."""
        return self.total - self.asked


@attrs.frozen
class _Gate:
    metric: str
    slice: str | None
    threshold: float
    members: frozenset[str]
    baseline: Mapping[str, float]
    sequence: BettingSequence


def _decision(sequence: BettingSequence, threshold: float) -> str:
    bounds = sequence.bounds()
    if bounds is None:
        return UNDECIDED
    cutoff = (1.0 - threshold) / 2.0  # D = -threshold on the [0, 1] scale
    low, high = bounds
    if high < cutoff:
        return FAIL
    if low >= cutoff:
        return PASS
    return UNDECIDED


def sequential_order(question_ids: Sequence[str], seed: int = DEFAULT_SEED) -> list[int]:
    """The seeded random order the questions are asked in (indices into the set)."""
    return [int(index) for index in np.random.default_rng(seed).permutation(len(question_ids))]


def run_sequentially(
    question_ids: Sequence[str],
    ask: Callable[[list[int]], Sequence[Mapping[str, float | None]]],
    gates: Sequence[tuple[str | None, str, float, Sequence[str]]],
    baseline: Mapping[str, Mapping[str, float]],
    *,
    alpha: float,
    batch: int = 1,
    seed: int = DEFAULT_SEED,
) -> tuple[list[int], SequentialResult]:
    """Ask questions (indices, ``batch`` at a time) until every gate is settled.

    ``ask`` evaluates the given questions and returns each one's metric values;
    ``gates`` are (slice, metric, threshold, member question ids); ``baseline`` maps a
    metric to the baseline's value per question id (undefined values left out).
    Returns the indices asked, in order, and the result.
    """
    if not gates:
        raise ValueError("a sequential run needs at least one threshold to settle")
    share = alpha / len(gates)
    states = []
    for slice_name, metric, threshold, members in gates:
        before = baseline.get(metric, {})
        population = sum(1 for question_id in members if question_id in before)
        states.append(
            _Gate(
                metric,
                slice_name,
                threshold,
                frozenset(members),
                before,
                BettingSequence(max(population, 1), share),
            )
        )
    order = sequential_order(question_ids, seed)
    asked: list[int] = []
    decisions = [UNDECIDED] * len(states)
    for start in range(0, len(order), max(1, batch)):
        chosen = order[start : start + max(1, batch)]
        answers = ask(chosen)
        asked.extend(chosen)
        for index, scores in zip(chosen, answers, strict=True):
            question_id = question_ids[index]
            for state in states:
                if question_id not in state.members or question_id not in state.baseline:
                    continue
                value = scores.get(state.metric)
                if value is None:
                    # Undefined for the candidate but not the baseline cannot happen for a
                    # metric defined by the labels alone; count it as the worst case.
                    value = 0.0
                difference = float(value) - state.baseline[question_id]
                state.sequence.update((difference + 1.0) / 2.0)
        decisions = [_decision(state.sequence, state.threshold) for state in states]
        if FAIL in decisions or all(decision == PASS for decision in decisions):
            break
    if FAIL in decisions:
        overall = FAIL
    else:
        overall = PASS if all(d == PASS for d in decisions) else UNDECIDED
    rows = []
    for state, decision in zip(states, decisions, strict=True):
        bounds = state.sequence.bounds()
        rows.append(
            GateSequence(
                metric=state.metric,
                slice=state.slice,
                threshold=state.threshold,
                population=state.sequence.population,
                asked=state.sequence.seen,
                low=None if bounds is None else 2.0 * bounds[0] - 1.0,
                high=None if bounds is None else 2.0 * bounds[1] - 1.0,
                decision=decision,
            )
        )
    result = SequentialResult(
        decision=overall,
        asked=len(asked),
        total=len(question_ids),
        alpha=alpha,
        seed=seed,
        gates=tuple(rows),
    )
    return asked, result


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
) -> tuple[Run, Verdict, SequentialResult]:
    """Ask ``golden``'s questions in a seeded random order until the gate is settled.

    The run holds the questions asked (its manifest says how many, under
    ``extra["sequential"]``); the verdict's ``regressed`` is the sequential decision
    (``undecided`` fails). The pipeline's retrieval, scoring and record steps are those
    of `retrievalkit.api.evaluate`.
    """
    from retrievalkit.api import _config, _resolve, _scored_run
    from retrievalkit.metrics.definitions import normalise_ks
    from retrievalkit.metrics.scoring import ScoringOptions, score_run, slice_label
    from retrievalkit.pipeline.baselines import choose_baseline
    from retrievalkit.pipeline.evaluator import Retrieval, evaluate_questions
    from retrievalkit.pipeline.gate import compare_runs, settle_sequentially, split_slice
    from retrievalkit.stats.power import gated_metrics

    resolved = _resolve(retriever, None, None, _config(config))
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
        ks=normalise_ks(k), resamples=resamples, confidence=confidence, slices=tuple(slices)
    )
    quick = attrs.evolve(scoring, resamples=1)
    answered: dict[int, Retrieval] = {}

    def ask(indices: list[int]) -> list[dict[str, float | None]]:
        chosen = [questions[index] for index in indices]
        answers = evaluate_questions(
            resolved.retriever,
            chosen,
            depth=max(scoring.ks),
            overfetch=overfetch,
            concurrency=concurrency,
            timeout=timeout,
            secrets=resolved.secrets,
        )
        answered.update(zip(indices, answers, strict=True))
        return [dict(outcome.scores) for outcome in score_run(chosen, answers, quick).outcomes]

    asked, result = run_sequentially(
        [question.id for question in questions],
        ask,
        gates,
        before,
        alpha=1.0 - confidence,
        batch=concurrency,
        seed=seed,
    )
    kept = sorted(asked)
    run = _scored_run(
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
    )
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
    )
    return run, settle_sequentially(verdict, result), result
