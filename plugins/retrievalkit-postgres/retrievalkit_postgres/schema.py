"""The store's tables, and the migrations that bring any older layout up to the current one.

Each entry of `MIGRATIONS` moves a store's schema from version ``n - 1`` to ``n``;
the table ``schema_version`` records which have been applied, when. Opening a store
applies the missing ones in one transaction under an advisory lock, so two runners that
open a new or old store at the same moment neither race nor apply a step twice. A store
written by a newer retrievalkit-postgres (a version this module does not know) is
refused, never misread.

Layout (current version):

- ``runs``: one row per run, the summary a history needs: the key (``set_name``,
  ``model``, ``grader``), ``created_at``, ``pass_rate`` (top-1 hit rate), ``mean_score``
  (top-3 hit rate), ``questions``, ``errored``, the git commit, the retriever's plugin,
  the record's schema and its manifest; ``seq`` is the save order.
- ``run_metrics``: one row per (run, slice, metric): mean, interval, n, and the
  interval's method (NULL for runs of record schema 1, which the record loading names
  ``percentile``). The whole-set figures have ``slice_field = ''``.
- ``run_questions``: one row per (run, question): the verdict (``passed``: top-1 hit,
  ``score``: top-3 hit), the ranking, each metric's value, latency, error, form, hard
  class and the judgments used.
- ``pins``: the pinned baseline of a key; a foreign key on ``runs`` makes a pin that
  points at a deleted run impossible, whatever two processes do at once.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs


@attrs.frozen
class Migration:
    """One step: its version, what it does, and its statements (``{schema}`` is replaced)."""

    version: int
    description: str
    statements: Sequence[str]


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
)

LATEST = MIGRATIONS[-1].version
