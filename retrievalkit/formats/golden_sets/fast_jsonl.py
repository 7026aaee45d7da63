"""The fast path of a JSON Lines set: blocks of lines decoded at once and checked by column.

It gives up (returns None) on anything it cannot vouch for; `jsonl` then reads the block
line by line, so every message comes from the one careful reader.
"""

from __future__ import annotations

import json
import operator
import re
from itertools import chain, repeat
from pathlib import Path
from typing import Any

from retrievalkit.errors import InputError
from retrievalkit.formats.golden_sets.questions import (
    HARD_CLASSES,
    HARD_CLASSES_KEPT,
    INT_ONLY,
    KNOWN_SET,
    NO_LABELS,
    line_question,
)
from retrievalkit.formats.golden_sets.text import MAX_QUESTION_CHARS, TEXT_UNSAFE, unsafe_character
from retrievalkit.formats.limits import MAX_GRADE, MAX_LINE_BYTES, line_too_long
from retrievalkit.formats.text_files import iter_lines, not_a_regular_file
from retrievalkit.formats.unsafe_text import UNSAFE as _LABEL_UNSAFE
from retrievalkit.model.values import (
    FrozenDict,
    GoldenQuestion,
    QuestionForm,
    questions_from_columns,
)

#: Bytes of a JSON Lines set read, decoded and checked at once by `fast_questions`. A
#: block's parsed lines stay in the processor's cache and die young, before the cyclic
#: collector promotes them: loading takes about two thirds of the time it takes in blocks
#: of a megabyte with the collector switched off.
_BLOCK_BYTES = 1 << 14


def fast_questions(path: Path) -> tuple[list[GoldenQuestion], bool] | None:
    """The file's questions, and whether the whole file is ASCII without a ``\\u``
    escape (so that no id can change in NFC); None when anything is wrong (or odd)
    about the file.

    The file is read a block of whole lines at a time, so neither its bytes nor its text
    are ever held whole. Each block is decoded, parsed and checked by `_block_questions`;
    a block it declines (a blank line, a line with spaces around its object, a grade
    written 2.0, ...) goes through `line_question` line by line. None, and so a reading
    of the whole file by `_load_jsonl_lines`, follows any error: invalid UTF-8 anywhere
    comes first there, then the first bad line.
    """

    if not_a_regular_file(path) is not None:
        return None
    questions: list[GoldenQuestion] = []
    seen: set[str] = set()
    lines = 0  # lines of the file before the current block
    plain = True
    try:
        with path.open("rb") as stream:
            rest = stream.read(_BLOCK_BYTES)
            if rest.startswith(b"\xef\xbb\xbf"):  # a byte order mark, as utf-8-sig reads it
                rest = rest[3:]
            while rest:
                more = stream.read(_BLOCK_BYTES)
                cut = rest.rfind(b"\n") + 1 if more else len(rest)
                if cut == 0:  # one line longer than a block: read to its end
                    rest = _rest_of_line(stream, rest, more, str(path), lines + 1)
                    continue
                text = rest[:cut].decode("utf-8")
                rest = rest[cut:] + more
                plain = plain and text.isascii() and "\\u" not in text
                block = _block_questions(text, seen)
                if block is None:
                    block = _lines_questions(text, lines, str(path), seen)
                questions.extend(block)
                lines += text.count("\n")
    except LineTooLong as error:
        # Reading the file again line by line would hold the whole line: refused here.
        raise error.refusal from None
    except (OSError, ValueError, InputError, RecursionError):
        # ValueError: invalid UTF-8 (UnicodeDecodeError) and whatever else the line by
        # line reading would raise and name.
        return None
    return (questions, plain) if questions else None


class LineTooLong(Exception):
    """A line past `MAX_LINE_BYTES`; ``refusal`` is the error that names it."""

    def __init__(self, size: int, *, source: str, line: int) -> None:
        super().__init__(size)
        self.refusal = line_too_long(size, source=source, line=line)


def _rest_of_line(stream: Any, start: bytes, more: bytes, source: str, line: int) -> bytes:
    """``start`` (a block with no line break) and ``more``, read on to the end of the line.

    The blocks are kept in a list and joined once: adding each to the line read so far
    would copy the line again for every block (quadratic: a 512 MB file without a line
    break took minutes). A line past `MAX_LINE_BYTES` is refused as soon as it is.
    """
    parts, size = [start], len(start)
    while more:
        parts.append(more)
        end = more.find(b"\n")
        if end >= 0:
            size += end
            break
        size += len(more)
        if size > MAX_LINE_BYTES:
            break
        more = stream.read(_BLOCK_BYTES)
    if size > MAX_LINE_BYTES:
        raise LineTooLong(size, source=source, line=line)
    return b"".join(parts)


def _lines_questions(text: str, before: int, source: str, seen: set[str]) -> list[GoldenQuestion]:
    """The questions of a block of lines, one line at a time; raises at any problem."""
    questions = []
    for number, line in enumerate(iter_lines(text), start=before + 1):
        if not line.strip():
            continue
        question = line_question(line, number, source)
        if question.id in seen:
            raise InputError("duplicate id", source=source, line=number, field="id")
        seen.add(question.id)
        questions.append(question)
    return questions


#: The plain decoder's scanner: objects become dicts, with no Python run per object. A key
#: named twice in one object is found by counting colons (`_block_questions`).
_SCAN: Any = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


#: A \u escape that writes a colon, which the count of colons would miss. (A lone
#: surrogate needs no search: every string is checked by a pattern or by ``isprintable``,
#: and both refuse one.)
_COLON_ESCAPE = re.compile(r"\\u003[aA]")


_FORM_OF: dict[str | None, QuestionForm | None] = {None: None, "": None}


for _form in QuestionForm:
    for _spelling in (_form.value, _form.value.lower(), _form.value.capitalize()):
        _FORM_OF[_spelling] = _form


_ID = operator.itemgetter("id")


_TEXT = operator.itemgetter("question")


_EXPECTED = operator.itemgetter("expected")


_DICTS: frozenset[type] = frozenset((dict,))


_LISTS: frozenset[type] = frozenset((list,))


_STRINGS_OR_NONE: frozenset[type] = frozenset((str, type(None)))


_DICTS_OR_NONE: frozenset[type] = frozenset((dict, type(None)))


_EMPTY: dict[str, Any] = {}


def _block_questions(text: str, seen: set[str]) -> list[GoldenQuestion] | None:
    """The questions of a block of whole lines, checked together in C, or None when one
    line might be unusual or wrong in any way: then `parse_question` decides, line by line.

    Accepted only is what `parse_question` accepts, built into the values it builds: one
    JSON object a line, nothing around it, no line blank; known fields, none twice; ids and
    document ids clean; text without control characters; forms as written in the docs;
    whole grades; ids new to the set (added to ``seen``).
    """
    if _COLON_ESCAPE.search(text) is not None:
        return None
    records: list[Any] = []
    append = records.append
    scan = _SCAN
    position, size = 0, len(text)
    try:
        while position < size:
            found, end = scan(text, position)
            append(found)
            if end == size:  # the file's last line, without a line break
                break
            if text[end] != "\n":
                if text[end] != "\r" or text[end + 1] != "\n":
                    return None
                end += 1
            position = end + 1
    except (StopIteration, ValueError, IndexError, RecursionError):
        return None
    # One object a line, and no object spread over two lines.
    if text.count("\n") != len(records) - (not text.endswith("\n")):
        return None
    if not _DICTS.issuperset(map(type, records)):
        return None
    # Questions with expected_chunks or a cluster are read line by line (`parse_question`).
    if not _FAST_FIELDS.issuperset(chain.from_iterable(records)):
        return None
    try:
        ids = list(map(_ID, records))
        texts = list(map(_TEXT, records))
        expected = list(map(_EXPECTED, records))
        forms = list(map(_FORM_OF.__getitem__, map(dict.get, records, repeat("form"))))
        all_ids = "".join(ids)
        all_texts = "".join(texts)
    except (KeyError, TypeError):
        return None
    if not _LISTS.issuperset(map(type, expected)):
        return None
    documents = list(chain.from_iterable(expected))
    all_documents = _clean_strings(documents)
    if (
        all_documents is None
        or "" in ids
        or " " in all_ids
        or not all_ids.isprintable()
        or not all(map(str.strip, texts))
        or max(map(len, texts), default=0) > MAX_QUESTION_CHARS
        or TEXT_UNSAFE.search(all_texts) is not None
        or sum(map(len, map(set, expected))) != len(documents)
    ):
        return None
    unique = set(ids)
    if len(unique) != len(ids) or not seen.isdisjoint(unique):
        return None
    grades = _block_grades(list(map(dict.get, records, repeat("grades"))), expected)
    metas = _block_meta(list(map(dict.get, records, repeat("meta"), repeat(_EMPTY))))
    hard_classes = _block_hard_classes(list(map(dict.get, records, repeat("hard_class"))))
    gists = list(map(dict.get, records, repeat("gist")))
    if grades is None or metas is None or hard_classes is None:
        return None
    if not _STRINGS_OR_NONE.issuperset(map(type, gists)):
        return None
    all_gists = "".join(filter(None, gists))
    if TEXT_UNSAFE.search(all_gists) is not None:
        return None
    # Every colon of the text separates a key from its value or sits in a string, so the
    # colons number the keys parsed plus the colons of every string parsed unless a key
    # was named twice in one object (the decoder keeps the last, silently). A colon
    # written as a \u escape was declined above.
    graded = list(chain.from_iterable(grades))
    labelled = "".join(chain.from_iterable(metas)) + "".join(
        chain.from_iterable(map(dict.values, metas))
    )
    keys = sum(map(len, records)) + sum(map(len, grades)) + sum(map(len, metas))
    colons = sum(
        part.count(":")
        for part in (
            all_ids,
            all_texts,
            all_documents,
            "".join(graded),
            labelled,
            all_gists,
            "".join(filter(None, hard_classes)),
        )
    )
    if text.count(":") != keys + colons:
        return None
    seen.update(unique)
    # A document id graded and expected is one string, not two: the graded one, since a
    # read-only mapping cannot change its keys but a tuple is built anyway.
    get = dict(zip(graded, graded, strict=True)).get
    expected_tuples = list(map(tuple, map(map, repeat(get), expected, expected)))
    return questions_from_columns(
        ids, texts, forms, expected_tuples, grades, hard_classes, gists, metas
    )


def _clean_strings(items: list[Any]) -> str | None:
    """All items joined when each is a string that `is_clean_id` accepts (checked in C
    at once), else None."""
    try:
        joined = "".join(items)
    except TypeError:
        return None
    return joined if "" not in items and " " not in joined and joined.isprintable() else None


def _label_maps(values: list[Any], allowed: frozenset[type]) -> list[FrozenDict] | None:
    """Objects as read-only mappings, the shared empty one where absent or empty; None
    unless every value is of an allowed type."""
    if not allowed.issuperset(map(type, values)):
        return None
    if not any(values):
        return [NO_LABELS] * len(values)
    return [FrozenDict(labels) if labels else NO_LABELS for labels in values]


def _block_grades(values: list[Any], expected: list[list[str]]) -> list[FrozenDict] | None:
    """A block's grades (the shared empty mapping where absent), or None unless each is an
    object of clean document ids to whole grades 0 to MAX_GRADE, none 0 for an expected id."""
    maps = _label_maps(values, _DICTS_OR_NONE)
    if maps is None:
        return None
    grades = list(chain.from_iterable(map(dict.values, maps)))
    if not grades:
        return maps
    if not (
        INT_ONLY.issuperset(map(type, grades))
        and min(grades) >= 0
        and max(grades) <= MAX_GRADE
        and _clean_strings(list(chain.from_iterable(maps))) is not None
    ):
        return None
    if min(grades) == 0:
        for labels, documents in zip(maps, expected, strict=True):
            if 0 in labels.values() and any(labels.get(doc) == 0 for doc in documents):
                return None
    return maps


def _block_meta(values: list[Any]) -> list[FrozenDict] | None:
    """A block's meta (the shared empty mapping where absent), or None unless each is an
    object of strings to strings without control characters."""
    maps = _label_maps(values, _DICTS)
    if maps is None:
        return None
    try:
        keys = "".join(chain.from_iterable(maps))
        labels = "".join(chain.from_iterable(map(dict.values, maps)))
    except TypeError:
        return None
    if _LABEL_UNSAFE.search(keys) or _LABEL_UNSAFE.search(labels):
        return None
    return maps


def _block_hard_classes(values: list[Any]) -> list[str | None] | None:
    """A block's hard classes, one string per class, or None unless each is a non-empty
    string without control characters."""
    try:
        distinct = set(values)
    except TypeError:
        return None
    shared: dict[Any, str | None] = {None: None}
    for value in distinct - {None}:
        if type(value) is not str or not value.strip() or unsafe_character(value) is not None:
            return None
        if len(HARD_CLASSES) < HARD_CLASSES_KEPT:
            value = HARD_CLASSES.setdefault(value, value)
        shared[value] = value
    return list(map(shared.__getitem__, values))


#: Lines with ``expected_chunks`` or a ``cluster`` are read by `parse_question`, one at a time.
_FAST_FIELDS = KNOWN_SET - {"expected_chunks", "cluster"}
