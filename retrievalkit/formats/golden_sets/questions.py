"""One question from its fields: every field checked, each error naming its place and field."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from retrievalkit.errors import InputError
from retrievalkit.formats.golden_sets.strict_json import DuplicateKey, parse_json
from retrievalkit.formats.golden_sets.text import KNOWN_FIELDS, MAX_QUESTION_CHARS, check_text
from retrievalkit.formats.limits import MAX_GRADE
from retrievalkit.model.values import FrozenDict, GoldenQuestion, QuestionForm


def line_question(line: str, number: int, source: str) -> GoldenQuestion:
    """The question of one non-blank line, or the InputError naming what is wrong with it."""
    try:
        # NaN and Infinity parse as floats, so the check of the field holding one refuses it
        # and names that field.
        data = parse_json(line)
    except json.JSONDecodeError as error:
        raise InputError(
            f"malformed JSON: {error.msg} at column {error.colno}",
            source=source,
            line=number,
            hint="each line must be one JSON object",
        ) from None
    except RecursionError:
        raise InputError(
            "JSON nested too deeply", source=source, line=number, hint="a question is flat"
        ) from None
    except DuplicateKey as error:
        raise InputError(
            "the key appears twice in one object",
            source=source,
            line=number,
            field=error.key,
            hint="keep one; JSON readers disagree on which one wins",
        ) from None
    # Text decoded from UTF-8 holds no lone surrogate unless a \u escape made one.
    return parse_question(data, source=source, line=number, may_hold_surrogates="\\u" in line)


def parse_question(
    data: Any, *, source: str, line: int | None = None, may_hold_surrogates: bool = True
) -> GoldenQuestion:
    """Validate one question's plain data and build it; every failure names the field.

    ``may_hold_surrogates=False`` skips the search for lone surrogates, for data decoded
    from JSON text that has no ``\\u`` escape (the search is a third of a set's load).
    """

    def fail(message: str, field: str | None = None, hint: str | None = None) -> InputError:
        return InputError(message, source=source, line=line, field=field, hint=hint)

    _check_fields(data, fail, may_hold_surrogates)
    question_id = data.get("id")
    if question_id is None:
        raise fail("missing field", field="id", hint="every question needs a unique string id")
    if not isinstance(question_id, str) or not is_clean_id(question_id):
        raise fail(
            f"must be a non-empty string without spaces or control characters, got {question_id!r}",
            field="id",
        )
    text = data.get("question")
    if text is None:
        raise fail("missing field", field="question", hint="the question text a user would type")
    if not isinstance(text, str) or not text.strip():
        raise fail("must be a non-empty string", field="question")
    if len(text) > MAX_QUESTION_CHARS:
        raise fail(
            f"is {len(text)} characters long; the limit is {MAX_QUESTION_CHARS}",
            field="question",
            hint="a golden question is a question, not a document",
        )
    check_text(text, "question", fail, free_text=True)
    form = _parse_form(data.get("form"), fail)
    if "expected" not in data:
        raise fail(
            "missing field",
            field="expected",
            hint="list every document id that answers it, or [] when none does",
        )
    expected = _parse_expected(data["expected"], fail)
    grades = _parse_grades(data.get("grades"), expected, fail)
    hard_class = _parse_hard_class(data.get("hard_class"), fail)
    gist = data.get("gist")
    if gist is not None and not isinstance(gist, str):
        raise fail("must be a string", field="gist")
    if gist is not None:
        check_text(gist, "gist", fail, free_text=True)
    meta = data.get("meta", NO_LABELS)
    if not isinstance(meta, Mapping) or (
        meta
        and not all(isinstance(key, str) and isinstance(value, str) for key, value in meta.items())
    ):
        raise fail("must be an object of string keys to string values", field="meta")
    for key, value in meta.items():
        check_text(key, "meta", fail)
        check_text(value, f"meta.{key}", fail)
    chunks = _parse_chunks(data.get("expected_chunks", []), fail)
    return GoldenQuestion(
        id=question_id,
        question=text,
        form=form,
        expected=expected,
        # Read-only already, so the question keeps them as they are; most questions share
        # the one empty mapping.
        grades=FrozenDict(grades) if grades else NO_LABELS,
        hard_class=hard_class,
        gist=gist,
        meta=FrozenDict(meta) if meta else NO_LABELS,
        expected_chunks=tuple(chunks),
        cluster=parse_cluster(data.get("cluster"), fail),
    )


def parse_cluster(cluster: Any, fail: Any) -> str | None:
    """A question's ``cluster``: any non-empty string without control characters."""
    if cluster is None:
        return None
    if not isinstance(cluster, str) or not cluster.strip():
        raise fail(
            "must be a non-empty string naming the question's group, e.g. 'doc-17'",
            field="cluster",
        )
    check_text(cluster, "cluster", fail)
    return cluster


def _check_fields(data: Any, fail: Any, may_hold_surrogates: bool) -> None:
    """A question is an object of known fields whose keys and values are valid Unicode."""
    if not isinstance(data, Mapping):
        raise fail(f"expected a JSON object, found {type(data).__name__}")
    clean = not may_hold_surrogates or _all_unicode(data)
    for key, value in () if clean else data.items():
        if not _is_unicode(key) or not _is_unicode(value):
            raise fail(
                "holds a lone surrogate escape (such as \\ud800), which is not valid Unicode",
                field=str(key) if _is_unicode(key) else None,
                hint="fix the \\u escapes, or save the text as UTF-8 without escapes",
            )
    unknown = [] if KNOWN_SET.issuperset(data) else [k for k in data if k not in KNOWN_FIELDS]
    if unknown:
        raise fail(
            f"unknown field '{unknown[0]}'",
            field=str(unknown[0]),
            hint="known fields: " + ", ".join(KNOWN_FIELDS),
        )


def _parse_expected(expected: Any, fail: Any) -> list[str]:
    """``expected``: a list of distinct, clean document ids (empty: nothing answers)."""
    return _parse_ids(expected, fail, "expected", "document")


def _parse_hard_class(hard_class: Any, fail: Any) -> str | None:
    """``hard_class``: a non-empty string, one shared copy per class of the set."""
    if hard_class is None:
        return None
    if not isinstance(hard_class, str) or not hard_class.strip():
        raise fail("must be a non-empty string such as 'near-duplicate'", field="hard_class")
    check_text(hard_class, "hard_class", fail)
    # A set has a handful of classes: one string each instead of one a question.
    if len(HARD_CLASSES) < HARD_CLASSES_KEPT:
        return HARD_CLASSES.setdefault(hard_class, hard_class)
    return str(hard_class)


def _parse_chunks(chunks: Any, fail: Any) -> list[str]:
    """``expected_chunks``: a list of distinct, clean chunk ids."""
    return _parse_ids(chunks, fail, "expected_chunks", "chunk")


def _parse_ids(ids: Any, fail: Any, field: str, noun: str) -> list[str]:
    """A list of distinct ids, each non-empty, without spaces or control characters."""
    if not isinstance(ids, list) or not _all_strings(ids):
        raise fail(f"must be a list of {noun} id strings", field=field)
    if not _all_clean_ids(ids):
        for item in ids:
            if not is_clean_id(item):
                raise fail(
                    f"{noun} id {item!r} is empty or has spaces or control characters",
                    field=field,
                )
    if len(set(ids)) != len(ids):
        twice = sorted({item for item in ids if ids.count(item) > 1})[0]
        raise fail(f"{noun} id '{twice}' is listed twice", field=field)
    return ids


KNOWN_SET = frozenset(KNOWN_FIELDS)


HARD_CLASSES: dict[str, str] = {}


HARD_CLASSES_KEPT = 1024


INT_ONLY = frozenset((int,))


NO_LABELS = FrozenDict()


def _all_strings(items: list[Any]) -> bool:
    """Whether every item is a string, checked in C: joining fails on anything else."""
    try:
        "".join(items)
    except TypeError:
        return False
    return True


def _all_clean_ids(items: list[str]) -> bool:
    """`is_clean_id` of every item at once: printability is a property of each character."""
    joined = "".join(items)
    return "" not in items and joined.isprintable() and " " not in joined


def _all_unicode(data: Any) -> bool:
    """True when no string in ``data`` holds a lone surrogate, checked in C for the common case.

    False also when the data is not JSON-like (TOML dates): then the field-by-field walk
    of `_is_unicode` decides, and names the field.
    """
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except (UnicodeEncodeError, TypeError, ValueError):
        return False
    return True


def _is_unicode(value: Any) -> bool:
    """False when a string anywhere in ``value`` holds a lone surrogate (from a \\ud800 escape)."""
    if isinstance(value, str):
        # Only a surrogate code point fails to encode, and encoding runs in C: a
        # character loop here was most of the time it takes to load a large set.
        if value.isascii():
            return True
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(value, Mapping):
        return all(_is_unicode(key) and _is_unicode(item) for key, item in value.items())
    if isinstance(value, list):
        return all(_is_unicode(item) for item in value)
    return True


def is_clean_id(value: str) -> bool:
    # Every whitespace character but the space is also unprintable, so this is "no
    # whitespace and nothing unprintable", checked in C instead of per character.
    return bool(value) and value.isprintable() and " " not in value


#: Looked up once: ``QuestionForm.__members__`` builds a new mapping on every access.
_FORMS = dict(QuestionForm.__members__)


def _parse_form(value: Any, fail: Any) -> QuestionForm | None:
    if value is None or value == "":
        return None
    form = _FORMS.get(value.upper()) if isinstance(value, str) else None
    if form is not None:
        return form
    raise fail(f"unknown form {value!r}", field="form", hint="use MATCH, GAP, or leave it out")


def _parse_grades(value: Any, expected: list[str], fail: Any) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise fail("must be an object of document id to integer grade", field="grades")
    numbers = list(value.values())
    if (
        numbers
        and INT_ONLY.issuperset(map(type, numbers))
        and min(numbers) > 0
        and max(numbers) <= MAX_GRADE
        and _all_strings(list(value))
        and _all_clean_ids(list(value))
    ):
        # The common case, checked in C: clean ids, whole grades 1 to MAX_GRADE (a grade
        # of 0 is checked against ``expected`` below).
        return dict(value)
    grades: dict[str, int] = {}
    for doc_id, grade in value.items():
        if not is_clean_id(doc_id):
            raise fail(f"document id {doc_id!r} has spaces or control characters", field="grades")
        if isinstance(grade, bool) or not isinstance(grade, (int, float)):
            raise fail(f"grade of '{doc_id}' must be an integer, got {grade!r}", field="grades")
        if isinstance(grade, float) and (math.isnan(grade) or not grade.is_integer()):
            raise fail(f"grade of '{doc_id}' must be a whole number, got {grade!r}", field="grades")
        if grade < 0:
            raise fail(
                f"grade of '{doc_id}' is {grade}; grades are integers >= 0",
                field="grades",
                hint="0 means judged not relevant",
            )
        if grade > MAX_GRADE:
            raise fail(
                f"grade of '{doc_id}' is {grade:g}; grades are at most {MAX_GRADE}",
                field="grades",
                hint="TREC grades run from 0 to 4",
            )
        if grade == 0 and doc_id in expected:
            raise fail(
                f"'{doc_id}' is expected but graded 0 (not relevant)",
                field="grades",
                hint="grade it 1 or more, or remove it from expected",
            )
        grades[doc_id] = int(grade)
    return grades
