"""Golden sets from TOML: ``[[questions]]`` tables, each error naming its question and field."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from retrievalkit.errors import InputError
from retrievalkit.formats.text_files import lines_of, read_text, toml_error_line
from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib
from retrievalkit.formats.golden_sets.questions import parse_question
from retrievalkit.formats.golden_sets.text import unsafe_character

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
