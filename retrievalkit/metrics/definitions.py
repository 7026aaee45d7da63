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
* ``ndcg@k`` is trec_eval's nDCG, gain = grade; ``ndcg_exp@k`` (ranx's ``ndcg_burges@k``)
  is Burges' nDCG, gain = 2^grade - 1. The two agree when every grade is 0 or 1.
  ``ndcg_exp@k`` is computed only when asked for by name (`ON_REQUEST`), so the
  default metric table is the same with or without it.

* Incomplete judgments: ``bpref`` (trec_eval's bpref) and ``infap`` (trec_eval's infAP)
  over the scored ranking, and the condensed variant of every ranked metric
  (``ndcg@10:condensed``: the ranking with its unjudged documents removed, Sakai 2007).
  They are computed for a set with judged non-relevant labels (grade 0) or when named
  (`INCOMPLETE`).

Where trec_eval defines a metric, the value equals trec_eval's for the same ranking
(pytrec_eval is the test oracle): ``success_k``, ``P_k``, ``recall_k``,
``recip_rank``, ``ndcg_cut_k``, ``map_cut_k``, ``bpref`` and ``infAP``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain

import attrs
import numpy as np
import numpy.typing as npt

from retrievalkit.formats.limits import MAX_K
from retrievalkit.metrics.names import bare_metric_name, split_stage_metric, stage_metric

FloatArray = npt.NDArray[np.float64]

#: Always computed, whatever ``--k`` says: the generic record's two rates come from them.
REQUIRED_KS = (1, 3)
DEFAULT_KS = (1, 3, 5, 10)
#: Matrix cells per block of questions in `compute_metrics` (about 1 MB of float64).
_BLOCK_CELLS = 1 << 17
#: What ends the name of a metric's condensed variant: ``ndcg@10:condensed``.
CONDENSED = ":condensed"
#: trec_eval's INFAP_EPSILON, which keeps infAP's ratio defined with nothing judged above.
INFAP_EPSILON = 0.00001


@attrs.frozen
class _Block:
    """The per-rank matrices of a block of questions that every metric is computed from."""

    grades: npt.NDArray[np.int64]
    relevant: npt.NDArray[np.bool_]
    cumulative: FloatArray
    """Relevant documents found up to each rank."""
    dcg: FloatArray
    idcg: FloatArray
    dcg_exp: FloatArray | None
    """DCG with gain 2^grade - 1, only when an exponential-gain metric was asked for."""
    idcg_exp: FloatArray | None
    ap_sum: FloatArray
    answerable: npt.NDArray[np.bool_]
    total: FloatArray
    """Relevant documents per question; NaN for a no-answer question."""
    undefined: FloatArray
    """0 for an answerable question, NaN for a no-answer one (added to undefined metrics)."""
    returned_nothing: npt.NDArray[np.bool_]
    nonrelevant_total: FloatArray
    """Documents judged not relevant (grade 0) per question, returned or not."""


def _hit(block: _Block, k: int) -> FloatArray:
    found = block.cumulative[:, k - 1]
    no_answer_hit = block.returned_nothing.astype(np.float64)
    return np.where(block.answerable, (found > 0).astype(np.float64), no_answer_hit)


def _recall(block: _Block, k: int) -> FloatArray:
    return block.cumulative[:, k - 1] / block.total


def _precision(block: _Block, k: int) -> FloatArray:
    return block.cumulative[:, k - 1] / k + block.undefined


def _ndcg(block: _Block, k: int) -> FloatArray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(block.answerable, block.dcg[:, k - 1] / block.idcg[:, k - 1], np.nan)


def _ndcg_exp(block: _Block, k: int) -> FloatArray:
    assert block.dcg_exp is not None and block.idcg_exp is not None
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(
            block.answerable, block.dcg_exp[:, k - 1] / block.idcg_exp[:, k - 1], np.nan
        )


def _ap(block: _Block, k: int) -> FloatArray:
    return block.ap_sum[:, k - 1] / block.total


def _rr(block: _Block, k: int) -> FloatArray:
    # k is the judged depth here: rr looks at the whole scored ranking.
    first = np.argmax(block.relevant, axis=1)
    reciprocal = np.where(block.relevant.any(axis=1), 1.0 / (first + 1.0), 0.0)
    return reciprocal + block.undefined


def _judged(block: _Block, k: int) -> FloatArray:
    # Out of what was returned in the top k: a short ranking is not "unjudged".
    shown = (block.grades[:, :k] >= -1).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = (block.grades[:, :k] >= 0).sum(axis=1) / shown
    return np.where(shown > 0, share, np.nan) + block.undefined


def _bpref(block: _Block, k: int) -> FloatArray:
    # trec_eval's bpref: each relevant document scores 1 - min(n, R) / min(N, R), with n
    # the judged non-relevant documents above it, R the relevant and N the judged
    # non-relevant of the question; unjudged documents are skipped. Summed over the
    # relevant documents of the scored ranking, divided by R.
    above = np.cumsum(block.grades == 0, axis=1, dtype=np.float64)
    relevant_total = np.where(block.answerable, block.total, 1.0)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        penalty = np.minimum(above, relevant_total) / np.minimum(
            block.nonrelevant_total[:, None], relevant_total
        )
    terms = np.where(above > 0, 1.0 - penalty, 1.0)
    scored: FloatArray = np.where(block.relevant, terms, 0.0).sum(axis=1) / block.total
    return scored


def _infap(block: _Block, k: int) -> FloatArray:
    # trec_eval's infAP: at the relevant document of 0-based rank j, the expected precision
    # 1/(j+1) + j/(j+1) * (pooled above / j) * (relevant above + e) / (judged above + 2e).
    # A returned document without a label is trec_eval's "pooled but unjudged" (-1 in
    # qrels): every one of the j above is pooled, and the judged ones stand for them.
    relevant = block.relevant
    judged_nonrelevant = block.grades == 0
    unjudged = block.grades == -1
    rel_above = np.cumsum(relevant, axis=1, dtype=np.float64) - relevant
    nonrel_above = np.cumsum(judged_nonrelevant, axis=1, dtype=np.float64)
    unjudged_above = np.cumsum(unjudged, axis=1, dtype=np.float64) - unjudged
    j = np.arange(block.grades.shape[1], dtype=np.float64)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        estimate = 1.0 / (j + 1.0) + (j / (j + 1.0)) * (
            (rel_above + nonrel_above + unjudged_above) / j
        ) * ((rel_above + INFAP_EPSILON) / (rel_above + nonrel_above + 2 * INFAP_EPSILON))
    estimate[:, 0] = 1.0
    scored: FloatArray = np.where(relevant, estimate, 0.0).sum(axis=1) / block.total
    return scored


@attrs.frozen
class MetricFamily:
    """A metric family, defined once: what it measures, how it is computed, how it treats
    no-answer questions, and its names in trec_eval and ir_measures."""

    family: str
    description: str
    no_answer: str
    """What a no-answer question (nothing relevant) scores, in words."""
    trec_eval: str | None
    """trec_eval's measure, with ``k`` for the cut-off (``success_k``); None if it has none."""
    ir_measures: str | None
    """ir_measures' measure, with ``k`` for the cut-off (``nDCG@k``)."""
    compute: Callable[[_Block, int], FloatArray] = attrs.field(eq=False, repr=False)
    per_k: bool = True
    defined_for_no_answer: bool = False
    """True when a no-answer question has a value (only hit@k); else it is left out of means."""
    chunk: bool = False
    """Scores the raw chunk ranking against ``expected_chunks`` (`chunk_metrics`), not the
    document ranking; computed only for a set with ``expected_chunks``."""
    on_request: bool = False
    """Computed only when named (``--metric``, ``[eval] metrics``, a threshold, a sweep's
    ``select``), never part of the default table (`ON_REQUEST`)."""
    incomplete: bool = False
    """A metric for incomplete judgments (``bpref``, ``infap``): computed for a set with
    judged non-relevant labels (grade 0), else only when named (`INCOMPLETE`)."""
    condensable: bool = False
    """A ranked metric with a condensed variant (``ndcg@10:condensed``): the same metric of
    the ranking with its unjudged documents removed (Sakai 2007)."""

    def name(self, k: int | None = None) -> str:
        return f"{self.family}@{k}" if self.per_k else self.family


#: Every family, in report order.
METRICS: dict[str, MetricFamily] = {
    definition.family: definition
    for definition in (
        MetricFamily(
            "hit",
            "1 if any of the k best distinct documents is relevant (success, top-k hit rate).",
            "1 only if the retriever returned nothing at all",
            "success_k",
            "Success@k",
            _hit,
            defined_for_no_answer=True,
            condensable=True,
        ),
        MetricFamily(
            "recall",
            "Relevant documents in the top k divided by all relevant documents.",
            "undefined",
            "recall_k",
            "R@k",
            _recall,
            condensable=True,
        ),
        MetricFamily(
            "precision",
            "Relevant documents in the top k divided by k (k even when fewer were returned).",
            "undefined",
            "P_k",
            "P@k",
            _precision,
            condensable=True,
        ),
        MetricFamily(
            "ndcg",
            "DCG@k / ideal DCG@k with gain = grade and discount log2(rank + 1); the ideal "
            "ranking is built from every document graded 1 or more.",
            "undefined",
            "ndcg_cut_k",
            "nDCG@k",
            _ndcg,
            condensable=True,
        ),
        MetricFamily(
            "ndcg_exp",
            "ndcg@k with gain 2^grade - 1 (Burges et al. 2005; ranx's ndcg_burges): a "
            "grade-2 document counts three times a grade-1 one, not twice. Equal to ndcg@k "
            "when every grade is 0 or 1. Computed only when asked for.",
            "undefined",
            None,
            None,
            _ndcg_exp,
            on_request=True,
            condensable=True,
        ),
        MetricFamily(
            "ap",
            "Sum of precision@r at each relevant rank r <= k, divided by all relevant "
            "documents (trec_eval's map_cut).",
            "undefined",
            "map_cut_k",
            "AP@k",
            _ap,
            condensable=True,
        ),
        MetricFamily(
            "rr",
            "1 / rank of the first relevant document within the scored depth, 0 if none.",
            "undefined",
            "recip_rank",
            "RR",
            _rr,
            per_k=False,
            condensable=True,
        ),
        MetricFamily(
            "bpref",
            "Buckley and Voorhees' binary preference over the scored ranking, as trec_eval: "
            "each relevant document scores 1 - min(n, R) / min(N, R), n the judged "
            "non-relevant documents above it, R the relevant and N the judged non-relevant "
            "documents of the question; the sum divided by R. Unjudged documents are skipped.",
            "undefined",
            "bpref",
            "Bpref",
            _bpref,
            per_k=False,
            incomplete=True,
        ),
        MetricFamily(
            "infap",
            "Yilmaz and Aslam's inferred AP over the scored ranking, as trec_eval's infAP: "
            "a returned document without a label is pooled but unjudged, and its relevance "
            "is estimated from the judged documents above it.",
            "undefined",
            "infAP",
            "infAP",
            _infap,
            per_k=False,
            incomplete=True,
        ),
        MetricFamily(
            "chunk_recall",
            "recall@k of the raw ranking of chunk ids (before they collapse to documents) "
            "against the question's expected_chunks.",
            "undefined; also undefined for a question without expected_chunks",
            "recall_k",
            "R@k",
            _recall,
            chunk=True,
        ),
        MetricFamily(
            "chunk_rr",
            "1 / rank of the first expected chunk in the raw chunk ranking, 0 if none.",
            "undefined; also undefined for a question without expected_chunks",
            "recip_rank",
            "RR",
            _rr,
            per_k=False,
            chunk=True,
        ),
        MetricFamily(
            "chunk_ndcg",
            "ndcg@k of the raw chunk ranking, every expected chunk at gain 1.",
            "undefined; also undefined for a question without expected_chunks",
            "ndcg_cut_k",
            "nDCG@k",
            _ndcg,
            chunk=True,
        ),
        MetricFamily(
            "judged",
            "Share of the documents returned in the top k that carry any label, relevant or "
            "not: below about 0.8 the other metrics are biased low (pooling bias).",
            "undefined; also undefined when nothing was returned",
            None,
            "Judged@k",
            _judged,
        ),
    )
}
_FAMILY_ORDER = tuple(METRICS)
#: Other names a family is known by: ranx calls Burges' nDCG ``ndcg_burges``.
ALIASES = {"ndcg_burges": "ndcg_exp"}
#: The families computed only when a metric of theirs is named.
ON_REQUEST = tuple(family.family for family in METRICS.values() if family.on_request)
#: The families for incomplete judgments: computed for a set with grade-0 labels or when
#: named (so are the condensed variants, ``METRIC:condensed``).
INCOMPLETE = tuple(family.family for family in METRICS.values() if family.incomplete)


@attrs.frozen
class Metric:
    """One metric of the table, such as ``ndcg@10``: a family and its cut-off.

    Made once by `parse_metric`; the configuration, the gate, the comparison and
    every report use it (and its `name`) rather than splitting names by hand.
    """

    family: MetricFamily
    k: int | None = None
    condensed: bool = False
    """The condensed variant (``ndcg@10:condensed``): scored on the ranking without its
    unjudged documents."""

    @property
    def name(self) -> str:
        return self.family.name(self.k) + (CONDENSED if self.condensed else "")

    @property
    def plain(self) -> Metric:
        """The metric itself, for a condensed variant (``ndcg@10`` of ``ndcg@10:condensed``)."""
        return Metric(self.family, self.k)

    @property
    def by_request(self) -> bool:
        """Left out of the default table: computed on request, or (a metric for incomplete
        judgments, a condensed variant) for a set with grade-0 labels."""
        return self.family.on_request or self.family.incomplete or self.condensed

    @property
    def trec_eval(self) -> str | None:
        """trec_eval's name (``ndcg_cut_10``), or None where trec_eval has no such measure."""
        measure = self.family.trec_eval
        if measure is None or self.condensed:
            return None
        return measure.replace("_k", f"_{self.k}")

    @property
    def ir_measures(self) -> str | None:
        """ir_measures' name (``nDCG@10``)."""
        measure = self.family.ir_measures
        if measure is None or self.condensed:
            return None
        return measure.replace("@k", f"@{self.k}")

    @property
    def headline(self) -> bool:
        """One of the metrics a reader looks at first (`HEADLINE`)."""
        return self.name in HEADLINE

    @property
    def order(self) -> tuple[int, int]:
        """Report order: hit, recall, precision, ndcg, ap by k, then rr, bpref, infap,
        judged by k, then the condensed variants in the same order."""
        place = _FAMILY_ORDER.index(self.family.family)
        return (place + len(_FAMILY_ORDER) * self.condensed, self.k or 0)

    def __str__(self) -> str:
        return self.name


#: The metrics a reader looks at first: reports show them, the rest is in JSON.
HEADLINE: tuple[str, ...] = ("hit@1", "hit@3", "rr", "ndcg@10")
#: The short list a history or trend shows: the record's two rates and MRR.
TREND: tuple[str, ...] = ("hit@1", "hit@3", "rr")


def parse_metric(name: str) -> Metric:
    """``"ndcg@10"`` -> its `Metric`; ``ValueError`` naming the known ones otherwise (an
    `ArgumentError`, a `TypeError` too, for what is not a string)."""
    if not isinstance(name, str):
        from retrievalkit.errors import ArgumentError

        shown = "None" if name is None else f"a {type(name).__name__}"
        raise ArgumentError(f"must be a metric name such as hit@3, got {shown}", field="name")
    text = name.strip()
    condensed = text.lower().endswith(CONDENSED)
    if condensed:
        text = text[: -len(CONDENSED)]
    family_name, at, k = text.partition("@")
    family_name = family_name.lower()
    family = METRICS.get(ALIASES.get(family_name, family_name))
    if family is not None and (family.condensable or not condensed):
        if not family.per_k and not at:
            return Metric(family, condensed=condensed)
        # ASCII digits only: int() reads 'hit@٣' as 3, and a threshold written so would
        # then be keyed by a name no computed metric has, and never be checked.
        if family.per_k and at and k.isascii() and k.isdigit() and 0 < int(k) <= MAX_K:
            return Metric(family, int(k), condensed)
    known = ", ".join(f.name(0).replace("@0", "@K") for f in METRICS.values())
    known += ", " + ", ".join(f"{alias}@K (= {family}@K)" for alias, family in ALIASES.items())
    condensable = ", ".join(f.family for f in METRICS.values() if f.condensable)
    raise ValueError(
        f"unknown metric '{name}' (known: {known}; {condensable} also as METRIC{CONDENSED}; "
        "e.g. hit@3, ndcg@10, rr, ndcg@10:condensed)"
    )


def metric_order(name: str) -> tuple[int, int]:
    """The report-order key of a metric name; unknown names go last.

    Stored records come back with their metrics sorted by name (``hit@10`` before
    ``hit@3``); this puts them back in the order every report uses.
    """
    try:
        return parse_metric(name).order
    except ValueError:
        return (len(_FAMILY_ORDER), 0)


def headline(names: Iterable[str]) -> list[str]:
    """The headline metrics among ``names``, in report order."""
    present = set(names)
    return [name for name in HEADLINE if name in present]


def canonical_metric_name(name: str) -> str:
    """The canonical name of a metric or stage metric (``" NDCG@10"`` -> ``ndcg@10``,
    ``stage.rerank:RR`` -> ``stage.rerank:rr``); ``ValueError`` naming the known metrics
    otherwise."""
    text = name.strip()
    split = split_stage_metric(text)
    if split is None:
        return parse_metric(text).name
    stage, metric = split
    return stage_metric(stage, parse_metric(metric).name)


def requested_metrics(names: Iterable[str]) -> tuple[str, ...]:
    """The metrics among ``names`` that are left out of the default table
    (`Metric.by_request`: ``ndcg_exp@10``, ``bpref``, ``ndcg@10:condensed``), by their
    canonical names, in report order; a stage's (``stage.S:ndcg_exp@10``) counts as its
    metric. Unknown names are left for their own check."""
    found: set[Metric] = set()
    for name in names:
        try:
            bare = bare_metric_name(name)
        except ValueError:
            continue
        try:
            metric = parse_metric(bare)
        except ValueError:
            continue
        if metric.by_request:
            found.add(metric)
    return tuple(metric.name for metric in sorted(found, key=lambda metric: metric.order))


def metric_names(
    ks: Sequence[int],
    *,
    judged: bool = False,
    chunks: bool = False,
    extra: Sequence[str] = (),
    incomplete: bool = False,
) -> list[str]:
    """The metric table's names, in report order: per-k families by k, then ``rr``; the
    chunk metrics only with ``chunks``; of the families computed on request, only the
    names in ``extra`` (`requested_metrics`). With ``incomplete`` (a set with grade-0
    labels) ``bpref``, ``infap`` and the condensed variant of every ranked metric of the
    table too; without it, only those named in ``extra``."""
    wanted = set(extra)
    plain: list[str] = []
    for family in METRICS.values():
        if (family.family == "judged" and not judged) or (family.chunk and not chunks):
            continue
        if family.on_request or (family.incomplete and not incomplete):
            if not family.per_k:
                plain.extend(name for name in (family.name(),) if name in wanted)
                continue
            plain.extend(
                name for name in map(family.name, sorted(_ks_of(extra, family))) if name in wanted
            )
            continue
        if family.per_k:
            plain.extend(family.name(k) for k in ks)
        else:
            plain.append(family.name())
    condensed = {
        metric.name
        for metric in map(parse_metric, plain)
        if metric.family.condensable and (incomplete or metric.name + CONDENSED in wanted)
    }
    # A condensed variant named in extra whose metric is not in the table (ndcg_exp@3).
    condensed.update(metric.plain.name for metric in map(parse_metric, wanted) if metric.condensed)
    return plain + sorted((name + CONDENSED for name in condensed), key=metric_order)


def _ks_of(names: Sequence[str], family: MetricFamily) -> set[int]:
    return {
        metric.k
        for metric in map(parse_metric, names)
        if metric.family == family and metric.k is not None
    }


def condense(judged: JudgedRankings) -> JudgedRankings:
    """The rankings without their unjudged documents (Sakai's condensed lists): the judged
    documents of each ranking moved up in their order, the ranks freed at the end empty.

    A question keeps its labels, its ``returned_any`` (a no-answer question that returned
    only unjudged documents still returned something) and its errors.
    """
    grades = judged.grades
    order = np.argsort(grades < 0, axis=1, kind="stable")
    moved = np.take_along_axis(grades, order, axis=1)
    kept = (grades >= 0).sum(axis=1)
    moved[np.arange(grades.shape[1])[None, :] >= kept[:, None]] = -2
    return attrs.evolve(judged, grades=moved)


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
    nonrelevant_total: FloatArray | None = None
    """(questions,): how many documents are judged not relevant (grade 0); None: none."""

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
    nonrelevant = np.fromiter(
        (sum(1 for grade in labels.values() if grade == 0) for labels in judgments),
        dtype=np.float64,
        count=count,
    )
    return JudgedRankings(grades, ideal, relevant_total, returned_any, failed, nonrelevant)


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
    return ideal_of_labels(sizes, values, depth)


def ideal_of_labels(
    sizes: npt.NDArray[np.intp], values: npt.NDArray[np.int64], depth: int
) -> tuple[FloatArray, FloatArray]:
    """`_ideal_grades` from the labels' grades laid end to end, ``sizes[i]`` of them
    for question i."""
    count = len(sizes)
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


def judge_codes(
    ranking_offsets: npt.NDArray[np.int64],
    ranking_codes: npt.NDArray[np.int64],
    label_offsets: npt.NDArray[np.int64],
    label_codes: npt.NDArray[np.int64],
    label_grades: npt.NDArray[np.int64],
    depth: int,
    errored: npt.NDArray[np.bool_],
) -> JudgedRankings:
    """`judge_rankings` for rankings and labels given as document codes in CSR form.

    Question i ranked ``ranking_codes[ranking_offsets[i]:ranking_offsets[i + 1]]`` and
    labelled ``label_codes[label_offsets[i]:label_offsets[i + 1]]`` (one code a
    document) with ``label_grades``. The very same matrices as `judge_rankings` gives
    for the same rankings and labels, without a Python step per question: each
    (question, document) pair is one integer key, and the ranked keys are looked up
    among the sorted labelled ones.
    """
    count = len(ranking_offsets) - 1
    lengths = np.diff(ranking_offsets)
    grades = np.where(np.arange(depth) < lengths[:, None], -1, -2).astype(np.int64)
    span = int(max(ranking_codes.max(initial=-1), label_codes.max(initial=-1))) + 1
    owners = np.repeat(np.arange(count, dtype=np.int64), lengths)
    ranks = np.arange(len(ranking_codes), dtype=np.int64) - np.repeat(ranking_offsets[:-1], lengths)
    scored = ranks < depth
    owners, ranks = owners[scored], ranks[scored]
    ranked_keys = owners * span + ranking_codes[scored]
    label_owners = np.repeat(np.arange(count, dtype=np.int64), np.diff(label_offsets))
    label_keys = label_owners * span + label_codes
    order = np.argsort(label_keys, kind="stable")
    sorted_keys = label_keys[order]
    where = np.searchsorted(sorted_keys, ranked_keys)
    where = np.minimum(where, max(len(sorted_keys) - 1, 0))
    found = (
        sorted_keys[where] == ranked_keys if len(sorted_keys) else np.zeros(len(ranked_keys), bool)
    )
    grades[owners[found], ranks[found]] = label_grades[order[where[found]]]
    ideal, relevant_total = ideal_of_labels(
        np.diff(label_offsets).astype(np.intp), np.asarray(label_grades, dtype=np.int64), depth
    )
    returned_any = lengths > 0
    failed = np.asarray(errored, dtype=bool)
    if failed.any():
        grades[failed] = -2
        returned_any[failed] = False
    nonrelevant = np.bincount(label_owners[np.asarray(label_grades) == 0], minlength=count).astype(
        np.float64
    )
    return JudgedRankings(grades, ideal, relevant_total, returned_any, failed, nonrelevant)


def compute_metrics(
    judged: JudgedRankings,
    ks: Sequence[int],
    *,
    with_judged: bool = False,
    extra: Sequence[str] = (),
    incomplete: bool = False,
) -> dict[str, FloatArray]:
    """Every metric of the table for every question; NaN where a value is undefined.

    ``extra``: metrics left out of the default table (``ndcg_exp@10``, ``bpref``,
    ``rr:condensed``), by canonical name; their cut-offs must be among ``ks``.
    ``incomplete``: the set has grade-0 labels, so ``bpref``, ``infap`` and every
    condensed variant are computed too (`metric_names`)."""
    depth = judged.depth
    if max(ks) > depth:
        raise ValueError(f"k={max(ks)} is deeper than the judged depth {depth}")
    names = metric_names(ks, judged=with_judged, extra=extra, incomplete=incomplete)
    missing = set(extra) - set(names)
    if missing:
        raise ValueError(f"{', '.join(sorted(missing))}: not a metric at a cut-off of {ks}")
    plain = [name for name in names if not name.endswith(CONDENSED)]
    condensed = [name.removesuffix(CONDENSED) for name in names if name.endswith(CONDENSED)]
    results = _compute_plain(judged, ks, plain, with_judged=with_judged)
    if condensed:
        values = _compute_plain(condense(judged), ks, condensed, with_judged=False)
        results.update({name + CONDENSED: values[name] for name in condensed})
    return {name: results[name] for name in names}


def _compute_plain(
    judged: JudgedRankings, ks: Sequence[int], names: Sequence[str], *, with_judged: bool
) -> dict[str, FloatArray]:
    """The metrics ``names`` (none condensed) of every question, block by block."""
    depth = judged.depth
    count = len(judged.relevant_total)
    results = {name: np.empty(count) for name in names}
    wanted = [parse_metric(name) for name in names]
    nonrelevant = np.zeros(count) if judged.nonrelevant_total is None else judged.nonrelevant_total
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
            wanted,
            nonrelevant[rows],
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
    wanted: Sequence[Metric],
    nonrelevant_total: FloatArray,
) -> dict[str, FloatArray]:
    depth = grades.shape[1]
    relevant = grades >= 1
    gains = np.where(relevant, grades, 0).astype(np.float64)
    answerable = relevant_total > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        total = np.where(answerable, relevant_total, np.nan)
    cumulative = np.cumsum(relevant, axis=1, dtype=np.float64)
    ranks = np.arange(1, depth + 1, dtype=np.float64)
    precision_at_rank = np.where(relevant, cumulative / ranks, 0.0)
    exponential = any(metric.family.family == "ndcg_exp" for metric in wanted)
    block = _Block(
        grades=grades,
        relevant=relevant,
        cumulative=cumulative,
        dcg=np.cumsum(gains * discount, axis=1),
        idcg=np.cumsum(ideal * discount, axis=1),
        dcg_exp=np.cumsum((np.exp2(gains) - 1.0) * discount, axis=1) if exponential else None,
        idcg_exp=np.cumsum((np.exp2(ideal) - 1.0) * discount, axis=1) if exponential else None,
        ap_sum=np.cumsum(precision_at_rank, axis=1),
        answerable=answerable,
        total=total,
        undefined=np.where(answerable, 0.0, np.nan),
        returned_nothing=returned_nothing,
        nonrelevant_total=nonrelevant_total,
    )
    # k is the judged depth for the families without a cut-off (rr, bpref, infap).
    return {metric.name: metric.family.compute(block, metric.k or depth) for metric in wanted}


def chunk_metrics(
    rankings: Sequence[Sequence[str]],
    expected_chunks: Sequence[Sequence[str]],
    ks: Sequence[int],
    errored: Sequence[bool],
) -> dict[str, FloatArray]:
    """``chunk_recall@k``, ``chunk_rr`` and ``chunk_ndcg@k`` of each question: the raw
    ranking of distinct chunk ids, cut at the deepest k, against its expected chunks (each
    relevant at grade 1), as trec_eval's recall_k, recip_rank and ndcg_cut_k score them.
    NaN for a question without expected chunks."""
    depth = max(ks)
    judged = judge_rankings(
        [list(ranking)[:depth] for ranking in rankings],
        [dict.fromkeys(chunks, 1) for chunks in expected_chunks],
        depth,
        list(errored),
    )
    table = compute_metrics(judged, ks)
    values: dict[str, FloatArray] = {}
    for family in METRICS.values():
        if not family.chunk:
            continue
        base = family.family.removeprefix("chunk_")
        for k in ks if family.per_k else (None,):
            values[family.name(k)] = table[f"{base}@{k}" if k is not None else base]
    return values
