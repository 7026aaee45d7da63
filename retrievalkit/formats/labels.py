"""Extra relevance labels (e.g. from a model judge): their TSV file, merging, and their effect.

A labels file is tab-separated with a header; its first three columns are BEIR's qrels
columns, so a plain qrels file (``query-id``, ``corpus-id``, ``score``) is a labels file
too. Labels written by ``retrievalkit judge`` add who judged them::

    query-id  corpus-id  score  judge  model  prompt-version  judged-at

Merging never overrides the set's own labels, and leaves no-answer questions alone
(their author declared that no document answers them).
"""

from __future__ import annotations

import csv
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import attrs
import numpy as np

from retrievalkit.errors import InputError
from retrievalkit.metrics.definitions import headline
from retrievalkit.model.values import GoldenQuestion, QuestionOutcome

COLUMNS = ("query-id", "corpus-id", "score", "judge", "model", "prompt-version", "judged-at")


@attrs.frozen
class Label:
    """One judgment: a document's grade (0 not relevant, 1 to 3 relevant) for a question."""

    question_id: str
    document_id: str
    grade: int
    judge: str = ""
    model: str = ""
    prompt_version: str = ""
    judged_at: str = ""


def read_labels(path: Path) -> list[Label]:
    """Read a labels file (or BEIR qrels); errors name the file, line and column."""
    try:
        handle = path.open(encoding="utf-8-sig", newline="")
    except OSError as error:
        raise InputError(f"cannot read the labels: {error.strerror}", source=str(path)) from None
    labels: list[Label] = []
    with handle:
        for number, row in enumerate(csv.reader(handle, delimiter="\t"), start=1):
            if not row or not "".join(row).strip():
                continue
            if number == 1 and row[0].strip().lower() in ("query-id", "query_id", "qid"):
                continue
            if len(row) == 4 and row[1].strip() in ("0", "Q0"):  # TREC qrels
                row = [row[0], row[2], row[3]]
            if len(row) < 3:
                raise InputError(
                    f"expected at least 3 tab-separated columns (query-id, corpus-id, score), "
                    f"got {len(row)}",
                    source=str(path),
                    line=number,
                )
            question_id, document_id, score = (cell.strip() for cell in row[:3])
            for column, value in (("query-id", question_id), ("corpus-id", document_id)):
                if not value or any(ch.isspace() for ch in value):
                    raise InputError(
                        f"must be a non-empty id without spaces, got {value!r}",
                        source=str(path),
                        line=number,
                        field=column,
                    )
            try:
                grade = int(score)
            except ValueError:
                grade = -1
            if grade < 0:
                raise InputError(
                    f"must be a whole number >= 0, got {score!r}",
                    source=str(path),
                    line=number,
                    field="score",
                )
            extra = [cell.strip() for cell in row[3:7]] + [""] * (7 - max(len(row), 3))
            labels.append(Label(question_id, document_id, grade, *extra[:4]))
    return labels


def write_labels(labels: Iterable[Label], path: Path) -> None:
    """Write a labels file with its header, replacing ``path`` whole."""
    directory = path.parent if str(path.parent) else Path(".")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as stream:
            writer = csv.writer(stream, delimiter="\t", lineterminator="\n")
            writer.writerow(COLUMNS)
            for label in labels:
                writer.writerow(
                    [
                        label.question_id,
                        label.document_id,
                        label.grade,
                        label.judge,
                        label.model,
                        label.prompt_version,
                        label.judged_at,
                    ]
                )
        os.replace(temporary, path)
    except OSError as error:
        raise InputError(f"cannot write the labels: {error.strerror}", source=str(path)) from None


@attrs.frozen
class MergeResult:
    questions: tuple[GoldenQuestion, ...]
    added: int
    """Labels that judged a document the set had not judged."""
    already_judged: int
    """Labels for documents the set already judges: the set's label is kept."""
    no_answer: int
    """Labels for no-answer questions: left out."""
    unknown_question: int
    """Labels for question ids not in the set: left out."""


def merge_labels(questions: Sequence[GoldenQuestion], labels: Iterable[Label]) -> MergeResult:
    """The questions with the extra labels added as grades; the set's own labels win."""
    by_question: dict[str, dict[str, int]] = {}
    ids = {question.id: question for question in questions}
    already = no_answer = unknown = added = 0
    for label in labels:
        question = ids.get(label.question_id)
        if question is None:
            unknown += 1
            continue
        if not question.answerable:
            no_answer += 1
            continue
        extra = by_question.setdefault(label.question_id, {})
        if label.document_id in question.judgments() or label.document_id in extra:
            already += 1
            continue
        extra[label.document_id] = label.grade
        added += 1
    merged = tuple(
        attrs.evolve(question, grades={**question.grades, **by_question[question.id]})
        if question.id in by_question
        else question
        for question in questions
    )
    return MergeResult(merged, added, already, no_answer, unknown)


@attrs.frozen
class LabelEffect:
    """A run's metric means scored with the set's labels, and with extra labels merged in."""

    sources: tuple[str, ...]
    added: int
    already_judged: int
    no_answer: int
    unknown_question: int
    before: Mapping[str, float | None]
    after: Mapping[str, float | None]

    def rows(self) -> list[tuple[str, float | None, float | None]]:
        """(metric, before, after) for the text reports: every judged@k, then the headline."""
        names = [name for name in self.before if name.startswith("judged@")]
        # The headline metrics follow; JSON has them all.
        names += headline(self.before)
        return [(name, self.before[name], self.after[name]) for name in names]

    def describe(self) -> str:
        """One line: what was merged and what was left out."""
        left = []
        if self.already_judged:
            left.append(f"{self.already_judged} already judged by the set (its label kept)")
        if self.no_answer:
            left.append(f"{self.no_answer} for no-answer questions")
        if self.unknown_question:
            left.append(f"{self.unknown_question} for questions not in the run")
        return f"{self.added} extra labels merged from {', '.join(self.sources)}" + (
            f"; left out: {', '.join(left)}" if left else ""
        )


def outcome_questions(outcomes: Sequence[QuestionOutcome]) -> list[GoldenQuestion]:
    """The questions of a stored run, rebuilt from its outcomes' labels (texts unknown)."""
    return [
        GoldenQuestion(
            id=outcome.question_id,
            question="?",
            form=outcome.form,
            expected=outcome.expected,
            grades={doc: grade for doc, grade in outcome.judgments.items() if grade != 1},
        )
        for outcome in outcomes
    ]


def label_effect(
    outcomes: Sequence[QuestionOutcome],
    ks: Sequence[int],
    labels: Iterable[Label],
    *,
    sources: Sequence[str],
) -> LabelEffect:
    """Score a run's rankings twice: with its own judgments, then with ``labels`` merged in.

    Works from the outcomes alone (rankings and judgments), so a stored run can be
    rescored without its set. Means only (no intervals), with ``judged@k`` for every k.
    """
    from retrievalkit.metrics.definitions import compute_metrics, judge_rankings

    merged = merge_labels(outcome_questions(outcomes), labels)
    rankings = [outcome.ranking for outcome in outcomes]
    errored = [outcome.error is not None for outcome in outcomes]
    depth = max(ks)

    def means(judgments: list[Mapping[str, int]]) -> dict[str, float | None]:
        judged = judge_rankings(rankings, judgments, depth=depth, errored=errored)
        values = compute_metrics(judged, ks, with_judged=True)
        result: dict[str, float | None] = {}
        for name, column in values.items():
            defined = column[~np.isnan(column)]
            result[name] = float(defined.mean()) if defined.size else None
        return result

    return LabelEffect(
        tuple(sources),
        merged.added,
        merged.already_judged,
        merged.no_answer,
        merged.unknown_question,
        before=means([outcome.judgments for outcome in outcomes]),
        after=means([question.judgments() for question in merged.questions]),
    )


def read_label_files(paths: Sequence[str]) -> list[Label]:
    """Every label of every file, in order (the first label of a pair wins when merged)."""
    return [label for path in paths for label in read_labels(Path(path))]
