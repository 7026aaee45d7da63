"""Extra relevance labels (e.g. from a model judge): their TSV file, merging, and their effect.

A labels file is tab-separated with a header; its first three columns are BEIR's qrels
columns, so a plain qrels file (``query-id``, ``corpus-id``, ``score``) is a labels file
too. Labels written by ``retrievalkit judge`` add who judged them::

    query-id  corpus-id  score  judge  model  prompt-version  judged-at

Grades given by people (``retrievalkit serve``'s judging queue) have the judge ``human``
and the grader's name in the ``model`` column, so that judge-corrected estimates can tell
them from a model's. Such a file is appended to, never rewritten: when one file grades a
pair twice, its later line is the one that counts (a correction, or a second person's
grade; both stay in the file).

Merging never overrides the set's own labels, and leaves no-answer questions alone
(their author declared that no document answers them).

A label whose ``judge`` column is ``human`` (`HUMAN_JUDGE`) is a person's grade. When a file
holds human labels for a random sample of the questions beside a model judge's labels,
`label_effect` also gives each metric's judge-corrected mean and interval
(`retrievalkit.stats.ppi`): the questions with a human label are the human sample, and
their metric under human labels corrects the metric under the judge's labels.
"""

from __future__ import annotations

import csv
import os
import tempfile
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from retrievalkit.errors import InputError
from retrievalkit.metrics.definitions import headline
from retrievalkit.model.values import GoldenQuestion, QuestionOutcome
from retrievalkit.stats.ppi import CorrectedMean
from retrievalkit.stats.ppi_paired import CorrectedDifference

COLUMNS = ("query-id", "corpus-id", "score", "judge", "model", "prompt-version", "judged-at")
#: The ``judge`` of a grade a person gave (the person's name is in ``model``): such labels
#: are the human sample of the judge-corrected (PPI) estimates.
HUMAN_JUDGE = "human"


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

    @property
    def is_human(self) -> bool:
        """Whether a person gave this grade (judge ``human``), not a model."""
        return self.judge == HUMAN_JUDGE

    @property
    def pair(self) -> tuple[str, str]:
        return (self.question_id, self.document_id)


def is_label_id(value: str) -> bool:
    """Whether a labels file can hold ``value`` as an id: non-empty, no whitespace, no
    control or format characters. The reader and the writer both ask this, so a grade
    written is always read back."""
    return bool(value) and not any(ch.isspace() for ch in value) and value.isprintable()


def _row(label: Label) -> list[object]:
    return [
        label.question_id,
        label.document_id,
        label.grade,
        label.judge,
        label.model,
        label.prompt_version,
        label.judged_at,
    ]


def read_labels(path: Path) -> list[Label]:
    """Read a labels file (or BEIR qrels); errors name the file, line and column."""
    return [label for _, label in numbered_labels(path)]


#: What a SQLite database file starts with: a store given where labels were meant.
_SQLITE = b"SQLite format 3\x00"


def numbered_labels(path: Path) -> list[tuple[int, Label]]:
    """Every label of a labels file (or BEIR qrels) with the line it is on.

    Every problem is an `InputError` naming the file and the line (and the column): a
    byte that is not UTF-8, a field past csv's size limit, a line that is no judgment (a
    SQLite store or a JSON Lines file given by mistake says so), an id with spaces, a
    grade that is not a whole number from 0 to `MAX_GRADE`.
    """
    from retrievalkit.formats.ids import canonical
    from retrievalkit.formats.limits import MAX_GRADE
    from retrievalkit.formats.text_files import text_lines

    source = str(path)
    _refuse_a_database(path)
    labels: list[tuple[int, Label]] = []
    reader = csv.reader(text_lines(path, "the labels"), delimiter="\t")
    try:
        for row in reader:
            number = reader.line_num
            if not row or not "".join(row).strip():
                continue
            if number == 1 and row[0].strip().lower() in ("query-id", "query_id", "qid"):
                continue
            if len(row) == 4 and row[1].strip() in ("0", "Q0"):  # TREC qrels
                row = [row[0], row[2], row[3]]
            if len(row) < 3:
                json_like = row[0].lstrip().startswith(("{", "["))
                raise InputError(
                    f"expected at least 3 tab-separated columns (query-id, corpus-id, score), "
                    f"got {len(row)}",
                    source=source,
                    line=number,
                    hint="this line is JSON: a store or a golden set, not a labels file?"
                    if json_like
                    else "one judgment a line: query-id, corpus-id and score, tab-separated",
                )
            question_id, document_id, score = (cell.strip() for cell in row[:3])
            for column, value in (("query-id", question_id), ("corpus-id", document_id)):
                if not is_label_id(value):
                    raise InputError(
                        f"must be a non-empty id without spaces or control characters, got "
                        f"{value[:80]!r}",
                        source=source,
                        line=number,
                        field=column,
                    )
            # ASCII digits only: int() would also take "1_0", " 3" or Arabic-Indic digits.
            grade = int(score) if score.isascii() and score.isdigit() and len(score) < 9 else -1
            if not 0 <= grade <= MAX_GRADE:
                raise InputError(
                    f"must be a whole number from 0 to {MAX_GRADE:,}, got {score[:40]!r}",
                    source=source,
                    line=number,
                    field="score",
                )
            extra = [cell.strip() for cell in row[3:7]] + [""] * (7 - max(len(row), 3))
            # Ids are compared in NFC, as the set's and the retriever's are (formats/ids.py).
            pair = canonical(question_id), canonical(document_id)
            labels.append((number, Label(*pair, grade, *extra[:4])))
    except csv.Error as error:
        too_long = "field limit" in str(error)
        raise InputError(
            f"a field is longer than {csv.field_size_limit():,} characters"
            if too_long
            else f"not a tab-separated line ({error})",
            source=source,
            line=reader.line_num,
            hint="one judgment a line: query-id, corpus-id and score, tab-separated; "
            'is a quote (") left open?',
        ) from None
    return labels


def _refuse_a_database(path: Path) -> None:
    from retrievalkit.formats.text_files import not_a_regular_file

    if not_a_regular_file(path) is not None:
        return  # a FIFO could block: the reader refuses it without opening it
    try:
        with path.open("rb") as handle:
            head = handle.read(len(_SQLITE))
    except OSError:
        return  # the reader names what is wrong with the file
    if head == _SQLITE:
        raise InputError(
            "is a SQLite database (a results store?), not a labels file",
            source=str(path),
            hint="give a tab-separated labels file (query-id, corpus-id, score), as "
            "retrievalkit judge and serve write them",
        )


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
                writer.writerow(_row(label))
        os.replace(temporary, path)
    except OSError as error:
        raise InputError(f"cannot write the labels: {error.strerror}", source=str(path)) from None


def append_labels(labels: Sequence[Label], path: Path) -> None:
    """Append labels to a labels file (its header first when the file is new or empty).

    The lines are written with one ``write`` on a file opened for appending, under an
    exclusive lock, so two writers at once never interleave or lose a line.
    """
    import fcntl
    import io

    for label in labels:
        for value in (label.question_id, label.document_id):
            if not is_label_id(value):
                raise InputError(
                    "a label's ids must be non-empty, without spaces or control characters "
                    f"(a labels file could not be read back): {value!r}"
                )
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter="\t", lineterminator="\n")
    for label in labels:
        writer.writerow(_row(label))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as error:
        raise InputError(f"cannot write the labels: {error.strerror}", source=str(path)) from None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        header = ""
        if os.fstat(descriptor).st_size == 0:
            header = "\t".join(COLUMNS) + "\n"
        os.write(descriptor, (header + buffer.getvalue()).encode("utf-8"))
        os.fsync(descriptor)
    except OSError as error:
        raise InputError(f"cannot write the labels: {error.strerror}", source=str(path)) from None
    finally:
        os.close(descriptor)


def latest_labels(labels: Iterable[Label]) -> list[Label]:
    """One label per (question, document) pair: the last one given, in the order of the
    pairs' first appearance (how one appended file's corrections take effect)."""
    latest: dict[tuple[str, str], Label] = {}
    for label in labels:
        latest[label.pair] = label
    return list(latest.values())


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
    corrected: Mapping[str, CorrectedMean] | None = None
    """With human labels (judge ``human``) for a sample of the questions: each metric's
    mean under the model judge's labels, corrected by the human sample
    (`retrievalkit.stats.ppi`); None without human labels."""

    def rows(self) -> list[tuple[str, float | None, float | None]]:
        """(metric, before, after) for the text reports: every judged@k, then the headline."""
        names = [name for name in self.before if name.startswith("judged@")]
        # The headline metrics follow; JSON has them all.
        names += headline(self.before)
        return [(name, self.before[name], self.after[name]) for name in names]

    def corrected_rows(self) -> list[tuple[str, CorrectedMean]]:
        """(metric, judge-corrected mean) of the headline metrics, for the text reports."""
        if self.corrected is None:
            return []
        return [(name, self.corrected[name]) for name in headline(self.corrected)]

    def describe_corrected(self) -> str:
        """One line on the human sample behind the judge-corrected means."""
        rows = self.corrected_rows()
        if not rows:
            return ""
        first = rows[0][1]
        return (
            f"judge-corrected (prediction-powered, {first.method}): {first.labelled} questions "
            f"with human labels correct the judge's labels on {first.unlabelled} others; "
            "valid when the human-labelled questions are a random sample"
        )

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
    confidence: float = 0.95,
    seed: int = 20240611,
) -> LabelEffect:
    """Score a run's rankings twice: with its own judgments, then with ``labels`` merged in.

    Works from the outcomes alone (rankings and judgments), so a stored run can be
    rescored without its set. Means only (no intervals), with ``judged@k`` for every k,
    and the metrics computed only on request (``ndcg_exp@10``) that the run holds.
    With human labels among ``labels`` (`HUMAN_JUDGE`), also the judge-corrected mean and
    interval of every metric (`LabelEffect.corrected`).
    """
    import numpy as np

    from retrievalkit.metrics.definitions import (
        compute_metrics,
        judge_rankings,
        requested_metrics,
    )

    labels = list(labels)
    held = next((outcome.scores for outcome in outcomes if outcome.error is None), {})
    extra = [name for name in requested_metrics(held) if name in held]
    questions = outcome_questions(outcomes)
    merged = merge_labels(questions, labels)
    rankings = [outcome.ranking for outcome in outcomes]
    errored = [outcome.error is not None for outcome in outcomes]
    depth = max(ks)

    def columns(judgments: Sequence[Mapping[str, int]]) -> dict[str, Any]:
        judged = judge_rankings(rankings, list(judgments), depth=depth, errored=errored)
        return dict(compute_metrics(judged, ks, with_judged=True, extra=extra))

    def means(judgments: Sequence[Mapping[str, int]]) -> dict[str, float | None]:
        result: dict[str, float | None] = {}
        for name, column in columns(judgments).items():
            defined = column[~np.isnan(column)]
            result[name] = float(defined.mean()) if defined.size else None
        return result

    corrected = None
    split = judge_and_human_columns(outcomes, ks, labels)
    if split is not None:
        from retrievalkit.stats.ppi import corrected_mean

        by_judge, by_people = split
        corrected = {
            name: corrected_mean(by_judge[name], by_people[name], confidence=confidence, seed=seed)
            for name in by_judge
        }
    return LabelEffect(
        tuple(sources),
        merged.added,
        merged.already_judged,
        merged.no_answer,
        merged.unknown_question,
        before=means([outcome.judgments for outcome in outcomes]),
        after=means([question.judgments() for question in merged.questions]),
        corrected=corrected,
    )


def judge_and_human_columns(
    outcomes: Sequence[QuestionOutcome], ks: Sequence[int], labels: Iterable[Label]
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """Each metric's per-question values (in the order of ``outcomes``) under the model
    judge's labels, and under the human labels (NaN outside the human sample: the
    questions with at least one `HUMAN_JUDGE` label); None without human labels.
    ``judged@k`` is left out (it is about the labels, not the system)."""
    import numpy as np

    from retrievalkit.metrics.definitions import (
        compute_metrics,
        judge_rankings,
        requested_metrics,
    )

    labels = list(labels)
    human = [label for label in labels if label.judge == HUMAN_JUDGE]
    if not human:
        return None
    held = next((outcome.scores for outcome in outcomes if outcome.error is None), {})
    extra = [name for name in requested_metrics(held) if name in held]
    questions = outcome_questions(outcomes)
    rankings = [outcome.ranking for outcome in outcomes]
    errored = [outcome.error is not None for outcome in outcomes]

    def columns(chosen: Sequence[Label]) -> dict[str, Any]:
        judgments = [q.judgments() for q in merge_labels(questions, chosen).questions]
        judged = judge_rankings(rankings, judgments, depth=max(ks), errored=errored)
        found = compute_metrics(judged, ks, with_judged=True, extra=extra)
        return {name: column for name, column in found.items() if not name.startswith("judged@")}

    by_judge = columns([label for label in labels if label.judge != HUMAN_JUDGE])
    by_people = columns(human)
    sampled = {label.question_id for label in human}
    in_sample = np.array([outcome.question_id in sampled for outcome in outcomes], dtype=bool)
    return by_judge, {name: np.where(in_sample, by_people[name], np.nan) for name in by_people}


@attrs.frozen
class PairedCorrection:
    """The judge-corrected differences of two runs (candidate - baseline), per metric."""

    differences: Mapping[str, CorrectedDifference]
    questions: tuple[str, ...]
    """The question ids both runs have, in the baseline's order."""
    split: tuple[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]] = (
        attrs.field(eq=False, repr=False)
    )
    """(candidate judged, baseline judged, candidate human, baseline human) columns per
    metric over ``questions``, for `label_next`."""

    def label_next(self, metric: str, count: int) -> list[str]:
        """The ``count`` questions without human labels whose labels would help the
        ``metric`` difference's interval most (`ppi_paired.labelling_priority`)."""
        from retrievalkit.stats.ppi_paired import labelling_priority

        if metric not in self.differences:
            return []
        columns = [part[metric] for part in self.split]
        ranked = labelling_priority(*columns)
        return [self.questions[index] for index, _ in ranked[:count]]


def paired_correction(
    candidate: Sequence[QuestionOutcome],
    baseline: Sequence[QuestionOutcome],
    ks: Sequence[int],
    labels: Iterable[Label],
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 20240611,
) -> PairedCorrection | None:
    """The judge-corrected (PPI++) mean difference candidate - baseline of every metric
    both runs hold, on the questions both have, from a model judge's labels and human
    labels for a random sample of the questions; None without human labels."""
    import numpy as np

    from retrievalkit.stats.ppi_paired import corrected_difference

    labels = list(labels)
    found_a = judge_and_human_columns(candidate, ks, labels)
    found_b = judge_and_human_columns(baseline, ks, labels)
    if found_a is None or found_b is None:
        return None
    where_a = {outcome.question_id: index for index, outcome in enumerate(candidate)}
    shared = [outcome.question_id for outcome in baseline if outcome.question_id in where_a]
    rows_a = np.array([where_a[qid] for qid in shared], dtype=np.intp)
    where_b = {outcome.question_id: index for index, outcome in enumerate(baseline)}
    rows_b = np.array([where_b[qid] for qid in shared], dtype=np.intp)
    names = [name for name in found_b[0] if name in found_a[0]]
    split = (
        {name: found_a[0][name][rows_a] for name in names},
        {name: found_b[0][name][rows_b] for name in names},
        {name: found_a[1][name][rows_a] for name in names},
        {name: found_b[1][name][rows_b] for name in names},
    )
    differences = {
        name: corrected_difference(
            split[0][name],
            split[1][name],
            split[2][name],
            split[3][name],
            confidence=confidence,
            resamples=resamples,
            seed=seed,
        )
        for name in names
    }
    return PairedCorrection(differences, tuple(shared), split)


def read_label_files(paths: Sequence[str]) -> list[Label]:
    """The labels of every file, in order: within a file a pair's last line counts (see
    `latest_labels`); across files the first file's label of a pair wins when merged."""
    return list(read_extra_labels(paths))


@attrs.frozen
class ExtraLabels:
    """The labels of ``eval --extra-labels`` files (as `read_label_files` gives them), with
    what a reader must be told about them: files with no labels, and pairs graded twice
    with different grades (in one file, or in two)."""

    labels: tuple[Label, ...]
    by_file: tuple[tuple[str, tuple[Label, ...]], ...]
    warnings: tuple[str, ...]

    def __iter__(self) -> Iterator[Label]:
        return iter(self.labels)

    def __len__(self) -> int:
        return len(self.labels)

    def unknown_questions(self, question_ids: Collection[str], where: str) -> list[str]:
        """A warning for each file with labels of questions not in ``question_ids`` (the
        set's, or the run's: ``where`` names it); such labels are left out of every
        score, so a file of another set must not pass unnoticed."""
        known = set(question_ids)
        warnings = []
        for path, labels in self.by_file:
            unknown = [label for label in labels if label.question_id not in known]
            if not unknown:
                continue
            example = unknown[0].question_id
            if len(unknown) == len(labels):
                warnings.append(
                    f"{path}: none of its {len(labels)} labels is for a question of {where} "
                    f"(e.g. query-id {example!r}), so nothing is merged from it: is it the "
                    "labels file of another set?"
                )
            else:
                warnings.append(
                    f"{path}: {len(unknown)} of its {len(labels)} labels are for question ids "
                    f"not in {where} (e.g. {example!r}); they are left out"
                )
        return warnings


def read_extra_labels(paths: Sequence[str]) -> ExtraLabels:
    """Read every labels file, as `read_label_files` does, and say what is odd in them."""
    warnings: list[str] = []
    by_file: list[tuple[str, tuple[Label, ...]]] = []
    first_file: dict[tuple[str, str], tuple[str, int]] = {}
    merged: list[Label] = []
    for path in paths:
        numbered = numbered_labels(Path(path))
        if not numbered:
            warnings.append(f"{path} holds no labels: nothing is merged from it")
        latest: dict[tuple[str, str], tuple[int, Label]] = {}
        conflicts: list[str] = []
        for number, label in numbered:
            before = latest.get(label.pair)
            if (
                before is not None
                and before[1].grade != label.grade
                and not (before[1].is_human and label.is_human)  # a person's correction
            ):
                conflicts.append(
                    f"{label.question_id} / {label.document_id}: {before[1].grade} on line "
                    f"{before[0]}, {label.grade} on line {number}"
                )
            latest[label.pair] = (number, label)
        if conflicts:
            warnings.append(
                f"{path}: {len(conflicts)} (question, document) pair(s) graded twice with "
                f"different grades (e.g. {conflicts[0]}); the later line counts"
            )
        kept = tuple(label for _, label in latest.values())
        across: list[tuple[str, str]] = []
        for label in kept:
            other = first_file.get(label.pair)
            if other is None:
                first_file[label.pair] = (path, label.grade)
            elif other[0] != path and other[1] != label.grade:
                pair = f"{label.question_id} / {label.document_id}"
                across.append((other[0], f"{pair}: {other[1]} there, {label.grade} here"))
        if across:
            warnings.append(
                f"{path}: {len(across)} pair(s) graded differently in an earlier labels file "
                f"(e.g. {across[0][0]}, {across[0][1]}); the first file's grade counts"
            )
        by_file.append((path, kept))
        merged += kept
    return ExtraLabels(tuple(merged), tuple(by_file), tuple(warnings))
