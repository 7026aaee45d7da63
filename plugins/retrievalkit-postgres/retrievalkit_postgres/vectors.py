"""A corpus and its embeddings in a pgvector table with an HNSW index, and how to search it.

``retrievalkit pg index`` embeds every document (title and text, as the embedded
``dense`` retriever does) with an embedder plugin and loads them, in ONE transaction,
into a table ``id text PRIMARY KEY, title text, body text, embedding vector(D)`` with an
HNSW index (``m``, ``ef_construction``) whose operator class follows the embedder's
similarity. What made the table, the embedding model, its dimensions and similarity,
the index parameters, the corpus hash, is kept as JSON in the table's comment, so a
retriever over it knows which model must embed the questions and the run manifest
records it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from retrievalkit.errors import InputError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import psycopg

    from retrievalkit.embedders import Embedder

#: pgvector's defaults, and the bounds it accepts.
DEFAULT_M = 16
DEFAULT_EF_CONSTRUCTION = 64
DEFAULT_EF_SEARCH = 40
M_RANGE = (2, 100)
EF_CONSTRUCTION_RANGE = (4, 1000)
EF_SEARCH_RANGE = (1, 1000)
#: The marker in a table comment that says retrievalkit built the table.
METADATA_KIND = "retrievalkit-pgvector"
METADATA_VERSION = 1


@attrs.frozen
class Similarity:
    """How one embedder similarity maps onto pgvector: operator class and distance operator."""

    name: str
    opclass: str
    operator: str


SIMILARITIES: dict[str, Similarity] = {
    "cosine": Similarity("cosine", "vector_cosine_ops", "<=>"),
    # Unit-length vectors: the inner product ranks as cosine does, and costs less.
    "dot_product": Similarity("dot_product", "vector_ip_ops", "<#>"),
    "max_inner_product": Similarity("max_inner_product", "vector_ip_ops", "<#>"),
    "l2_norm": Similarity("l2_norm", "vector_l2_ops", "<->"),
}


@attrs.frozen
class VectorTable:
    """What the table comment records about a table ``pg index`` built."""

    table: str
    model_id: str
    dimensions: int
    similarity: str
    m: int
    ef_construction: int
    documents: int
    corpus_hash: str
    created_at: str

    def comment(self) -> str:
        return json.dumps(
            {"kind": METADATA_KIND, "version": METADATA_VERSION, **attrs.asdict(self)},
            sort_keys=True,
        )


@attrs.frozen
class IndexReport:
    table: VectorTable
    embed_seconds: float
    load_seconds: float
    index_seconds: float


def check_range(value: Any, bounds: tuple[int, int], field: str) -> int:
    """A whole number within pgvector's bounds, or an error naming the option."""
    low, high = bounds
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InputError(f"must be a whole number from {low} to {high}, got {value!r}", field=field)
    return value


def check_table_name(name: Any, field: str = "table") -> str:
    """``table`` or ``schema.table``; quoted as identifiers, so any characters are safe."""
    if not isinstance(name, str) or not name.strip() or name.count(".") > 1:
        raise InputError(
            f"expected a table name such as scifact_vectors or search.scifact, got {name!r}",
            field=field,
        )
    if any(len(part) > 63 or not part for part in name.split(".")):
        raise InputError(f"each part of {name!r} must be 1 to 63 characters", field=field)
    return name


def identifier(name: str) -> psycopg.sql.Identifier:
    from psycopg import sql

    return sql.Identifier(*name.split("."))


def vector_literal(row: npt.NDArray[np.float32]) -> str:
    """pgvector's text form, every float32 written so that it reads back to the same bits."""
    return "[" + ",".join(repr(float(value)) for value in row) + "]"


def build_table(
    connection: psycopg.Connection[Any],
    name: str,
    corpus: Path,
    embedder: Embedder,
    *,
    m: int = DEFAULT_M,
    ef_construction: int = DEFAULT_EF_CONSTRUCTION,
    recreate: bool = False,
    batch_size: int = 256,
    advance: Callable[[int], None] | None = None,
) -> IndexReport:
    """Embed the corpus and create the table and its HNSW index, all in one transaction."""
    import datetime as dt

    import numpy as np
    import psycopg
    from psycopg import sql

    from retrievalkit.formats.corpus import read_corpus
    from retrievalkit.retrievers.dense import corpus_hash, document_text

    similarity = SIMILARITIES.get(embedder.similarity)
    if similarity is None:
        raise InputError(
            f"the embedder's similarity {embedder.similarity!r} has no pgvector operator",
            field="--embedder",
        )
    documents = list(read_corpus(corpus))
    if not documents:
        raise InputError("the corpus holds no documents", source=str(corpus))
    seen: set[str] = set()
    for document in documents:
        if document.id in seen:
            raise InputError(f"document id {document.id!r} occurs twice", source=str(corpus))
        seen.add(document.id)
    table = identifier(name)
    started = time.monotonic()
    texts = [document_text(document) for document in documents]
    vectors = np.zeros((len(texts), embedder.dimensions), dtype=np.float32)
    for start in range(0, len(texts), batch_size):
        block = np.asarray(embedder.embed(texts[start : start + batch_size]), dtype=np.float32)
        if block.shape != (len(texts[start : start + batch_size]), embedder.dimensions):
            raise InputError(
                f"the embedder {embedder.model_id} returned a {block.shape} matrix for "
                f"{len(texts[start : start + batch_size])} texts of {embedder.dimensions} "
                "dimensions",
                field="--embedder",
            )
        vectors[start : start + len(block)] = block
        if advance is not None:
            advance(len(block))
    if not np.isfinite(vectors).all():
        raise InputError(f"the embedder {embedder.model_id} returned NaN or infinite values")
    embedded = time.monotonic()
    metadata = VectorTable(
        table=name,
        model_id=embedder.model_id,
        dimensions=embedder.dimensions,
        similarity=similarity.name,
        m=m,
        ef_construction=ef_construction,
        documents=len(documents),
        corpus_hash=corpus_hash(documents),
        created_at=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    with connection.transaction(), connection.cursor() as cursor:
        cursor.execute("CREATE EXTENSION IF NOT EXISTS vector")
        if recreate:
            cursor.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
        try:
            cursor.execute(
                sql.SQL(
                    "CREATE TABLE {} (id text PRIMARY KEY, title text NOT NULL,"
                    " body text NOT NULL, embedding vector({}) NOT NULL)"
                ).format(table, sql.Literal(embedder.dimensions))
            )
        except psycopg.errors.DuplicateTable:
            raise InputError(
                f"the table {name} already exists",
                field="--table",
                hint="name another table, or give --recreate to replace it",
            ) from None
        copy_sql = sql.SQL("COPY {} (id, title, body, embedding) FROM STDIN").format(table)
        with cursor.copy(copy_sql) as copy:
            for document, vector in zip(documents, vectors, strict=True):
                copy.write_row((document.id, document.title, document.text, vector_literal(vector)))
        loaded = time.monotonic()
        cursor.execute(
            sql.SQL(
                "CREATE INDEX {} ON {} USING hnsw (embedding {})"
                " WITH (m = {}, ef_construction = {})"
            ).format(
                sql.Identifier(f"{name.split('.')[-1]}_hnsw"),
                table,
                sql.SQL(similarity.opclass),
                sql.Literal(m),
                sql.Literal(ef_construction),
            )
        )
        cursor.execute(
            sql.SQL("COMMENT ON TABLE {} IS {}").format(table, sql.Literal(metadata.comment()))
        )
        cursor.execute(sql.SQL("ANALYZE {}").format(table))
    indexed = time.monotonic()
    return IndexReport(
        table=metadata,
        embed_seconds=embedded - started,
        load_seconds=loaded - embedded,
        index_seconds=indexed - loaded,
    )


def read_table(connection: psycopg.Connection[Any], name: str) -> VectorTable:
    """The metadata of a table ``pg index`` built; an error naming the fix otherwise."""
    found = connection.execute(
        "SELECT obj_description(to_regclass(%s), 'pg_class'), to_regclass(%s) IS NOT NULL",
        (name, name),
    ).fetchone()
    if found is None or not found[1]:
        raise InputError(
            f"the database has no table {name}",
            field="table",
            hint="check the name, or create it with 'retrievalkit pg index'",
        )
    try:
        data = json.loads(found[0] or "")
        if data.get("kind") != METADATA_KIND:
            raise ValueError(data.get("kind"))
        fields = {field.name for field in attrs.fields(VectorTable)}
        return VectorTable(**{key: value for key, value in data.items() if key in fields})
    except (ValueError, TypeError, AttributeError):
        raise InputError(
            f"the table {name} was not built by 'retrievalkit pg index' (its comment does not "
            "record the embedding model)",
            field="table",
            hint="build it with 'retrievalkit pg index', which records the model and index",
        ) from None


def check_embedder_matches(table: VectorTable, embedder: Embedder) -> None:
    """The questions must be embedded by the model that embedded the documents."""
    if embedder.model_id != table.model_id or embedder.dimensions != table.dimensions:
        raise InputError(
            f"the table {table.table} holds vectors of {table.model_id} ({table.dimensions} "
            f"dimensions), but the embedder is {embedder.model_id} ({embedder.dimensions})",
            field="embedder",
            hint="configure the embedder (and embedder_options) that built the table",
        )


def describe_table(table: VectorTable) -> Mapping[str, str]:
    return {
        "pgvector.table": table.table,
        "pgvector.m": str(table.m),
        "pgvector.ef_construction": str(table.ef_construction),
        "pgvector.documents": str(table.documents),
        "embedding.dimensions": str(table.dimensions),
        "embedding.similarity": table.similarity,
        "embedding.corpus_hash": table.corpus_hash[:16],
    }
