"""The mathematics of ``eval --sequential``: betting confidence sequences over a seeded order.

`retrievalkit.pipeline.gating.sequential_gate` asks the questions in that order and stops once
the gate is settled; this module decides, from the answers so far, whether it is.

For each gated metric (and slice) the quantity the gate judges is the mean difference
D = candidate - baseline (per question) that the fixed-sample gate judges with
``--require-significant``: a regression is a drop past the allowed drop T that the
questions show to be real, not one of A/A noise. Asking the questions one at a time in
a random order, two betting confidence sequences (Waudby-Smith & Ramdas, JRSS-B 2024,
"Estimating means of bounded random variables by betting") are updated after every
answer. Both hold at every step at once ("anytime-valid"), so stopping as soon as one
settles keeps its error rate:

- ``fail`` early: the sequence for the system's expected difference (questions as draws
  from the population of questions like these: a random order of such a set is such a
  draw) lies below -T. A candidate that is the same system as the baseline has expected
  difference 0 and fails this way at most alpha of the time, whatever the set size;
- ``pass`` early: the sequence for the difference over this very set (sampling it
  without replacement, Waudby-Smith & Ramdas, NeurIPS 2020) lies at or above -T, so the
  whole set's drop is at most T and the fixed-sample rule could not fail it;
- a set asked whole is decided by the fixed-sample rule: the exact difference over the
  set and the paired sign-flip test the fixed gate uses (`retrievalkit.stats.paired`): it
  fails when the drop is past T and significant, so an identical candidate passes, with
  a threshold of 0 too;
- ``undecided``: a gate the run stopped before settling (another gate failed first), or
  one with no question both runs define.

Each sequence uses alpha / (number of gates); the whole-set rule uses alpha as the fixed
gate does. The run stops when one gate fails or all pass.

With clusters of related questions (``clusters``), whole clusters are the draws: they
are asked in a seeded random order, each with all its questions, and a gate takes a
cluster once all its members have been answered. Its value is the cluster's summed
difference over the gate's mean cluster size m (so the clusters' mean is D), scaled by
the largest cluster's m_max / m into [-1, 1]; the whole-set rule is the sign-flip test
of the clusters' sums, as the fixed gate's clustered test.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import attrs
import numpy as np
import numpy.typing as npt

from retrievalkit.stats.intervals import DEFAULT_SEED
from retrievalkit.stats.paired import SIGNIFICANT, p_floor, sign_flip_p_value, verdict

if TYPE_CHECKING:
    pass

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
    drawn without replacement (``population`` None: drawn with replacement, so the
    sequence is for the mean of the distribution the values come from).

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

    def __init__(self, population: int | None, alpha: float, points: int = GRID_POINTS) -> None:
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
        if self.population is None:
            lowest, highest = self.edges[:-1], self.edges[1:]
            possible = np.ones(lowest.size, dtype=bool)
        else:
            left = self.population - self._seen
            # The mean the remaining values must have, if the population mean is m: over
            # a cell it runs from ``lowest`` to ``highest``.
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


#: How a gate's decision was reached.
SEQUENCE_RULE = "confidence sequence"
WHOLE_SET_RULE = "whole set: paired sign-flip test"
#: Differences within this of the threshold are at it, not past it (as in the fixed gate).
_TOLERANCE = 1e-9


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
    clusters: int | None = attrs.field(default=None, kw_only=True)
    """With clusters as the unit: how many the population's questions form."""
    low: float | None
    high: float | None
    """The confidence sequence of the mean difference (candidate - baseline) over the set."""
    decision: str
    rule: str = SEQUENCE_RULE
    """``confidence sequence`` (settled early) or ``whole set: paired sign-flip test``."""
    difference: float | None = None
    """The mean difference over the questions asked (exact once the set is asked whole)."""
    p_value: float | None = None
    """The paired test's two-sided p-value, when the whole-set rule decided."""


@attrs.frozen
class SequentialResult:
    """What ``eval --sequential`` decided, and how many questions it took."""

    decision: str
    """``pass`` or ``fail`` (``undecided`` only when no gate had a question to compare)."""
    asked: int
    total: int
    alpha: float
    seed: int
    gates: tuple[GateSequence, ...]

    @property
    def saved(self) -> int:
        """Questions not asked: the retrieval calls saved."""
        return self.total - self.asked

    @property
    def saved_share(self) -> float:
        """The share of the set not asked (0 for an empty set)."""
        return self.saved / self.total if self.total else 0.0


@attrs.define
class _Gate:
    metric: str
    slice: str | None
    threshold: float
    members: frozenset[str]
    baseline: Mapping[str, float]
    population: int
    """Questions both runs define."""
    sequence: BettingSequence
    """For the difference over the set (without replacement): settles ``pass`` early."""
    expected: BettingSequence
    """For the expected difference (with replacement): settles ``fail`` early."""
    cluster_of: Mapping[str, int] | None = None
    """Each population question's cluster (None: every question is its own unit)."""
    sizes: Mapping[int, int] = attrs.field(factory=dict)
    """Each cluster's population questions."""
    scale: float = 1.0
    """A unit's value is its summed difference over ``scale`` (with clusters: the largest
    cluster's size), so that it lies in [-1, 1] and the units' mean is D / ``bound``."""
    bound: float = 1.0
    """The largest cluster's size over the mean size: D's bound in units' values."""
    differences: list[float] = attrs.field(factory=list)
    sums: list[float] = attrs.field(factory=list)
    """Each completed unit's summed difference."""
    pending: dict[int, list[float]] = attrs.field(factory=dict)

    @property
    def units(self) -> int:
        """How many units the population forms (questions, or clusters)."""
        return self.population if self.cluster_of is None else len(self.sizes)

    def update(self, question_id: str, difference: float) -> None:
        self.differences.append(difference)
        if self.cluster_of is None:
            self._take(difference)
            return
        code = self.cluster_of[question_id]
        held = self.pending.setdefault(code, [])
        held.append(difference)
        if len(held) == self.sizes[code]:
            del self.pending[code]
            self._take(math.fsum(held))

    def _take(self, total: float) -> None:
        self.sums.append(total)
        value = (total / self.scale + 1.0) / 2.0
        self.sequence.update(value)
        self.expected.update(value)


def _decision(gate: _Gate, alpha: float, seed: int) -> tuple[str, str, float | None]:
    """(decision, rule, p-value of the whole-set rule)."""
    if len(gate.sums) >= gate.units:
        return _whole_set(gate, alpha, seed)
    # D = -threshold on the units' [0, 1] scale
    cutoff = (1.0 - gate.threshold / gate.bound) / 2.0
    expected = gate.expected.bounds()
    if expected is not None and expected[1] < cutoff:
        return FAIL, SEQUENCE_RULE, None
    bounds = gate.sequence.bounds()
    if bounds is not None and bounds[0] >= cutoff:
        return PASS, SEQUENCE_RULE, None
    return UNDECIDED, SEQUENCE_RULE, None


def _whole_set(gate: _Gate, alpha: float, seed: int) -> tuple[str, str, float | None]:
    """The fixed gate's rule with ``--require-significant``: a drop past the threshold
    that the paired sign-flip test finds significant fails."""
    if not gate.differences:
        return UNDECIDED, WHOLE_SET_RULE, None
    differences = np.asarray(gate.differences, dtype=np.float64)
    # The sign-flip test of the units: questions, or the clusters' summed differences.
    sums = np.asarray(gate.sums, dtype=np.float64)
    p_value, _, _ = sign_flip_p_value(sums, seed=seed)
    discordant = int((np.abs(sums) > 1e-12).sum())
    dropped = -float(differences.mean()) > gate.threshold + _TOLERANCE
    said = verdict(p_value, p_floor(discordant), alpha)
    return (FAIL if dropped and said == SIGNIFICANT else PASS), WHOLE_SET_RULE, p_value


def sequential_order(
    question_ids: Sequence[str],
    seed: int = DEFAULT_SEED,
    clusters: Sequence[int] | None = None,
) -> list[int]:
    """The seeded random order the questions are asked in (indices into the set); with
    ``clusters`` (each question's cluster code), the clusters' order, each cluster's
    questions together in the set's order."""
    if clusters is None:
        return [int(i) for i in np.random.default_rng(seed).permutation(len(question_ids))]
    codes = np.asarray(clusters, dtype=np.intp)
    distinct = np.unique(codes)
    rank = np.empty(int(distinct.max()) + 1 if distinct.size else 0, dtype=np.intp)
    rank[distinct] = np.random.default_rng(seed).permutation(distinct.size)
    return [int(i) for i in np.lexsort((np.arange(codes.size), rank[codes]))]


def run_sequentially(
    question_ids: Sequence[str],
    ask: Callable[[list[int]], Sequence[Mapping[str, float | None]]],
    gates: Sequence[tuple[str | None, str, float, Sequence[str]]],
    baseline: Mapping[str, Mapping[str, float]],
    *,
    alpha: float,
    batch: int = 1,
    seed: int = DEFAULT_SEED,
    points: int = GRID_POINTS,
    clusters: Sequence[int] | None = None,
) -> tuple[list[int], SequentialResult]:
    """Ask questions (indices, ``batch`` at a time) until every gate is settled.

    ``ask`` evaluates the given questions and returns each one's metric values;
    ``gates`` are (slice, metric, threshold, member question ids); ``baseline`` maps a
    metric to the baseline's value per question id (undefined values left out);
    ``points`` is the resolution of the sequences' grid of means; ``clusters`` (each
    question's cluster code) makes whole clusters the draws. Returns the indices asked,
    in order, and the result.
    """
    if not gates:
        raise ValueError("a sequential run needs at least one threshold to settle")
    if clusters is not None and len(clusters) != len(question_ids):
        raise ValueError(f"{len(clusters)} cluster codes for {len(question_ids)} questions")
    if clusters is not None and len(set(clusters)) == len(clusters):
        clusters = None  # clusters of one question each: the questions are the units
    share = alpha / len(gates)
    states = [
        _gate(slice_name, metric, threshold, members, baseline.get(metric, {}), share, points,
              None if clusters is None else dict(zip(question_ids, clusters, strict=True)))
        for slice_name, metric, threshold, members in gates
    ]  # fmt: skip
    order = sequential_order(question_ids, seed, clusters)
    asked: list[int] = []
    decisions = [_decision(state, alpha, seed) for state in states]
    for start in range(0, len(order), max(1, batch)):
        if any(d == FAIL for d, _, _ in decisions) or all(d == PASS for d, _, _ in decisions):
            break
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
                state.update(question_id, float(value) - state.baseline[question_id])
        decisions = [_decision(state, alpha, seed) for state in states]
    if any(d == FAIL for d, _, _ in decisions):
        overall = FAIL
    else:
        overall = PASS if all(d == PASS for d, _, _ in decisions) else UNDECIDED
    rows = []
    for state, (decision, rule, p_value) in zip(states, decisions, strict=True):
        bounds = state.sequence.bounds()
        rows.append(
            GateSequence(
                metric=state.metric,
                slice=state.slice,
                threshold=state.threshold,
                population=state.population,
                asked=len(state.differences),
                low=None if bounds is None else state.bound * (2.0 * bounds[0] - 1.0),
                high=None if bounds is None else state.bound * (2.0 * bounds[1] - 1.0),
                decision=decision,
                rule=rule,
                difference=float(np.mean(state.differences)) if state.differences else None,
                p_value=p_value,
                clusters=None if state.cluster_of is None else state.units,
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


def _gate(
    slice_name: str | None,
    metric: str,
    threshold: float,
    members: Sequence[str],
    before: Mapping[str, float],
    share: float,
    points: int,
    cluster_of: Mapping[str, int] | None,
) -> _Gate:
    """A gate's state before any answer: its population, and its clusters' sizes."""
    population = [question_id for question_id in members if question_id in before]
    sizes: dict[int, int] = {}
    for code in (cluster_of[q] for q in population) if cluster_of is not None else ():
        sizes[code] = sizes.get(code, 0) + 1
    clustered = cluster_of is not None and len(sizes) < len(population)
    scale = bound = 1.0
    if clustered:
        scale = float(max(sizes.values()))
        bound = scale * len(sizes) / len(population)
    units = len(sizes) if clustered else len(population)
    return _Gate(
        metric,
        slice_name,
        threshold,
        frozenset(members),
        before,
        len(population),
        BettingSequence(max(units, 1), share, points),
        BettingSequence(None, share, points),
        cluster_of={q: cluster_of[q] for q in population} if clustered and cluster_of else None,
        sizes=sizes if clustered else {},
        scale=scale,
        bound=bound,
    )
