"""The ``postgresql://`` result store: a team's one history, in tables every runner writes to.

``postgresql://[USER@]HOST[:PORT]/DATABASE[?schema=NAME&sslmode=...]`` keeps runs in
the PostgreSQL schema ``NAME`` (default ``retrievalkit``), laid out as
`retrievalkit_postgres.schema` describes: a summary row per run, a row per metric
and slice, and the run's per-question outcomes as column blobs (``bytea``), which a
record read from the store loads only when its outcomes are used. Any libpq parameter
may follow in the query string (TLS: ``sslmode``, ``sslrootcert``, ``sslcert``,
``sslkey``; ``service``, ``connect_timeout``, ...); the password never does: libpq
reads it from ``PGPASSWORD``, ``~/.pgpass`` or a service file.

Every write is one transaction: a save inserts the run, its outcome columns and its
metrics, or nothing; a pin checks the run and replaces the key's pin; a prune refuses
pinned runs and deletes the rest. Reads run in one repeatable-read snapshot, so a run
deleted meanwhile is either read whole or not at all. A record's outcome columns are
read later, each on first use, checked against the run's ``seq`` (never reused): a run
deleted since is a `StoreError`, never another run's data. Many processes may save at
once.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from retrievalkit.plugin_api import (
    EXIT_EVALUATION_FAILED,
    GRADER,
    InputError,
    ResultRecord,
    RetrievalkitError,
    StoreError,
    dump_columns,
    dump_summary,
    load_summary,
)
from retrievalkit_postgres.connection import (
    Target,
    server_reason,
    target_from_url,
    unreachable,
)
from retrievalkit_postgres.schema import LATEST, MIGRATIONS

if TYPE_CHECKING:
    import psycopg

DEFAULT_SCHEMA = "retrievalkit"
_URL_OPTIONS = ("schema",)
_METRIC_COLUMNS = (
    "run_seq",
    "slice_field",
    "slice_value",
    "metric",
    "mean",
    "ci_low",
    "ci_high",
    "n",
    "method",
)


class _CopyAbortNoise(logging.Filter):
    """Drop psycopg's warning about a COPY it could not end cleanly on a lost connection.

    The store reports that failure itself, in one line; the extra warning would be a
    second, less useful line on stderr.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("error ignored terminating")


logging.getLogger("psycopg").addFilter(_CopyAbortNoise())
log = logging.getLogger(__name__)


class _ColumnReader:
    """Loads one stored run's outcome columns through its store, on first use."""

    __slots__ = ("_run_id", "_seq", "_store")

    def __init__(self, store: PostgresStore, seq: int, run_id: str) -> None:
        self._store, self._seq, self._run_id = store, seq, run_id

    def __call__(self, name: str) -> bytes:
        return self._store._column(self._seq, self._run_id, name)


class StoreUnavailable(StoreError):
    """The server went away during an operation: the evaluation's result could not be kept."""

    exit_code = EXIT_EVALUATION_FAILED


class PostgresStore:
    """Runs in PostgreSQL tables; reads answer newest (last saved) first."""

    def __init__(self, target: Target, schema: str, *, url: str) -> None:
        self.url = url
        self.schema = schema
        self._target = target
        self._connection: psycopg.Connection[Any] | None = None
        # Records read from the store load their columns from other threads, later.
        self._lock = threading.RLock()

    @classmethod
    def from_url(cls, url: str) -> PostgresStore:
        """Open the store; connects, and creates or upgrades its tables when needed."""
        try:
            target, options = target_from_url(url, field="--store", extra=_URL_OPTIONS)
        except InputError as error:
            raise StoreError(error.detail + (f" ({error.hint})" if error.hint else "")) from None
        schema = options.get("schema", DEFAULT_SCHEMA)
        if not schema or len(schema) > 63 or "\x00" in schema:
            raise StoreError(
                f"store {target.shown}: schema={schema!r} is not a PostgreSQL schema name "
                "(1 to 63 characters)"
            )
        store = cls(target, schema, url=target.shown)
        store._open()
        return store

    # --- the ResultStore protocol ----------------------------------------------------------

    def save(self, record: ResultRecord) -> None:
        import psycopg

        columns = dump_columns(record)
        summary = dump_summary(record, columns)
        data = json.loads(summary)
        run_row = _run_row(data, summary)
        metric_rows = _metric_rows(data)
        connection = self._connect()
        try:
            with connection.transaction(), connection.cursor() as cursor:
                cursor.execute(
                    self._sql(
                        "INSERT INTO {schema}.runs (run_id, set_name, model, grader, created_at,"
                        " record_schema, pass_rate, mean_score, manifest, questions, errored,"
                        " git_commit, plugin, summary) VALUES (%s, %s, %s, %s, %s, %s, %s, %s,"
                        " %s, %s, %s, %s, %s, %s) RETURNING seq"
                    ),
                    run_row,
                )
                found = cursor.fetchone()
                assert found is not None
                seq = int(found[0])
                cursor.executemany(
                    self._sql(
                        "INSERT INTO {schema}.run_columns (run_seq, name, data) VALUES (%s, %s, %s)"
                    ),
                    [(seq, name, blob) for name, blob in columns.items()],
                )
                names = ", ".join(_METRIC_COLUMNS)
                with cursor.copy(
                    self._sql(f"COPY {{schema}}.run_metrics ({names}) FROM STDIN")
                ) as copy:
                    for row in metric_rows:
                        copy.write_row((seq, *row))
        except psycopg.errors.UniqueViolation:
            raise StoreError(f"run {record.run_id} is already stored in {self.url}") from None
        except psycopg.Error as error:
            raise self._error(error, f"save run {record.run_id}", saving=True) from None

    def runs(self, set_name: str, model: str, grader: str = GRADER) -> list[ResultRecord]:
        return self._select(
            "WHERE r.set_name = %s AND r.model = %s AND r.grader = %s", (set_name, model, grader)
        )

    def get(self, run_id: str) -> ResultRecord | None:
        found = self._select("WHERE r.run_id = %s", (run_id,))
        return found[0] if found else None

    def all_runs(self) -> list[ResultRecord]:
        return self._select()

    # --- pinned baselines and deletion -----------------------------------------------------

    def pin(self, record: ResultRecord) -> str | None:
        import psycopg

        set_name, model, grader = record.key
        connection = self._connect()
        try:
            with connection.transaction(), connection.cursor() as cursor:
                # FOR KEY SHARE: a prune of this run waits for us, then finds the pin.
                cursor.execute(
                    self._sql("SELECT 1 FROM {schema}.runs WHERE run_id = %s FOR KEY SHARE"),
                    (record.run_id,),
                )
                if cursor.fetchone() is None:
                    raise StoreError(f"run {record.run_id} is not stored in {self.url}")
                cursor.execute(
                    self._sql(
                        "SELECT run_id FROM {schema}.pins WHERE set_name = %s AND model = %s"
                        " AND grader = %s FOR UPDATE"
                    ),
                    (set_name, model, grader),
                )
                before = cursor.fetchone()
                cursor.execute(
                    self._sql(
                        "INSERT INTO {schema}.pins (set_name, model, grader, run_id)"
                        " VALUES (%s, %s, %s, %s) ON CONFLICT (set_name, model, grader)"
                        " DO UPDATE SET run_id = EXCLUDED.run_id, pinned_at = now()"
                    ),
                    (set_name, model, grader, record.run_id),
                )
        except psycopg.errors.ForeignKeyViolation:
            raise StoreError(f"run {record.run_id} is not stored in {self.url}") from None
        except psycopg.Error as error:
            raise self._error(error, f"pin run {record.run_id}; nothing changed") from None
        return None if before is None else str(before[0])

    def unpin(self, set_name: str, model: str, grader: str = GRADER) -> str | None:
        import psycopg

        connection = self._connect()
        try:
            with connection.transaction(), connection.cursor() as cursor:
                cursor.execute(
                    self._sql(
                        "DELETE FROM {schema}.pins WHERE set_name = %s AND model = %s"
                        " AND grader = %s RETURNING run_id"
                    ),
                    (set_name, model, grader),
                )
                before = cursor.fetchone()
        except psycopg.Error as error:
            raise self._error(error, "unpin; nothing changed") from None
        return None if before is None else str(before[0])

    def pinned(self, set_name: str, model: str, grader: str = GRADER) -> str | None:
        import psycopg

        connection = self._connect()
        try:
            row = connection.execute(
                self._sql(
                    "SELECT run_id FROM {schema}.pins WHERE set_name = %s AND model = %s"
                    " AND grader = %s"
                ),
                (set_name, model, grader),
            ).fetchone()
        except psycopg.Error as error:
            raise self._error(error, "read the pinned baseline") from None
        return None if row is None else str(row[0])

    def delete(self, run_ids: Sequence[str]) -> int:
        import psycopg

        wanted = list(dict.fromkeys(run_ids))
        if not wanted:
            return 0
        connection = self._connect()
        try:
            with connection.transaction(), connection.cursor() as cursor:
                cursor.execute(
                    self._sql(
                        "SELECT run_id FROM {schema}.pins WHERE run_id = ANY(%s)"
                        " ORDER BY run_id LIMIT 1"
                    ),
                    (wanted,),
                )
                pinned = cursor.fetchone()
                if pinned is not None:
                    raise self._pinned_error(str(pinned[0]))
                cursor.execute(
                    self._sql("DELETE FROM {schema}.runs WHERE run_id = ANY(%s)"), (wanted,)
                )
                deleted = cursor.rowcount
        except psycopg.errors.ForeignKeyViolation:
            # Pinned by another process after our check: the foreign key refused the delete.
            raise self._pinned_error(self._first_pinned(wanted) or wanted[0]) from None
        except psycopg.Error as error:
            raise self._error(error, "delete runs; nothing was deleted") from None
        return int(deleted)

    def close(self) -> None:
        """Close the connection (a later call opens a new one)."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    # --- internals -------------------------------------------------------------------------

    def _sql(self, text: str) -> psycopg.sql.Composed:
        from psycopg import sql

        return sql.SQL(text).format(schema=sql.Identifier(self.schema))

    def _connect(self) -> psycopg.Connection[Any]:
        """The open connection, or a new one when it is gone.

        A store stays open while an evaluation runs, which can outlast the server's idle
        timeout or a restart; one cheap round trip finds out before an operation starts,
        so only a failure during the operation itself is reported.
        """
        import psycopg

        with self._lock:
            if self._connection is not None and not self._connection.closed:
                try:
                    self._connection.execute("SELECT 1")
                except psycopg.OperationalError:
                    self.close()
            if self._connection is None or self._connection.closed:
                try:
                    self._connection = self._target.connect()
                except InputError as error:
                    raise StoreError(
                        f"store {self.url}: {error.detail}"
                        + (f" ({error.hint})" if error.hint else "")
                    ) from None
                except RetrievalkitError as error:
                    raise StoreUnavailable(f"store {self.url}: {error}") from None
            return self._connection

    def _error(self, error: Exception, action: str, *, saving: bool = False) -> StoreError:
        import psycopg

        reason = server_reason(error)
        if isinstance(error, psycopg.OperationalError) and unreachable(error):
            self.close()
            outcome = (
                " (the run is stored whole or not at all: look for it with 'retrievalkit history')"
                if saving
                else ""
            )
            return StoreUnavailable(
                f"store {self.url}: lost the connection to PostgreSQL at {self._target.where} "
                f"while trying to {action}: {reason}{outcome}"
            )
        if isinstance(error, psycopg.errors.InsufficientPrivilege):
            return StoreError(
                f"store {self.url}: {reason} (trying to {action}); grant the role the "
                "privileges in docs/postgres.md ('A shared history for a team')"
            )
        if isinstance(error, psycopg.DataError):
            return StoreError(
                f"store {self.url}: PostgreSQL cannot keep a value of this run ({reason}); "
                f"nothing was saved"
                if saving
                else f"store {self.url}: {reason} (trying to {action})"
            )
        return StoreError(f"store {self.url}: cannot {action}: {reason}")

    def _pinned_error(self, run_id: str) -> StoreError:
        return StoreError(
            f"run {run_id} is a pinned baseline in {self.url}; unpin it first "
            "(retrievalkit baseline unpin); nothing was deleted"
        )

    def _first_pinned(self, run_ids: list[str]) -> str | None:
        row = (
            self._connect()
            .execute(
                self._sql("SELECT min(run_id) FROM {schema}.pins WHERE run_id = ANY(%s)"),
                (run_ids,),
            )
            .fetchone()
        )
        return None if row is None or row[0] is None else str(row[0])

    @contextmanager
    def _snapshot(self) -> Iterator[psycopg.Cursor[Any]]:
        connection = self._connect()
        with connection.transaction(), connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield cursor

    def _select(self, where: str = "", parameters: tuple[str, ...] = ()) -> list[ResultRecord]:
        import psycopg

        try:
            with self._snapshot() as cursor:
                cursor.execute(
                    self._sql(
                        f"SELECT r.seq, r.run_id, r.summary FROM {{schema}}.runs AS r"
                        f" {where} ORDER BY r.seq DESC"
                    ),
                    parameters,
                )
                rows = cursor.fetchall()
        except psycopg.Error as error:
            raise self._error(error, "read runs") from None
        return [
            load_summary(
                text,
                _ColumnReader(self, int(seq), str(run_id)),
                where=f"{self.url}, run {run_id} (row {seq})",
            )
            for seq, run_id, text in rows
        ]

    def _column(self, seq: int, run_id: str, name: str) -> bytes:
        """One outcome column of a stored run, read when a record first uses it."""
        import psycopg

        what = f"column '{name}' of run {run_id}"
        try:
            with self._lock:
                connection = self._connect()
                row = connection.execute(
                    self._sql(
                        "SELECT c.data FROM {schema}.run_columns AS c JOIN {schema}.runs AS r"
                        " ON r.seq = c.run_seq WHERE r.seq = %s AND r.run_id = %s AND c.name = %s"
                    ),
                    (seq, run_id, name),
                ).fetchone()
                stored = row is not None or (
                    connection.execute(
                        self._sql("SELECT 1 FROM {schema}.runs WHERE seq = %s AND run_id = %s"),
                        (seq, run_id),
                    ).fetchone()
                    is not None
                )
        except psycopg.Error as error:
            raise self._error(error, f"read the {what}") from None
        if row is None and not stored:
            raise StoreError(
                f"run {run_id} is no longer in {self.url} (deleted or pruned after it was "
                f"read), so its column '{name}' cannot be loaded; read the run again"
            )
        if row is None:
            raise StoreError(f"store {self.url}: the {what} is missing (row {seq})")
        return bytes(row[0])

    def _open(self) -> None:
        """Connect, and bring the tables to the current layout (created on first use)."""
        import psycopg

        connection = self._connect()
        try:
            version = self._version(connection)
            if version == LATEST:
                return
            if version is not None and version > LATEST:
                raise StoreError(
                    f"store {self.url}: its tables (schema '{self.schema}') are at layout "
                    f"version {version}, newer than this retrievalkit-postgres knows ({LATEST}); "
                    "upgrade retrievalkit-postgres"
                )
            self._migrate(connection)
        except psycopg.errors.InsufficientPrivilege as error:
            raise StoreError(
                f"store {self.url}: the tables in schema '{self.schema}' need creating or "
                f"upgrading to layout {LATEST}, which this role may not do "
                f"({server_reason(error)}); open the store once as the role that owns the "
                "schema (docs/postgres.md, 'A shared history for a team')"
            ) from None
        except psycopg.Error as error:
            raise self._error(error, "open the store") from None

    def _version(self, connection: psycopg.Connection[Any]) -> int | None:
        """The layout version of the schema's tables, or None when there are none yet."""
        exists = connection.execute(
            "SELECT to_regclass(%s) IS NOT NULL", (f'"{self.schema}".schema_version',)
        ).fetchone()
        if not exists or not exists[0]:
            return None
        row = connection.execute(self._sql("SELECT max(version) FROM {schema}.schema_version"))
        found = row.fetchone()
        return None if found is None or found[0] is None else int(found[0])

    def _migrate(self, connection: psycopg.Connection[Any]) -> None:
        with connection.transaction(), connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"rk:{self.schema}",))
            cursor.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,))
            if cursor.fetchone() is None:
                # Not IF NOT EXISTS: that asks for CREATE on the database even when the
                # schema an administrator made for the team is already there.
                cursor.execute(self._sql("CREATE SCHEMA {schema}"))
            cursor.execute(
                self._sql(
                    "CREATE TABLE IF NOT EXISTS {schema}.schema_version ("
                    " version integer PRIMARY KEY,"
                    " description text NOT NULL,"
                    " applied_at timestamptz NOT NULL DEFAULT now())"
                )
            )
            current = self._version(connection) or 0
            for step in MIGRATIONS:
                if step.version <= current:
                    continue
                for statement in step.statements:
                    cursor.execute(self._sql(statement))
                if step.convert is not None:
                    converted = step.convert(cursor, self._sql)
                    log.info(
                        "store %s: %d runs rewritten (%s)", self.url, converted, step.description
                    )
                for statement in step.after:
                    cursor.execute(self._sql(statement))
                cursor.execute(
                    self._sql(
                        "INSERT INTO {schema}.schema_version (version, description) VALUES (%s, %s)"
                    ),
                    (step.version, step.description),
                )


# --- records to rows ----------------------------------------------------------------------


def _run_row(data: Mapping[str, Any], summary: str) -> tuple[Any, ...]:
    from psycopg.types.json import Jsonb

    manifest = data["manifest"]
    created = dt.datetime.fromisoformat(str(manifest["created_at"]).replace("Z", "+00:00"))
    header = data["outcomes"]
    return (
        data["run_id"],
        data["set"],
        data["model"],
        data["grader"],
        created,
        data["schema_version"],
        data["pass_rate"],
        data["mean_score"],
        Jsonb(manifest),
        header["count"],
        header["errored"],
        manifest.get("git_commit"),
        manifest.get("plugin"),
        summary,
    )


def _metric_rows(data: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []

    def add(field: str, value: str, metrics: Mapping[str, Any]) -> None:
        for name, metric in metrics.items():
            ci = metric["ci"]
            low, high = (None, None) if ci is None else ci
            rows.append(
                (field, value, name, metric["mean"], low, high, metric["n"], metric.get("method"))
            )

    add("", "", data["metrics"])
    for field, by_value in data["slices"].items():
        if field == "":
            raise StoreError(f"run {data['run_id']} has a slice with an empty field name")
        for value, metrics in by_value.items():
            add(field, value, metrics)
    return rows
