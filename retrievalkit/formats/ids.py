"""The one identity of a document or question id, applied to labels and returned ids alike.

Two ids are the same id when their Unicode NFC forms are equal, and whitespace or an
invisible character around an id is never part of it:

* NFC (canonical composition) because canonically equivalent strings are the same text
  to every reader: ``"é"`` typed on one system and ``"e" + U+0301`` written by another
  (macOS file names, some PDF extractors) must not be a silent miss. NFKC would go
  further and merge ids that differ visibly (``x²`` and ``x2``, full-width digits), which
  a corpus may well keep apart, so it is not used; case is never folded either.
* Labels in a set are refused when they hold whitespace, control characters or nothing
  (the loaders say so, naming line and field; a set built in code is refused a label
  that whitespace or an invisible character surrounds); labels and question ids that
  are not in NFC are compared in NFC, with a warning, and two labels (or two question
  ids) that are one id in NFC are refused, as an id listed twice is.
* Ids a retriever returns (document ids, chunk ids, every stage's ids) are stripped of
  surrounding whitespace, control and format characters (`trimmed`: ``"doc-a "``,
  ``"doc-a\\r\\n"``, ``"\\u200bdoc-a"``) and compared in NFC, never silently: a
  warning counts how many the rule changed and quotes the first with its question,
  and the run's JSON carries the count. An id that is empty after that, or a ranking
  that is not an ordered sequence of strings (a set, a dict, a generator), is an error
  outcome for that question, since no order or no id could be scored from it.
"""

from __future__ import annotations

import operator
import threading
import unicodedata
import weakref
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from itertools import chain
from typing import TYPE_CHECKING, Any, Literal

import attrs

from retrievalkit.errors import InputError

if TYPE_CHECKING:
    from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet

FORM: Literal["NFC"] = "NFC"


def canonical(text: str) -> str:
    """``text`` in NFC (ASCII, the common case, is NFC already)."""
    if text.isascii() or unicodedata.is_normalized(FORM, text):
        return text
    return unicodedata.normalize(FORM, text)


def trimmed(text: str) -> str:
    """``text`` without what may surround it unseen: whitespace (``str.strip``: spaces,
    tabs, line breaks, NBSP, the other Unicode spaces), control characters and format
    characters (Unicode Cc and Cf: NUL, U+200B ZERO WIDTH SPACE, U+FEFF, soft hyphens,
    direction marks).

    Every set file's reader refuses an id holding any of them, and a set built in code
    is refused an id they surround (`canonical_set`), so an id that differs from a label
    only by them can only mean that label.
    """
    text = text.strip()
    if text and not (text[0].isprintable() and text[-1].isprintable()):
        start, end = 0, len(text)
        while start < end and _invisible(text[start]):
            start += 1
        while end > start and _invisible(text[end - 1]):
            end -= 1
        text = text[start:end]
    return text


def _invisible(character: str) -> bool:
    return character.isspace() or unicodedata.category(character) in ("Cc", "Cf")


def returned_id(text: str) -> str:
    """A returned id as it is compared: `trimmed`, in NFC."""
    return canonical(trimmed(text))


@attrs.frozen
class IdChanges:
    """What the identity rule changed in a run's returned ids: how many, and the first."""

    changed: int
    question: str | None
    """The text of the question whose answer held the first changed id."""
    returned: str
    compared_as: str
    question_id: str | None = None

    def warning(self) -> str:
        where = ""
        if self.question_id is not None:
            where = f" for question {self.question_id}"
        elif self.question is not None:
            where = f" for question {self.question[:80]!r}"
        return (
            f"{self.changed} returned document id(s) had whitespace or invisible "
            f"characters around them or were not in Unicode NFC (e.g. {_quoted(self.returned)}"
            f"{where}, compared as {_quoted(self.compared_as)}); each was compared without "
            "them, in NFC: return ids exactly as the set labels them"
        )

    def document(self) -> dict[str, Any]:
        """The JSON of ``returned_ids`` in a run's summary."""
        return {
            "changed": self.changed,
            "example": {
                "question_id": self.question_id,
                "returned": self.returned,
                "compared_as": self.compared_as,
            },
        }


def _quoted(text: str, limit: int = 80) -> str:
    """``repr(text)``, cut to ``limit`` characters: an id is quoted, never pasted whole."""
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"


class ReturnedIds:
    """Counts the returned ids the identity policy changed over a run (thread-safe), and
    keeps the first one of each question, so that the example quoted is the same
    however the questions were scheduled."""

    def __init__(self) -> None:
        self.changed = 0
        self._first: dict[str | None, tuple[str, str]] = {}
        self._lock = threading.Lock()

    def note(self, raw: str, clean: str, question: str | None = None) -> None:
        with self._lock:
            self.changed += 1
            self._first.setdefault(question, (raw, clean))

    @property
    def example(self) -> tuple[str, str] | None:
        """The (returned, compared as) ids first noted, if any."""
        return next(iter(self._first.values()), None)

    @property
    def question(self) -> str | None:
        """The text of the question `example` was returned for."""
        return next(iter(self._first), None)

    def merge(self, other: ReturnedIds) -> None:
        """Count ``other``'s changes too (a worker's, or a part of the run's)."""
        with self._lock, other._lock:
            self.changed += other.changed
            for question, example in other._first.items():
                self._first.setdefault(question, example)

    def changes(self, questions: Sequence[GoldenQuestion] = ()) -> IdChanges | None:
        """The count and an example: that of the first of ``questions`` (in order) with
        a changed id, else the first noted."""
        with self._lock:
            if not self.changed or not self._first:
                return None
            for asked in questions:
                found = self._first.get(asked.question)
                if found is not None:
                    return IdChanges(self.changed, asked.question, *found, question_id=asked.id)
            question, (raw, clean) = next(iter(self._first.items()))
            return IdChanges(self.changed, question, raw, clean)

    def warning(self) -> str | None:
        changes = self.changes()
        return None if changes is None else changes.warning()


def unordered_kind(ids: Any) -> str | None:
    """What is wrong with ``ids`` as a ranking when it has no order, or None."""
    if isinstance(ids, Mapping):
        return "a mapping"
    if isinstance(ids, AbstractSet):
        return "a set"
    return None


def clean_ranking(
    ids: Sequence[str], notes: ReturnedIds | None, question: str | None = None
) -> list[str]:
    """The ids as the policy compares them; ``ValueError`` for an id that is empty.

    ``notes`` counts every id the policy changed (``question``, the text asked, is kept
    with the first, for the warning)."""
    cleaned = []
    for rank, raw in enumerate(ids, start=1):
        clean = returned_id(raw)
        if not clean:
            raise ValueError(f"returned an empty document id at rank {rank} ({raw!r})")
        if clean != raw and notes is not None:
            notes.note(raw, clean, question)
        cleaned.append(clean)
    return cleaned


def needs_cleaning(joined: str) -> bool:
    """Whether ids joined into ``joined`` might change under the policy (or be empty,
    checked by the caller): any non-ASCII or any whitespace at all."""
    return not joined.isascii() or " " in joined or not joined.isprintable()


_ID = operator.attrgetter("id")
_EXPECTED = operator.attrgetter("expected")
_GRADES = operator.attrgetter("grades")
_CHUNKS = operator.attrgetter("expected_chunks")


def _refuse_unclean(questions: Sequence[GoldenQuestion], source: str) -> None:
    """Refuse the first id that is empty or that whitespace or an invisible character
    surrounds (`trimmed` changes it).

    A set read from a file never has one (its reader refuses them, naming the line); a
    set built in code could, and since a retriever's id is compared `trimmed`, such a
    label could never be hit.
    """
    for question in questions:
        fields = (
            ("id", (question.id,)),
            ("expected", question.expected),
            ("grades", question.grades),
            ("expected_chunks", question.expected_chunks),
        )
        for field, values in fields:
            for value in values:
                if not isinstance(value, str) or not value or trimmed(value) != value:
                    raise InputError(
                        f"question {question.id!r}: {field} holds {value!r}, which is empty "
                        "or has whitespace or an invisible character around it",
                        source=source,
                        field=field,
                        hint="ids are compared without whitespace or invisible characters "
                        "around them: give the id as the documents name it, without them",
                    )


#: Sets `canonical_set` gave back, by identity: a set loaded (and made canonical) and then
#: evaluated is not checked twice. (Frozen, a set cannot become another after the check.)
_CANONICAL: weakref.WeakValueDictionary[int, GoldenQuestionSet] = weakref.WeakValueDictionary()


def canonical_set(golden: GoldenQuestionSet) -> GoldenQuestionSet:
    """``golden`` with every question id and label in NFC, and a warning when any changed.

    Refuses (InputError) two question ids, or two labels of one question, that are one
    id in NFC. A set whose ids are all ASCII is returned as it is, at the cost of one
    check of all its ids joined; a set this function returned before is returned at once.
    """
    if _CANONICAL.get(id(golden)) is golden:
        return golden
    made = _canonical(golden)
    _CANONICAL[id(made)] = made
    return made


def known_canonical(golden: GoldenQuestionSet) -> None:
    """Record that ``golden`` is canonical as it is, for a reader that knows it (a file
    of ASCII text without a ``\\u`` escape): `canonical_set` then returns it at once.

    Duplicate question ids and labels are the reader's to refuse; in ASCII, NFC joins
    none that differ."""
    _CANONICAL[id(golden)] = golden


def _canonical(golden: GoldenQuestionSet) -> GoldenQuestionSet:
    questions = golden.questions
    texts = list(
        chain(
            map(_ID, questions),
            chain.from_iterable(map(_EXPECTED, questions)),
            chain.from_iterable(map(_GRADES, questions)),
            chain.from_iterable(map(_CHUNKS, questions)),
        )
    )
    # Joined by single spaces, ids that are all printable, none empty and none with a
    # space at either end pass one check in C; only others are looked at one by one.
    joined = " ".join(texts)
    source = golden.source or f"question set '{golden.name}'"
    if texts and not (
        joined.isprintable()
        and "  " not in joined
        and not joined.startswith(" ")
        and not joined.endswith(" ")
    ):
        _refuse_unclean(questions, source)
    if joined.isascii() or unicodedata.is_normalized(FORM, joined):
        return golden
    changed: list[tuple[str, str]] = []
    rebuilt: list[GoldenQuestion] = []
    seen: dict[str, str] = {}
    for question in questions:
        rebuilt.append(_canonical_question(question, source, changed))
        new_id = rebuilt[-1].id
        if new_id in seen:
            raise InputError(
                f"question ids {seen[new_id]!a} and {question.id!a} are one id in "
                f"Unicode NFC ({new_id!r})",
                source=source,
                field="id",
                hint="ids are compared in NFC: give the questions ids that differ visibly",
            )
        seen[new_id] = question.id
    raw, clean = changed[0]
    warning = (
        f"{len(changed)} id(s) of the set were not in Unicode NFC (e.g. {raw!a}) and are "
        f"compared as their NFC form ({clean!a}); retrievers' ids are compared in NFC too"
    )
    return attrs.evolve(golden, questions=rebuilt, warnings=(*golden.warnings, warning))


def _canonical_question(
    question: GoldenQuestion, source: str, changed: list[tuple[str, str]]
) -> GoldenQuestion:
    def fix(text: str) -> str:
        clean = canonical(text)
        if clean != text:
            changed.append((text, clean))
        return clean

    where = f"question {question.id}"
    expected: dict[str, str] = {}
    for label in question.expected:
        clean = fix(label)
        if clean in expected:
            raise InputError(
                f"{where}: document ids {expected[clean]!a} and {label!a} are one id in "
                f"Unicode NFC ({clean!r}), listed twice",
                source=source,
                field="expected",
                hint="keep one: ids are compared in NFC",
            )
        expected[clean] = label
    grades: dict[str, int] = {}
    raw_of: dict[str, str] = {}
    for label, grade in question.grades.items():
        clean = fix(label)
        if clean in grades:
            raise InputError(
                f"{where}: document ids {raw_of[clean]!a} and {label!a} are one id in "
                f"Unicode NFC ({clean!r}), graded twice",
                source=source,
                field="grades",
                hint="keep one: ids are compared in NFC",
            )
        grades[clean], raw_of[clean] = grade, label
    chunks = [fix(chunk) for chunk in question.expected_chunks]
    return attrs.evolve(
        question,
        id=fix(question.id),
        expected=list(expected),
        grades=grades,
        expected_chunks=tuple(chunks),
    )


def separator_problem(
    golden: GoldenQuestionSet, separator: str, retriever: str
) -> tuple[str, str, str] | None:
    """(question id, field, label) of the first label holding ``separator``, or None.

    The retriever cuts every returned id at its first separator (``doc-7#3`` -> ``doc-7``),
    so a label holding it can never be returned: every question expecting it is a miss.
    """
    del retriever
    for question in golden.questions:
        for field, labels in (("expected", question.expected), ("grades", question.grades)):
            for label in labels:
                if separator in label:
                    return question.id, field, label
    return None


def separators_of(options: Mapping[str, Any]) -> list[str]:
    """Every ``doc_id_separator`` in a retriever's options, nested ones (parts of a
    composed retriever) included."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                if key == "doc_id_separator" and isinstance(item, str) and item:
                    found.append(item)
                else:
                    walk(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)

    walk(options)
    return list(dict.fromkeys(found))


def check_separators(golden: GoldenQuestionSet, options: Mapping[str, Any], retriever: str) -> None:
    """Refuse a set with a label no retriever configured so could ever return."""
    for separator in separators_of(options):
        problem = separator_problem(golden, separator, retriever)
        if problem is None:
            continue
        question_id, field, label = problem
        raise InputError(
            f"question {question_id}: document id {label!r} holds the doc_id_separator "
            f"{separator!r} of retriever '{retriever}', which cuts every returned id at its "
            f"first {separator!r}, so it could never be hit",
            source=golden.source,
            field=field,
            hint=f"label the document as {label.partition(separator)[0]!r}, or give the "
            "retriever a separator its document ids never hold",
        )
