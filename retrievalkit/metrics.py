"""The metric table: each metric defined once, computed for all questions at once with numpy.

Conventions (see the metric reference in the docs):

* A ranking is the list of DISTINCT document ids a retriever returned, best first,
  cut at the deepest k asked for; every metric is computed on that list.
* A document is relevant when its grade is 1 or more (trec_eval's relevance level 1):
  every ``expected`` id has grade 1 unless graded otherwise. Grade 0 is "judged, not
  relevant".
* A no-answer question (nothing relevant) scores ``hit@k`` = 1 only if the retriever
  returned nothing at all; every other metric is undefined for it (NaN here, ``None``
  in every output) and is left out of means, never counted as 0.
* An errored question is a miss in every metric.

Where trec_eval defines a metric, the value equals trec_eval's for the same ranking
(pytrec_eval is the test oracle): ``success_k``, ``P_k``, ``recall_k``,
``recip_rank``, ``ndcg_cut_k`` and ``map_cut_k``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: Always computed, whatever ``--k`` says: the generic record's two rates come from them.
REQUIRED_KS = (1, 3)
DEFAULT_KS = (1, 3, 5, 10)


@attrs.frozen
class MetricDefinition:
    """A metric family: its name pattern, what it measures and how it treats edge cases."""

    family: str
    description: str
    no_answer: str
    trec_eval: str | None
    per_k: bool = True

    def name(self, k: int | None = None) -> str:
        return f"{self.family}@{k}" if self.per_k else self.family


METRICS: dict[str, MetricDefinition] = {
    definition.family: definition
    for definition in (
        MetricDefinition(
            "hit",
            "1 if any of the k best distinct documents is relevant (success, top-k hit rate).",
            "1 only if the retriever returned nothing at all",
            "success_k",
        ),
        MetricDefinition(
            "recall",
            "Relevant documents in the top k divided by all relevant documents.",
            "undefined",
            "recall_k",
        ),
        MetricDefinition(
            "precision",
            "Relevant documents in the top k divided by k (k even when fewer were returned).",
            "undefined",
            "P_k",
        ),
        MetricDefinition(
            "rr",
            "1 / rank of the first relevant document within the scored depth, 0 if none.",
            "undefined",
            "recip_rank",
            per_k=False,
        ),
        MetricDefinition(
            "ndcg",
            "DCG@k / ideal DCG@k with gain = grade and discount log2(rank + 1); the ideal "
            "ranking is built from every document graded 1 or more.",
            "undefined",
            "ndcg_cut_k",
        ),
        MetricDefinition(
            "ap",
            "Sum of precision@r at each relevant rank r <= k, divided by all relevant "
            "documents (trec_eval's map_cut).",
            "undefined",
            "map_cut_k",
        ),
        MetricDefinition(
            "judged",
            "Share of the top k (out of k) that carry any label, relevant or not: below "
            "about 0.8 the other metrics are biased low.",
            "undefined",
            None,
        ),
    )
}


def metric_names(ks: Sequence[int], *, judged: bool = False) -> list[str]:
    """The metric table's names, in report order: per-k families by k, then ``rr``."""
    ordered: list[str] = []
    for family in ("hit", "recall", "precision", "ndcg", "ap"):
        ordered.extend(f"{family}@{k}" for k in ks)
    ordered.append("rr")
    if judged:
        ordered.extend(f"judged@{k}" for k in ks)
    return ordered


def normalise_ks(ks: Sequence[int]) -> tuple[int, ...]:
    """Sorted, distinct, with 1 and 3 always present."""
    return tuple(sorted({*ks, *REQUIRED_KS}))


@attrs.frozen
class JudgedRankings:
    """Rankings turned into dense per-rank matrices: the one input of every metric."""

    grades: npt.NDArray[np.int64]
    """(questions, depth): the grade at each rank; -1 unjudged, -2 nothing at that rank."""
    ideal: FloatArray
    """(questions, depth): the positive grades of each question, best first, zero padded."""
    relevant_total: FloatArray
    """(questions,): how many documents are relevant (grade >= 1)."""
    returned_any: npt.NDArray[np.bool_]
    errored: npt.NDArray[np.bool_]

    @property
    def depth(self) -> int:
        return int(self.grades.shape[1])


def judge_rankings(
    rankings: Sequence[Sequence[str]],
    judgments: Sequence[Mapping[str, int]],
    depth: int,
    errored: Sequence[bool] | None = None,
) -> JudgedRankings:
    """Look up every ranked document's grade once, for all questions."""
    count = len(rankings)
    if len(judgments) != count:
        raise ValueError("one judgment map per ranking is needed")
    flat: list[int] = []
    ideal = np.zeros((count, depth))
    relevant_total = np.zeros(count)
    returned_any = np.zeros(count, dtype=bool)
    padding = [-2] * depth
    for index, (ranking, labels) in enumerate(zip(rankings, judgments, strict=True)):
        top = ranking[:depth]
        get = labels.get
        row = [get(doc, -1) for doc in top]
        flat.extend(row)
        flat.extend(padding[: depth - len(row)])
        returned_any[index] = bool(ranking)
        positive = sorted((grade for grade in labels.values() if grade >= 1), reverse=True)
        relevant_total[index] = len(positive)
        if positive:
            ideal[index, : min(depth, len(positive))] = positive[:depth]
    grades = np.array(flat, dtype=np.int64).reshape(count, depth)
    failed = np.zeros(count, dtype=bool) if errored is None else np.asarray(errored, dtype=bool)
    if failed.any():
        grades[failed] = -2
        returned_any[failed] = False
    return JudgedRankings(grades, ideal, relevant_total, returned_any, failed)


def compute_metrics(
    judged: JudgedRankings, ks: Sequence[int], *, with_judged: bool = False
) -> dict[str, FloatArray]:
    """Every metric of the table for every question; NaN where a value is undefined."""
    depth = judged.depth
    if max(ks) > depth:
        raise ValueError(f"k={max(ks)} is deeper than the judged depth {depth}")
    grades = judged.grades
    relevant = grades >= 1
    gains = np.where(relevant, grades, 0).astype(np.float64)
    answerable = judged.relevant_total > 0
    undefined = np.where(answerable, 0.0, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        total = np.where(answerable, judged.relevant_total, np.nan)
    cumulative = np.cumsum(relevant, axis=1, dtype=np.float64)
    discount = 1.0 / np.log2(np.arange(2, depth + 2, dtype=np.float64))
    dcg = np.cumsum(gains * discount, axis=1)
    idcg = np.cumsum(judged.ideal * discount, axis=1)
    ranks = np.arange(1, depth + 1, dtype=np.float64)
    precision_at_rank = np.where(relevant, cumulative / ranks, 0.0)
    ap_sum = np.cumsum(precision_at_rank, axis=1)
    no_answer_hit = (~judged.returned_any & ~judged.errored).astype(np.float64)

    results: dict[str, FloatArray] = {}
    for k in ks:
        found = cumulative[:, k - 1]
        results[f"hit@{k}"] = np.where(answerable, (found > 0).astype(np.float64), no_answer_hit)
        results[f"recall@{k}"] = found / total
        results[f"precision@{k}"] = found / k + undefined
        with np.errstate(divide="ignore", invalid="ignore"):
            results[f"ndcg@{k}"] = np.where(answerable, dcg[:, k - 1] / idcg[:, k - 1], np.nan)
        results[f"ap@{k}"] = ap_sum[:, k - 1] / total
        if with_judged:
            results[f"judged@{k}"] = (grades[:, :k] >= 0).sum(axis=1) / k + undefined
    first = np.argmax(relevant, axis=1)
    reciprocal = np.where(relevant.any(axis=1), 1.0 / (first + 1.0), 0.0)
    results["rr"] = reciprocal + undefined
    return {name: results[name] for name in metric_names(ks, judged=with_judged)}
