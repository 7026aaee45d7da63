"""The default store: one SQLite file in WAL mode, one transaction per run.

Every write (save, pin, unpin, delete) is one ``BEGIN IMMEDIATE`` transaction: the
write lock is taken before the checks are read, so a pin can never point at a run that
a concurrent prune deleted between the check and the write.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from retrievalkit.errors import StoreBusyError, StoreError
from retrievalkit.model import GRADER, ResultRecord
from retrievalkit.stores import (
    DEFAULT_STORE_URL,
    check_parent,
    lock_timeout,
    not_a_regular_file,
    path_from_url,
    read_only_reason,
)
from retrievalkit.stores.serialization import dump_record, load_record

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL UNIQUE,
    set_name TEXT NOT NULL,
    model TEXT NOT NULL,
    grader TEXT NOT NULL,
    created_at TEXT NOT NULL,
    schema_version INTEGER NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_by_key ON runs (set_name, model, grader, seq);
CREATE TABLE IF NOT EXISTS pins (
    set_name TEXT NOT NULL,
    model TEXT NOT NULL,
    grader TEXT NOT NULL,
    run_id TEXT NOT NULL,
    PRIMARY KEY (set_name, model, grader)
);
"""


class SQLiteStore:
    """Runs as rows of one table; each record's canonical JSON is kept whole in a column."""

    def __init__(self, path: Path, *, url: str | None = None) -> None:
        self.path = path
        self.url = url or f"sqlite:///{path}"
        self.timeout = lock_timeout()
        try:
            # isolation_level=None: transactions are begun here, explicitly and IMMEDIATE.
            self._connection = sqlite3.connect(
                path, timeout=self.timeout, check_same_thread=False, isolation_level=None
            )
            self._connection.execute("PRAGMA journal_mode=WAL")
            self._connection.execute("PRAGMA synchronous=NORMAL")
            with self._transaction("open"):
                for statement in filter(str.strip, _SCHEMA.split(";")):
                    self._connection.execute(statement)
        except sqlite3.Error as error:
            self._busy(error, "open")
            reason = read_only_reason(path)
            raise StoreError(
                f"cannot open store {self.url}: {error}" + (f" ({reason})" if reason else "")
            ) from None

    def _busy(self, error: sqlite3.Error, action: str) -> None:
        """Raise StoreBusyError (exit code 3) when ``error`` is another process's lock."""
        text = str(error).lower()
        if "locked" in text or "busy" in text:
            raise StoreBusyError(
                f"cannot {action} {self.url}: another process held its lock for more than "
                f"{self.timeout:g} s; nothing was changed (try again, or raise "
                "RETRIEVALKIT_STORE_TIMEOUT)"
            ) from None

    @contextmanager
    def _transaction(self, action: str) -> Iterator[sqlite3.Connection]:
        """One write transaction holding the write lock from its first statement."""
        try:
            self._connection.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as error:
            self._busy(error, action)
            raise
        try:
            yield self._connection
        except BaseException:
            self._connection.execute("ROLLBACK")
            raise
        try:
            self._connection.execute("COMMIT")
        except sqlite3.Error as error:
            self._connection.execute("ROLLBACK")
            self._busy(error, action)
            raise

    def check_can_write(self) -> None:
        """Take the write lock and let it go: a locked store fails now, before any work."""
        try:
            with self._transaction("write to"):
                pass
        except sqlite3.Error as error:
            raise StoreError(f"cannot write {self.url}: {error}") from None

    @classmethod
    def from_url(cls, url: str) -> SQLiteStore:
        path = path_from_url(url, "sqlite")
        check_parent(path, url, create=url == DEFAULT_STORE_URL)
        if path.is_dir():
            raise StoreError(f"store {url!r} names a folder; name a .sqlite3 file")
        odd = not_a_regular_file(path)
        if odd is not None:
            raise StoreError(f"store {url!r} names {odd}; name a .sqlite3 file")
        return cls(path, url=url)

    def save(self, record: ResultRecord) -> None:
        try:
            with self._transaction("save to"):
                self._connection.execute(
                    "INSERT INTO runs (run_id, set_name, model, grader, created_at,"
                    " schema_version, record) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        record.run_id,
                        record.set,
                        record.model,
                        record.grader,
                        record.manifest.created_at,
                        record.schema_version,
                        dump_record(record),
                    ),
                )
        except sqlite3.IntegrityError:
            raise StoreError(f"run {record.run_id} is already stored in {self.url}") from None
        except sqlite3.Error as error:
            raise StoreBusyError(f"cannot save to {self.url}: {error}; nothing was saved") from None

    def _select(self, where: str = "", parameters: tuple[str, ...] = ()) -> list[ResultRecord]:
        try:
            rows = self._connection.execute(
                f"SELECT seq, record FROM runs {where} ORDER BY seq DESC", parameters
            ).fetchall()
        except sqlite3.Error as error:
            raise StoreError(f"cannot read {self.url}: {error}") from None
        return [self._load(text, seq) for seq, text in rows]

    def _load(self, text: str, seq: int) -> ResultRecord:
        try:
            return load_record(text, where=f"{self.url} row {seq}")
        except json.JSONDecodeError as error:
            # Rows are written in one transaction, so this is damage from outside retrievalkit.
            raise StoreError(
                f"{self.url} row {seq}: the stored run is not JSON ({error})"
            ) from None

    def runs(self, set_name: str, model: str, grader: str = GRADER) -> list[ResultRecord]:
        return self._select(
            "WHERE set_name = ? AND model = ? AND grader = ?", (set_name, model, grader)
        )

    def get(self, run_id: str) -> ResultRecord | None:
        found = self._select("WHERE run_id = ?", (run_id,))
        return found[0] if found else None

    def all_runs(self) -> list[ResultRecord]:
        return self._select()

    def pin(self, record: ResultRecord) -> str | None:
        try:
            with self._transaction("pin in"):
                stored = self._connection.execute(
                    "SELECT 1 FROM runs WHERE run_id = ?", (record.run_id,)
                ).fetchone()
                if stored is None:
                    raise StoreError(f"run {record.run_id} is not stored in {self.url}")
                before = self._pinned(record.set, record.model, record.grader)
                self._connection.execute(
                    "INSERT OR REPLACE INTO pins (set_name, model, grader, run_id)"
                    " VALUES (?, ?, ?, ?)",
                    (record.set, record.model, record.grader, record.run_id),
                )
        except sqlite3.Error as error:
            raise StoreError(f"cannot pin in {self.url}: {error}; nothing changed") from None
        return before

    def unpin(self, set_name: str, model: str, grader: str = GRADER) -> str | None:
        try:
            with self._transaction("unpin in"):
                before = self._pinned(set_name, model, grader)
                self._connection.execute(
                    "DELETE FROM pins WHERE set_name = ? AND model = ? AND grader = ?",
                    (set_name, model, grader),
                )
        except sqlite3.Error as error:
            raise StoreError(f"cannot unpin in {self.url}: {error}; nothing changed") from None
        return before

    def pinned(self, set_name: str, model: str, grader: str = GRADER) -> str | None:
        try:
            return self._pinned(set_name, model, grader)
        except sqlite3.Error as error:
            raise StoreError(f"cannot read {self.url}: {error}") from None

    def _pinned(self, set_name: str, model: str, grader: str) -> str | None:
        row = self._connection.execute(
            "SELECT run_id FROM pins WHERE set_name = ? AND model = ? AND grader = ?",
            (set_name, model, grader),
        ).fetchone()
        return None if row is None else str(row[0])

    def delete(self, run_ids: Sequence[str]) -> int:
        wanted = list(dict.fromkeys(run_ids))
        if not wanted:
            return 0
        marks = ", ".join("?" * len(wanted))
        try:
            with self._transaction("delete from"):
                pinned = self._connection.execute(
                    f"SELECT run_id FROM pins WHERE run_id IN ({marks})", wanted
                ).fetchone()
                if pinned is not None:
                    raise StoreError(
                        f"run {pinned[0]} is a pinned baseline in {self.url}; unpin it first "
                        "(retrievalkit baseline unpin); nothing was deleted"
                    )
                deleted = self._connection.execute(
                    f"DELETE FROM runs WHERE run_id IN ({marks})", wanted
                ).rowcount
        except sqlite3.Error as error:
            raise StoreError(f"cannot delete from {self.url}: {error}; nothing deleted") from None
        return int(deleted)
