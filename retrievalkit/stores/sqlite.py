"""The default store: one SQLite file in WAL mode, one transaction per run.

Layout (``PRAGMA user_version`` 1):

- ``runs``: one row per run: the key (``set_name``, ``model``, ``grader``), ``created_at``,
  the record's ``schema_version`` and, in ``record``, the run's summary JSON: everything
  but the per-question outcomes and the slices, plus the outcomes' small header
  (question count, errored count, metric and column names). ``seq`` is the save order;
  the index on (set_name, model, grader, seq) answers "the runs of this key, newest
  first".
- ``run_columns``: one row per (run, outcome column), the column's encoded bytes, and
  the row ``summary/slices``: the slices' JSON (most of a summary's bytes, which history
  never reads).

`runs`, `all_runs` and `get` read summaries only. The records they return load each
outcome column, and their slices, when first read, through a connection of its own (so
a record stays usable after its store is closed, from any thread); a column of a run
deleted meanwhile is a `StoreError`, never another run's data (``seq`` is never reused).

Every write (save, pin, unpin, delete) is one ``BEGIN IMMEDIATE`` transaction: the
write lock is taken before the checks are read, so a pin can never point at a run that
a concurrent prune deleted between the check and the write.

A file written before the column layout (user_version 0: each run's whole record JSON in
``runs.record``) is migrated when it is first opened for writing, in one transaction:
every run is rewritten as summary plus columns, or none is. A file this process may not
write is read as it is, without migrating.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from retrievalkit.errors import StoreBusyError, StoreError
from retrievalkit.formats.text_files import not_a_regular_file
from retrievalkit.model.records import GRADER, ResultRecord
from retrievalkit.stores import (
    DEFAULT_STORE_URL,
    RunCheck,
    StoredKey,
    check_parent,
    check_whole,
    lock_timeout,
    path_from_url,
    read_only_reason,
)
from retrievalkit.stores.serialization import (
    dump_columns,
    dump_summary_parts,
    load_record,
    load_summary,
    verify_stored,
)

log = logging.getLogger(__name__)

#: ``PRAGMA user_version`` of the layout this module writes: 1, summaries and columns.
#: 0 (a file written before) keeps each run's whole record JSON in ``runs.record``.
LAYOUT = 1
#: The first record schema whose stored form is a summary plus outcome columns.
COLUMNAR_SCHEMA = 3
#: The row of ``run_columns`` that holds a run's slices (outcome columns never have a '/'
#: after a first word other than ``metric``).
SLICES = "summary/slices"

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
CREATE TABLE IF NOT EXISTS run_columns (
    run_seq INTEGER NOT NULL,
    name TEXT NOT NULL,
    data BLOB NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS run_columns_by_run ON run_columns (run_seq, name);
CREATE TABLE IF NOT EXISTS pins (
    set_name TEXT NOT NULL,
    model TEXT NOT NULL,
    grader TEXT NOT NULL,
    run_id TEXT NOT NULL,
    PRIMARY KEY (set_name, model, grader)
);
"""


_DRIFT_TABLE = """
CREATE TABLE IF NOT EXISTS drift_records (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    drift_id TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    record TEXT NOT NULL
)
"""


class _ColumnReader:
    """Loads one stored run's outcome columns on demand, each through a fresh connection.

    It holds only the file's name and the run's identity (``seq`` and run id), so a
    record keeps loading after its store is closed, and from any thread.
    """

    __slots__ = ("_run_id", "_seq", "_uri", "_url")

    def __init__(self, uri: str, url: str, seq: int, run_id: str) -> None:
        self._uri, self._url, self._seq, self._run_id = uri, url, seq, run_id

    def __call__(self, name: str) -> bytes:
        what = f"column '{name}' of run {self._run_id}"
        try:
            connection = sqlite3.connect(self._uri, uri=True, timeout=lock_timeout())
        except sqlite3.Error as error:
            raise StoreError(f"cannot read the {what} from {self._url}: {error}") from None
        try:
            row = connection.execute(
                "SELECT c.data FROM run_columns AS c JOIN runs AS r ON r.seq = c.run_seq"
                " WHERE r.seq = ? AND r.run_id = ? AND c.name = ?",
                (self._seq, self._run_id, name),
            ).fetchone()
            stored = row is not None or (
                connection.execute(
                    "SELECT 1 FROM runs WHERE seq = ? AND run_id = ?", (self._seq, self._run_id)
                ).fetchone()
                is not None
            )
        except sqlite3.Error as error:
            raise StoreError(f"cannot read the {what} from {self._url}: {error}") from None
        finally:
            connection.close()
        if row is None and not stored:
            raise StoreError(
                f"run {self._run_id} is no longer in {self._url} (deleted or pruned after it "
                f"was read), so its column '{name}' cannot be loaded; read the run again"
            )
        if row is None:
            raise StoreError(
                f"{self._url} row {self._seq}: the {what} is missing (the file was changed "
                "outside retrievalkit)"
            )
        return bytes(row[0])


def _stored_form(record: ResultRecord) -> tuple[str, dict[str, bytes]]:
    """The summary row's JSON, and the blobs: the outcome columns and the slices."""
    columns = dump_columns(record)
    summary, slices = dump_summary_parts(record, columns)
    columns[SLICES] = slices
    return summary, columns


def _check_row(record: ResultRecord, where: str, run_id: str, key: Sequence[str]) -> None:
    """The row's own columns (what the index answers from) must say what its record says."""
    if not key:
        return
    stored = (run_id, *key)
    held = (
        record.run_id,
        record.set,
        record.model,
        record.grader,
        record.manifest.created_at,
    )
    names = ("run_id", "set_name", "model", "grader", "created_at")
    for name, row_value, value in zip(names, stored, held, strict=True):
        if row_value != value:
            from retrievalkit.stores.consistency import DamagedRun

            raise DamagedRun(
                f"{where}: run {record.run_id} is damaged and cannot be trusted: the row's "
                f"{name} is {row_value!r} but its stored record says {value!r} (the store was "
                "changed outside "
                "retrievalkit since the run was saved); restore the store from a backup, or "
                "delete the run (retrievalkit history --verify lists every damaged run)"
            )


def _file_identity(path: Path) -> tuple[int, int] | None:
    """The device and inode of the file at ``path`` (following symlinks), or None."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return (status.st_dev, status.st_ino)


#: Free bytes under which a write error of SQLite is taken for a full disk.
_NEARLY_FULL = 1 << 20


def _refuse_when_full(error: sqlite3.Error, url: str, action: str, path: Path) -> None:
    """Raise StoreBusyError (exit code 3) saying "disk full" when SQLite ran out of space.

    SQLite says so itself for ENOSPC; a write that failed otherwise ("disk I/O error",
    as when the -shm file cannot be grown) on a file system with almost no space left
    is the same cause.
    """
    text = str(error).lower()
    full = "disk is full" in text or "disk full" in text
    if not full and "i/o error" in text:
        try:
            usage = os.statvfs(path.parent if str(path.parent) else ".")
            full = usage.f_bavail * usage.f_frsize < _NEARLY_FULL
        except OSError:
            full = False
    if full:
        raise StoreBusyError(
            f"cannot {action} {url}: disk full ({error}); nothing was saved (free some space, "
            "or choose another --store)"
        ) from None


class SQLiteStore:
    """Runs as summary rows plus outcome column blobs in one SQLite file."""

    def __init__(self, path: Path, *, url: str | None = None) -> None:
        self.path = path
        self.url = url or f"sqlite:///{path}"
        self.timeout = lock_timeout()
        #: Why this store can only be read (a read-only file or folder), or None.
        self.read_only: str | None = None
        self._uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
        try:
            # isolation_level=None: transactions are begun here, explicitly and IMMEDIATE.
            self._connection = sqlite3.connect(
                path, timeout=self.timeout, check_same_thread=False, isolation_level=None
            )
            if self._layout() != LAYOUT:
                self._connection.execute("PRAGMA journal_mode=WAL")
                self._upgrade()
            self._connection.execute("PRAGMA synchronous=NORMAL")
            self.read_only = read_only_reason(path)
            self._identity = _file_identity(path)
        except sqlite3.Error as error:
            self._busy(error, "open")
            _refuse_when_full(error, self.url, "open", path)
            reason = read_only_reason(path)
            if reason is not None and path.is_file() and self._open_read_only(reason):
                return
            raise StoreError(
                f"cannot open store {self.url}: {error}" + (f" ({reason})" if reason else "")
            ) from None

    def _layout(self) -> int:
        (version,) = self._connection.execute("PRAGMA user_version").fetchone()
        return int(version)

    def _open_read_only(self, reason: str) -> bool:
        """Read a file this process may not write as it is (no migration); False if unreadable."""
        self._connection.close()
        # Without a -shm file beside it, and no right to create one, WAL reading needs
        # SQLite told that nobody writes the file: true of a file nobody may write.
        for uri in (self._uri, self._uri + "&immutable=1"):
            try:
                connection = sqlite3.connect(
                    uri, uri=True, timeout=self.timeout, check_same_thread=False
                )
                connection.execute("SELECT count(*) FROM runs").fetchone()
            except sqlite3.Error:
                continue
            self._connection, self._uri, self.read_only = connection, uri, reason
            log.info("store %s is read-only (%s): reading it without migrating", self.url, reason)
            return True
        return False

    def _upgrade(self) -> None:
        """Create the tables, or migrate a file of the earlier layout, in one transaction."""
        migrated = 0
        with self._transaction("open"):
            if self._layout() == LAYOUT:
                return  # another process got here first
            if self._layout() > LAYOUT:
                raise StoreError(
                    f"store {self.url} is of layout {self._layout()}, newer than this "
                    f"retrievalkit writes ({LAYOUT}); upgrade retrievalkit to use it"
                )
            for statement in filter(str.strip, _SCHEMA.split(";")):
                self._connection.execute(statement)
            migrated = self._migrate_rows()
            self._connection.execute(f"PRAGMA user_version = {LAYOUT}")
        if migrated:
            log.info("migrated %d runs of %s to summaries and columns", migrated, self.url)
            try:  # give back the space the inline outcomes took; another time if busy
                self._connection.execute("VACUUM")
            except sqlite3.Error as error:
                log.info("could not compact %s after migrating: %s", self.url, error)

    def _migrate_rows(self) -> int:
        """Rewrite each run stored whole (schema 1, 2) as summary plus columns."""
        old = self._connection.execute(
            "SELECT seq FROM runs WHERE schema_version < ? ORDER BY seq", (COLUMNAR_SCHEMA,)
        ).fetchall()
        migrated = 0
        for (seq,) in old:
            (text,) = self._connection.execute(
                "SELECT record FROM runs WHERE seq = ?", (seq,)
            ).fetchone()
            try:
                record = load_record(text, where=f"{self.url} row {seq}")
            except (StoreError, json.JSONDecodeError) as error:
                # Left as it is: reading it names the damage, as before the migration.
                log.warning("%s row %s was not migrated: %s", self.url, seq, error)
                continue
            summary, columns = _stored_form(record)
            self._connection.execute(
                "UPDATE runs SET record = ?, schema_version = ? WHERE seq = ?",
                (summary, record.schema_version, seq),
            )
            self._connection.execute("DELETE FROM run_columns WHERE run_seq = ?", (seq,))
            self._insert_columns(seq, columns)
            migrated += 1
        return migrated

    def _insert_columns(self, seq: int, columns: dict[str, bytes]) -> None:
        self._connection.executemany(
            "INSERT INTO run_columns (run_seq, name, data) VALUES (?, ?, ?)",
            [(seq, name, data) for name, data in columns.items()],
        )

    def _busy(self, error: sqlite3.Error, action: str) -> None:
        """Raise StoreBusyError (exit code 3) when ``error`` is another process's lock."""
        text = str(error).lower()
        if "locked" in text or "busy" in text:
            raise StoreBusyError(
                f"cannot {action} {self.url}: another process held its lock for more than "
                f"{self.timeout:g} s; nothing was changed (try again, or raise "
                "RETRIEVALKIT_STORE_TIMEOUT)"
            ) from None

    def _refuse_if_read_only(self, action: str) -> None:
        if self.read_only is not None:
            raise StoreError(f"cannot {action} {self.url}: {self.read_only}; nothing was changed")

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
            self._rollback()
            raise
        try:
            self._connection.execute("COMMIT")
        except sqlite3.Error as error:
            self._rollback()
            self._busy(error, action)
            raise

    def _rollback(self) -> None:
        """Roll back the open transaction, if SQLite has not already (it does so itself on
        a full disk): the error that caused it is the one reported, never the rollback's
        "no transaction is active"."""
        if not self._connection.in_transaction:
            return
        try:
            self._connection.execute("ROLLBACK")
        except sqlite3.Error as error:
            log.info("rolling back %s failed: %s", self.url, error)

    def check_can_write(self) -> None:
        """Take the write lock and let it go: a locked store fails now, before any work."""
        self._refuse_if_read_only("write to")
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

    def close(self) -> None:
        """Close the connection; records read from the store keep loading their columns."""
        self._connection.close()

    def save(self, record: ResultRecord) -> None:
        self._refuse_if_read_only("save to")
        summary, columns = _stored_form(record)
        try:
            with self._transaction("save to"):
                self._check_same_file()
                cursor = self._connection.execute(
                    "INSERT INTO runs (run_id, set_name, model, grader, created_at,"
                    " schema_version, record) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        record.run_id,
                        record.set,
                        record.model,
                        record.grader,
                        record.manifest.created_at,
                        record.schema_version,
                        summary,
                    ),
                )
                assert cursor.lastrowid is not None
                self._insert_columns(cursor.lastrowid, columns)
        except sqlite3.IntegrityError:
            raise StoreError(f"run {record.run_id} is already stored in {self.url}") from None
        except sqlite3.Error as error:
            _refuse_when_full(error, self.url, "save to", self.path)
            raise StoreBusyError(f"cannot save to {self.url}: {error}; nothing was saved") from None

    def _check_same_file(self) -> None:
        """Refuse to save into a file that is no longer the one at the store's path.

        SQLite keeps writing to the file it opened: deleted or replaced during the run
        (a cleanup step, a checkout), the run would be "saved" where nobody can read it.
        """
        now = _file_identity(self.path)
        if getattr(self, "_identity", None) is not None and now != self._identity:
            what = "deleted" if now is None else "replaced by another file"
            raise StoreBusyError(
                f"cannot save to {self.url}: the file {self.path} was {what} while the run "
                "was evaluated; the run was not saved (run again to save it)"
            )

    _ROW = "seq, run_id, schema_version, record, set_name, model, grader, created_at"

    def _select(self, where: str = "", parameters: tuple[str, ...] = ()) -> list[ResultRecord]:
        try:
            rows = self._connection.execute(
                f"SELECT {self._ROW} FROM runs {where} ORDER BY seq DESC", parameters
            ).fetchall()
        except sqlite3.Error as error:
            raise StoreError(f"cannot read {self.url}: {error}") from None
        return [self._load(*row) for row in rows]

    def _load(self, seq: int, run_id: str, schema: int, text: str, *key: str) -> ResultRecord:
        return self._read(seq, run_id, schema, text, key, verify=False)[0]

    def _read(
        self, seq: int, run_id: str, schema: int, text: str, key: Sequence[str], *, verify: bool
    ) -> tuple[ResultRecord, bool]:
        """The record of a row, and (``verify``: read whole and checked) whether it has a digest."""
        where = f"{self.url} row {seq}"
        digest = False
        try:
            if schema < COLUMNAR_SCHEMA:
                # Written whole: a file that could not be migrated (read-only), or a run
                # saved by an older retrievalkit since.
                record = load_record(text, where=where)
            else:
                reader = _ColumnReader(self._uri, self.url, seq, run_id)
                record = load_summary(text, reader, where=where, slices=lambda: reader(SLICES))
                if verify:
                    digest = verify_stored(text, reader, where=where, slices=lambda: reader(SLICES))
        except json.JSONDecodeError as error:
            # Rows are written in one transaction, so this is damage from outside retrievalkit.
            raise StoreError(
                f"{self.url} row {seq}: the stored run is not JSON ({error})"
            ) from None
        _check_row(record, where, run_id, key)
        return record, digest

    def verify_runs(self) -> list[RunCheck]:
        """Every run read whole and checked against its digest, newest first."""
        try:
            rows = self._connection.execute(
                f"SELECT {self._ROW} FROM runs ORDER BY seq DESC"
            ).fetchall()
        except sqlite3.Error as error:
            raise StoreError(f"cannot read {self.url}: {error}") from None
        return [
            check_whole(
                str(row[1]),
                f"{self.url} row {row[0]}",
                lambda row=row: self._read(row[0], row[1], row[2], row[3], row[4:], verify=True)[1],
                (str(row[4]), str(row[5]), str(row[6])),
            )
            for row in rows
        ]

    def runs(self, set_name: str, model: str, grader: str = GRADER) -> list[ResultRecord]:
        return self._select(
            "WHERE set_name = ? AND model = ? AND grader = ?", (set_name, model, grader)
        )

    def get(self, run_id: str) -> ResultRecord | None:
        found = self._select("WHERE run_id = ?", (run_id,))
        return found[0] if found else None

    def all_runs(self) -> list[ResultRecord]:
        return self._select()

    def save_drift(self, record: Mapping[str, Any]) -> None:
        """Keep a drift record (``retrievalkit drift``) in its own table, created with the
        first one: the runs' tables and readers that know nothing of drift are untouched."""
        self._refuse_if_read_only("save to")
        text = json.dumps(record, sort_keys=True, ensure_ascii=False, allow_nan=False)
        with self._transaction("save to") as connection:
            connection.execute(_DRIFT_TABLE)
            connection.execute(
                "INSERT INTO drift_records (drift_id, created_at, record) VALUES (?, ?, ?)",
                (record["drift_id"], record["created_at"], text),
            )

    def drifts(self) -> list[dict[str, Any]]:
        """The drift records, newest first (none in a store that never kept one)."""
        try:
            rows = self._connection.execute(
                "SELECT record FROM drift_records ORDER BY seq DESC"
            ).fetchall()
        except sqlite3.OperationalError as error:
            if "no such table" in str(error):
                return []
            raise StoreError(f"cannot read {self.url}: {error}") from None
        return [json.loads(row[0]) for row in rows]

    def keys(self) -> list[StoredKey]:
        """Every (set, model, grader) with its run count and newest run, from the index."""
        try:
            rows = self._connection.execute(
                "SELECT r.set_name, r.model, r.grader, k.runs, r.run_id, r.created_at FROM runs r "
                "JOIN (SELECT max(seq) AS newest, count(*) AS runs FROM runs "
                "GROUP BY set_name, model, grader) k ON r.seq = k.newest "
                "ORDER BY r.set_name, r.model, r.grader"
            ).fetchall()
        except sqlite3.Error as error:
            raise StoreError(f"cannot read {self.url}: {error}") from None
        return [StoredKey(*row) for row in rows]

    def pin(self, record: ResultRecord) -> str | None:
        self._refuse_if_read_only("pin in")
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
        self._refuse_if_read_only("unpin in")
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
        self._refuse_if_read_only("delete from")
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
                self._connection.execute(
                    "DELETE FROM run_columns WHERE run_seq IN"
                    f" (SELECT seq FROM runs WHERE run_id IN ({marks}))",
                    wanted,
                )
                deleted = self._connection.execute(
                    f"DELETE FROM runs WHERE run_id IN ({marks})", wanted
                ).rowcount
        except sqlite3.Error as error:
            raise StoreError(f"cannot delete from {self.url}: {error}; nothing deleted") from None
        return int(deleted)
