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

A record older than `retrievalkit.model.records.SCHEMA_VERSION` is upgraded step by step
through `MIGRATIONS` before it is built; a newer one is refused with a message
that says to upgrade retrievalkit, never misread. A store holding records of schema 2
or older (one JSON document each) migrates them by `load_record` and then writing
`dump_summary` and `dump_columns` of the result.
"""

from __future__ import annotations

import hashlib
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
from retrievalkit.model.records import SCHEMA_VERSION, ResultRecord
from retrievalkit.model.values import LazySlices, MetricValue
from retrievalkit.stores.columns import columns_header, decode_columns, encode_columns

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


#: The key of a stored summary that holds its content digest (`seal`).
DIGEST_KEY = "digest"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def seal(
    data: dict[str, Any], columns: Mapping[str, bytes], slices: bytes | None = None
) -> dict[str, Any]:
    """``data`` (a summary's plain data) with its content digest under `DIGEST_KEY`.

    The digest holds the SHA-256 of the summary's canonical JSON (without the digest),
    of each outcome column's bytes and, for a summary stored in two parts
    (`dump_summary_parts`), of the slices' bytes. `load_summary` checks the summary when
    it is read and each column when it is first loaded; a stored run changed afterwards
    (a value edited by hand, a column file swapped) is a `DamagedRun` naming the run.
    """
    digest: dict[str, Any] = {
        "algorithm": "sha256",
        "summary": _sha256(_canonical(data).encode("utf-8")),
        "columns": {name: _sha256(value) for name, value in sorted(columns.items())},
    }
    if slices is not None:
        digest["slices"] = _sha256(slices)
    return {**data, DIGEST_KEY: digest}


def dump_summary(record: ResultRecord, columns: Mapping[str, bytes] | None = None) -> str:
    """The record without outcomes and items, with the outcomes' header and the content
    digest of the run (`seal`): canonical JSON.

    ``columns``: the record's `dump_columns`, when the caller has them already (they are
    encoded again otherwise, for their digests).
    """
    data = unstructure_summary(record)
    data["outcomes"] = columns_header(record.outcomes)
    return _canonical(seal(data, dump_columns(record) if columns is None else columns))


def dump_summary_parts(
    record: ResultRecord, columns: Mapping[str, bytes] | None = None
) -> tuple[str, bytes]:
    """`dump_summary` in two parts: the summary without ``slices``, and the slices' JSON.

    A store that keeps the slices apart (they are most of a summary's bytes) reads them
    back only when a record's slices are used: pass them to `load_summary` as
    ``slices``. The digest of the first part covers the second.
    """
    data = unstructure_summary(record)
    data["outcomes"] = columns_header(record.outcomes)
    slices = _canonical(data.pop("slices")).encode("utf-8")
    sealed = seal(data, dump_columns(record) if columns is None else columns, slices)
    return _canonical(sealed), slices


def dump_columns(record: ResultRecord) -> dict[str, bytes]:
    """The record's outcome columns, ``name -> bytes``, to store beside `dump_summary`."""
    return encode_columns(record.outcomes)


class _Digest:
    """The digests a stored summary holds, checking what is read against them."""

    def __init__(self, stored: Any, run_id: str, where: str) -> None:
        self.run_id, self.where = run_id, where
        if not isinstance(stored, dict) or stored.get("algorithm") != "sha256":
            self._damaged("its content digest is not one retrievalkit writes")
        columns = stored.get("columns")
        if not isinstance(columns, dict) or not isinstance(stored.get("summary"), str):
            self._damaged("its content digest is incomplete")
        self.summary: str = stored["summary"]
        self.columns: dict[str, Any] = columns
        self.slices: Any = stored.get("slices")

    def _damaged(self, what: str) -> None:
        from retrievalkit.stores.consistency import DamagedRun

        raise DamagedRun(
            f"{self.where}: run {self.run_id} is damaged and cannot be trusted: {what} (the "
            "store was changed outside retrievalkit since the run was saved); restore the "
            "store from a backup, or delete the run (retrievalkit history --verify lists every "
            "damaged run)"
        )

    def check_summary(self, data: dict[str, Any]) -> None:
        if _sha256(_canonical(data).encode("utf-8")) != self.summary:
            self._damaged("its summary does not match the digest written when it was saved")

    def check_column(self, name: str, value: bytes) -> bytes:
        expected = self.columns.get(name)
        if expected is None:
            self._damaged(f"its outcome column '{name}' is not one it was saved with")
        if _sha256(value) != expected:
            self._damaged(f"its outcome column '{name}' does not match its digest")
        return value

    def check_slices(self, value: bytes) -> bytes:
        if self.slices is not None and _sha256(value) != self.slices:
            self._damaged("its slices do not match their digest")
        return value


def _unseal(data: dict[str, Any], where: str) -> _Digest | None:
    """Take the digest out of ``data`` (None for a run saved without one), checking the rest."""
    if DIGEST_KEY not in data:
        return None
    run_id = data.get("run_id")
    digest = _Digest(data.pop(DIGEST_KEY), run_id if isinstance(run_id, str) else "?", where)
    digest.check_summary(data)
    return digest


def has_digest(text: str | bytes) -> bool:
    """Whether a stored summary carries a content digest (runs saved before 0.5 do not)."""
    try:
        data = json.loads(text)
    except ValueError:
        return False
    return isinstance(data, dict) and DIGEST_KEY in data


def verify_stored(
    text: str | bytes,
    load_column: Callable[[str], bytes],
    *,
    where: str,
    slices: Callable[[], bytes] | None = None,
) -> bool:
    """Read a stored run whole and check it against its digest: every column, the slices.

    Returns whether the run had a digest (False: saved before digests, read unchecked
    beyond what loading it checks). Raises `retrievalkit.errors.StoreError` (a
    `DamagedRun` for a digest that does not match) naming the run.
    """
    data = _parse(text, where)
    record = load_summary(text, load_column, where=where, slices=slices)
    digest = _unseal(dict(data), where) if isinstance(data, dict) else None
    if digest is not None:
        for name in digest.columns:
            digest.check_column(name, load_column(name))
        if slices is not None:
            digest.check_slices(slices())
    # Decode every column and the slices: what reading them checks besides their digests.
    encode_columns(record.outcomes)
    dict(record.slices)
    return digest is not None


def _checked_slices(load: Callable[[], bytes], digest: _Digest) -> Callable[[], bytes]:
    return lambda: digest.check_slices(load())


def _checked_loader(
    load_column: Callable[[str], bytes], digest: _Digest | None
) -> Callable[[str], bytes]:
    if digest is None:
        return load_column

    def load(name: str) -> bytes:
        return digest.check_column(name, load_column(name))

    return load


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
    digest = _unseal(data, where)
    load_column = _checked_loader(load_column, digest)
    if digest is not None and slices is not None:
        slices = _checked_slices(slices, digest)
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
    data["outcomes"] = decode_columns(data["outcomes"], load_column, where=where)
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
