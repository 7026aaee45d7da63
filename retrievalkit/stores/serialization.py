"""Records to and from the forms stores keep, with schema versions checked on the way in.

Two stored forms:

- **summary + columns** (schema 3, what the stores of retrievalkit write): `dump_summary`
  gives the record without its per-question outcomes, as one JSON text holding the
  outcomes' header (`retrievalkit.model.outcomes.Outcomes.header`) under ``outcomes``, and
  `dump_columns` the outcome columns as ``name -> bytes``. `load_summary` reads a
  summary back with outcomes that load each column from the store only when first
  used, so listing, history and baseline choice read summaries only;
- **one JSON document** (`dump_record` / `load_record`): the record with its outcomes
  and items inline, as the JSON export shows it, for stores that keep one document
  a run. It reads records of every schema.

A record older than `retrievalkit.model.values.SCHEMA_VERSION` is upgraded step by step
through `MIGRATIONS` before it is built; a newer one is refused with a message
that says to upgrade retrievalkit, never misread. A store holding records of schema 2
or older (one JSON document each) migrates them by `load_record` and then writing
`dump_summary` and `dump_columns` of the result.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from retrievalkit.errors import StoreError
from retrievalkit.formats.convert import (
    converter,
    describe_structure_error,
    structure,
    to_json,
    unstructure_summary,
)
from retrievalkit.model.outcomes import Outcomes
from retrievalkit.model.values import SCHEMA_VERSION, LazySlices, MetricValue, ResultRecord

Migration = Callable[[dict[str, Any]], dict[str, Any]]
_SLICES = Mapping[str, Mapping[str, Mapping[str, MetricValue]]]


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


def _derive_items(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 2 -> 3: items are derived from the outcomes' hit@1 and hit@3, not stored.

    They always were those two columns, so the stored list is dropped unread. The
    outcomes stay inline in a one-document record; the stores of retrievalkit rewrite
    them by column (`dump_summary`, `dump_columns`) when they migrate.
    """
    data.pop("items", None)
    return data


#: The upgrade of a stored record's plain data from schema ``n`` to ``n + 1``, under key
#: ``n``. Whoever bumps SCHEMA_VERSION adds the step here, and a fixture of the old schema
#: under tests/fixtures/, so that every store written before keeps opening.
MIGRATIONS: dict[int, Migration] = {1: _name_interval_methods, 2: _derive_items}


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
    """One line of canonical JSON (sorted keys), outcomes and items inline."""
    return to_json(record)


def _version(data: Any, where: str) -> int:
    version = data.get("schema_version", 1) if isinstance(data, dict) else None
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise StoreError(f"{where}: stored record has no valid schema_version")
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{where}: record schema {version} is newer than this retrievalkit understands "
            f"({SCHEMA_VERSION}); upgrade retrievalkit to read it"
        )
    return version


def _parse(text: str | bytes, where: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as error:
        raise StoreError(f"{where}: stored record is not JSON: {error}") from None


def _structure(data: Any, where: str) -> ResultRecord:
    try:
        return structure(data, ResultRecord)
    except StoreError:
        raise
    except Exception as error:
        raise StoreError(
            f"{where}: stored record cannot be read: {describe_structure_error(error)}"
        ) from None


def load_record(text: str, *, where: str) -> ResultRecord:
    """A record from its one-document JSON; a newer schema than this retrievalkit is an error."""
    data: Any = json.loads(text)
    version = _version(data, where)
    return _structure(migrate(data, version, where=where), where)


def _canonical(data: Any) -> str:
    return json.dumps(
        data, sort_keys=True, ensure_ascii=False, allow_nan=False, separators=(",", ":")
    )


def dump_summary(record: ResultRecord) -> str:
    """The record without outcomes and items, with the outcomes' header: canonical JSON."""
    data = unstructure_summary(record)
    data["outcomes"] = record.outcomes.header()
    return _canonical(data)


def dump_summary_parts(record: ResultRecord) -> tuple[str, bytes]:
    """`dump_summary` in two parts: the summary without ``slices``, and the slices' JSON.

    A store that keeps the slices apart (they are most of a summary's bytes) reads them
    back only when a record's slices are used: pass them to `load_summary` as
    ``slices``.
    """
    data = unstructure_summary(record)
    data["outcomes"] = record.outcomes.header()
    slices = data.pop("slices")
    return _canonical(data), _canonical(slices).encode("utf-8")


def dump_columns(record: ResultRecord) -> dict[str, bytes]:
    """The record's outcome columns, ``name -> bytes``, to store beside `dump_summary`."""
    return record.outcomes.to_columns()


def load_summary(
    text: str | bytes,
    load_column: Callable[[str], bytes],
    *,
    where: str,
    slices: Callable[[], bytes] | None = None,
) -> ResultRecord:
    """A record from `dump_summary`'s text, its outcomes read through ``load_column``.

    ``load_column(name)`` returns the bytes `dump_columns` gave for ``name``; it is called
    only when a column is first read (the question count and the errored count come
    from the summary). Errors name ``where``; a column that cannot be read raises
    `retrievalkit.errors.StoreError` when it is first used.

    ``slices``: for a summary stored in the two parts of `dump_summary_parts` (one
    without ``slices``), returns the second; it is called when the record's slices are
    first used.
    """
    data: Any = _parse(text, where)
    version = _version(data, where)
    header = data.get("outcomes")
    if version < 3 or not isinstance(header, dict):
        raise StoreError(
            f"{where}: stored summary has no outcomes header (a record of schema {version} "
            "is one JSON document: read it with load_record)"
        )
    apart = slices is not None and "slices" not in data
    if apart:
        data["slices"] = {}
    data = migrate(data, version, where=where)
    data["outcomes"] = Outcomes.from_columns(data["outcomes"], load_column, where=where)
    record = _structure(data, where)
    if slices is None or not apart:
        return record
    return attrs.evolve(record, slices=LazySlices(lambda: _load_slices(slices, version, where)))


def _load_slices(load: Callable[[], bytes], version: int, where: str) -> Any:
    """Slices stored apart, upgraded as their record's would be, then checked."""
    data = migrate(
        {"schema_version": version, "slices": _parse(load(), where)}, version, where=where
    )
    try:
        return converter.structure(data["slices"], _SLICES)  # type: ignore[type-abstract]
    except Exception as error:
        raise StoreError(
            f"{where}: stored slices cannot be read: {describe_structure_error(error)}"
        ) from None
