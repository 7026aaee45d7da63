"""The ``pgvector`` retriever: nearest documents in a table ``retrievalkit pg index`` built.

``search = "hnsw"`` (the default) asks the HNSW index, with ``hnsw.ef_search`` as
configured; ``search = "exact"`` turns index scans off, so PostgreSQL compares the
question with every row and the ranking is the true nearest neighbours. Two configured
instances over one table, one of each, are what ``retrievalkit fidelity`` compares to
measure the recall the approximation costs. Questions are embedded with the embedder
that built the table (its ``model_id`` is checked against the table's record).

Everything a configuration can get wrong is checked when the retriever is created: the
server answers, the table exists and records its embedding model, that model is the
configured embedder's, and the query plan is the one asked for (an HNSW index scan, or
none).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from retrievalkit.plugin_api import InputError, document_id_of
from retrievalkit_postgres.connection import Target, server_reason, target_from_url
from retrievalkit_postgres.vectors import (
    DEFAULT_EF_CONSTRUCTION,
    DEFAULT_EF_SEARCH,
    DEFAULT_M,
    EF_CONSTRUCTION_RANGE,
    EF_SEARCH_RANGE,
    M_RANGE,
    SIMILARITIES,
    VectorTable,
    check_embedder_matches,
    check_range,
    check_table_name,
    describe_table,
    identifier,
    read_table,
    vector_literal,
)

if TYPE_CHECKING:
    import psycopg

    from retrievalkit.plugin_api import Embedder

SEARCHES = ("hnsw", "exact")

log = logging.getLogger(__name__)


class SearchFailed(RuntimeError):
    """PostgreSQL could not answer one question; the evaluator records it as an error."""


class PgvectorRetriever:
    """Ranked document ids from a pgvector table, nearest first."""

    embedding_backend = "pgvector"

    def __init__(
        self,
        target: Target,
        table: VectorTable,
        embedder: Embedder,
        *,
        search: str,
        ef_search: int,
        doc_id_separator: str | None = None,
    ) -> None:
        self.identifier = f"pgvector:{table.table}:{search}"
        self.embedder = embedder
        self.embedding_model_id = table.model_id
        self._target = target
        self._table = table
        self._search = search
        self._ef_search = ef_search
        self._separator = doc_id_separator
        self._connection: psycopg.Connection[Any] | None = None
        self._session_ef: int | None = None
        self._versions: dict[str, str] = {}
        self._dropper: Any = None
        self.ephemeral = False
        """Whether the table was built for this retriever and is dropped with it."""

    def close(self) -> None:
        """Close the connection; an ephemeral retriever's table is dropped now."""
        if self._connection is not None and not self._connection.closed:
            self._connection.close()
        if self._dropper is not None:
            self._dropper()

    # --- the retriever contract ------------------------------------------------------------

    def retrieve(self, question: str, limit: int) -> list[str]:
        return [doc_id for doc_id, _ in self.retrieve_scored(question, limit)]

    def retrieve_scored(self, question: str, limit: int) -> list[tuple[str, float]]:
        """(document id, similarity) pairs, best first."""
        from retrievalkit.plugin_api import embed_queries

        if limit <= 0:
            return []
        return self._nearest(vector_literal(embed_queries(self.embedder, [question])[0]), limit)

    def retrieve_many(
        self, questions: Sequence[str], limit: int
    ) -> list[Sequence[str] | BaseException]:
        """One ranking per question; the questions are embedded in one call."""
        from retrievalkit.plugin_api import embed_queries

        if limit <= 0:
            return [[] for _ in questions]
        vectors = [
            vector_literal(vector) for vector in embed_queries(self.embedder, list(questions))
        ]
        try:
            batch = self._nearest_batch(vectors, limit)
        except SearchFailed:
            batch = None  # ask one by one, so each question gets its own outcome
        answers: list[Sequence[str] | BaseException] = []
        for number, vector in enumerate(vectors):
            try:
                found = batch[number] if batch is not None else self._nearest(vector, limit)
                answers.append([doc_id for doc_id, _ in found])
            except SearchFailed as error:
                answers.append(error)
        return answers

    def describe(self) -> dict[str, str]:
        """What the run manifest records: the table, its index, the search (no secrets)."""
        described = dict(describe_table(self._table))
        described["pgvector.search"] = self._search
        if self._search == "hnsw":
            described["pgvector.ef_search"] = str(self._ef_search)
            # HNSW returns at most ef_search rows, so a deeper query widens the search.
            described["pgvector.ef_search_used"] = "max(ef_search, limit)"
        described.update(self._versions)
        return described

    # --- searching -------------------------------------------------------------------------

    def _connect(self) -> psycopg.Connection[Any]:
        from retrievalkit.plugin_api import RetrievalkitError

        if self._connection is None or self._connection.closed:
            try:
                connection = self._target.connect()
            except RetrievalkitError as error:
                raise SearchFailed(str(error)) from None
            configure_session(connection, self._search)
            self._connection = connection
            self._session_ef = None
        return self._connection

    def _query(self) -> psycopg.sql.Composed:
        from psycopg import sql

        similarity = SIMILARITIES[self._table.similarity]
        return sql.SQL(
            "SELECT id, embedding {op} %s::vector AS distance FROM {table}"
            " ORDER BY embedding {op} %s::vector LIMIT %s"
        ).format(op=sql.SQL(similarity.operator), table=identifier(self._table.table))

    def _prepare(self, limit: int) -> psycopg.Connection[Any]:
        """The session, with ``hnsw.ef_search`` wide enough for ``limit`` rows."""
        from psycopg import sql

        connection = self._connect()
        if self._search == "hnsw":
            # HNSW returns at most ef_search rows: a deeper limit widens the search.
            wanted = max(self._ef_search, min(limit, EF_SEARCH_RANGE[1]))
            if wanted != self._session_ef:
                connection.execute(sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(wanted)))
                self._session_ef = wanted
        return connection

    def _failed(self, error: Exception) -> SearchFailed:
        if self._connection is not None and self._connection.broken:
            self._connection = None
        return SearchFailed(
            f"PostgreSQL at {self._target.where} could not search {self._table.table}: "
            f"{server_reason(error)}"
        )

    def _ranking(self, rows: Sequence[tuple[Any, ...]]) -> list[tuple[str, float]]:
        similarity = self._table.similarity
        return [
            (document_id_of(str(doc_id), self._separator), _score(similarity, float(distance)))
            for doc_id, distance in rows
        ]

    def _nearest(self, vector: str, limit: int) -> list[tuple[str, float]]:
        import psycopg

        try:
            connection = self._prepare(limit)
            rows = connection.execute(self._query(), (vector, vector, limit)).fetchall()
        except psycopg.Error as error:
            raise self._failed(error) from None
        return self._ranking(rows)

    def _nearest_batch(self, vectors: Sequence[str], limit: int) -> list[list[tuple[str, float]]]:
        """Every query sent at once in libpq's pipeline mode: one round trip, not one each."""
        import psycopg

        query = self._query()
        try:
            connection = self._prepare(limit)
            cursors = []
            with connection.pipeline():
                for vector in vectors:
                    cursor = connection.cursor()
                    cursor.execute(query, (vector, vector, limit))
                    cursors.append(cursor)
            return [self._ranking(cursor.fetchall()) for cursor in cursors]
        except psycopg.Error as error:
            raise self._failed(error) from None


def _score(similarity: str, distance: float) -> float:
    """pgvector's distance as a similarity, larger is nearer."""
    if similarity == "cosine":
        return 1.0 - distance
    if similarity in ("dot_product", "max_inner_product"):
        return -distance  # <#> is the negative inner product
    return -distance


def configure_session(connection: psycopg.Connection[Any], search: str) -> None:
    """Steer the planner: exact search never touches an index; HNSW never scans the table."""
    if search == "exact":
        for setting in ("enable_indexscan", "enable_bitmapscan", "enable_indexonlyscan"):
            connection.execute(f"SET {setting} = off")
    else:
        connection.execute("SET enable_seqscan = off")


def check_plan(connection: psycopg.Connection[Any], table: VectorTable, search: str) -> None:
    """EXPLAIN one query: an exact search must not use the index, HNSW must."""
    from psycopg import sql

    similarity = SIMILARITIES[table.similarity]
    probe = "[" + ",".join(["0.5"] * table.dimensions) + "]"
    plan = connection.execute(
        sql.SQL(
            "EXPLAIN SELECT id FROM {table} ORDER BY embedding {op} %s::vector LIMIT 10"
        ).format(table=identifier(table.table), op=sql.SQL(similarity.operator)),
        (probe,),
    ).fetchall()
    text = "\n".join(str(row[0]) for row in plan)
    uses_index = "Index Scan" in text
    if (search == "hnsw") != uses_index:
        raise InputError(
            f"PostgreSQL plans a {'sequential' if not uses_index else 'index'} scan of "
            f"{table.table} for search = {search!r}",
            field="search",
            hint="rebuild the table with 'retrievalkit pg index' (it creates the HNSW index)",
        )


def create_pgvector(
    *,
    url: str | None = None,
    table: str | None = None,
    embedder: str | None = None,
    embedder_options: Mapping[str, Any] | None = None,
    search: str = "hnsw",
    ef_search: int = DEFAULT_EF_SEARCH,
    doc_id_separator: str | None = None,
    password: Any = None,
    ephemeral: bool = False,
    corpus: str | None = None,
    m: int = DEFAULT_M,
    ef_construction: int = DEFAULT_EF_CONSTRUCTION,
) -> PgvectorRetriever:
    """Factory of the ``pgvector`` plugin; see docs/postgres.md for the options.

    ``password`` is accepted only to refuse it: libpq reads passwords from PGPASSWORD,
    ~/.pgpass or a service file, never from a configuration.

    With ``ephemeral = true`` the table is built here from ``corpus`` (HNSW ``m`` and
    ``ef_construction``) and dropped when the run ends (`retrievalkit_postgres.ephemeral`).
    """

    from retrievalkit.plugin_api import create_embedder

    if password is not None:
        raise InputError(
            "secrets are not accepted in the configuration (password = ...)",
            field="password",
            hint="remove it; libpq reads the password from PGPASSWORD, ~/.pgpass or PGSERVICE",
        )
    if not isinstance(url, str) or not url:
        raise InputError(
            "the pgvector retriever needs the option 'url'",
            field="url",
            hint='e.g. url = "postgresql://search@127.0.0.1:5433/retrievalkit"',
        )
    name = check_table_name(table)
    if search not in SEARCHES:
        raise InputError(f"must be 'hnsw' or 'exact', got {search!r}", field="search")
    check_range(ef_search, EF_SEARCH_RANGE, "ef_search")
    if not isinstance(embedder, str) or not embedder:
        raise InputError(
            "the pgvector retriever needs the option 'embedder': the embedder that built the table",
            field="embedder",
            hint='e.g. embedder = "wordllama"',
        )
    if doc_id_separator is not None and (
        not isinstance(doc_id_separator, str) or not doc_id_separator
    ):
        raise InputError(
            f"expected a non-empty string such as '#', got {doc_id_separator!r}",
            field="doc_id_separator",
        )
    if embedder_options is not None and not isinstance(embedder_options, Mapping):
        raise InputError("expected a table of options", field="embedder_options")
    if not isinstance(ephemeral, bool):
        raise InputError(f"must be true or false, got {ephemeral!r}", field="ephemeral")
    if corpus is not None and not ephemeral:
        raise InputError(
            "corpus applies only with ephemeral = true (the table is then built from it)",
            field="corpus",
            hint="add ephemeral = true, or build the table with 'retrievalkit pg index'",
        )
    target, _ = target_from_url(url, field="url")
    model = create_embedder(embedder, embedder_options)
    dropper = None
    if ephemeral:
        from retrievalkit_postgres.ephemeral import build_ephemeral, drop_when_done

        check_range(m, M_RANGE, "m")
        check_range(ef_construction, EF_CONSTRUCTION_RANGE, "ef_construction")
        build_ephemeral(target, name, corpus, model, m=m, ef_construction=ef_construction)
        # Until the retriever exists, the drop belongs to this call's frame: a failure
        # below drops the table as soon as the frame goes.
        holder = _Pending()
        dropper = drop_when_done(holder, target, name)
    try:
        return _checked(target, name, model, search, ef_search, doc_id_separator, dropper)
    except BaseException:
        if dropper is not None:
            dropper()
        raise


class _Pending:
    """What owns an ephemeral table between its build and its retriever."""


def _checked(
    target: Target,
    name: str,
    model: Embedder,
    search: str,
    ef_search: int,
    doc_id_separator: str | None,
    dropper: Any,
) -> PgvectorRetriever:
    import psycopg

    from retrievalkit.plugin_api import EvaluationError, RetrievalkitError

    connection = target.connect()
    try:
        described = read_table(connection, name)
        check_embedder_matches(described, model)
        configure_session(connection, search)
        check_plan(connection, described, search)
        versions = connection.execute(
            "SELECT current_setting('server_version'),"
            " (SELECT extversion FROM pg_extension WHERE extname = 'vector')"
        ).fetchone()
    except RetrievalkitError:
        connection.close()
        raise
    except psycopg.errors.InsufficientPrivilege as error:
        connection.close()
        raise InputError(
            f"PostgreSQL at {target.where}: {server_reason(error)}",
            field="table",
            hint=f"grant SELECT on {name} to this role",
        ) from None
    except psycopg.Error as error:
        connection.close()
        raise EvaluationError(
            f"PostgreSQL at {target.where} failed while checking {name}: {server_reason(error)}"
        ) from None
    retriever = PgvectorRetriever(
        target,
        described,
        model,
        search=search,
        ef_search=ef_search,
        doc_id_separator=doc_id_separator,
    )
    retriever._connection = connection
    if dropper is not None:
        from retrievalkit_postgres.ephemeral import drop_when_done

        dropper.detach()
        retriever._dropper = drop_when_done(retriever, target, name)
        retriever.ephemeral = True
    if versions:
        retriever._versions = {
            "postgres.version": str(versions[0]),
            "pgvector.version": str(versions[1]),
        }
    log.info("pgvector on %s at %s (%s search)", name, target.where, search)
    return retriever
