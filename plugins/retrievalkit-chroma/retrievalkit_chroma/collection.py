"""A corpus and its embeddings in a Chroma collection on disk, and the record of what made it.

``retrievalkit chroma index`` embeds every document (title and text, as the embedded
``dense`` retriever does, through the same embedding cache keyed by corpus hash and
model) and adds one record per document: the record id is the document id, its metadata
the document's position in the corpus. Chroma's HNSW index takes ``hnsw:space``,
``hnsw:M``, ``hnsw:construction_ef`` and ``hnsw:search_ef`` from the collection's
metadata, which also records (under ``retrievalkit:``) the embedding model, its
dimensions and similarity, and the corpus hash, so a retriever over it knows which model
must embed the questions and the run manifest records it.

Chroma is never given an embedding function: its default one would download a model.
Every vector comes from a retrievalkit embedder. The collection is written under a
temporary name and renamed when complete, so a build that fails or is interrupted never
leaves a collection of the final name.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
import secrets
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from retrievalkit.plugin_api import InputError

if TYPE_CHECKING:
    from chromadb.api import ClientAPI

    from retrievalkit.plugin_api import Embedder

#: Chroma's defaults, and the bounds retrievalkit accepts.
DEFAULT_M = 16
DEFAULT_CONSTRUCTION_EF = 100
DEFAULT_SEARCH_EF = 100
M_RANGE = (2, 128)
EF_RANGE = (1, 4096)
DEFAULT_CACHE_DIR = ".retrievalkit/embeddings"
#: The embedder similarity -> Chroma's space (distance): unit-length vectors
#: (``dot_product``) rank by the inner product as by cosine.
SPACES = {"cosine": "cosine", "dot_product": "ip", "max_inner_product": "ip", "l2_norm": "l2"}
SPACE_NAMES = ("cosine", "ip", "l2")
KIND = "retrievalkit-chroma"
METADATA_VERSION = 1
PREFIX = "retrievalkit:"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,200}[A-Za-z0-9]$")


@attrs.frozen
class VectorCollection:
    """What a collection's metadata records about a collection ``chroma index`` built."""

    collection: str
    model_id: str
    dimensions: int
    similarity: str
    space: str
    m: int
    construction_ef: int
    search_ef: int
    documents: int
    corpus_hash: str
    created_at: str

    def metadata(self) -> dict[str, Any]:
        """Chroma's HNSW keys, and retrievalkit's record under ``retrievalkit:``."""
        own = {
            "kind": KIND,
            "version": METADATA_VERSION,
            "model_id": self.model_id,
            "dimensions": self.dimensions,
            "similarity": self.similarity,
            "documents": self.documents,
            "corpus_hash": self.corpus_hash,
            "created_at": self.created_at,
        }
        return {
            "hnsw:space": self.space,
            "hnsw:M": self.m,
            "hnsw:construction_ef": self.construction_ef,
            "hnsw:search_ef": self.search_ef,
            **{PREFIX + key: value for key, value in own.items()},
        }


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
    """Chroma's rule: 3 to 202 of letters, digits, ``.``, ``_``, ``-``, alphanumeric ends."""
    if not isinstance(name, str) or not _NAME.match(name) or ".." in name:
        raise InputError(
            "expected a collection name of 3 or more letters, digits, '.', '_' and '-', "
            f"starting and ending with a letter or digit (such as scifact_wordllama), got {name!r}",
            field=field,
        )
    return name


def check_space(space: Any, field: str = "space") -> str:
    if space not in SPACE_NAMES:
        raise InputError(
            f"must be one of {', '.join(SPACE_NAMES)} (Chroma's hnsw:space), got {space!r}",
            field=field,
        )
    return str(space)


def open_client(path: Any, *, field: str = "path") -> ClientAPI:
    """Chroma's PersistentClient on ``path``, anonymized telemetry off."""
    import chromadb
    from chromadb.config import Settings

    if not isinstance(path, str) or not path.strip():
        raise InputError(
            f"expected the folder that holds the Chroma database, got {path!r}",
            field=field,
            hint='e.g. path = ".retrievalkit/chroma"',
        )
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
        return chromadb.PersistentClient(
            path=path, settings=Settings(anonymized_telemetry=False, allow_reset=False)
        )
    except OSError as error:
        raise InputError(
            f"cannot open the Chroma folder: {error.strerror or error}", source=path, field=field
        ) from None


def _names(client: ClientAPI) -> set[str]:
    # Chroma 1.x lists Collection objects; older releases listed names.
    return {str(getattr(item, "name", item)) for item in client.list_collections()}


def build_collection(
    client: ClientAPI,
    name: str,
    corpus: Path,
    embedder: Embedder,
    *,
    where: str,
    space: str | None = None,
    m: int = DEFAULT_M,
    construction_ef: int = DEFAULT_CONSTRUCTION_EF,
    search_ef: int = DEFAULT_SEARCH_EF,
    recreate: bool = False,
    batch_size: int = 256,
    cache_dir: str | None = DEFAULT_CACHE_DIR,
    progress: bool = False,
    field: str = "--collection",
) -> IndexReport:
    """Embed the corpus and write it as a new collection; a failure leaves no collection."""
    import numpy as np

    from retrievalkit.plugin_api import embed_corpus

    chosen = SPACES.get(embedder.similarity) if space is None else check_space(space, "--space")
    if chosen is None:
        raise InputError(
            f"the embedder's similarity {embedder.similarity!r} has no Chroma space",
            field="--embedder",
        )
    started = time.monotonic()
    embedded = embed_corpus(
        corpus,
        embedder,
        cache_dir=cache_dir or None,
        batch_size=batch_size,
        progress=progress,
        label="chroma index",
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
        space=chosen,
        m=m,
        construction_ef=construction_ef,
        search_ef=search_ef,
        documents=len(embedded.documents),
        corpus_hash=embedded.corpus_hash,
        created_at=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    if name in _names(client):
        if not recreate:
            raise InputError(
                f"the collection {name} already exists in {where}",
                field=field,
                hint="name another collection, or give --recreate to replace it",
            )
        read_collection(client, name, where=where)  # only one chroma index built
    building = f"{name[:180]}-building-{secrets.token_hex(4)}"
    target = client.create_collection(building, metadata=record.metadata(), embedding_function=None)
    try:
        step = max(1, min(5000, int(client.get_max_batch_size())))
        for start in range(0, len(embedded.documents), step):
            block = embedded.documents[start : start + step]
            target.add(
                ids=[document.id for document in block],
                embeddings=np.asarray(embedded.matrix[start : start + len(block)]),
                metadatas=[{"position": start + offset} for offset in range(len(block))],
            )
        if recreate and name in _names(client):
            client.delete_collection(name)
        target.modify(name=name)
    except BaseException:
        with contextlib.suppress(Exception):  # the original error is the one to report
            client.delete_collection(building)
        raise
    return IndexReport(record, loaded_from - started, time.monotonic() - loaded_from)


def read_collection(client: ClientAPI, name: str, *, where: str) -> VectorCollection:
    """The record of a collection ``chroma index`` built; an error naming the fix otherwise."""
    from chromadb.errors import NotFoundError

    try:
        found = client.get_collection(name, embedding_function=None)
    except NotFoundError:
        raise InputError(
            f"{where} has no Chroma collection {name}",
            field="collection",
            hint="check the name and the path, or create it with 'retrievalkit chroma index'",
        ) from None
    data = dict(found.metadata or {})
    own = {key[len(PREFIX) :]: value for key, value in data.items() if key.startswith(PREFIX)}
    if own.get("kind") != KIND:
        raise InputError(
            f"the collection {name} in {where} was not built by 'retrievalkit chroma index' "
            "(its metadata does not record the embedding model)",
            field="collection",
            hint="build it with 'retrievalkit chroma index', which records the model and index",
        )
    try:
        return VectorCollection(
            collection=name,
            model_id=str(own["model_id"]),
            dimensions=int(own["dimensions"]),
            similarity=str(own["similarity"]),
            space=str(data["hnsw:space"]),
            m=int(data["hnsw:M"]),
            construction_ef=int(data["hnsw:construction_ef"]),
            search_ef=int(data["hnsw:search_ef"]),
            documents=int(own["documents"]),
            corpus_hash=str(own["corpus_hash"]),
            created_at=str(own["created_at"]),
        )
    except (KeyError, TypeError, ValueError):
        raise InputError(
            f"the metadata of the collection {name} in {where} is damaged",
            field="collection",
            hint="build it again with 'retrievalkit chroma index --recreate'",
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


def drop_collection(client: ClientAPI, name: str, *, where: str) -> None:
    """Delete a collection ``chroma index`` (or an ephemeral retriever) built; refuse others."""
    from chromadb.errors import NotFoundError

    try:
        found = client.get_collection(name, embedding_function=None)
    except NotFoundError:
        raise InputError(f"{where} has no Chroma collection {name}", field="collection") from None
    if (found.metadata or {}).get(PREFIX + "kind") != KIND:
        raise InputError(
            f"the collection {name} in {where} was not built by 'retrievalkit chroma index'; "
            "it is left alone",
            field="collection",
        )
    client.delete_collection(name)


def describe_collection(collection: VectorCollection) -> Mapping[str, str]:
    return {
        "chroma.collection": collection.collection,
        "chroma.hnsw:space": collection.space,
        "chroma.hnsw:M": str(collection.m),
        "chroma.hnsw:construction_ef": str(collection.construction_ef),
        "chroma.hnsw:search_ef": str(collection.search_ef),
        "chroma.documents": str(collection.documents),
        "embedding.dimensions": str(collection.dimensions),
        "embedding.similarity": collection.similarity,
        "embedding.corpus_hash": collection.corpus_hash[:16],
    }
