"""Records to and from the text stores keep, with schema versions checked on the way in."""

from __future__ import annotations

import json
from typing import Any

from retrievalkit.convert import describe_structure_error, structure, to_json
from retrievalkit.errors import StoreError
from retrievalkit.model import SCHEMA_VERSION, ResultRecord


def dump_record(record: ResultRecord) -> str:
    """One line of canonical JSON (sorted keys), the same in every store."""
    return to_json(record)


def load_record(text: str, *, where: str) -> ResultRecord:
    """A record from its stored JSON; a newer schema than this retrievalkit is an error."""
    data: Any = json.loads(text)
    version = data.get("schema_version", 1) if isinstance(data, dict) else None
    if not isinstance(version, int):
        raise StoreError(f"{where}: stored record has no valid schema_version")
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{where}: record schema {version} is newer than this retrievalkit understands "
            f"({SCHEMA_VERSION}); upgrade retrievalkit to read it"
        )
    try:
        return structure(data, ResultRecord)
    except Exception as error:
        raise StoreError(
            f"{where}: stored record cannot be read: {describe_structure_error(error)}"
        ) from None
