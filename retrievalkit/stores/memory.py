"""An in-process store (``memory:``), for tests and one-off runs that keep nothing.

It keeps each run in the stored form of every retrievalkit store (a summary and its
outcome columns, `retrievalkit.stores.serialization`), so a record read back is a new
value whose outcomes load by column, exactly as from a store on disk.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import attrs

from retrievalkit.errors import StoreError
from retrievalkit.model.records import GRADER, ResultRecord
from retrievalkit.stores import RunCheck, check_whole
from retrievalkit.stores.serialization import (
    dump_columns,
    dump_summary,
    load_summary,
    verify_stored,
)


@attrs.frozen
class _Stored:
    run_id: str
    key: tuple[str, str, str]
    summary: str
    columns: dict[str, bytes]


_SHARED: dict[str, MemoryStore] = {}
_LOCK = threading.Lock()


class MemoryStore:
    """Runs kept in a list for the life of the process; ``memory:NAME`` stores are shared."""

    def __init__(self, url: str = "memory:") -> None:
        self.url = url
        self._records: list[_Stored] = []
        self._pins: dict[tuple[str, str, str], str] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_url(cls, url: str) -> MemoryStore:
        with _LOCK:
            return _SHARED.setdefault(url, cls(url))

    def save(self, record: ResultRecord) -> None:
        columns = dump_columns(record)
        stored = _Stored(record.run_id, record.key, dump_summary(record, columns), columns)
        with self._lock:
            if any(existing.run_id == record.run_id for existing in self._records):
                raise StoreError(f"run {record.run_id} is already stored in {self.url}")
            self._records.append(stored)

    def _read(self, stored: _Stored) -> ResultRecord:
        return load_summary(
            stored.summary, stored.columns.__getitem__, where=f"{self.url} run {stored.run_id}"
        )

    def runs(self, set_name: str, model: str, grader: str = GRADER) -> list[ResultRecord]:
        wanted = (set_name, model, grader)
        with self._lock:
            found = [stored for stored in reversed(self._records) if stored.key == wanted]
        return [self._read(stored) for stored in found]

    def get(self, run_id: str) -> ResultRecord | None:
        with self._lock:
            found = next((stored for stored in self._records if stored.run_id == run_id), None)
        return None if found is None else self._read(found)

    def all_runs(self) -> list[ResultRecord]:
        with self._lock:
            found = list(reversed(self._records))
        return [self._read(stored) for stored in found]

    def verify_runs(self) -> list[RunCheck]:
        """Every run read whole and checked against its digest, newest first."""
        with self._lock:
            found = list(reversed(self._records))
        return [
            check_whole(
                stored.run_id,
                self.url,
                lambda stored=stored: verify_stored(
                    stored.summary,
                    stored.columns.__getitem__,
                    where=f"{self.url} run {stored.run_id}",
                ),
                stored.key,
            )
            for stored in found
        ]

    def pin(self, record: ResultRecord) -> str | None:
        with self._lock:
            if not any(existing.run_id == record.run_id for existing in self._records):
                raise StoreError(f"run {record.run_id} is not stored in {self.url}")
            before = self._pins.get(record.key)
            self._pins[record.key] = record.run_id
            return before

    def unpin(self, set_name: str, model: str, grader: str = GRADER) -> str | None:
        with self._lock:
            return self._pins.pop((set_name, model, grader), None)

    def pinned(self, set_name: str, model: str, grader: str = GRADER) -> str | None:
        with self._lock:
            return self._pins.get((set_name, model, grader))

    def delete(self, run_ids: Sequence[str]) -> int:
        wanted = set(run_ids)
        with self._lock:
            pinned = sorted(wanted & set(self._pins.values()))
            if pinned:
                raise StoreError(
                    f"run {pinned[0]} is a pinned baseline in {self.url}; unpin it first "
                    "(retrievalkit baseline unpin); nothing was deleted"
                )
            kept = [record for record in self._records if record.run_id not in wanted]
            deleted = len(self._records) - len(kept)
            self._records = kept
            return deleted
