"""The store's tables, and the migrations that bring any older layout up to the current one.

Each entry of `MIGRATIONS` moves a store's schema from version ``n - 1`` to ``n``: its
statements, then (for a step that rewrites runs) its ``convert`` function, then its
``after`` statements; the table ``schema_version`` records which have been applied,
when. Opening a store applies the missing ones in one transaction under an advisory
lock, so two runners that open a new or old store at the same moment neither race nor
apply a step twice. A store written by a newer retrievalkit-postgres (a version this
module does not know) is refused, never misread.

Layout (current version):

- ``runs``: one row per run, the summary a history needs: the key (``set_name``,
  ``model``, ``grader``), ``created_at``, ``pass_rate`` (top-1 hit rate), ``mean_score``
  (top-3 hit rate), ``questions``, ``errored``, the git commit, the retriever's plugin,
  the record's schema and its manifest; ``seq`` is the save order. ``summary`` is the
  record without its per-question outcomes, as retrievalkit reads it back
  (`retrievalkit.stores.serialization.dump_summary`).
- ``run_metrics``: one row per (run, slice, metric): mean, interval, n, and the
  interval's method (NULL for runs of record schema 1, which the record loading names
  ``percentile``). The whole-set figures have ``slice_field = ''``.
- ``run_columns``: one row per (run, outcome column): the column's bytes
  (`retrievalkit.model.outcomes`), read only when a record's outcomes are.
- ``pins``: the pinned baseline of a key; a foreign key on ``runs`` makes a pin that
  points at a deleted run impossible, whatever two processes do at once.

Layouts 1 to 3 kept a row per (run, question) in ``run_questions``; step 4 rewrites
every run as summary plus columns and drops that table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    import psycopg
    from psycopg import sql

#: ``convert(cursor, sql)``: rewrites the runs a step changes; ``sql(text)`` fills in
#: ``{schema}``. Returns how many runs it rewrote.
Convert = Callable[["psycopg.Cursor[Any]", Callable[[str], "sql.Composed"]], int]


@attrs.frozen
class Migration:
    """One step: its version, what it does, and its statements (``{schema}`` is replaced)."""

    version: int
    description: str
    statements: Sequence[str]
    convert: Convert | None = None
    after: Sequence[str] = ()


#: A run of layouts 1 to 3 as retrievalkit's one-document JSON, assembled from its rows.
#: Floats print in their shortest exact form, so they read back bit for bit.
_METRIC_JSON = (
    "json_build_object('mean', m.mean, 'ci', CASE WHEN m.ci_low IS NULL THEN NULL"
    " ELSE json_build_array(m.ci_low, m.ci_high) END, 'n', m.n, 'method', m.method)"
)
OLD_RECORD_JSON = f"""json_build_object(
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
    'outcomes', (SELECT coalesce(json_agg(json_build_object(
            'question_id', q.question_id, 'ranking', q.ranking, 'scores', q.scores,
            'latency_ms', q.latency_ms, 'error', q.error, 'form', q.form,
            'hard_class', q.hard_class, 'judgments', q.judgments)
            ORDER BY q.outcome_position), '[]')
        FROM {{schema}}.run_questions AS q
        WHERE q.run_seq = r.seq AND q.outcome_position IS NOT NULL)
)::text"""


def _runs_to_columns(cursor: psycopg.Cursor[Any], sql: Callable[[str], Any]) -> int:
    """Step 4: each run's question rows become a summary and outcome columns, one run at a time."""
    from retrievalkit.stores.serialization import dump_columns, dump_summary, load_record

    cursor.execute(sql("SELECT seq FROM {schema}.runs ORDER BY seq"))
    sequence = [int(row[0]) for row in cursor.fetchall()]
    for seq in sequence:
        cursor.execute(
            sql(f"SELECT r.run_id, {OLD_RECORD_JSON} FROM {{schema}}.runs AS r WHERE r.seq = %s"),
            (seq,),
        )
        found = cursor.fetchone()
        assert found is not None
        run_id, text = found
        record = load_record(text, where=f"run {run_id} (row {seq})")
        cursor.execute(
            sql("UPDATE {schema}.runs SET summary = %s, record_schema = %s WHERE seq = %s"),
            (dump_summary(record), record.schema_version, seq),
        )
        cursor.executemany(
            sql("INSERT INTO {schema}.run_columns (run_seq, name, data) VALUES (%s, %s, %s)"),
            [(seq, name, data) for name, data in dump_columns(record).items()],
        )
    return len(sequence)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "runs, per-question outcomes, metrics and pins",
        (
            """CREATE TABLE {schema}.runs (
                seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                run_id text NOT NULL UNIQUE,
                set_name text NOT NULL,
                model text NOT NULL,
                grader text NOT NULL,
                created_at timestamptz NOT NULL,
                record_schema integer NOT NULL,
                pass_rate double precision NOT NULL,
                mean_score double precision NOT NULL,
                manifest jsonb NOT NULL
            )""",
            "CREATE INDEX runs_by_key ON {schema}.runs (set_name, model, grader, seq)",
            """CREATE TABLE {schema}.run_metrics (
                run_seq bigint NOT NULL REFERENCES {schema}.runs (seq) ON DELETE CASCADE,
                slice_field text NOT NULL,
                slice_value text NOT NULL,
                metric text NOT NULL,
                mean double precision,
                ci_low double precision,
                ci_high double precision,
                n integer NOT NULL,
                PRIMARY KEY (run_seq, slice_field, slice_value, metric)
            )""",
            """CREATE TABLE {schema}.run_questions (
                run_seq bigint NOT NULL REFERENCES {schema}.runs (seq) ON DELETE CASCADE,
                question_id text NOT NULL,
                outcome_position integer,
                item_position integer,
                passed boolean,
                score double precision,
                ranking text[],
                scores jsonb,
                latency_ms double precision,
                error text,
                form text,
                hard_class text,
                judgments jsonb,
                PRIMARY KEY (run_seq, question_id)
            )""",
            """CREATE TABLE {schema}.pins (
                set_name text NOT NULL,
                model text NOT NULL,
                grader text NOT NULL,
                run_id text NOT NULL REFERENCES {schema}.runs (run_id) ON DELETE RESTRICT,
                pinned_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (set_name, model, grader)
            )""",
        ),
    ),
    Migration(
        2,
        "summary columns (questions, errored, git commit, plugin) and the history index",
        (
            """ALTER TABLE {schema}.runs
                ADD COLUMN questions integer,
                ADD COLUMN errored integer,
                ADD COLUMN git_commit text,
                ADD COLUMN plugin text""",
            """UPDATE {schema}.runs AS r SET
                questions = (SELECT count(*) FROM {schema}.run_questions q
                             WHERE q.run_seq = r.seq AND q.outcome_position IS NOT NULL),
                errored = (SELECT count(*) FROM {schema}.run_questions q
                           WHERE q.run_seq = r.seq AND q.error IS NOT NULL),
                git_commit = r.manifest ->> 'git_commit',
                plugin = r.manifest ->> 'plugin'""",
            """ALTER TABLE {schema}.runs
                ALTER COLUMN questions SET NOT NULL,
                ALTER COLUMN errored SET NOT NULL""",
            """CREATE INDEX runs_by_key_created
                ON {schema}.runs (set_name, model, grader, created_at, seq)""",
            "DROP INDEX {schema}.runs_by_key",
            "CREATE INDEX pins_by_run ON {schema}.pins (run_id)",
        ),
    ),
    Migration(
        3,
        "the method of each metric's interval (record schema 2)",
        ("ALTER TABLE {schema}.run_metrics ADD COLUMN method text",),
    ),
    Migration(
        4,
        "outcomes by column (record schema 3): a summary per run and its column blobs",
        (
            "ALTER TABLE {schema}.runs ADD COLUMN summary text",
            """CREATE TABLE {schema}.run_columns (
                run_seq bigint NOT NULL REFERENCES {schema}.runs (seq) ON DELETE CASCADE,
                name text NOT NULL,
                data bytea NOT NULL,
                PRIMARY KEY (run_seq, name)
            )""",
            # The columns are compressed already: store them out of line, as they are.
            "ALTER TABLE {schema}.run_columns ALTER COLUMN data SET STORAGE EXTERNAL",
        ),
        convert=_runs_to_columns,
        after=(
            "DROP TABLE {schema}.run_questions",
            "ALTER TABLE {schema}.runs ALTER COLUMN summary SET NOT NULL",
        ),
    ),
)

LATEST = MIGRATIONS[-1].version
