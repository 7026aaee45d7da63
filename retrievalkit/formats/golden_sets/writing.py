"""Golden sets written as JSON Lines, in the form the reader reads."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from retrievalkit.formats.golden_sets.text import KNOWN_FIELDS
from retrievalkit.model.values import GoldenQuestion


def question_record(question: GoldenQuestion) -> dict[str, Any]:
    """A question as one JSON Lines object: fields in the documented order, empty ones left out.

    ``expected`` is always written (an empty list declares a no-answer question).
    """
    from retrievalkit.formats.convert import unstructure

    data = unstructure(question)
    return {
        field: data[field]
        for field in KNOWN_FIELDS
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
