"""Reading a pool file (``retrievalkit pool --output``): the pairs queued for labelling.

One JSON object a line, best first: ``question_id``, ``question``, ``document``,
``priority`` and ``runs`` (``[{"run", "rank"}]``). Only the first three are needed to
judge a pair; ``priority`` and ``runs`` are read when present (and must then be a number
and a list of runs). Each problem is an `InputError` naming the file, the line and the
field.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

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
    priority: float | None = None
    """The pair's priority as the pool wrote it, None when the line has none."""
    runs: tuple[tuple[str, int], ...] = ()
    """(run id, rank) of each run that ranked the document, as the pool wrote them."""


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
        priority = _priority(data.get("priority"), source, number)
        runs = _runs(data.get("runs"), source, number)
        pairs.append(QueuedPair(question_id, question, document, number, priority, runs))
    return pairs


def _priority(value: Any, source: str, line: int) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InputError(
            f"must be a number, got {json.dumps(value)[:60]}",
            source=source,
            line=line,
            field="priority",
        )
    return float(value)


def _runs(value: Any, source: str, line: int) -> tuple[tuple[str, int], ...]:
    if value is None:
        return ()
    found = []
    for entry in value if isinstance(value, list) else [None]:
        run = entry.get("run") if isinstance(entry, Mapping) else None
        rank = entry.get("rank") if isinstance(entry, Mapping) else None
        if (
            not isinstance(run, str)
            or not run.strip()
            or isinstance(rank, bool)
            or not isinstance(rank, int)
            or rank < 1
        ):
            raise InputError(
                'must be a list of {"run": RUN_ID, "rank": N >= 1}, got ' + json.dumps(value)[:60],
                source=source,
                line=line,
                field="runs",
            )
        found.append((run, rank))
    return tuple(found)
