"""The ``chroma`` retriever: nearest documents in a collection ``retrievalkit chroma index`` built.

``search = "hnsw"`` (the default) asks Chroma's HNSW index (its ``hnsw:search_ef`` is the
collection's, set by ``chroma index --search-ef``). Chroma has no switch for an exact
search, so ``search = "exact"`` reads every stored vector back from the collection once,
when the retriever is created, and ranks all of them against the question in NumPy by
the collection's space (cosine, inner product or squared Euclidean distance), ties in
corpus order. The reference is thus the vectors Chroma holds, not a recomputation, and
two configured instances over one collection, one of each, are what ``retrievalkit
fidelity`` compares to measure the recall HNSW costs.

Questions are embedded with the embedder that built the collection (its ``model_id`` is
checked against the collection's metadata); Chroma's own embedding function is never
used.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrievalkit.plugin_api import InputError, document_id_of
from retrievalkit_chroma.collection import (
    DEFAULT_CACHE_DIR,
    DEFAULT_CONSTRUCTION_EF,
    DEFAULT_M,
    DEFAULT_SEARCH_EF,
    EF_RANGE,
    M_RANGE,
    VectorCollection,
    check_collection_name,
    check_embedder_matches,
    check_range,
    check_space,
    describe_collection,
    open_client,
    read_collection,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from chromadb.api import ClientAPI

    from retrievalkit.plugin_api import Embedder

SEARCHES = ("hnsw", "exact")
#: Stored vectors read back per request for exact search.
READ_PAGE = 5000

log = logging.getLogger(__name__)


class SearchFailed(RuntimeError):
    """Chroma could not answer one question; the evaluator records it as an error."""


class ChromaRetriever:
    """Ranked document ids from a Chroma collection, nearest first."""

    embedding_backend = "chroma"

    def __init__(
        self,
        client: ClientAPI,
        where: str,
        collection: VectorCollection,
        embedder: Embedder,
        *,
        search: str,
        doc_id_separator: str | None = None,
        ephemeral: bool = False,
    ) -> None:
        self.identifier = f"chroma:{collection.collection}:{search}"
        self.embedder = embedder
        self.embedding_model_id = collection.model_id
        self.ephemeral = ephemeral
        """Whether the collection was built for this retriever and is deleted with it."""
        self._where = where
        self._collection = collection
        self._search = search
        self._separator = doc_id_separator
        self._handle = client.get_collection(collection.collection, embedding_function=None)
        self._ids: list[str] = []
        self._matrix: npt.NDArray[np.float32] | None = None
        self._norms: npt.NDArray[np.float32] | None = None
        if search == "exact":
            self._load_vectors()
        self._finish = weakref.finalize(
            self, _finish, client, where, collection.collection if ephemeral else None
        )

    def close(self) -> None:
        """An ephemeral retriever's collection is deleted now (once)."""
        self._finish()

    # --- the retriever contract ------------------------------------------------------------

    def retrieve(self, question: str, limit: int) -> list[str]:
        return [doc_id for doc_id, _ in self.retrieve_scored(question, limit)]

    def retrieve_scored(self, question: str, limit: int) -> list[tuple[str, float]]:
        """(document id, similarity) pairs, best first."""
        from retrievalkit.plugin_api import embed_queries

        if limit <= 0:
            return []
        return self._nearest_batch(embed_queries(self.embedder, [question]), limit)[0]

    def retrieve_many(self, questions: Sequence[str], limit: int) -> list[list[str]]:
        """One ranking per question; the questions are embedded and sent in one call."""
        from retrievalkit.plugin_api import embed_queries

        if limit <= 0:
            return [[] for _ in questions]
        found = self._nearest_batch(embed_queries(self.embedder, list(questions)), limit)
        return [[doc_id for doc_id, _ in ranking] for ranking in found]

    def describe(self) -> dict[str, str]:
        """What the run manifest records: the collection, its index, the search."""
        import importlib.metadata

        described = dict(describe_collection(self._collection))
        described["chroma.path"] = self._where
        described["chroma.search"] = self._search
        if self._search == "exact":
            described["chroma.search_used"] = "exact: every stored vector ranked in NumPy"
        described["chromadb.version"] = importlib.metadata.version("chromadb")
        if self.ephemeral:
            described["chroma.ephemeral"] = "true"
        return described

    # --- searching -------------------------------------------------------------------------

    def _load_vectors(self) -> None:
        """Every stored vector, row ``position`` for the document at that corpus position."""
        import numpy as np

        size = self._collection.documents
        matrix = np.zeros((size, self._collection.dimensions), dtype=np.float32)
        ids: list[str | None] = [None] * size
        for offset in range(0, size, READ_PAGE):
            page = self._handle.get(
                limit=READ_PAGE, offset=offset, include=["embeddings", "metadatas"]
            )
            embeddings = page["embeddings"]
            metadatas = page["metadatas"] or []
            assert embeddings is not None
            for doc_id, vector, metadata in zip(page["ids"], embeddings, metadatas, strict=True):
                position = int(str((metadata or {})["position"]))
                matrix[position] = np.asarray(vector, dtype=np.float32)
                ids[position] = doc_id
        if any(doc_id is None for doc_id in ids):
            raise InputError(
                f"the collection {self._collection.collection} in {self._where} holds fewer "
                f"records than the {size} its metadata records",
                field="collection",
                hint="build it again with 'retrievalkit chroma index --recreate'",
            )
        self._ids = [document_id_of(str(doc_id), self._separator) for doc_id in ids]
        self._matrix = matrix
        if self._collection.space in ("cosine", "l2"):
            self._norms = np.linalg.norm(matrix, axis=1).astype(np.float32)

    def _exact(self, query: npt.NDArray[np.float32], limit: int) -> list[tuple[str, float]]:
        """Every stored vector scored as the ``dense`` retriever scores, ties in corpus order."""
        import numpy as np

        assert self._matrix is not None
        scores = self._matrix @ query
        query_norm = np.float32(np.linalg.norm(query))
        if self._collection.space == "cosine":
            assert self._norms is not None
            norms = self._norms * query_norm
            scores = np.divide(scores, norms, out=np.zeros_like(scores), where=norms > 0)
        elif self._collection.space == "l2":
            assert self._norms is not None
            scores = -np.maximum(self._norms**2 + query_norm**2 - 2 * scores, 0)
        take = min(limit, len(scores))
        order = np.lexsort((np.arange(len(scores)), -scores))[:take]
        return [(self._ids[index], float(scores[index])) for index in order]

    def _nearest_batch(
        self, vectors: npt.NDArray[np.float32], limit: int
    ) -> list[list[tuple[str, float]]]:
        import numpy as np

        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self._collection.dimensions:
            raise SearchFailed(
                f"the embedder gave question vectors of shape {vectors.shape}, "
                f"not (n, {self._collection.dimensions})"
            )
        if self._search == "exact":
            return [self._exact(vector, limit) for vector in vectors]
        try:
            found = self._handle.query(
                query_embeddings=vectors,
                n_results=min(limit, self._collection.documents),
                include=["distances"],
            )
        except Exception as error:
            raise SearchFailed(
                f"Chroma in {self._where} could not search {self._collection.collection}: "
                f"{type(error).__name__}: {error}"
            ) from None
        distances = found["distances"] or []
        return [
            [
                (document_id_of(doc_id, self._separator), _similarity(self._collection.space, d))
                for doc_id, d in zip(ids, row, strict=True)
            ]
            for ids, row in zip(found["ids"], distances, strict=True)
        ]


def _similarity(space: str, distance: float) -> float:
    """Chroma's distance as a similarity, larger is nearer."""
    return 1.0 - float(distance) if space in ("cosine", "ip") else -float(distance)


def _finish(client: ClientAPI, where: str, ephemeral_collection: str | None) -> None:
    """The end of an ephemeral retriever: delete its collection."""
    if ephemeral_collection is None:
        return
    from retrievalkit_chroma.collection import drop_collection

    try:
        drop_collection(client, ephemeral_collection, where=where)
    except Exception as error:  # the run is over; say what is left behind
        log.warning(
            "could not delete the ephemeral collection %s in %s (%s); delete it with "
            "'retrievalkit chroma drop --collection %s --path %s'",
            ephemeral_collection,
            where,
            error,
            ephemeral_collection,
            where,
        )


def create_chroma(
    *,
    collection: str | None = None,
    path: str | None = None,
    embedder: str | None = None,
    embedder_options: Mapping[str, Any] | None = None,
    search: str = "hnsw",
    doc_id_separator: str | None = None,
    ephemeral: bool = False,
    corpus: str | None = None,
    space: str | None = None,
    m: int = DEFAULT_M,
    construction_ef: int = DEFAULT_CONSTRUCTION_EF,
    search_ef: int = DEFAULT_SEARCH_EF,
    cache_dir: str | None = DEFAULT_CACHE_DIR,
) -> ChromaRetriever:
    """Factory of the ``chroma`` plugin; see docs/chroma.md for the options.

    With ``ephemeral = true`` the collection is built here from ``corpus`` (``space``,
    ``m``, ``construction_ef``, ``search_ef``) and deleted when the run ends.
    """
    from retrievalkit.plugin_api import create_embedder

    name = check_collection_name(collection)
    if not isinstance(path, str) or not path.strip():
        raise InputError(
            "the chroma retriever needs the option 'path': the folder of the Chroma database",
            field="path",
            hint='e.g. path = ".retrievalkit/chroma"',
        )
    if search not in SEARCHES:
        raise InputError(f"must be 'hnsw' or 'exact', got {search!r}", field="search")
    if not isinstance(embedder, str) or not embedder:
        raise InputError(
            "the chroma retriever needs the option 'embedder': the embedder that built the "
            "collection",
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
            "corpus applies only with ephemeral = true (the collection is then built from it)",
            field="corpus",
            hint="add ephemeral = true, or build the collection with 'retrievalkit chroma index'",
        )
    if ephemeral:
        if space is not None:
            check_space(space)
        check_range(m, M_RANGE, "m")
        check_range(construction_ef, EF_RANGE, "construction_ef")
        check_range(search_ef, EF_RANGE, "search_ef")
        if not isinstance(corpus, str) or not corpus:
            raise InputError(
                "an ephemeral chroma retriever needs the option 'corpus' to build its "
                "collection from",
                field="corpus",
                hint='e.g. corpus = "data/corpus.jsonl"',
            )
    model = create_embedder(embedder, embedder_options)
    where = str(Path(path).resolve())
    client = open_client(path)
    if ephemeral:
        _build_ephemeral(
            client, where, name, Path(str(corpus)), model,
            space=space, m=m, construction_ef=construction_ef, search_ef=search_ef,
            cache_dir=cache_dir,
        )  # fmt: skip
    try:
        described = read_collection(client, name, where=where)
        check_embedder_matches(described, model)
        retriever = ChromaRetriever(
            client,
            where,
            described,
            model,
            search=search,
            doc_id_separator=doc_id_separator,
            ephemeral=ephemeral,
        )
    except BaseException:
        if ephemeral:
            _finish(client, where, name)
        raise
    log.info("chroma collection %s in %s (%s search)", name, where, search)
    return retriever


def _build_ephemeral(
    client: ClientAPI, where: str, name: str, corpus: Path, model: Embedder, **options: Any
) -> None:
    """Embed ``corpus`` into the new collection ``name`` (refused when it exists)."""
    from retrievalkit_chroma.collection import build_collection

    try:
        build_collection(client, name, corpus, model, where=where, field="collection", **options)
    except InputError as error:
        if error.field == "collection":
            raise InputError(
                f"the collection {name} already exists in {where}; an ephemeral retriever "
                "builds a collection of its own and never replaces one",
                field="collection",
                hint=f"name another collection, or 'retrievalkit chroma drop --collection {name}'",
            ) from None
        raise
