"""The judging queues of ``retrievalkit serve``: which documents to grade, and the labels file
people grade into.

A queue is anything with the shape of `JudgingQueue`; the judging view knows no other.
Two are built: the queue of a run (`RunQueue`) and the queue of a pool file
(`PoolQueue`, from ``retrievalkit pool --output``).

The queue of a run is its unjudged documents in the top k of every answerable question
that did not error (what ``retrievalkit judge`` would grade), in question and rank
order, optionally mixed with a seeded random sample of documents the set already
judges (their grades measure people against the set). The queue of a pool is its
pairs in the file's order (best first, by priority). Grades are appended to one
labels file in the format ``--extra-labels`` reads, each marked as human with the
grader's name; nothing is ever rewritten, so two people grading the same queue keep
both their grades, and the later grade of a pair is the one that counts.
"""

from __future__ import annotations

import datetime as dt
import os
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import attrs

if TYPE_CHECKING:
    # The labels module imports the metrics (and numpy): imported when a page needs it,
    # not when the server starts.
    from retrievalkit.formats.labels import Label
    from retrievalkit.formats.pool_file import QueuedPair
    from retrievalkit.model.outcomes import Outcomes

#: How long a document shown to one grader is kept from the others (seconds).
CLAIM_SECONDS = 600.0
#: The ``prompt-version`` column of a grade given in the browser.
SOURCE = "serve"


@attrs.frozen
class QueueItem:
    """One document to grade for one question, at its rank in the run."""

    position: int
    question_id: str
    document_id: str
    rank: int | None
    """Its rank in the run; in a pool, the best rank a pooled run gave it (None: not said)."""
    set_grade: int | None
    """The set's own grade when the document was sampled from the judged ones, else None."""
    question: str | None = None
    """The question's text when the queue holds it (a pool's line), else None."""
    priority: float | None = None
    """The pair's priority in a pool, else None."""
    run_id: str | None = None
    """In a pool, the first run its line names (None: none named)."""

    @property
    def pair(self) -> tuple[str, str]:
        return (self.question_id, self.document_id)


class JudgingQueue(Protocol):
    """What the judging view and the grade form use of a queue: its items in order, and
    the item of a (question, document) pair."""

    def __len__(self) -> int: ...

    def items(self) -> Iterator[QueueItem]: ...

    def find(self, question_id: str, document_id: str) -> QueueItem | None:
        """The item of a pair, or None when it is not in the queue."""
        ...

    def positions(self, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """The queue position of each pair that is in the queue."""
        ...


class RunQueue:
    """The queue of one run as arrays; items are built only when asked for."""

    def __init__(self, outcomes: Outcomes, *, k: int, sample: int = 0, seed: int = 0) -> None:
        import numpy as np

        self.k = k
        self.sample = sample
        self._question_ids = outcomes.question_ids
        self._outcomes = outcomes  # its document ids are decoded as items are shown
        offsets, codes = outcomes.rankings
        count = len(outcomes)
        lengths = np.minimum(np.diff(offsets), k).astype(np.int64)
        questions = np.repeat(np.arange(count, dtype=np.int64), lengths)
        firsts = np.cumsum(lengths) - lengths
        within = np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(firsts, lengths)
        ranked = np.asarray(codes, dtype=np.int64)[np.repeat(offsets[:-1], lengths) + within]

        judged_offsets, judged_codes, grades = outcomes.judgments
        judged_questions = np.repeat(
            np.arange(count, dtype=np.int64), np.diff(judged_offsets).astype(np.int64)
        )
        width = max(outcomes.document_count, 1)
        judged_keys = judged_questions * width + np.asarray(judged_codes, dtype=np.int64)
        order = np.argsort(judged_keys, kind="stable")
        judged_keys = judged_keys[order]
        judged_grades = np.asarray(grades, dtype=np.int64)[order]
        keys = questions * width + ranked
        found = np.searchsorted(judged_keys, keys)
        found = np.minimum(found, max(len(judged_keys) - 1, 0))
        judged = judged_keys[found] == keys if len(judged_keys) else np.zeros(len(keys), dtype=bool)
        # Answerable: some document is relevant; errored questions retrieved nothing to grade.
        answerable = np.zeros(count, dtype=bool)
        relevant = judged_questions[np.asarray(grades) >= 1]
        answerable[relevant] = True
        for index in outcomes.errors:
            answerable[index] = False
        usable = answerable[questions]
        chosen = usable & ~judged
        set_grade = np.full(len(keys), -1, dtype=np.int64)
        if sample:
            candidates = np.flatnonzero(usable & judged)
            generator = np.random.default_rng(seed)
            picked = generator.choice(candidates, size=min(sample, len(candidates)), replace=False)
            chosen[picked] = True
            set_grade[picked] = judged_grades[found[picked]]
        self._questions = questions[chosen]
        self._codes = ranked[chosen]
        self._ranks = within[chosen] + 1
        self._set_grades = set_grade[chosen]

    def __len__(self) -> int:
        return len(self._questions)

    @property
    def sampled(self) -> int:
        """How many items were sampled from the set's judged documents."""
        return int((self._set_grades >= 0).sum())

    def item(self, position: int) -> QueueItem:
        grade = int(self._set_grades[position])
        return QueueItem(
            position=position,
            question_id=self._question_ids[int(self._questions[position])],
            document_id=self._document(position),
            rank=int(self._ranks[position]),
            set_grade=None if grade < 0 else grade,
        )

    def _document(self, position: int) -> str:
        (found,) = self._outcomes.document_names([int(self._codes[position])])
        return found

    def items(self) -> Iterator[QueueItem]:
        return (self.item(position) for position in range(len(self)))

    def find(self, question_id: str, document_id: str) -> QueueItem | None:
        """The item of a (question, document) pair, or None when it is not in the queue."""
        try:
            index = self._outcomes.index_of(question_id)
        except ValueError:
            return None
        low, high = self._questions.searchsorted([index, index + 1])
        for position in range(int(low), int(high)):
            if self._document(position) == document_id:
                return self.item(position)
        return None

    def positions(self, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """The queue position of each pair that is in the queue."""
        found = {}
        for pair in pairs:
            item = self.find(*pair)
            if item is not None:
                found[pair] = item.position
        return found


class PoolQueue:
    """The queue of a pool file: its pairs in the file's order (best first)."""

    def __init__(self, path: Path, pairs: Sequence[QueuedPair]) -> None:
        self.path = path
        self._pairs = tuple(pairs)
        self._positions = {
            (pair.question_id, pair.document): position for position, pair in enumerate(pairs)
        }
        self.run_ids = tuple(dict.fromkeys(run for pair in pairs for run, _ in pair.runs))
        """The runs the pool's lines name, in the order they first appear."""

    @property
    def name(self) -> str:
        """The file's name, as the judging page shows it."""
        return self.path.name

    def __len__(self) -> int:
        return len(self._pairs)

    def item(self, position: int) -> QueueItem:
        pair = self._pairs[position]
        return QueueItem(
            position=position,
            question_id=pair.question_id,
            document_id=pair.document,
            rank=min((rank for _, rank in pair.runs), default=None),
            set_grade=None,
            question=pair.question,
            priority=pair.priority,
            run_id=pair.runs[0][0] if pair.runs else None,
        )

    def items(self) -> Iterator[QueueItem]:
        return (self.item(position) for position in range(len(self)))

    def find(self, question_id: str, document_id: str) -> QueueItem | None:
        position = self._positions.get((question_id, document_id))
        return None if position is None else self.item(position)

    def positions(self, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], int]:
        return {pair: self._positions[pair] for pair in pairs if pair in self._positions}


def open_pool(
    path: Path,
    *,
    set_questions: Collection[str] | None,
    set_name: str = "",
    run_questions: Callable[[str], Collection[str] | None],
    store_url: str = "",
) -> PoolQueue:
    """The queue of the pool file at ``path``, every question of it checked: against the
    set (``set_questions``, the ids of the set ``set_name``) when one is served, else
    against the runs each line names (``run_questions(run_id)``: the question ids of a
    run of the store, None when the store has no such run). Raises `InputError` naming
    the file, the line and the field of the first line that fails."""
    from retrievalkit.errors import InputError
    from retrievalkit.formats.pool_file import read_pool

    source = str(path)
    pairs = read_pool(path)
    for pair in pairs:
        if set_questions is not None:
            if pair.question_id not in set_questions:
                raise InputError(
                    f"question {pair.question_id!r} is not in the set {set_name}",
                    source=source,
                    line=pair.line,
                    field="question_id",
                    hint="serve with the set the pool was made from (--set), or pool again",
                )
            continue
        if not pair.runs:
            raise InputError(
                "names no run, so its question cannot be looked up in the store",
                source=source,
                line=pair.line,
                field="runs",
                hint="give the set the pool was made from with --set",
            )
        for run_id, _ in pair.runs:
            questions = run_questions(run_id)
            if questions is None:
                raise InputError(
                    f"run {run_id} is not in {store_url}",
                    source=source,
                    line=pair.line,
                    field="runs",
                    hint="serve the store the pool was made from (--store), or give its set "
                    "with --set",
                )
            if pair.question_id not in questions:
                raise InputError(
                    f"question {pair.question_id!r} is not a question of run {run_id}",
                    source=source,
                    line=pair.line,
                    field="question_id",
                    hint="pool again from the runs of this store",
                )
    return PoolQueue(path, pairs)


@attrs.frozen
class Progress:
    """How far a run's queue is graded, by whom, and where people disagree."""

    total: int
    graded: int
    by_grader: Mapping[str, int]
    disagreements: int
    """Pairs of the queue that two people graded differently."""

    @property
    def share(self) -> float:
        return self.graded / self.total if self.total else 1.0


class LabelsFile:
    """The append-only labels file of human grades, read again only when it changed."""

    def __init__(self, path: Path, judge_files: Sequence[Path] = ()) -> None:
        self.path = path
        self.judge_files = tuple(judge_files)
        self._lock = threading.Lock()
        self._seen: tuple[int, int] | None = None
        self._labels: list[Label] = []

    def writable(self) -> str | None:
        """Why grades cannot be written here, or None when they can."""
        from retrievalkit.stores import read_only_reason

        if self.path.exists() and not self.path.is_file():
            return f"{self.path} is not a regular file"
        parent = next(p for p in (self.path.parent, *self.path.parent.parents) if p.exists())
        if not self.path.exists() and not os.access(parent, os.W_OK | os.X_OK):
            return f"the folder {parent} is read-only"
        return read_only_reason(self.path)

    def labels(self) -> list[Label]:
        """Every line of the file, in order (empty when it does not exist yet)."""
        with self._lock:
            try:
                stat = self.path.stat()
            except FileNotFoundError:
                self._seen, self._labels = None, []
                return []
            seen = (stat.st_mtime_ns, stat.st_size)
            if seen != self._seen:
                from retrievalkit.formats.labels import read_labels

                self._labels = read_labels(self.path)
                self._seen = seen
            return list(self._labels)

    def human(self) -> dict[tuple[str, str], Label]:
        """The grade that counts for each pair people graded: the latest line's."""
        from retrievalkit.formats.labels import latest_labels

        return {label.pair: label for label in latest_labels(self.labels()) if label.is_human}

    def model_grades(self) -> dict[tuple[str, str], Label]:
        """A model judge's latest grade of each pair: from this file and the judge files."""
        from retrievalkit.formats.labels import latest_labels, read_labels

        found: dict[tuple[str, str], Label] = {}
        for path in self.judge_files:
            for label in latest_labels(read_labels(path)):
                if not label.is_human:
                    found.setdefault(label.pair, label)
        for label in latest_labels(self.labels()):
            if not label.is_human:
                found.setdefault(label.pair, label)
        return found

    def grade(self, question_id: str, document_id: str, grade: int, grader: str) -> Label:
        """Append one human grade, stamped with the grader and the time."""
        from retrievalkit.formats.labels import HUMAN_JUDGE, Label, append_labels
        from retrievalkit.pipeline.authoring.judging import MAX_GRADE

        if not 0 <= grade <= MAX_GRADE:
            raise ValueError(f"a grade runs from 0 to {MAX_GRADE}, got {grade}")
        moment = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
        label = Label(
            question_id,
            document_id,
            grade,
            judge=HUMAN_JUDGE,
            model=grader,
            prompt_version=SOURCE,
            judged_at=moment.isoformat().replace("+00:00", "Z"),
        )
        append_labels([label], self.path)
        return label

    def progress(self, queue: JudgingQueue) -> Progress:
        everyone = [label for label in self.labels() if label.is_human]
        latest = {label.pair: label for label in everyone}
        positions = queue.positions(list(latest))
        by_grader: dict[str, int] = {}
        grades: dict[tuple[str, str], set[int]] = {}
        for label in everyone:
            if label.pair in positions:
                grades.setdefault(label.pair, set()).add(label.grade)
        for pair in positions:
            grader = latest[pair].model
            by_grader[grader] = by_grader.get(grader, 0) + 1
        return Progress(
            total=len(queue),
            graded=len(positions),
            by_grader=dict(sorted(by_grader.items())),
            disagreements=sum(1 for found in grades.values() if len(found) > 1),
        )


class Claims:
    """Which grader was last shown which pair, so two people are given different documents."""

    def __init__(self, seconds: float = CLAIM_SECONDS) -> None:
        self.seconds = seconds
        self._lock = threading.Lock()
        self._claims: dict[tuple[str, str], tuple[str, float]] = {}

    def claim(self, pair: tuple[str, str], grader: str) -> None:
        with self._lock:
            self._claims[pair] = (grader, time.monotonic())

    def held_by_other(self, pair: tuple[str, str], grader: str) -> bool:
        with self._lock:
            found = self._claims.get(pair)
        return (
            found is not None and found[0] != grader and time.monotonic() - found[1] < self.seconds
        )


def next_item(
    queue: JudgingQueue,
    graded: Mapping[tuple[str, str], Label],
    claims: Claims,
    grader: str,
) -> QueueItem | None:
    """The first item nobody has graded and no one else is looking at, else the first
    ungraded one (two people may then grade it; both grades are kept)."""
    fallback = None
    for item in queue.items():
        if item.pair in graded:
            continue
        if not claims.held_by_other(item.pair, grader):
            return item
        fallback = fallback or item
    return fallback


def agreement_pairs(
    human: Mapping[tuple[str, str], Label], others: Mapping[tuple[str, str], int]
) -> list[tuple[int, int]]:
    """(human grade, other grade) for every pair both graded, in a stable order."""
    return [(human[pair].grade, others[pair]) for pair in sorted(human) if pair in others]
