"""An in-process store (``memory:``), for tests and one-off runs that keep nothing."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from retrievalkit.errors import StoreError
from retrievalkit.model import GRADER, ResultRecord

_SHARED: dict[str, MemoryStore] = {}
_LOCK = threading.Lock()


class MemoryStore:
    """Runs kept in a list for the life of the process; ``memory:NAME`` stores are shared."""

    def __init__(self, url: str = "memory:") -> None:
        self.url = url
        self._records: list[ResultRecord] = []
        self._pins: dict[tuple[str, str, str], str] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_url(cls, url: str) -> MemoryStore:
        with _LOCK:
            return _SHARED.setdefault(url, cls(url))

    def save(self, record: ResultRecord) -> None:
        with self._lock:
            if any(existing.run_id == record.run_id for existing in self._records):
                raise StoreError(f"run {record.run_id} is already stored in {self.url}")
            self._records.append(record)

    def runs(self, set_name: str, model: str, grader: str = GRADER) -> list[ResultRecord]:
        return [record for record in self.all_runs() if record.key == (set_name, model, grader)]

    def get(self, run_id: str) -> ResultRecord | None:
        return next((record for record in self._records if record.run_id == run_id), None)

    def all_runs(self) -> list[ResultRecord]:
        with self._lock:
            return list(reversed(self._records))

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
