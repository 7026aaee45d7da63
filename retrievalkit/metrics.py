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
from itertools import chain

import attrs
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: Always computed, whatever ``--k`` says: the generic record's two rates come from them.
REQUIRED_KS = (1, 3)
DEFAULT_KS = (1, 3, 5, 10)
#: Matrix cells per block of questions in :func:`compute_metrics` (about 1 MB of float64).
_BLOCK_CELLS = 1 << 17


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
            "Share of the documents returned in the top k that carry any label, relevant or "
            "not: below about 0.8 the other metrics are biased low (pooling bias).",
            "undefined; also undefined when nothing was returned",
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
    """Look up every ranked document's grade once, for all questions.

    Only the few labelled documents of a question are placed: a set intersection finds
    which of them were returned (one hash probe per returned id, in C), and every other
    rank keeps the unjudged default. Building a grade for every rank in Python instead
    costs about three times as much at depth 100.
    """
    count = len(rankings)
    if len(judgments) != count:
        raise ValueError("one judgment map per ranking is needed")
    lengths = np.fromiter(map(len, rankings), dtype=np.intp, count=count)
    grades = np.where(np.arange(depth) < lengths[:, None], -1, -2).astype(np.int64)
    rows: list[int] = []
    columns: list[int] = []
    found_grades: list[int] = []
    for index, (ranking, labels) in enumerate(zip(rankings, judgments, strict=True)):
        if not labels or not ranking:
            continue
        top = ranking[:depth] if len(ranking) > depth else ranking
        for doc in labels.keys() & top:
            grade = labels[doc]
            # A repeated id gets its grade at every rank, as a per-rank lookup would give.
            rank = top.index(doc)
            while True:
                rows.append(index)
                columns.append(rank)
                found_grades.append(grade)
                try:
                    rank = top.index(doc, rank + 1)
                except ValueError:
                    break
    grades[rows, columns] = found_grades
    ideal, relevant_total = _ideal_grades(judgments, depth)
    returned_any = lengths > 0
    failed = np.zeros(count, dtype=bool) if errored is None else np.asarray(errored, dtype=bool)
    if failed.any():
        grades[failed] = -2
        returned_any[failed] = False
    return JudgedRankings(grades, ideal, relevant_total, returned_any, failed)


def _ideal_grades(
    judgments: Sequence[Mapping[str, int]], depth: int
) -> tuple[FloatArray, FloatArray]:
    """Each question's positive grades best first (zero padded to depth), and their count."""
    count = len(judgments)
    sizes = np.fromiter(map(len, judgments), dtype=np.intp, count=count)
    values = np.fromiter(
        chain.from_iterable(labels.values() for labels in judgments),
        dtype=np.int64,
        count=int(sizes.sum()),
    )
    owners = np.repeat(np.arange(count), sizes)
    positive = values >= 1
    values, owners = values[positive], owners[positive]
    relevant_total = np.bincount(owners, minlength=count).astype(np.float64)
    order = np.lexsort((-values, owners))
    values, owners = values[order], owners[order]
    starts = np.cumsum(relevant_total.astype(np.intp)) - relevant_total.astype(np.intp)
    place = np.arange(len(owners)) - starts[owners]
    kept = place < depth
    ideal = np.zeros((count, depth))
    ideal[owners[kept], place[kept]] = values[kept]
    return ideal, relevant_total


def compute_metrics(
    judged: JudgedRankings, ks: Sequence[int], *, with_judged: bool = False
) -> dict[str, FloatArray]:
    """Every metric of the table for every question; NaN where a value is undefined."""
    depth = judged.depth
    if max(ks) > depth:
        raise ValueError(f"k={max(ks)} is deeper than the judged depth {depth}")
    names = metric_names(ks, judged=with_judged)
    count = len(judged.relevant_total)
    results = {name: np.empty(count) for name in names}
    discount = 1.0 / np.log2(np.arange(2, depth + 2, dtype=np.float64))
    # Every step is row by row, so blocks of questions give the very same values while
    # their (block, depth) temporaries stay in cache instead of streaming through memory.
    block = max(1, _BLOCK_CELLS // depth)
    for low in range(0, count, block):
        rows = slice(low, low + block)
        values = _metrics_block(
            judged.grades[rows],
            judged.ideal[rows],
            judged.relevant_total[rows],
            ~judged.returned_any[rows] & ~judged.errored[rows],
            discount,
            ks,
            with_judged=with_judged,
        )
        for name in names:
            results[name][rows] = values[name]
    return results


def _metrics_block(
    grades: npt.NDArray[np.int64],
    ideal: FloatArray,
    relevant_total: FloatArray,
    returned_nothing: npt.NDArray[np.bool_],
    discount: FloatArray,
    ks: Sequence[int],
    *,
    with_judged: bool,
) -> dict[str, FloatArray]:
    depth = grades.shape[1]
    relevant = grades >= 1
    gains = np.where(relevant, grades, 0).astype(np.float64)
    answerable = relevant_total > 0
    undefined = np.where(answerable, 0.0, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        total = np.where(answerable, relevant_total, np.nan)
    cumulative = np.cumsum(relevant, axis=1, dtype=np.float64)
    dcg = np.cumsum(gains * discount, axis=1)
    idcg = np.cumsum(ideal * discount, axis=1)
    ranks = np.arange(1, depth + 1, dtype=np.float64)
    precision_at_rank = np.where(relevant, cumulative / ranks, 0.0)
    ap_sum = np.cumsum(precision_at_rank, axis=1)
    no_answer_hit = returned_nothing.astype(np.float64)

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
            # Out of what was returned in the top k: a short ranking is not "unjudged".
            shown = (grades[:, :k] >= -1).sum(axis=1)
            with np.errstate(divide="ignore", invalid="ignore"):
                share = (grades[:, :k] >= 0).sum(axis=1) / shown
            results[f"judged@{k}"] = np.where(shown > 0, share, np.nan) + undefined
    first = np.argmax(relevant, axis=1)
    reciprocal = np.where(relevant.any(axis=1), 1.0 / (first + 1.0), 0.0)
    results["rr"] = reciprocal + undefined
    return results
