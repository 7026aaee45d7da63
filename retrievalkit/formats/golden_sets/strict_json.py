"""JSON decoded strictly: a key named twice in one object is an error, not the last value."""

from __future__ import annotations

import json
from typing import Any


def parse_json(text: str) -> Any:
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
