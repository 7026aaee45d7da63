"""The ``qdrant`` retriever: nearest documents in a collection ``retrievalkit qdrant index`` built.

On a Qdrant server ``search = "hnsw"`` (the default) asks the HNSW graph, with
``hnsw_ef`` as configured, and ``search = "exact"`` sends ``exact = true``, so Qdrant
compares the question with every point; two configured instances over one collection,
one of each, are what ``retrievalkit fidelity`` compares to measure the recall the
approximation costs. Qdrant's local mode (``path``) builds no HNSW graph at all: it
compares every point whatever ``search`` says, and the manifest says so.

Questions are embedded with the embedder that built the collection (its ``model_id`` is
checked against the collection's metadata). Everything a configuration can get wrong is
checked when the retriever is created: the location, the collection and its record, the
embedder.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrievalkit.plugin_api import InputError, document_id_of
from retrievalkit_qdrant.collection import (
    DEFAULT_CACHE_DIR,
    DEFAULT_EF_CONSTRUCT,
    DEFAULT_M,
    EF_CONSTRUCT_RANGE,
    HNSW_EF_RANGE,
    M_RANGE,
    VectorCollection,
    check_collection_name,
    check_embedder_matches,
    check_range,
    describe_collection,
    read_collection,
)
from retrievalkit_qdrant.connection import (
    DEFAULT_TIMEOUT,
    MEMORY,
    Handle,
    acquire,
    location_from_options,
    server_error,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from retrievalkit.plugin_api import Embedder

SEARCHES = ("hnsw", "exact")

log = logging.getLogger(__name__)


class SearchFailed(RuntimeError):
    """Qdrant could not answer one question; the evaluator records it as an error."""


class QdrantRetriever:
    """Ranked document ids from a Qdrant collection, nearest first."""

    embedding_backend = "qdrant"

    def __init__(
        self,
        handle: Handle,
        collection: VectorCollection,
        embedder: Embedder,
        *,
        search: str,
        hnsw_ef: int | None,
        doc_id_separator: str | None = None,
        ephemeral: bool = False,
    ) -> None:
        self.identifier = f"qdrant:{collection.collection}:{search}"
        self.embedder = embedder
        self.embedding_model_id = collection.model_id
        self.ephemeral = ephemeral
        """Whether the collection was built for this retriever and is deleted with it."""
        self._location = handle.location
        self._client = handle.client
        self._collection = collection
        self._search = search
        self._hnsw_ef = hnsw_ef
        self._separator = doc_id_separator
        self._finish = weakref.finalize(
            self, _finish, handle, collection.collection if ephemeral else None
        )

    def close(self) -> None:
        """Release the client; an ephemeral retriever's collection is deleted now."""
        self._finish()

    # --- the retriever contract ------------------------------------------------------------

    def retrieve(self, question: str, limit: int) -> list[str]:
        return [doc_id for doc_id, _ in self.retrieve_scored(question, limit)]

    def retrieve_scored(self, question: str, limit: int) -> list[tuple[str, float]]:
        """(document id, similarity) pairs, best first."""
        from retrievalkit.plugin_api import embed_queries

        if limit <= 0:
            return []
        return self._nearest(embed_queries(self.embedder, [question])[0], limit)

    def retrieve_many(
        self, questions: Sequence[str], limit: int
    ) -> list[Sequence[str] | BaseException]:
        """One ranking per question; the questions are embedded and sent in one call each."""
        from retrievalkit.plugin_api import embed_queries

        if limit <= 0:
            return [[] for _ in questions]
        vectors = embed_queries(self.embedder, list(questions))
        try:
            batch: list[list[tuple[str, float]]] | None = self._nearest_batch(vectors, limit)
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
        """What the run manifest records: the collection, its index, the search (no secrets)."""
        import importlib.metadata

        described = dict(describe_collection(self._collection))
        described["qdrant.mode"] = self._location.mode
        described["qdrant.location"] = self._location.where
        described["qdrant.search"] = self._search
        if self._location.mode == "server":
            if self._search == "hnsw":
                described["qdrant.hnsw_ef"] = (
                    "server default" if self._hnsw_ef is None else str(self._hnsw_ef)
                )
        else:
            described["qdrant.search_used"] = "exact (local mode builds no HNSW index)"
        described["qdrant.client_version"] = importlib.metadata.version("qdrant-client")
        if self.ephemeral:
            described["qdrant.ephemeral"] = "true"
        return described

    # --- searching -------------------------------------------------------------------------

    def _params(self) -> Any:
        from qdrant_client import models

        if self._location.mode != "server":
            return None  # local mode compares every point, and warns about any parameter
        if self._search == "exact":
            return models.SearchParams(exact=True)
        return models.SearchParams(hnsw_ef=self._hnsw_ef, exact=False)

    def _ranking(self, points: Sequence[Any]) -> list[tuple[str, float]]:
        euclid = self._collection.distance == "Euclid"
        return [
            (
                document_id_of(str((point.payload or {})["doc_id"]), self._separator),
                -float(point.score) if euclid else float(point.score),
            )
            for point in points
        ]

    def _failed(self, error: Exception) -> SearchFailed:
        return SearchFailed(
            str(server_error(self._location, error, f"searching {self._collection.collection}"))
        )

    def _check(self, vector: npt.NDArray[np.float32]) -> list[float]:
        if vector.shape != (self._collection.dimensions,):
            raise SearchFailed(
                f"the embedder gave a question vector of shape {vector.shape}, "
                f"not ({self._collection.dimensions},)"
            )
        return [float(value) for value in vector]

    def _nearest(self, vector: npt.NDArray[np.float32], limit: int) -> list[tuple[str, float]]:
        query = self._check(vector)
        try:
            found = self._client.query_points(
                self._collection.collection,
                query=query,
                limit=limit,
                search_params=self._params(),
                with_payload=["doc_id"],
            )
        except Exception as error:
            raise self._failed(error) from None
        return self._ranking(found.points)

    def _nearest_batch(
        self, vectors: npt.NDArray[np.float32], limit: int
    ) -> list[list[tuple[str, float]]]:
        from qdrant_client import models

        requests = [
            models.QueryRequest(
                query=self._check(vector),
                limit=limit,
                params=self._params(),
                with_payload=["doc_id"],
            )
            for vector in vectors
        ]
        try:
            found = self._client.query_batch_points(self._collection.collection, requests)
        except Exception as error:
            raise self._failed(error) from None
        return [self._ranking(response.points) for response in found]


def _finish(handle: Handle, ephemeral_collection: str | None) -> None:
    """The end of a retriever: delete its ephemeral collection, then release the client."""
    try:
        if ephemeral_collection is not None and handle.location.mode != "memory":
            from retrievalkit_qdrant.collection import drop_collection

            try:
                drop_collection(handle.client, ephemeral_collection, where=handle.location.where)
            except Exception as error:  # the run is over; say what is left behind
                log.warning(
                    "could not delete the ephemeral collection %s in %s (%s); delete it with "
                    "'retrievalkit qdrant drop --collection %s'",
                    ephemeral_collection,
                    handle.location.where,
                    error,
                    ephemeral_collection,
                )
    finally:
        handle.release()


def create_qdrant(
    *,
    collection: str | None = None,
    path: str | None = None,
    url: str | None = None,
    api_key_env: str | None = None,
    timeout: int = DEFAULT_TIMEOUT,
    embedder: str | None = None,
    embedder_options: Mapping[str, Any] | None = None,
    search: str = "hnsw",
    hnsw_ef: int | None = None,
    doc_id_separator: str | None = None,
    api_key: Any = None,
    ephemeral: bool = False,
    corpus: str | None = None,
    m: int = DEFAULT_M,
    ef_construct: int = DEFAULT_EF_CONSTRUCT,
    cache_dir: str | None = DEFAULT_CACHE_DIR,
) -> QdrantRetriever:
    """Factory of the ``qdrant`` plugin; see docs/qdrant.md for the options.

    ``api_key`` is accepted only to refuse it: the key comes from the environment
    variable ``api_key_env`` names, never from a configuration.

    With ``ephemeral = true`` the collection is built here from ``corpus`` (HNSW ``m`` and
    ``ef_construct``) and deleted when the run ends.
    """
    from retrievalkit.plugin_api import create_embedder

    if api_key is not None:
        raise InputError(
            "secrets are not accepted in the configuration (api_key = ...)",
            field="api_key",
            hint="remove it; export the key in an environment variable and name it with "
            "api_key_env",
        )
    name = check_collection_name(collection)
    location = location_from_options(path, url, api_key_env, timeout)
    if search not in SEARCHES:
        raise InputError(f"must be 'hnsw' or 'exact', got {search!r}", field="search")
    if hnsw_ef is not None:
        check_range(hnsw_ef, HNSW_EF_RANGE, "hnsw_ef")
    if not isinstance(embedder, str) or not embedder:
        raise InputError(
            "the qdrant retriever needs the option 'embedder': the embedder that built the "
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
            hint="add ephemeral = true, or build the collection with 'retrievalkit qdrant index'",
        )
    if location.mode == "memory" and not ephemeral:
        raise InputError(
            f"an in-memory Qdrant (path = {MEMORY!r}) starts empty",
            field="path",
            hint="add ephemeral = true and corpus = ... to build the collection for the run, "
            "or give a folder",
        )
    if ephemeral:
        check_range(m, M_RANGE, "m")
        check_range(ef_construct, EF_CONSTRUCT_RANGE, "ef_construct")
        if not isinstance(corpus, str) or not corpus:
            raise InputError(
                "an ephemeral qdrant retriever needs the option 'corpus' to build its "
                "collection from",
                field="corpus",
                hint='e.g. corpus = "data/corpus.jsonl"',
            )
    model = create_embedder(embedder, embedder_options)
    handle = acquire(location)
    try:
        if ephemeral:
            _build_ephemeral(handle, name, Path(str(corpus)), model, m, ef_construct, cache_dir)
        try:
            described = read_collection(handle.client, name, where=location.where)
            check_embedder_matches(described, model)
        except BaseException:
            if ephemeral:
                _finish(handle, name)
                raise
            raise
    except InputError:
        handle.release()
        raise
    except Exception as error:
        handle.release()
        from retrievalkit.plugin_api import RetrievalkitError

        if isinstance(error, RetrievalkitError):
            raise
        raise server_error(location, error, f"opening the collection {name}") from None
    retriever = QdrantRetriever(
        handle,
        described,
        model,
        search=search,
        hnsw_ef=hnsw_ef,
        doc_id_separator=doc_id_separator,
        ephemeral=ephemeral,
    )
    log.info("qdrant collection %s in %s (%s search)", name, location.where, search)
    return retriever


def _build_ephemeral(
    handle: Handle,
    name: str,
    corpus: Path,
    model: Embedder,
    m: int,
    ef_construct: int,
    cache_dir: str | None,
) -> None:
    """Embed ``corpus`` into the new collection ``name`` (refused when it exists)."""
    from retrievalkit_qdrant.collection import build_collection

    try:
        build_collection(
            handle,
            name,
            corpus,
            model,
            m=m,
            ef_construct=ef_construct,
            cache_dir=cache_dir,
            field="collection",
        )
    except InputError as error:
        if error.field == "collection":
            raise InputError(
                f"the collection {name} already exists in {handle.location.where}; an "
                "ephemeral retriever builds a collection of its own and never replaces one",
                field="collection",
                hint=f"name another collection, or 'retrievalkit qdrant drop --collection {name}'",
            ) from None
        raise
