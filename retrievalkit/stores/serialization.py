"""Records to and from the text stores keep, with schema versions checked on the way in.

A record older than `retrievalkit.model.SCHEMA_VERSION` is upgraded step by step
through `MIGRATIONS` before it is built; a newer one is refused with a message
that says to upgrade retrievalkit, never misread.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from retrievalkit.convert import describe_structure_error, structure, to_json
from retrievalkit.errors import StoreError
from retrievalkit.model import SCHEMA_VERSION, ResultRecord

Migration = Callable[[dict[str, Any]], dict[str, Any]]


def _name_interval_methods(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 1 -> 2: every interval of a schema-1 record was a percentile bootstrap."""

    def named(value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        return {**value, "method": "percentile" if value.get("ci") is not None else None}

    metrics = data.get("metrics")
    if isinstance(metrics, dict):
        data["metrics"] = {name: named(value) for name, value in metrics.items()}
    slices = data.get("slices")
    if isinstance(slices, dict):
        data["slices"] = {
            field: {
                label: {name: named(value) for name, value in table.items()}
                if isinstance(table, dict)
                else table
                for label, table in labels.items()
            }
            if isinstance(labels, dict)
            else labels
            for field, labels in slices.items()
        }
    return data


#: The upgrade of a stored record's plain data from schema ``n`` to ``n + 1``, under key
#: ``n``. Whoever bumps SCHEMA_VERSION adds the step here, and a fixture of the old schema
#: under tests/fixtures/, so that every store written before keeps opening.
MIGRATIONS: dict[int, Migration] = {1: _name_interval_methods}


def migrate(data: dict[str, Any], version: int, *, where: str) -> dict[str, Any]:
    """``data`` of schema ``version`` upgraded to the current schema, one step at a time."""
    while version < SCHEMA_VERSION:
        step = MIGRATIONS.get(version)
        if step is None:
            raise StoreError(
                f"{where}: no migration from record schema {version} to {version + 1} "
                f"(this retrievalkit writes schema {SCHEMA_VERSION})"
            )
        data = step(dict(data))
        version += 1
        data["schema_version"] = version
    return data


def dump_record(record: ResultRecord) -> str:
    """One line of canonical JSON (sorted keys), the same in every store."""
    return to_json(record)


def load_record(text: str, *, where: str) -> ResultRecord:
    """A record from its stored JSON; a newer schema than this retrievalkit is an error."""
    data: Any = json.loads(text)
    version = data.get("schema_version", 1) if isinstance(data, dict) else None
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise StoreError(f"{where}: stored record has no valid schema_version")
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{where}: record schema {version} is newer than this retrievalkit understands "
            f"({SCHEMA_VERSION}); upgrade retrievalkit to read it"
        )
    data = migrate(data, version, where=where)
    try:
        return structure(data, ResultRecord)
    except Exception as error:
        raise StoreError(
            f"{where}: stored record cannot be read: {describe_structure_error(error)}"
        ) from None
