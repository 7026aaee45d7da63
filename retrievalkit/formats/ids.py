"""The one identity of a document or question id, applied to labels and returned ids alike.

Two ids are the same id when their Unicode NFC forms are equal, and whitespace around an
id is never part of it:

* NFC (canonical composition) because canonically equivalent strings are the same text
  to every reader: ``"é"`` typed on one system and ``"e" + U+0301`` written by another
  (macOS file names, some PDF extractors) must not be a silent miss. NFKC would go
  further and merge ids that differ visibly (``x²`` and ``x2``, full-width digits), which
  a corpus may well keep apart, so it is not used; case is never folded either.
* Labels in a set are refused when they hold whitespace, control characters or nothing
  (the loaders say so, naming line and field); labels and question ids that are not in
  NFC are compared in NFC, with a warning, and two labels (or two question ids) that are
  one id in NFC are refused, as an id listed twice is.
* Ids a retriever returns are stripped of surrounding whitespace and compared in NFC,
  with a warning counting how many it changed; an id that is empty after that, a
  ranking that is not an ordered sequence of strings (a set, a dict, a generator) is an
  error outcome for that question, since no order or no id could be scored from it.
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


def returned_id(text: str) -> str:
    """A returned id as it is compared: without surrounding whitespace, in NFC."""
    return canonical(text.strip())


class ReturnedIds:
    """Counts the returned ids the identity policy changed over a run (thread-safe)."""

    def __init__(self) -> None:
        self.changed = 0
        self.example: tuple[str, str] | None = None
        self._lock = threading.Lock()

    def note(self, raw: str, clean: str) -> None:
        with self._lock:
            self.changed += 1
            if self.example is None:
                self.example = (raw, clean)

    def warning(self) -> str | None:
        if not self.changed or self.example is None:
            return None
        raw, clean = self.example
        return (
            f"{self.changed} returned document id(s) had whitespace around them or were not "
            f"in Unicode NFC (e.g. {raw!a} -> {clean!a}) and were compared as their NFC form "
            "without the whitespace; return ids exactly as the set labels them"
        )


def unordered_kind(ids: Any) -> str | None:
    """What is wrong with ``ids`` as a ranking when it has no order, or None."""
    if isinstance(ids, Mapping):
        return "a mapping"
    if isinstance(ids, AbstractSet):
        return "a set"
    return None


def clean_ranking(ids: Sequence[str], notes: ReturnedIds | None) -> list[str]:
    """The ids as the policy compares them; ``ValueError`` for an id that is empty."""
    cleaned = []
    for rank, raw in enumerate(ids, start=1):
        clean = returned_id(raw)
        if not clean:
            raise ValueError(f"returned an empty document id at rank {rank}")
        if clean != raw and notes is not None:
            notes.note(raw, clean)
        cleaned.append(clean)
    return cleaned


def needs_cleaning(joined: str) -> bool:
    """Whether ids joined into ``joined`` might change under the policy (or be empty,
    checked by the caller): any non-ASCII or any whitespace at all."""
    return not joined.isascii() or " " in joined or not joined.isprintable()


_ID = operator.attrgetter("id")
_EXPECTED = operator.attrgetter("expected")
_GRADES = operator.attrgetter("grades")


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
    texts = chain(
        map(_ID, questions),
        chain.from_iterable(map(_EXPECTED, questions)),
        chain.from_iterable(map(_GRADES, questions)),
    )
    joined = "\n".join(texts)
    if joined.isascii() or unicodedata.is_normalized(FORM, joined):
        return golden
    source = golden.source or f"question set '{golden.name}'"
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
    return attrs.evolve(question, id=fix(question.id), expected=list(expected), grades=grades)


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
