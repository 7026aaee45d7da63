"""Grade (question, document) pairs with a judge plugin, and measure a judge against people.

A ``retrievalkit.judges`` entry point is a factory called with keyword options that
returns a `RelevanceJudge`. Grades run from 0 (does not help answer the
question) to 3 (answers it fully); as everywhere in retrievalkit, grade 1 or more
counts as relevant.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, runtime_checkable

import attrs

from retrievalkit.errors import EvaluationError
from retrievalkit.formats.corpus import CorpusDocument
from retrievalkit.formats.labels import Label
from retrievalkit.generators.chat import ChatError

MAX_GRADE = 3


class JudgeFailed(EvaluationError):
    """A judge could not grade a pair; the message is safe to show."""


@runtime_checkable
class RelevanceJudge(Protocol):
    """What a ``retrievalkit.judges`` factory returns.

    ``model`` and ``prompt_version`` are written with every label. It may have a
    ``concurrency`` attribute (pairs graded at once; 1 when absent); ``grade`` must
    then be thread-safe.
    """

    identifier: str
    model: str
    prompt_version: str

    def grade(self, question: str, document: CorpusDocument) -> int:
        """An integer from 0 to 3; raises on failure."""
        ...


@attrs.frozen
class JudgeTask:
    question_id: str
    question: str
    document_id: str


@attrs.frozen
class JudgeFailure:
    question_id: str
    document_id: str
    error: str


@attrs.frozen
class JudgeResult:
    labels: tuple[Label, ...]
    failures: tuple[JudgeFailure, ...]


def judge_pairs(
    tasks: Sequence[JudgeTask],
    documents: Mapping[str, CorpusDocument],
    judge: RelevanceJudge,
    *,
    judge_name: str,
    progress: Callable[[int], None] | None = None,
) -> JudgeResult:
    """Grade every task; each label records the judge, its model, prompt version and time."""
    advance = progress or (lambda _: None)

    def grade(task: JudgeTask) -> Label | JudgeFailure:
        document = documents.get(task.document_id)
        if document is None:
            return JudgeFailure(task.question_id, task.document_id, "document not in the corpus")
        try:
            value = judge.grade(task.question, document)
            if isinstance(value, bool) or not isinstance(value, int):
                raise JudgeFailed(f"the judge returned {value!r}, not an integer grade")
            if not 0 <= value <= MAX_GRADE:
                raise JudgeFailed(f"the judge returned grade {value}, outside 0 to {MAX_GRADE}")
        except Exception as error:
            text = " ".join(str(error).split())
            if not isinstance(error, (JudgeFailed, ChatError)):
                text = f"{type(error).__name__}: {text}" if text else type(error).__name__
            return JudgeFailure(task.question_id, task.document_id, text)
        moment = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
        return Label(
            task.question_id,
            task.document_id,
            value,
            judge=judge_name,
            model=judge.model,
            prompt_version=judge.prompt_version,
            judged_at=moment.isoformat().replace("+00:00", "Z"),
        )

    concurrency = max(1, int(getattr(judge, "concurrency", 1) or 1))
    results: list[Label | JudgeFailure] = []
    if concurrency == 1 or len(tasks) <= 1:
        for task in tasks:
            results.append(grade(task))
            advance(1)
    else:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            for result in pool.map(grade, tasks):
                results.append(result)
                advance(1)
    return JudgeResult(
        tuple(item for item in results if isinstance(item, Label)),
        tuple(item for item in results if isinstance(item, JudgeFailure)),
    )


@attrs.frozen
class Agreement:
    """A confusion matrix (rows: people, columns: the judge) and Cohen's kappa on it."""

    categories: tuple[int, ...]
    matrix: tuple[tuple[int, ...], ...]
    kappa: float | None
    """None when chance agreement is 1 (every label in one category): kappa is undefined."""
    observed: float | None
    """Share of pairs on which both agree exactly."""


def cohen_kappa(matrix: Sequence[Sequence[int]]) -> float | None:
    """Cohen's kappa of a square confusion matrix: (p_o - p_e) / (1 - p_e).

    ``p_o`` is the share on the diagonal, ``p_e`` the agreement expected by chance from
    the row and column totals. None when there are no pairs or ``p_e`` is 1.
    """
    size = len(matrix)
    if any(len(row) != size for row in matrix):
        raise ValueError("a confusion matrix must be square")
    total = sum(sum(row) for row in matrix)
    if total == 0:
        return None
    observed = sum(matrix[i][i] for i in range(size)) / total
    rows = [sum(row) for row in matrix]
    columns = [sum(matrix[i][j] for i in range(size)) for j in range(size)]
    expected = sum(rows[i] * columns[i] for i in range(size)) / (total * total)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1.0 - expected)


def agreement(pairs: Sequence[tuple[int, int]]) -> Agreement:
    """Confusion matrix and kappa of (human grade, judge grade) pairs over the grades seen."""
    categories = tuple(sorted({grade for pair in pairs for grade in pair}))
    position = {grade: index for index, grade in enumerate(categories)}
    matrix = [[0] * len(categories) for _ in categories]
    for human, judged in pairs:
        matrix[position[human]][position[judged]] += 1
    observed = sum(1 for human, judged in pairs if human == judged) / len(pairs) if pairs else None
    return Agreement(categories, tuple(tuple(row) for row in matrix), cohen_kappa(matrix), observed)


def relevance_agreement(pairs: Sequence[tuple[int, int]]) -> Agreement:
    """The same on relevant (grade >= 1) against not relevant: what hit@k and recall see."""
    return agreement([(int(human >= 1), int(judged >= 1)) for human, judged in pairs])
