"""Tables that live for one run (``ephemeral = true``), and dropping what ``pg index`` built.

An ephemeral pgvector retriever embeds its ``corpus`` into a new table when it is
created and drops that table when it is closed, garbage-collected, or when the process
exits, whether the run finished, failed with an error, or was stopped with Ctrl-C (the
interpreter's exit runs the drop; a ``kill -9`` leaves the table for ``pg drop``). The
build is one transaction, so a build that fails or is interrupted leaves nothing.
"""

from __future__ import annotations

import logging
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrievalkit.plugin_api import InputError

if TYPE_CHECKING:
    import psycopg

    from retrievalkit.plugin_api import Embedder
    from retrievalkit_postgres.connection import Target

log = logging.getLogger(__name__)


def drop_table(connection: psycopg.Connection[Any], name: str, *, where: str) -> None:
    """Drop a table ``pg index`` (or an ephemeral retriever) built; refuse any other."""
    from psycopg import sql

    from retrievalkit_postgres.vectors import identifier, read_table

    read_table(connection, name)  # an error naming the fix unless retrievalkit built it
    connection.execute(sql.SQL("DROP TABLE {}").format(identifier(name)))
    log.info("dropped %s on %s", name, where)


def build_ephemeral(
    target: Target, name: str, corpus: Any, embedder: Embedder, *, m: int, ef_construction: int
) -> None:
    """Embed ``corpus`` into the new table ``name`` (refused when it exists)."""
    from retrievalkit_postgres.vectors import build_table

    if not isinstance(corpus, str) or not corpus:
        raise InputError(
            "an ephemeral pgvector retriever needs the option 'corpus' to build its table from",
            field="corpus",
            hint='e.g. corpus = "data/corpus.jsonl"',
        )
    connection = target.connect()
    try:
        try:
            build_table(
                connection, name, Path(corpus), embedder, m=m, ef_construction=ef_construction
            )
        except InputError as error:
            if error.field == "--table":
                raise InputError(
                    f"the table {name} already exists on {target.where}; an ephemeral "
                    "retriever builds a table of its own and never replaces one",
                    field="table",
                    hint=f"name another table, or 'retrievalkit pg drop --table {name}'",
                ) from None
            raise
    finally:
        connection.close()


def drop_when_done(owner: object, target: Target, name: str) -> weakref.finalize[Any, Any]:
    """Drop ``name`` once ``owner`` is closed (call the result), collected, or at exit."""
    return weakref.finalize(owner, _drop_quietly, target, name)


def _drop_quietly(target: Target, name: str) -> None:
    """The drop at the end of a run: a failure is a warning naming the command that fixes it."""
    try:
        connection = target.connect()
        try:
            drop_table(connection, name, where=target.where)
        finally:
            connection.close()
    except Exception as error:  # the run is over; say what is left behind
        log.warning(
            "could not drop the ephemeral table %s on %s (%s); drop it with "
            "'retrievalkit pg drop --table %s'",
            name,
            target.where,
            error,
            name,
        )
