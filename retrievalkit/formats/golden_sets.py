"""Read golden question sets from JSON Lines, TOML and BEIR directories, with exact error places.

Every problem is reported as an `retrievalkit.errors.InputError` that names the
file, the line (or question) and the field, and says what was expected.
"""

from __future__ import annotations

import json
import math
import operator
import re
import sys
from collections.abc import Iterable, Mapping
from itertools import chain, repeat
from pathlib import Path
from typing import Any

from retrievalkit.errors import InputError
from retrievalkit.formats.limits import MAX_GRADE, MAX_LINE_BYTES, check_path, line_too_long
from retrievalkit.formats.qrels import qrels_rows
from retrievalkit.formats.text_files import (
    iter_lines,
    lines_of,
    not_a_regular_file,
    read_text,
    toml_error_line,
)
from retrievalkit.formats.unsafe_text import UNSAFE as _LABEL_UNSAFE
from retrievalkit.model.values import (
    QUESTION_FIELDS,
    FrozenDict,
    GoldenQuestion,
    GoldenQuestionSet,
    QuestionForm,
    questions_from_columns,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

#: A question longer than this is almost certainly a pasted document, not a question.
MAX_QUESTION_CHARS = 10_000

#: The fields a question line may have: `GoldenQuestion`'s, in its order.
_KNOWN_FIELDS = QUESTION_FIELDS

#: Free text (a question, a gist, a description) may hold tabs and line breaks (also
#: U+2028 and U+2029); nothing else a terminal could act on (ESC, OSC, bidirectional
#: overrides) is accepted anywhere.
_TEXT_UNSAFE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b\u200e\u200f\u202a-\u202e\u2060-\u2069\ufeff\ud800-\udfff]"
)


def unsafe_character(text: str, *, free_text: bool = False) -> str | None:
    """A description of the first control character in ``text``, or None when it has none."""
    found = (_TEXT_UNSAFE if free_text else _LABEL_UNSAFE).search(text)
    if found is None:
        return None
    return f"control character U+{ord(found[0]):04X} at position {found.start() + 1}"


def _check_text(text: str, field: str, fail: Any, *, free_text: bool = False) -> None:
    problem = unsafe_character(text, free_text=free_text)
    if problem is not None:
        raise fail(
            f"holds a {problem}",
            field=field,
            hint="remove it: control and direction-changing characters would act on a terminal",
        )


def load_set_file(path: Path, *, name: str | None = None) -> GoldenQuestionSet:
    """Load a golden set from a ``.jsonl``/``.json`` file, a ``.toml`` file or a BEIR directory."""
    check_path(str(path), field="--set")
    if not path.exists():
        raise InputError(
            "no such file or directory", source=str(path), hint="check the path given to --set"
        )
    from retrievalkit.formats.ids import canonical_set

    # Every id as `retrievalkit.formats.ids` compares it, whatever format it came in.
    if path.is_dir():
        return canonical_set(load_beir(path, name=name))
    if path.suffix == ".toml":
        return canonical_set(load_toml(path, name=name))
    if path.suffix == ".tsv" and path.parent.name == "qrels":
        return canonical_set(load_beir(path.parent.parent, qrels=path, name=name))
    return canonical_set(load_jsonl(path, name=name))


def load_jsonl(path: Path, *, name: str | None = None) -> GoldenQuestionSet:
    """One question per line; blank lines are skipped.

    A file is read a block at a time and each block's questions are checked together
    (`_fast_questions`); a block that is unusual in any way goes through the checks of
    one line at a time, and any problem at all reads the whole file again the one line at
    a time way (`_load_jsonl_lines`), so every message is the one it always was.
    """
    fast = _fast_questions(path)
    if fast is None:
        questions = _load_jsonl_lines(path)
        return GoldenQuestionSet(name=name or path.stem, questions=questions, source=str(path))
    questions, plain = fast
    golden = GoldenQuestionSet(name=name or path.stem, questions=questions, source=str(path))
    if plain:
        from retrievalkit.formats.ids import known_canonical

        # ASCII without a \u escape: every id is its own NFC form, with nothing to check.
        known_canonical(golden)
    return golden


def _load_jsonl_lines(path: Path) -> list[GoldenQuestion]:
    """Every question of the file, checked one line at a time: the first problem in the
    file is raised, naming its line and field."""
    text = read_text(path)
    questions: list[GoldenQuestion] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(iter_lines(text), start=1):
        if len(line) > MAX_LINE_BYTES:
            raise line_too_long(len(line), source=str(path), line=number)
        if not line.strip():
            continue
        question = _line_question(line, number, str(path))
        if question.id in seen:
            raise InputError(
                f"duplicate id '{question.id}', first used on line {seen[question.id]}",
                source=str(path),
                line=number,
                field="id",
                hint="ids must be unique within a set",
            )
        seen[question.id] = number
        questions.append(question)
    if not questions:
        raise InputError(
            "the file holds no questions",
            source=str(path),
            hint="write one JSON object per line, as in the docs' golden set guide",
        )
    return questions


def _line_question(line: str, number: int, source: str) -> GoldenQuestion:
    """The question of one non-blank line, or the InputError naming what is wrong with it."""
    try:
        # NaN and Infinity parse as floats, so the check of the field holding one refuses it
        # and names that field.
        data = _parse_json(line)
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


#: Bytes of a JSON Lines set read, decoded and checked at once by `_fast_questions`. A
#: block's parsed lines stay in the processor's cache and die young, before the cyclic
#: collector promotes them: loading takes about two thirds of the time it takes in blocks
#: of a megabyte with the collector switched off.
_BLOCK_BYTES = 1 << 14


def _fast_questions(path: Path) -> tuple[list[GoldenQuestion], bool] | None:
    """The file's questions, and whether the whole file is ASCII without a ``\\u``
    escape (so that no id can change in NFC); None when anything is wrong (or odd)
    about the file.

    The file is read a block of whole lines at a time, so neither its bytes nor its text
    are ever held whole. Each block is decoded, parsed and checked by `_block_questions`;
    a block it declines (a blank line, a line with spaces around its object, a grade
    written 2.0, ...) goes through `_line_question` line by line. None, and so a reading
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
        question = _line_question(line, number, source)
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
        or _TEXT_UNSAFE.search(all_texts) is not None
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
    if _TEXT_UNSAFE.search(all_gists) is not None:
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
    """All items joined when each is a string that `_is_clean_id` accepts (checked in C
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
        return [_NO_LABELS] * len(values)
    return [FrozenDict(labels) if labels else _NO_LABELS for labels in values]


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
        _INT_ONLY.issuperset(map(type, grades))
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
        if len(_HARD_CLASSES) < _HARD_CLASSES_KEPT:
            value = _HARD_CLASSES.setdefault(value, value)
        shared[value] = value
    return list(map(shared.__getitem__, values))


def _parse_json(text: str) -> Any:
    """json.loads, except that an integer too long for Python's int parser becomes a float.

    Then the field check refuses it (as infinite or as not an id string) and names the
    field, instead of the parser failing with no field at all.
    """
    if text.startswith("\ufeff"):  # what json.loads says, before decoding
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return _DECODER.decode(text)


class DuplicateKey(ValueError):
    """A JSON object names the same key twice (json.loads would silently keep the last)."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data = dict(pairs)
    if len(data) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return data


# One decoder for every line: json.loads with an option builds a new one per call.
_DECODER = json.JSONDecoder(
    parse_int=lambda digits: int(digits) if len(digits) < 100 else float(digits),
    object_pairs_hook=_unique_keys,
)


_TOML_QUESTION = re.compile(r"^\s*\[\[\s*questions\s*\]\]")


def load_toml(path: Path, *, name: str | None = None) -> GoldenQuestionSet:
    """``name``, ``description`` and ``[[questions]]`` tables with the JSON Lines fields."""
    text = read_text(path)
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise InputError(
            f"malformed TOML: {error}", source=str(path), line=toml_error_line(error, text)
        ) from None
    except RecursionError:
        raise InputError(
            "TOML nested too deeply", source=str(path), hint="a question is a flat table"
        ) from None
    unknown = sorted(set(document) - {"name", "description", "questions"})
    if unknown:
        raise InputError(
            f"unknown top-level key '{unknown[0]}'",
            source=str(path),
            field=unknown[0],
            hint="a TOML set has name, description and [[questions]]",
        )
    entries = document.get("questions")
    if not isinstance(entries, list) or not entries:
        raise InputError(
            "no [[questions]] tables", source=str(path), field="questions", hint="add [[questions]]"
        )
    questions: list[GoldenQuestion] = []
    seen: dict[str, int] = {}
    # Where each [[questions]] table starts, so a message can name its line too; tables
    # written inline (questions = [...]) have no header, and then only the index is named.
    headers = [n for n, row in enumerate(lines_of(text), 1) if _TOML_QUESTION.match(row)]
    for index, entry in enumerate(entries, start=1):
        where = f"{path}, question {index}"
        line = headers[index - 1] if len(headers) == len(entries) else None
        if line is not None:
            where = f"{path}, line {line} (question {index})"
        question = parse_question(entry, source=where)
        if question.id in seen:
            raise InputError(
                f"duplicate id '{question.id}', first used by question {seen[question.id]}",
                source=where,
                field="id",
            )
        seen[question.id] = index
        questions.append(question)
    set_name = document.get("name", name or path.stem)
    description = document.get("description")
    for key, value in (("name", set_name), ("description", description)):
        if value is not None and not isinstance(value, str):
            raise InputError("must be a string", source=str(path), field=key)
        problem = None if value is None else unsafe_character(value, free_text=key != "name")
        if problem is not None:
            raise InputError(f"holds a {problem}", source=str(path), field=key)
    return GoldenQuestionSet(
        name=name or set_name, questions=questions, description=description, source=str(path)
    )


def parse_question(
    data: Any, *, source: str, line: int | None = None, may_hold_surrogates: bool = True
) -> GoldenQuestion:
    """Validate one question's plain data and build it; every failure names the field.

    ``may_hold_surrogates=False`` skips the search for lone surrogates, for data decoded
    from JSON text that has no ``\\u`` escape (the search is a third of a set's load).
    """

    def fail(message: str, field: str | None = None, hint: str | None = None) -> InputError:
        return InputError(message, source=source, line=line, field=field, hint=hint)

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
    unknown = [] if _KNOWN_SET.issuperset(data) else [k for k in data if k not in _KNOWN_FIELDS]
    if unknown:
        raise fail(
            f"unknown field '{unknown[0]}'",
            field=str(unknown[0]),
            hint="known fields: " + ", ".join(_KNOWN_FIELDS),
        )
    question_id = data.get("id")
    if question_id is None:
        raise fail("missing field", field="id", hint="every question needs a unique string id")
    if not isinstance(question_id, str) or not _is_clean_id(question_id):
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
    _check_text(text, "question", fail, free_text=True)
    form = _parse_form(data.get("form"), fail)
    if "expected" not in data:
        raise fail(
            "missing field",
            field="expected",
            hint="list every document id that answers it, or [] when none does",
        )
    expected = data["expected"]
    if not isinstance(expected, list) or not _all_strings(expected):
        raise fail("must be a list of document id strings", field="expected")
    if not _all_clean_ids(expected):
        for item in expected:
            if not _is_clean_id(item):
                raise fail(
                    f"document id {item!r} is empty or has spaces or control characters",
                    field="expected",
                )
    duplicates = (
        sorted({item for item in expected if expected.count(item) > 1})
        if len(set(expected)) != len(expected)
        else []
    )
    if duplicates:
        raise fail(f"document id '{duplicates[0]}' is listed twice", field="expected")
    grades = _parse_grades(data.get("grades"), expected, fail)
    hard_class = data.get("hard_class")
    if hard_class is not None and (not isinstance(hard_class, str) or not hard_class.strip()):
        raise fail("must be a non-empty string such as 'near-duplicate'", field="hard_class")
    if hard_class is not None:
        _check_text(hard_class, "hard_class", fail)
        # A set has a handful of classes: one string each instead of one a question.
        if len(_HARD_CLASSES) < _HARD_CLASSES_KEPT:
            hard_class = _HARD_CLASSES.setdefault(hard_class, hard_class)
    gist = data.get("gist")
    if gist is not None and not isinstance(gist, str):
        raise fail("must be a string", field="gist")
    if gist is not None:
        _check_text(gist, "gist", fail, free_text=True)
    meta = data.get("meta", _NO_LABELS)
    if not isinstance(meta, Mapping) or (
        meta
        and not all(isinstance(key, str) and isinstance(value, str) for key, value in meta.items())
    ):
        raise fail("must be an object of string keys to string values", field="meta")
    for key, value in meta.items():
        _check_text(key, "meta", fail)
        _check_text(value, f"meta.{key}", fail)
    chunks = data.get("expected_chunks", [])
    if not isinstance(chunks, list) or not _all_strings(chunks):
        raise fail("must be a list of chunk id strings", field="expected_chunks")
    for item in chunks:
        if not _is_clean_id(item):
            raise fail(
                f"chunk id {item!r} is empty or has spaces or control characters",
                field="expected_chunks",
            )
    if len(set(chunks)) != len(chunks):
        twice = sorted({item for item in chunks if chunks.count(item) > 1})[0]
        raise fail(f"chunk id '{twice}' is listed twice", field="expected_chunks")
    return GoldenQuestion(
        id=question_id,
        question=text,
        form=form,
        expected=expected,
        # Read-only already, so the question keeps them as they are; most questions share
        # the one empty mapping.
        grades=FrozenDict(grades) if grades else _NO_LABELS,
        hard_class=hard_class,
        gist=gist,
        meta=FrozenDict(meta) if meta else _NO_LABELS,
        expected_chunks=tuple(chunks),
        cluster=_parse_cluster(data.get("cluster"), fail),
    )


def _parse_cluster(cluster: Any, fail: Any) -> str | None:
    """A question's ``cluster``: any non-empty string without control characters."""
    if cluster is None:
        return None
    if not isinstance(cluster, str) or not cluster.strip():
        raise fail(
            "must be a non-empty string naming the question's group, e.g. 'doc-17'",
            field="cluster",
        )
    _check_text(cluster, "cluster", fail)
    return cluster


_KNOWN_SET = frozenset(_KNOWN_FIELDS)
#: Lines with ``expected_chunks`` or a ``cluster`` are read by `parse_question`, one at a time.
_FAST_FIELDS = _KNOWN_SET - {"expected_chunks", "cluster"}
_HARD_CLASSES: dict[str, str] = {}
_HARD_CLASSES_KEPT = 1024
_INT_ONLY = frozenset((int,))
_NO_LABELS = FrozenDict()


def _all_strings(items: list[Any]) -> bool:
    """Whether every item is a string, checked in C: joining fails on anything else."""
    try:
        "".join(items)
    except TypeError:
        return False
    return True


def _all_clean_ids(items: list[str]) -> bool:
    """`_is_clean_id` of every item at once: printability is a property of each character."""
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


def _is_clean_id(value: str) -> bool:
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
        and _INT_ONLY.issuperset(map(type, numbers))
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
        if not _is_clean_id(doc_id):
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


def load_beir(
    directory: Path, *, qrels: Path | None = None, name: str | None = None
) -> GoldenQuestionSet:
    """Import a BEIR directory: ``queries.jsonl`` and ``qrels/test.tsv`` (or the given qrels).

    Grades come from the qrels' score column. A row with score 0 is judged not
    relevant; a negative score (Cranfield's -1) is read as 0, as trec_eval does.
    Queries without any qrels row are left out, as in BEIR's own evaluation.
    """
    qrels = qrels or directory / "qrels" / "test.tsv"
    queries_file = directory / "queries.jsonl"
    for required in (queries_file, qrels):
        if not required.exists():
            raise InputError(
                "missing file",
                source=str(required),
                hint="a BEIR directory has corpus.jsonl, queries.jsonl and qrels/test.tsv",
            )
    judgments: dict[str, dict[str, int]] = {}
    first_lines: dict[str, int] = {}
    for number, query_id, doc_id, grade in qrels_rows(qrels):
        for column, value in (("query-id", query_id), ("corpus-id", doc_id)):
            if not _is_clean_id(value):
                raise InputError(
                    f"id {value!r} is empty or has spaces or control characters",
                    source=str(qrels),
                    line=number,
                    field=column,
                )
        first_lines.setdefault(query_id, number)
        if grade > MAX_GRADE:
            raise InputError(
                f"score {grade} is above the largest grade, {MAX_GRADE}",
                source=str(qrels),
                line=number,
                field="score",
            )
        judgments.setdefault(query_id, {})[doc_id] = max(grade, 0)
    texts: dict[str, str] = {}
    clusters: dict[str, str] = {}
    query_lines: dict[str, int] = {}
    for number, line in enumerate(lines_of(read_text(queries_file)), start=1):
        if not line.strip():
            continue
        try:
            if len(line) > MAX_LINE_BYTES:
                raise line_too_long(len(line), source=str(queries_file), line=number)
            record = _parse_json(line)
            query_text = record["text"]
            query_id = record["_id"]
        except DuplicateKey as error:
            raise InputError(
                "the key appears twice in one object",
                source=str(queries_file),
                line=number,
                field=error.key,
            ) from None
        except (json.JSONDecodeError, KeyError, TypeError, RecursionError) as error:
            raise InputError(
                f"expected a JSON object with _id and text ({type(error).__name__}: {error})",
                source=str(queries_file),
                line=number,
            ) from None
        if not isinstance(query_id, str) or not _is_clean_id(query_id):
            # As a JSON Lines question's id: str(None) or str(7) would be an id no qrels
            # row ever names, and the question would be dropped without a word.
            raise InputError(
                "must be a non-empty string without spaces or control characters, got "
                f"{query_id!r}",
                source=str(queries_file),
                line=number,
                field="_id",
            )
        if query_id in query_lines:
            raise InputError(
                f"query id '{query_id}' appears again; first on line {query_lines[query_id]}",
                source=str(queries_file),
                line=number,
                field="_id",
                hint="ids must be unique within queries.jsonl",
            )
        query_lines[query_id] = number
        texts[query_id] = query_text
        cluster = _beir_cluster(record, str(queries_file), number)
        if cluster is not None:
            clusters[query_id] = cluster
        if not isinstance(query_text, str) or not query_text.strip():
            raise InputError(
                f"must be the query as a non-empty string, got {query_text!r}",
                source=str(queries_file),
                line=number,
                field="text",
            )
        if len(query_text) > MAX_QUESTION_CHARS:
            raise InputError(
                f"is {len(query_text)} characters long; the limit is {MAX_QUESTION_CHARS}",
                source=str(queries_file),
                line=number,
                field="text",
                hint="a golden question is a question, not a document",
            )
        problem = unsafe_character(query_text, free_text=True)
        if problem is not None:
            raise InputError(
                f"holds a {problem}", source=str(queries_file), line=number, field="text"
            )
    missing = [query_id for query_id in judgments if query_id not in texts]
    if missing:
        raise InputError(
            f"query id '{missing[0]}' is judged but not in {queries_file.name}",
            source=str(qrels),
            line=first_lines[missing[0]],
        )
    if not judgments:
        raise InputError(
            "no judged queries: the qrels file holds no rows",
            source=str(qrels),
            hint="one row per judgment: query-id, corpus-id, score",
        )
    questions = []
    for query_id in sorted(judgments, key=_natural_key):
        labels = judgments[query_id]
        questions.append(
            GoldenQuestion(
                id=query_id,
                question=texts[query_id],
                expected=[doc for doc, grade in labels.items() if grade >= 1],
                grades={doc: grade for doc, grade in labels.items() if grade != 1},
                cluster=clusters.get(query_id),
            )
        )
    split = qrels.stem
    set_name = name or (directory.name if split == "test" else f"{directory.name}-{split}")
    return GoldenQuestionSet(name=set_name, questions=questions, source=str(qrels))


def _beir_cluster(record: Mapping[str, Any], source: str, line: int) -> str | None:
    """A BEIR query's cluster: its ``cluster`` key, or ``metadata.cluster``."""
    metadata = record.get("metadata")
    cluster = record.get("cluster")
    if cluster is None and isinstance(metadata, Mapping):
        cluster = metadata.get("cluster")

    def fail(message: str, field: str | None = None, hint: str | None = None) -> InputError:
        return InputError(message, source=source, line=line, field=field, hint=hint)

    return _parse_cluster(cluster, fail)


def _natural_key(value: str) -> tuple[int, int | str]:
    # ASCII digits only: '²'.isdigit() holds, and int('²') raises.
    return (0, int(value)) if value.isascii() and value.isdigit() else (1, value)


def check_provided_set(golden: GoldenQuestionSet, provider: str) -> GoldenQuestionSet:
    """Hold a set a plugin built in code to the rules a set file is held to.

    Each question goes through the same checks as a line of a JSON Lines file (empty
    text, an expected id graded 0, an id listed twice, ...), and ids must be unique; a
    failure names the provider, the set, the question and the field.
    """
    source = f"question set '{golden.name}' from {provider}"
    if not golden.questions:
        raise InputError(
            "holds no questions", source=source, hint="a provider's load() must return questions"
        )
    seen: dict[str, int] = {}
    for number, question in enumerate(golden.questions, start=1):
        where = f"{source}, question {number}"
        try:
            data = question_record(question)
        except Exception as error:
            raise InputError(
                f"is not a valid question: {type(error).__name__}: {error}", source=where
            ) from None
        parse_question(data, source=where)
        if question.id in seen:
            raise InputError(
                f"duplicate id '{question.id}', first used by question {seen[question.id]}",
                source=where,
                field="id",
                hint="ids must be unique within a set",
            )
        seen[question.id] = number
    from retrievalkit.formats.ids import canonical_set

    return canonical_set(golden)


def question_record(question: GoldenQuestion) -> dict[str, Any]:
    """A question as one JSON Lines object: fields in the documented order, empty ones left out.

    ``expected`` is always written (an empty list declares a no-answer question).
    """
    from retrievalkit.formats.convert import unstructure

    data = unstructure(question)
    return {
        field: data[field]
        for field in _KNOWN_FIELDS
        if field == "expected" or data.get(field) not in (None, {}, [])
    }


def write_jsonl(questions: Iterable[GoldenQuestion], path: Path) -> None:
    """Write a golden set file that `load_jsonl` reads back unchanged.

    The file is written beside its target and renamed over it, so a failure never
    leaves half a set behind.
    """
    from retrievalkit.formats.files import output_error, write_file

    lines = [json.dumps(question_record(q), ensure_ascii=False) + "\n" for q in questions]
    directory = path.parent if str(path.parent) else Path(".")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        write_file(path, "".join(lines))
    except OSError as error:
        raise output_error(error, path, "--output", "the set") from None
