"""Which (question, document) pairs to label next: pooling the runs' unjudged top documents.

The pool of some runs at a depth is every (question, document) pair that one of the runs
ranks in its top ``depth`` and that no label holds yet (the set's expected documents and
grades, judged non-relevant grade 0 included, and any extra labels). Its order says what
to label first.

**The effect priorities** (``dcg``, the default, and ``precision``) follow minimal test
collections (Carterette, Allan & Sitaraman, SIGIR 2006): a document's weight is how much
the paired difference between two runs on its question would change if it were relevant
rather than not, with gain 1 (relevant or not):

* ``dcg``: ``w(d) = |disc_A(d) - disc_B(d)|``, where ``disc_X(d) = 1 / log2(1 + r)`` when
  run X ranks d at rank r <= depth, and 0 when it does not rank it in its top depth. This
  is the change of the question's DCG@depth difference A - B; the pair mean difference
  over n questions moves by w(d) / n, so weights compare across questions.
* ``precision``: ``w(d) = |[r_A(d) <= depth] - [r_B(d) <= depth]| / depth``, the change
  of the question's precision@depth difference: ``1 / depth`` for a document in one top
  ``depth`` only, 0 for one in both.

With more than two runs the weight is summed over every pair of runs. A document at the
same rank in both runs changes nothing (weight 0); one in a single run's top ranks
matters most. DCG rather than nDCG: nDCG divides each question by an ideal DCG that the
labels still to come change (and that is undefined for a question with no relevant
document known), while within a question its order is DCG's.

Worked example (the one ``tests/test_pool.py`` checks), depth 3, run A ranks d1, d2, d3
and run B ranks d3, d1, d4: d1 has ``|1 - 1/log2 3| = 0.369``, d2 ``|1/log2 3 - 0| =
0.631``, d3 ``|1/2 - 1| = 0.5`` and d4 ``|0 - 1/2| = 0.5``; the order is d2, d3, d4, d1
(d3 before d4: best rank 1 before 3). With ``precision`` the weights are 0, 1/3, 0, 1/3.

**Depth pooling** (``depth``): a pair's priority is ``1 / best rank`` (the best rank any
run gave it: 1.0 at rank 1, 0.5 at rank 2), ties by the number of runs that rank it.

Every order breaks ties by the best rank, then by the number of runs (more first), then
by the question's place in the set and the document id, so the same inputs always give
the same file.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from retrievalkit.errors import InputError

if TYPE_CHECKING:
    from retrievalkit.model.records import ResultRecord
    from retrievalkit.model.values import GoldenQuestionSet

#: The orders a pool can be written in; the first is the default.
PRIORITIES = ("dcg", "precision", "depth")
DEFAULT_PRIORITY = PRIORITIES[0]
#: The effect priorities compare runs, so they need two.
EFFECT_PRIORITIES = ("dcg", "precision")
#: Digits a priority is rounded to, so equal weights summed in another order tie exactly.
_DIGITS = 12


@attrs.frozen
class PoolRank:
    """A run that put a document in its top depth, and the rank it gave it (1 = first)."""

    run: str
    rank: int


@attrs.frozen
class PoolPair:
    """One (question, document) pair to label, with its priority and where it came from."""

    question_id: str
    question: str
    document: str
    priority: float
    runs: tuple[PoolRank, ...]

    @property
    def best_rank(self) -> int:
        return min(rank.rank for rank in self.runs)

    def to_json(self) -> dict[str, Any]:
        """The pool file's line for this pair."""
        return {
            "question_id": self.question_id,
            "question": self.question,
            "document": self.document,
            "priority": self.priority,
            "runs": [{"run": rank.run, "rank": rank.rank} for rank in self.runs],
        }


@attrs.frozen
class Pool:
    """The unjudged pairs of some runs' top ``depth``, best first, cut at ``budget``."""

    set_name: str
    runs: tuple[str, ...]
    """The run ids pooled, in the order given."""
    depth: int
    priority: str
    budget: int | None
    pairs: tuple[PoolPair, ...]
    """The pairs to label, best first (at most ``budget``)."""
    unjudged: int
    """Unjudged pairs in the runs' top ``depth`` before the budget cut."""
    judged: int
    """Pairs in the runs' top ``depth`` that a label already holds (left out)."""
    questions: int
    """Questions whose rankings were pooled."""
    no_answer: int
    """No-answer questions left out: their author declared that no document answers."""
    warnings: tuple[str, ...] = ()

    def to_jsonl(self) -> str:
        """The pool file: one pair a line (`PoolPair.to_json`), best first."""
        import json

        return "".join(
            json.dumps(pair.to_json(), ensure_ascii=False, allow_nan=False) + "\n"
            for pair in self.pairs
        )

    def per_question(self) -> dict[str, int]:
        """Question id -> pairs of it in the pool, in pool order of first appearance."""
        counts: dict[str, int] = {}
        for pair in self.pairs:
            counts[pair.question_id] = counts.get(pair.question_id, 0) + 1
        return counts

    def by_run(self) -> dict[str, int]:
        """Run id -> pairs of the pool it ranks in its top ``depth`` (a pair counts for
        every run that ranks it)."""
        counts = dict.fromkeys(self.runs, 0)
        for pair in self.pairs:
            for rank in pair.runs:
                counts[rank.run] += 1
        return counts

    def only_in(self) -> dict[str, int]:
        """Run id -> pairs of the pool that only this run ranks in its top ``depth``."""
        counts = dict.fromkeys(self.runs, 0)
        for pair in self.pairs:
            if len(pair.runs) == 1:
                counts[pair.runs[0].run] += 1
        return counts


def discount(rank: int | None, depth: int) -> float:
    """DCG's discount of a document at ``rank`` (1 = first): ``1 / log2(1 + rank)`` within
    ``depth``, 0 below it or unranked."""
    if rank is None or rank > depth:
        return 0.0
    return 1.0 / math.log2(1 + rank)


def pair_weight(ranks: Sequence[int | None], depth: int, priority: str) -> float:
    """The weight of one document: its ``ranks`` in each run (None where a run does not
    rank it in its top ``depth``), by ``priority`` (see the module's formulas)."""
    if priority == "depth":
        given = [rank for rank in ranks if rank is not None and rank <= depth]
        return 1.0 / min(given) if given else 0.0
    if priority == "dcg":
        gains = [discount(rank, depth) for rank in ranks]
    elif priority == "precision":
        gains = [1.0 / depth if rank is not None and rank <= depth else 0.0 for rank in ranks]
    else:
        raise InputError(
            f"unknown priority {priority!r}", field="--priority", hint=f"one of {PRIORITIES}"
        )
    total = 0.0
    for first in range(len(gains)):
        for second in range(first + 1, len(gains)):
            total += abs(gains[first] - gains[second])
    return round(total, _DIGITS)


def check_runs(golden: GoldenQuestionSet, records: Sequence[ResultRecord]) -> list[str]:
    """Refuse runs of another set, runs given twice and runs of different questions;
    the warnings to show (a set changed since a run)."""
    seen: set[str] = set()
    for record in records:
        if record.run_id in seen:
            raise InputError(
                f"run {record.run_id} is given twice", field="--run", hint="name each run once"
            )
        seen.add(record.run_id)
        if record.set != golden.name:
            raise InputError(
                f"run {record.run_id} is a run of the set '{record.set}', not of '{golden.name}'",
                field="--run",
                hint=f"name runs of '{golden.name}', or give the set they were made on with --set",
            )
    first = records[0]
    mine = set(first.outcomes.question_ids)
    for record in records[1:]:
        theirs = set(record.outcomes.question_ids)
        if theirs != mine:
            raise InputError(
                f"run {record.run_id} was not scored on the same questions as run "
                f"{first.run_id}: {len(mine - theirs)} of its questions missing, "
                f"{len(theirs - mine)} others",
                field="--run",
                hint="pool runs made on the same version of the set",
            )
    known = {question.id for question in golden.questions}
    missing = [qid for qid in first.outcomes.question_ids if qid not in known]
    if missing:
        raise InputError(
            f"{len(missing)} question(s) of run {first.run_id} are not in set {golden.name} "
            f"(e.g. {missing[0]!r})",
            field="--set",
            hint="give the set file the runs were evaluated on",
        )
    warnings = []
    changed = [r.run_id for r in records if r.manifest.set_hash != golden.content_hash]
    if changed:
        warnings.append(
            f"set {golden.name} changed since run(s) {', '.join(changed)}: pooled against "
            "its current labels and question texts"
        )
    chunked = [r.run_id for r in records if r.manifest.extra.get("chunk_separator")]
    if chunked:
        warnings.append(
            f"run(s) {', '.join(chunked)} returned chunk ids: pooled by their documents, the "
            "ids the set's labels judge (chunk-level labels are not pooled)"
        )
    return warnings


def check_depth(records: Sequence[ResultRecord], depth: int) -> None:
    """Refuse a depth below what every run was scored to: a run keeps only its deepest
    cut-off's ranking, so a deeper pool would miss its documents there."""
    for record in records:
        deepest = max(record.manifest.ks)
        if depth > deepest:
            raise InputError(
                f"run {record.run_id} keeps its top {deepest} only (its k go up to {deepest}), "
                f"so a pool of depth {depth} would miss what it ranks below",
                field="--depth",
                hint=f"use --depth {deepest} or less, or evaluate again with a deeper --k",
            )


def build_pool(
    golden: GoldenQuestionSet,
    records: Sequence[ResultRecord],
    *,
    depth: int,
    priority: str = DEFAULT_PRIORITY,
    budget: int | None = None,
    labelled: Collection[tuple[str, str]] = (),
    warnings: Sequence[str] = (),
) -> Pool:
    """The pool of ``records`` (runs of ``golden``, checked by `check_runs`) at ``depth``.

    A pair is judged when the question's own labels (`GoldenQuestion.judgments`: expected
    documents and grades, grade 0 included) or ``labelled`` (extra labels' pairs) hold
    it. No-answer questions and questions a run errored on contribute nothing of theirs.
    """
    if priority not in PRIORITIES:
        raise InputError(
            f"unknown priority {priority!r}", field="--priority", hint=f"one of {PRIORITIES}"
        )
    if priority in EFFECT_PRIORITIES and len(records) < 2:
        raise InputError(
            f"the {priority} priority weighs documents by how they move the difference "
            f"between runs, so it needs two runs or more, got {len(records)}",
            field="--run",
            hint="give another --run, or pool one run with --priority depth",
        )
    extra = set(labelled)
    run_ids = tuple(record.run_id for record in records)
    rankings: list[Mapping[str, tuple[str, ...]]] = []
    for record in records:
        outcomes = record.outcomes
        errors = outcomes.errors
        rankings.append(
            {
                qid: () if index in errors else tuple(outcomes.ranking(index)[:depth])
                for index, qid in enumerate(outcomes.question_ids)
            }
        )
    asked = set(records[0].outcomes.question_ids)
    found: list[tuple[tuple[float, int, int, int, str], PoolPair]] = []
    judged = no_answer = questions = 0
    for place, question in enumerate(golden.questions):
        if question.id not in asked:
            continue
        if not question.answerable:
            no_answer += 1
            continue
        questions += 1
        labels = question.judgments()
        ranks: dict[str, list[int | None]] = {}
        for index, ranking in enumerate(rankings):
            for rank, document in enumerate(ranking[question.id], start=1):
                ranks.setdefault(document, [None] * len(rankings))[index] = rank
        for document, given in ranks.items():
            if document in labels or (question.id, document) in extra:
                judged += 1
                continue
            weight = pair_weight(given, depth, priority)
            by = tuple(
                PoolRank(run_id, rank)
                for run_id, rank in zip(run_ids, given, strict=True)
                if rank is not None
            )
            pair = PoolPair(question.id, question.question, document, weight, by)
            key = (-weight, pair.best_rank, -len(by), place, document)
            found.append((key, pair))
    found.sort(key=lambda item: item[0])
    chosen = found if budget is None else found[:budget]
    return Pool(
        set_name=golden.name,
        runs=run_ids,
        depth=depth,
        priority=priority,
        budget=budget,
        pairs=tuple(pair for _, pair in chosen),
        unjudged=len(found),
        judged=judged,
        questions=questions,
        no_answer=no_answer,
        warnings=tuple(warnings),
    )
