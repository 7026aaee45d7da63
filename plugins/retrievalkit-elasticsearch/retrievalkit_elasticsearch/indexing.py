"""Load a BEIR-style corpus into an Elasticsearch index set up for BM25 evaluation.

The index states everything that decides its scores, so two runs are comparable:
``title`` and ``text`` fields with a named analyzer and an explicit BM25 similarity
(``k1``, ``b``), one shard by default (collection statistics are then global, as in
the BEIR and Anserini setups) and no replicas by default. Documents keep their corpus
``_id``. Over several shards each shard scores with its own statistics unless the
retriever asks for ``search_type = "dfs_query_then_fetch"``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from retrievalkit.errors import EvaluationError, InputError
from retrievalkit.formats.corpus import read_corpus
from retrievalkit_elasticsearch import __version__
from retrievalkit_elasticsearch.connection import (
    Target,
    client_errors,
    error_reason,
    error_type,
    explain,
    version_mismatch,
)

if TYPE_CHECKING:
    from elasticsearch import Elasticsearch

    from retrievalkit_elasticsearch.vectors import VectorIndex

ANALYZERS = ("standard", "english")
SIMILARITY = "retrievalkit_bm25"
#: Elasticsearch's (and Lucene's) BM25 defaults, which the BEIR paper used.
DEFAULT_K1 = 1.2
DEFAULT_B = 0.75
DEFAULT_BATCH_SIZE = 500
MAX_FAILURES_SHOWN = 5


def index_body(
    *,
    k1: float,
    b: float,
    analyzer: str,
    shards: int = 1,
    replicas: int = 0,
    corpus: str | None = None,
    vectors: VectorIndex | None = None,
) -> dict[str, Any]:
    """Settings and mappings of a corpus index: the scoring setup, stated explicitly.

    With ``vectors``, a ``dense_vector`` field too, and the embedder in ``_meta``.
    """
    field = {"type": "text", "analyzer": analyzer, "similarity": SIMILARITY}
    meta: dict[str, Any] = {
        "created_by": f"retrievalkit-elasticsearch {__version__}",
        "analyzer": analyzer,
        "k1": k1,
        "b": b,
    }
    if corpus is not None:
        meta["corpus"] = corpus
    properties: dict[str, Any] = {"title": dict(field), "text": dict(field)}
    if vectors is not None:
        meta["embedding"] = vectors.meta()
        properties[vectors.field] = vectors.mapping()
    return {
        "settings": {
            "number_of_shards": shards,
            "number_of_replicas": replicas,
            # No refreshes while loading; the loader refreshes once at the end.
            "refresh_interval": "-1",
            "similarity": {SIMILARITY: {"type": "BM25", "k1": k1, "b": b}},
        },
        "mappings": {
            "dynamic": "strict",
            "_meta": {"retrievalkit": meta},
            "properties": properties,
        },
    }


#: Elasticsearch refuses a whole bulk request when one ``_id`` is longer than this.
MAX_ID_BYTES = 512


def count_documents(corpus: Path) -> int:
    """Read the whole corpus once, so a malformed line fails before the index is touched."""
    count = 0
    for count, document in enumerate(read_corpus(corpus), start=1):
        size = len(document.id.encode("utf-8"))
        if size > MAX_ID_BYTES:
            raise InputError(
                f"document {count} has an _id of {size} bytes ({document.id[:40]}...); "
                f"Elasticsearch accepts at most {MAX_ID_BYTES}",
                source=str(corpus),
                field="_id",
                hint="shorten the ids (and the golden set's expected ids with them)",
            )
    return count


@attrs.frozen
class LoadReport:
    """What a load did: documents read, indexed, and the first failures with reasons."""

    index: str
    documents: int
    indexed: int
    failed: int
    failures: tuple[tuple[str, str], ...]
    seconds: float
    searchable: int


def create_index(
    client: Elasticsearch, target: Target, index: str, body: dict[str, Any], *, recreate: bool
) -> None:
    """Create the index; an existing one is deleted only with ``recreate``."""
    import elasticsearch

    try:
        exists = bool(client.indices.exists(index=index))
        if exists and not recreate:
            raise InputError(
                f"index '{index}' already exists on {target.where}; nothing was changed",
                field="--index",
                hint="add --recreate to delete and rebuild it, or choose another name",
            )
        if exists:
            client.indices.delete(index=index)
        client.indices.create(index=index, **body)
    except elasticsearch.BadRequestError as error:
        reason = error_reason(error)
        analyzer = body["mappings"]["properties"]["text"]["analyzer"]
        if f"analyzer [{analyzer}]" in reason:
            raise InputError(
                f"Elasticsearch at {target.where} has no '{analyzer}' analyzer ({reason})",
                field="--analyzer",
                hint="the 'english' analyzer comes with the analysis-common module, which "
                "minimal distributions (the integ-test zip) lack; use --analyzer standard or a "
                "full Elasticsearch",
            ) from None
        if error_type(error) == "invalid_index_name_exception":
            raise InputError(f"{reason}", field="--index") from None
        problem = explain(error, target, action=f"create index '{index}'", index=index)
        raise (version_mismatch(client, target) or problem) from None
    except client_errors() as error:
        raise explain(error, target, action=f"create index '{index}'", index=index) from None


def load_documents(
    client: Elasticsearch,
    target: Target,
    corpus: Path,
    index: str,
    *,
    documents: int,
    batch_size: int = DEFAULT_BATCH_SIZE,
    advance: Callable[[int], None] | None = None,
    vectors: tuple[str, Any] | None = None,
) -> LoadReport:
    """Bulk-load the corpus into a created index, refresh it, and count what is searchable.

    A document Elasticsearch rejects (a duplicate id, an id over 512 bytes) is counted
    and reported; a failure of the cluster itself stops the load with an error. With
    ``vectors`` (the field and a matrix, row ``i`` for the corpus's document ``i``), each
    document carries its vector.
    """
    from elasticsearch import helpers

    step = advance or (lambda _: None)
    began = time.perf_counter()
    indexed = 0
    failed = 0
    failures: list[tuple[str, str]] = []

    def actions() -> Iterator[dict[str, Any]]:
        for row, document in enumerate(read_corpus(corpus)):
            source: dict[str, Any] = {"title": document.title, "text": document.text}
            if vectors is not None:
                # float32 -> Python float is exact, and Elasticsearch stores float32 again.
                source[vectors[0]] = [float(value) for value in vectors[1][row]]
            yield {
                "_op_type": "create",  # a repeated id is a failure, never a silent overwrite
                "_index": index,
                "_id": document.id,
                "_source": source,
            }

    try:
        for ok, item in helpers.streaming_bulk(
            client,
            actions(),
            chunk_size=batch_size,
            raise_on_error=False,
            max_retries=3,
        ):
            if ok:
                indexed += 1
            else:
                failed += 1
                detail: dict[str, Any] = next(iter(item.values()), {})
                if len(failures) < MAX_FAILURES_SHOWN:
                    failures.append(
                        (str(detail.get("_id")), _bulk_reason(detail.get("error", detail)))
                    )
            step(1)
        client.indices.put_settings(index=index, settings={"index": {"refresh_interval": None}})
        client.indices.refresh(index=index)
        searchable = int(client.count(index=index)["count"])
    except client_errors() as error:
        problem = explain(error, target, action=f"load documents into '{index}'", index=index)
        raise EvaluationError(
            f"{problem}; the index '{index}' is incomplete ({indexed} documents loaded): "
            "re-run with --recreate"
        ) from None
    return LoadReport(
        index=index,
        documents=documents,
        indexed=indexed,
        failed=failed,
        failures=tuple(failures),
        seconds=time.perf_counter() - began,
        searchable=searchable,
    )


def _bulk_reason(error: Any) -> str:
    if isinstance(error, dict):
        return f"{error.get('type', 'error')}: {error.get('reason', '')}".rstrip(": ")
    return str(error)
