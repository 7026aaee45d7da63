"""A corpus and its embeddings in a Qdrant collection, and the record of what made it.

``retrievalkit qdrant index`` embeds every document (title and text, as the embedded
``dense`` retriever does, through the same embedding cache keyed by corpus hash and
model) and writes one point per document: the point id is the document's position in
the corpus, its payload the document id. The collection's HNSW graph takes ``m`` and
``ef_construct``. What made the collection, the embedding model, its dimensions and
similarity, the HNSW parameters and the corpus hash, is kept in the collection's own
metadata, so a retriever over it knows which model must embed the questions and the run
manifest records it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from retrievalkit.plugin_api import InputError

if TYPE_CHECKING:
    from qdrant_client import QdrantClient

    from retrievalkit.plugin_api import Embedder
    from retrievalkit_qdrant.connection import Handle

#: Qdrant's defaults, and the bounds retrievalkit accepts.
DEFAULT_M = 16
DEFAULT_EF_CONSTRUCT = 100
M_RANGE = (2, 128)
EF_CONSTRUCT_RANGE = (4, 4096)
HNSW_EF_RANGE = (1, 4096)
#: Where ``qdrant index`` keeps embeddings unless told otherwise: the ``dense`` retriever's.
DEFAULT_CACHE_DIR = ".retrievalkit/embeddings"
#: Points written per request.
UPLOAD_BATCH = 256
#: The marker in a collection's metadata that says retrievalkit built it.
METADATA_KIND = "retrievalkit-qdrant"
METADATA_VERSION = 1
#: The embedder similarity -> Qdrant's distance. Unit-length vectors (``dot_product``)
#: rank by the inner product as by cosine.
DISTANCES = {
    "cosine": "Cosine",
    "dot_product": "Dot",
    "max_inner_product": "Dot",
    "l2_norm": "Euclid",
}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$")


@attrs.frozen
class VectorCollection:
    """What a collection's metadata records about a collection ``qdrant index`` built."""

    collection: str
    model_id: str
    dimensions: int
    similarity: str
    distance: str
    m: int
    ef_construct: int
    documents: int
    corpus_hash: str
    created_at: str

    def metadata(self) -> dict[str, Any]:
        return {"kind": METADATA_KIND, "version": METADATA_VERSION, **attrs.asdict(self)}


@attrs.frozen
class IndexReport:
    collection: VectorCollection
    embed_seconds: float
    load_seconds: float


def check_range(value: Any, bounds: tuple[int, int], field: str) -> int:
    """A whole number within the bounds, or an error naming the option."""
    low, high = bounds
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InputError(f"must be a whole number from {low} to {high}, got {value!r}", field=field)
    return value


def check_collection_name(name: Any, field: str = "collection") -> str:
    """Letters, digits, ``.``, ``_`` and ``-``: a name that is also a safe folder name."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise InputError(
            "expected a collection name of letters, digits, '.', '_' and '-' (such as "
            f"scifact_wordllama), got {name!r}",
            field=field,
        )
    return name


def build_collection(
    handle: Handle,
    name: str,
    corpus: Path,
    embedder: Embedder,
    *,
    m: int = DEFAULT_M,
    ef_construct: int = DEFAULT_EF_CONSTRUCT,
    recreate: bool = False,
    batch_size: int = 256,
    cache_dir: str | None = DEFAULT_CACHE_DIR,
    progress: bool = False,
    field: str = "--collection",
    advance: Callable[[int], None] | None = None,
) -> IndexReport:
    """Embed the corpus and write it as a new collection; a failure leaves no collection."""
    import numpy as np
    from qdrant_client import models

    from retrievalkit.plugin_api import embed_corpus

    distance = DISTANCES.get(embedder.similarity)
    if distance is None:
        raise InputError(
            f"the embedder's similarity {embedder.similarity!r} has no Qdrant distance",
            field="--embedder",
        )
    client = handle.client
    started = time.monotonic()
    embedded = embed_corpus(
        corpus,
        embedder,
        cache_dir=cache_dir or None,
        batch_size=batch_size,
        progress=progress,
        label="qdrant index",
    )
    seen: set[str] = set()
    for document in embedded.documents:
        if document.id in seen:
            raise InputError(f"document id {document.id!r} occurs twice", source=str(corpus))
        seen.add(document.id)
    loaded_from = time.monotonic()
    record = VectorCollection(
        collection=name,
        model_id=embedder.model_id,
        dimensions=embedder.dimensions,
        similarity=embedder.similarity,
        distance=distance,
        m=m,
        ef_construct=ef_construct,
        documents=len(embedded.documents),
        corpus_hash=embedded.corpus_hash,
        created_at=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    if client.collection_exists(name):
        if not recreate:
            raise InputError(
                f"the collection {name} already exists in {handle.location.where}",
                field=field,
                hint="name another collection, or give --recreate to replace it",
            )
        read_collection(client, name, where=handle.location.where)  # only one we built
        client.delete_collection(name)
    client.create_collection(
        name,
        vectors_config=models.VectorParams(
            size=embedder.dimensions, distance=models.Distance(distance)
        ),
        hnsw_config=models.HnswConfigDiff(m=m, ef_construct=ef_construct),
        metadata={**record.metadata(), "complete": False},
    )
    try:
        matrix = embedded.matrix
        for start in range(0, len(embedded.documents), UPLOAD_BATCH):
            block = embedded.documents[start : start + UPLOAD_BATCH]
            client.upsert(
                name,
                points=models.Batch(
                    ids=list(range(start, start + len(block))),
                    vectors=np.asarray(matrix[start : start + len(block)]).tolist(),
                    payloads=[{"doc_id": document.id} for document in block],
                ),
                wait=True,
            )
            if advance is not None:
                advance(len(block))
        # Marked complete last: a collection whose upload broke off is never searched.
        client.update_collection(name, metadata={"complete": True})
    except BaseException:
        with contextlib.suppress(Exception):  # the original error is the one to report
            client.delete_collection(name)
        raise
    return IndexReport(record, loaded_from - started, time.monotonic() - loaded_from)


def read_collection(client: QdrantClient, name: str, *, where: str) -> VectorCollection:
    """The record of a collection ``qdrant index`` built; an error naming the fix otherwise."""
    if not client.collection_exists(name):
        raise InputError(
            f"{where} has no Qdrant collection {name}",
            field="collection",
            hint="check the name and the path or url, or create it with 'retrievalkit qdrant "
            "index'",
        )
    data = client.get_collection(name).config.metadata or {}
    if data.get("kind") != METADATA_KIND:
        raise InputError(
            f"the collection {name} in {where} was not built by 'retrievalkit qdrant index' "
            "(its metadata does not record the embedding model)",
            field="collection",
            hint="build it with 'retrievalkit qdrant index', which records the model and index",
        )
    if data.get("complete") is not True:
        raise InputError(
            f"the collection {name} in {where} is incomplete (its build was interrupted)",
            field="collection",
            hint=f"build it again with 'retrievalkit qdrant index --recreate --collection {name}'",
        )
    fields = {field.name for field in attrs.fields(VectorCollection)}
    try:
        return VectorCollection(**{key: value for key, value in data.items() if key in fields})
    except TypeError:
        raise InputError(
            f"the metadata of the collection {name} in {where} is damaged",
            field="collection",
            hint="build it again with 'retrievalkit qdrant index --recreate'",
        ) from None


def check_embedder_matches(collection: VectorCollection, embedder: Embedder) -> None:
    """The questions must be embedded by the model that embedded the documents."""
    if embedder.model_id != collection.model_id or embedder.dimensions != collection.dimensions:
        raise InputError(
            f"the collection {collection.collection} holds vectors of {collection.model_id} "
            f"({collection.dimensions} dimensions), but the embedder is {embedder.model_id} "
            f"({embedder.dimensions})",
            field="embedder",
            hint="configure the embedder (and embedder_options) that built the collection",
        )


def drop_collection(client: QdrantClient, name: str, *, where: str) -> None:
    """Delete a collection ``qdrant index`` (or an ephemeral retriever) built; refuse others."""
    if not client.collection_exists(name):
        raise InputError(f"{where} has no Qdrant collection {name}", field="collection")
    data = client.get_collection(name).config.metadata or {}
    if data.get("kind") != METADATA_KIND:
        raise InputError(
            f"the collection {name} in {where} was not built by 'retrievalkit qdrant index'; "
            "it is left alone",
            field="collection",
        )
    client.delete_collection(name)


def describe_collection(collection: VectorCollection) -> Mapping[str, str]:
    return {
        "qdrant.collection": collection.collection,
        "qdrant.m": str(collection.m),
        "qdrant.ef_construct": str(collection.ef_construct),
        "qdrant.distance": collection.distance,
        "qdrant.documents": str(collection.documents),
        "embedding.dimensions": str(collection.dimensions),
        "embedding.similarity": collection.similarity,
        "embedding.corpus_hash": collection.corpus_hash[:16],
    }
