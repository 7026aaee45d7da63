"""The clicks log of an interleaving experiment: JSON Lines, one line per impression.

```json
{"impression": "i-1", "query": "renew passport", "teams": ["bm25", "dense"],
 "shown": [{"id": "doc-4", "team": "dense"}, {"id": "doc-9", "team": "bm25"}],
 "clicked": ["doc-9"]}
```

(one line in the file; wrapped here).

The ``interleave`` retriever writes every line but ``clicked`` (as ``[]``); the serving
system adds the documents clicked in that impression, joined on ``impression``. Every
mistake is an `InputError` naming the file, the line and the field.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from retrievalkit.errors import InputError
from retrievalkit.model.interleaving import SHARED, Impression, ShownDocument

FIELDS = ("impression", "query", "teams", "shown", "clicked")


def impression_line(impression: Impression) -> str:
    """The log line of ``impression`` (sorted keys, no newline)."""
    return json.dumps(
        {
            "impression": impression.impression,
            "query": impression.query,
            "teams": list(impression.teams),
            "shown": [{"id": shown.id, "team": shown.team} for shown in impression.shown],
            "clicked": list(impression.clicked),
        },
        sort_keys=True,
        ensure_ascii=False,
    )


def read_clicks(path: Path) -> Iterator[Impression]:
    """The impressions of the clicks log ``path``, in file order; blank lines are skipped."""
    from retrievalkit.formats.text_files import text_lines

    source = str(path)
    seen: dict[str, int] = {}
    teams: tuple[str, str] | None = None
    for number, text in enumerate(text_lines(path, "the clicks log"), 1):
        if not text.strip():
            continue
        impression = parse_impression(text, source=source, line=number)
        if impression.impression in seen:
            raise InputError(
                f"impression '{impression.impression}' is already on line "
                f"{seen[impression.impression]}",
                source=source,
                line=number,
                field="impression",
                hint="each impression is one line; merge its clicks into that line",
            )
        seen[impression.impression] = number
        if teams is None:
            teams = impression.teams
        elif impression.teams != teams:
            raise InputError(
                f"teams {list(impression.teams)} differ from {list(teams)} of the lines "
                "before: one log holds one experiment",
                source=source,
                line=number,
                field="teams",
                hint="split the log by experiment and credit each on its own",
            )
        yield impression


def parse_impression(text: str, *, source: str, line: int) -> Impression:
    """One line of a clicks log, checked."""

    def refuse(message: str, field: str | None = None, hint: str | None = None) -> InputError:
        return InputError(message, source=source, line=line, field=field, hint=hint)

    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise refuse(f"is not JSON: {error.msg} (column {error.colno})") from None
    if not isinstance(data, Mapping):
        raise refuse("must be a JSON object", hint="one impression per line: " + ", ".join(FIELDS))
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise refuse(
            f"unknown field {unknown[0]!r}", field=unknown[0], hint="fields: " + ", ".join(FIELDS)
        )
    for name in FIELDS:
        if name not in data:
            raise refuse("is missing", field=name)
    impression = _text(data["impression"], "impression", refuse)
    query = _text(data["query"], "query", refuse)
    teams = data["teams"]
    if (
        not isinstance(teams, list)
        or len(teams) != 2
        or not all(isinstance(team, str) and team.strip() for team in teams)
        or teams[0] == teams[1]
        or SHARED in teams
    ):
        raise refuse(
            f"must be the names of the two retrievers interleaved, got {_shown(teams)}",
            field="teams",
            hint=f'e.g. ["bm25", "dense"] (two different names, neither "{SHARED}")',
        )
    shown = data["shown"]
    if not isinstance(shown, list):
        raise refuse(f"must be a list of {{id, team}} objects, got {_shown(shown)}", "shown")
    documents: list[ShownDocument] = []
    ids: set[str] = set()
    for rank, entry in enumerate(shown, 1):
        field = f"shown[{rank - 1}]"
        if not isinstance(entry, Mapping) or set(entry) != {"id", "team"}:
            raise refuse(f"must be an object with id and team, got {_shown(entry)}", field)
        doc = _text(entry["id"], f"{field}.id", refuse)
        team = entry["team"]
        if team not in (*teams, SHARED):
            raise refuse(
                f"team {_shown(team)} is not one of the teams",
                f"{field}.team",
                hint=f"use {teams[0]!r}, {teams[1]!r} or {SHARED!r}",
            )
        if doc in ids:
            raise refuse(f"document '{doc}' is shown twice", f"{field}.id")
        ids.add(doc)
        documents.append(ShownDocument(doc, team))
    clicked = data["clicked"]
    if not isinstance(clicked, list):
        raise refuse(f"must be a list of document ids, got {_shown(clicked)}", "clicked")
    clicks: list[str] = []
    for index, doc in enumerate(clicked):
        doc = _text(doc, f"clicked[{index}]", refuse)
        if doc not in ids:
            raise refuse(
                f"document '{doc}' was clicked but is not among the shown documents",
                f"clicked[{index}]",
                hint="clicks are joined on the impression id: check the join",
            )
        if doc not in clicks:
            clicks.append(doc)
    return Impression(impression, query, (teams[0], teams[1]), tuple(documents), tuple(clicks))


def _text(value: Any, field: str, refuse: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise refuse(f"must be a non-empty string, got {_shown(value)}", field)
    return value


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if _jsonable(value) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True
