"""The generic (set, model, grader) record of a run: its items, summary, outcomes and manifest."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, overload

import attrs

from retrievalkit.model.outcomes import Outcomes
from retrievalkit.model.values import (
    FrozenDict,
    Manifest,
    MetricValue,
    QuestionOutcome,
    as_frozen_dict,
    as_nested,
    as_tuple,
)

#: The grader name of every retrievalkit record, so retrieval histories never mix with
#: another grader's in a generic (set, model, grader) store.
GRADER = "retrieval_hit_rate"

#: Bumped whenever the stored form of a record changes; stores migrate older records.
#: 2: each metric value names its interval method.
#: 3: outcomes are stored by column (`retrievalkit.model.outcomes`); items are derived from them.
SCHEMA_VERSION = 3


@attrs.frozen
class QuestionVerdict:
    """One item of the generic record: top-1 hit as ``passed``, top-3 hit as ``score``."""

    question_id: str
    passed: bool
    score: float


def _as_outcomes(value: Iterable[QuestionOutcome]) -> Outcomes:
    return Outcomes.from_outcomes(value)


class Verdicts(Sequence[QuestionVerdict]):
    """A record's items, derived on demand from its outcomes' hit@1 and hit@3 columns.

    Item ``i`` is question ``i``: ``passed`` when its hit@1 is 1, ``score`` its hit@3
    (0 where undefined or absent). No per-question object is kept.
    """

    __slots__ = ("_outcomes",)

    def __init__(self, outcomes: Outcomes) -> None:
        self._outcomes = outcomes

    def _column(self, metric: str) -> list[float]:
        if metric not in self._outcomes.metric_names:
            return [0.0] * len(self._outcomes)
        values: list[float] = self._outcomes.values(metric).tolist()
        return values

    def __len__(self) -> int:
        return len(self._outcomes)

    @overload
    def __getitem__(self, index: int) -> QuestionVerdict: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[QuestionVerdict, ...]: ...

    def __getitem__(self, index: int | slice) -> QuestionVerdict | tuple[QuestionVerdict, ...]:
        if isinstance(index, slice):
            return tuple(self)[index]
        position = range(len(self))[index]
        outcomes = self._outcomes
        names = outcomes.metric_names
        one = float(outcomes.values("hit@1")[position]) if "hit@1" in names else 0.0
        three = float(outcomes.values("hit@3")[position]) if "hit@3" in names else 0.0
        return QuestionVerdict(
            outcomes.question_ids[position], one == 1.0, 0.0 if three != three else three
        )

    def __iter__(self) -> Iterator[QuestionVerdict]:
        top1, top3 = self._column("hit@1"), self._column("hit@3")
        for question_id, one, three in zip(self._outcomes.question_ids, top1, top3, strict=True):
            yield QuestionVerdict(question_id, one == 1.0, 0.0 if three != three else three)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Verdicts, tuple, list)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Verdicts({len(self)} items)"


def _check_manifest(_: Any, __: Any, value: Any) -> None:
    if not isinstance(value, Manifest):
        raise TypeError(f"manifest must be a Manifest, not {type(value).__name__}")


def _as_table(value: Any) -> FrozenDict:
    """name -> name -> value, read-only at both levels."""
    return FrozenDict({key: as_frozen_dict(inner) for key, inner in value.items()})


@attrs.frozen
class StageDelta:
    """A stage's paired difference from the stage before it (this stage minus that one)."""

    difference: float | None
    ci: tuple[float, float] | None
    p_value: float | None
    n: int
    """Questions where both stages have a defined value."""
    verdict: str | None = None
    """``significant``, ``not significant`` or ``unresolvable`` (`retrievalkit.stats.paired`)."""


@attrs.frozen
class StageReport:
    """Every stage of a staged retriever scored in one run (see `pipeline.engine.stages`).

    ``order`` lists the stages as the retriever reported them, the last being its answer;
    ``metrics`` holds each stage's metric table with intervals, ``deltas`` each stage's
    paired difference from the stage before it (none for the first), ``attribution`` how
    many questions each outcome label covers (``not retrieved``, ``lost in fusion``,
    ``demoted by reranker``, ``rescued by reranker``, ...) at cut-off ``attribution_k``,
    and ``questions`` the label of each question that has one.
    """

    order: tuple[str, ...] = attrs.field(converter=as_tuple)
    metrics: Mapping[str, Mapping[str, MetricValue]] = attrs.field(converter=_as_table)
    deltas: Mapping[str, Mapping[str, StageDelta]] = attrs.field(converter=_as_table)
    attribution_k: int
    attribution: Mapping[str, int] = attrs.field(converter=as_frozen_dict)
    questions: Mapping[str, str] = attrs.field(factory=dict, converter=as_frozen_dict)


@attrs.frozen
class ResultRecord:
    """A run mapped onto the generic (set, model, grader) result record.

    ``pass_rate`` is the top-1 hit rate and ``mean_score`` the top-3 hit rate; the
    full metric table, the slices, the outcomes and the manifest travel with it.
    ``outcomes`` is an `retrievalkit.model.outcomes.Outcomes` (any iterable of
    `QuestionOutcome` is converted); ``items``, the generic record's per-question
    verdicts, are derived from it.
    """

    run_id: str
    set: str
    model: str
    grader: str
    pass_rate: float
    mean_score: float
    metrics: Mapping[str, MetricValue] = attrs.field(converter=as_frozen_dict)
    slices: Mapping[str, Mapping[str, Mapping[str, MetricValue]]] = attrs.field(converter=as_nested)
    outcomes: Outcomes = attrs.field(converter=_as_outcomes)
    manifest: Manifest = attrs.field(validator=_check_manifest)
    schema_version: int = SCHEMA_VERSION
    stages: StageReport | None = None
    """Each stage's scores, for a retriever that reports its stages; None otherwise (and
    then absent from the stored form, which is the same as before stages existed)."""
    cluster_by: str | None = None
    """The field whose clusters the run's intervals resampled (``--cluster-by``); None
    for independent questions."""
    clusters: Mapping[str, str] = attrs.field(factory=dict, converter=as_frozen_dict)
    """Question id -> the question's ``cluster`` field, for the questions that have one,
    so that a stored run can be compared by cluster without its set."""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.set, self.model, self.grader)

    @property
    def items(self) -> Verdicts:
        """The per-question verdicts: top-1 hit as ``passed``, top-3 hit as ``score``."""
        return Verdicts(self.outcomes)

    @property
    def errored(self) -> int:
        """How many questions errored; a stored record answers without reading its outcomes."""
        return self.outcomes.errored
