"""The ``postgresql://`` result store: a team's one history, in tables every runner writes to.

``postgresql://[USER@]HOST[:PORT]/DATABASE[?schema=NAME&sslmode=...]`` keeps runs in
the PostgreSQL schema ``NAME`` (default ``retrievalkit``), laid out as
`retrievalkit_postgres.schema` describes: a summary row per run, a row per
question, a row per metric and slice. Any libpq parameter may follow in the query
string (TLS: ``sslmode``, ``sslrootcert``, ``sslcert``, ``sslkey``; ``service``,
``connect_timeout``, ...); the password never does: libpq reads it from
``PGPASSWORD``, ``~/.pgpass`` or a service file.

Every write is one transaction: a save inserts the run, its questions (COPY) and its
metrics, or nothing; a pin checks the run and replaces the key's pin; a prune refuses
pinned runs and deletes the rest. Reads run in one repeatable-read snapshot, so a run
deleted meanwhile is either read whole or not at all. Many processes may save at once.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from retrievalkit.convert import unstructure
from retrievalkit.errors import EXIT_EVALUATION_FAILED, InputError, RetrievalkitError, StoreError
from retrievalkit.model import GRADER, ResultRecord
from retrievalkit.stores.serialization import load_record
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
#: Top-level record fields, and fields of one outcome, that the tables hold.
_RECORD_FIELDS = {
    "run_id",
    "set",
    "model",
    "grader",
    "pass_rate",
    "mean_score",
    "items",
    "metrics",
    "slices",
    "outcomes",
    "manifest",
    "schema_version",
}
_OUTCOME_FIELDS = {
    "question_id",
    "ranking",
    "scores",
    "latency_ms",
    "error",
    "form",
    "hard_class",
    "judgments",
}
_ITEM_FIELDS = {"question_id", "passed", "score"}
_METRIC_FIELDS = {"mean", "ci", "n", "method"}
_QUESTION_COLUMNS = (
    "run_seq",
    "question_id",
    "outcome_position",
    "item_position",
    "passed",
    "score",
    "ranking",
    "scores",
    "latency_ms",
    "error",
    "form",
    "hard_class",
    "judgments",
)
#: The whole record as retrievalkit's JSON, assembled by PostgreSQL from the three tables
#: (one text per run: a history of 10,000-question runs parses one document per run, not
#: two per question). Floats print in their shortest exact form, so they read back bit
#: for bit.
_METRIC_JSON = (
    "json_build_object('mean', m.mean, 'ci', CASE WHEN m.ci_low IS NULL THEN NULL"
    " ELSE json_build_array(m.ci_low, m.ci_high) END, 'n', m.n, 'method', m.method)"
)
_RECORD_JSON = f"""json_build_object(
    'run_id', r.run_id, 'set', r.set_name, 'model', r.model, 'grader', r.grader,
    'pass_rate', r.pass_rate, 'mean_score', r.mean_score, 'schema_version', r.record_schema,
    'manifest', r.manifest,
    'metrics', (SELECT coalesce(json_object_agg(m.metric, {_METRIC_JSON}), '{{{{}}}}')
        FROM {{schema}}.run_metrics AS m WHERE m.run_seq = r.seq AND m.slice_field = ''),
    'slices', (SELECT coalesce(json_object_agg(f.slice_field, f.by_value), '{{{{}}}}') FROM (
        SELECT v.slice_field, json_object_agg(v.slice_value, v.metrics) AS by_value FROM (
            SELECT m.slice_field, m.slice_value, json_object_agg(m.metric, {_METRIC_JSON})
                AS metrics
            FROM {{schema}}.run_metrics AS m WHERE m.run_seq = r.seq AND m.slice_field <> ''
            GROUP BY m.slice_field, m.slice_value) AS v
        GROUP BY v.slice_field) AS f),
    'items', (SELECT coalesce(json_agg(json_build_object(
            'question_id', q.question_id, 'passed', q.passed, 'score', q.score)
            ORDER BY q.item_position), '[]')
        FROM {{schema}}.run_questions AS q
        WHERE q.run_seq = r.seq AND q.item_position IS NOT NULL),
    'outcomes', (SELECT coalesce(json_agg(json_build_object(
            'question_id', q.question_id, 'ranking', q.ranking, 'scores', q.scores,
            'latency_ms', q.latency_ms, 'error', q.error, 'form', q.form,
            'hard_class', q.hard_class, 'judgments', q.judgments)
            ORDER BY q.outcome_position), '[]')
        FROM {{schema}}.run_questions AS q
        WHERE q.run_seq = r.seq AND q.outcome_position IS NOT NULL)
)::text"""
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

        data = unstructure(record)
        _check_fields(data, record.run_id)
        run_row = _run_row(data)
        question_rows = _question_rows(data)
        metric_rows = _metric_rows(data)
        connection = self._connect()
        try:
            with connection.transaction(), connection.cursor() as cursor:
                cursor.execute(
                    self._sql(
                        "INSERT INTO {schema}.runs (run_id, set_name, model, grader, created_at,"
                        " record_schema, pass_rate, mean_score, manifest, questions, errored,"
                        " git_commit, plugin) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s,"
                        " %s, %s, %s) RETURNING seq"
                    ),
                    run_row,
                )
                found = cursor.fetchone()
                assert found is not None
                seq = int(found[0])
                columns = ", ".join(_QUESTION_COLUMNS)
                with cursor.copy(
                    self._sql(f"COPY {{schema}}.run_questions ({columns}) FROM STDIN")
                ) as copy:
                    for row in question_rows:
                        copy.write_row((seq, *row))
                columns = ", ".join(_METRIC_COLUMNS)
                with cursor.copy(
                    self._sql(f"COPY {{schema}}.run_metrics ({columns}) FROM STDIN")
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
                    f"store {self.url}: {error.detail}" + (f" ({error.hint})" if error.hint else "")
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
                        f"SELECT r.seq, r.run_id, {_RECORD_JSON} FROM {{schema}}.runs AS r"
                        f" {where} ORDER BY r.seq DESC"
                    ),
                    parameters,
                )
                rows = cursor.fetchall()
        except psycopg.Error as error:
            raise self._error(error, "read runs") from None
        return [
            load_record(text, where=f"{self.url}, run {run_id} (row {seq})")
            for seq, run_id, text in rows
        ]

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
                cursor.execute(
                    self._sql(
                        "INSERT INTO {schema}.schema_version (version, description) VALUES (%s, %s)"
                    ),
                    (step.version, step.description),
                )


# --- records to rows ----------------------------------------------------------------------


def _check_fields(data: Mapping[str, Any], run_id: str) -> None:
    """Refuse a record with fields the tables do not hold, rather than drop them."""
    unknown = set(data) - _RECORD_FIELDS
    for outcome in data["outcomes"]:
        unknown |= {f"outcomes.{name}" for name in set(outcome) - _OUTCOME_FIELDS}
    for item in data["items"]:
        unknown |= {f"items.{name}" for name in set(item) - _ITEM_FIELDS}
    values = list(data["metrics"].values())
    for by_value in data["slices"].values():
        for metrics in by_value.values():
            values.extend(metrics.values())
    for value in values:
        unknown |= {f"metrics.{name}" for name in set(value) - _METRIC_FIELDS}
    if unknown:
        raise StoreError(
            f"run {run_id} has fields this retrievalkit-postgres cannot store "
            f"({', '.join(sorted(unknown))}); upgrade retrievalkit-postgres; nothing was saved"
        )


def _run_row(data: Mapping[str, Any]) -> tuple[Any, ...]:
    from psycopg.types.json import Jsonb

    manifest = data["manifest"]
    created = dt.datetime.fromisoformat(str(manifest["created_at"]).replace("Z", "+00:00"))
    outcomes = data["outcomes"]
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
        len(outcomes),
        sum(1 for outcome in outcomes if outcome["error"] is not None),
        manifest.get("git_commit"),
        manifest.get("plugin"),
    )


def _question_rows(data: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """One row per question id: its outcome and its verdict (either may be absent)."""
    from psycopg.types.json import Jsonb

    rows: dict[str, list[Any]] = {}
    for position, outcome in enumerate(data["outcomes"]):
        rows[outcome["question_id"]] = [
            outcome["question_id"],
            position,
            None,
            None,
            None,
            outcome["ranking"],
            Jsonb(outcome["scores"]),
            outcome["latency_ms"],
            outcome["error"],
            outcome["form"],
            outcome["hard_class"],
            Jsonb(outcome["judgments"]),
        ]
    if len(rows) != len(data["outcomes"]):
        raise StoreError(f"run {data['run_id']} answers a question id twice; nothing was saved")
    for position, item in enumerate(data["items"]):
        row = rows.setdefault(item["question_id"], [item["question_id"], *[None] * 11])
        row[2:5] = [position, item["passed"], item["score"]]
    return [tuple(row) for row in rows.values()]


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
