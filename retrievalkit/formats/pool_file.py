"""Reading a pool file (``retrievalkit pool --output``): the pairs queued for labelling.

One JSON object a line, best first: ``question_id``, ``question``, ``document``,
``priority`` and ``runs`` (``[{"run", "rank"}]``). Only the first three are needed to
judge a pair; each problem is an `InputError` naming the file, the line and the field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import attrs

from retrievalkit.errors import InputError

#: The fields a pool line must hold to be judged.
NEEDED = ("question_id", "question", "document")


@attrs.frozen
class QueuedPair:
    """One pair of a pool file, with the line it is on."""

    question_id: str
    question: str
    document: str
    line: int


def read_pool(path: Path) -> list[QueuedPair]:
    """The pairs of a pool file in its order, each (question, document) pair once."""
    from retrievalkit.formats.ids import canonical
    from retrievalkit.formats.labels import is_label_id
    from retrievalkit.formats.text_files import text_lines

    source = str(path)
    pairs: list[QueuedPair] = []
    seen: set[tuple[str, str]] = set()
    for number, text in enumerate(text_lines(path, "the pool"), start=1):
        if not text.strip():
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise InputError(
                f"is not JSON: {error.msg} (column {error.colno})",
                source=source,
                line=number,
                hint="a pool file is JSON Lines, as retrievalkit pool writes it",
            ) from None
        if not isinstance(data, Mapping):
            raise InputError("must be a JSON object", source=source, line=number)
        values = []
        for name in NEEDED:
            value = data.get(name)
            if not isinstance(value, str) or not value.strip():
                raise InputError(
                    f"must be a non-empty string, got {json.dumps(value)[:60]}",
                    source=source,
                    line=number,
                    field=name,
                )
            values.append(value)
        question_id, question, document = canonical(values[0]), values[1], canonical(values[2])
        for name, value in (("question_id", question_id), ("document", document)):
            if not is_label_id(value):
                raise InputError(
                    "must be an id without spaces or control characters (a labels file "
                    f"could not hold it), got {value[:60]!r}",
                    source=source,
                    line=number,
                    field=name,
                )
        if (question_id, document) in seen:
            continue
        seen.add((question_id, document))
        pairs.append(QueuedPair(question_id, question, document, number))
    return pairs
