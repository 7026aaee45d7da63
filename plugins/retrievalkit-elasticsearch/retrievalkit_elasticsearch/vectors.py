"""Vectors in Elasticsearch: the ``dense_vector`` field an index gets, and kNN retrievers.

``retrievalkit es index --embedder NAME`` embeds every document with a
``retrievalkit.embedders`` plugin and stores the vectors in a ``dense_vector`` field with
an HNSW graph (``m``, ``ef_construction``) or a ``flat`` (exact) index. The mapping's
``_meta`` records the embedder (plugin, options, ``model_id``, dimensions, similarity), so
``elasticsearch-knn`` embeds each question with the index's own model, and every run's
manifest names that model, read from the index rather than from the configuration.
``elasticsearch-hybrid`` fuses the index's BM25 and kNN rankings: with Elasticsearch's
``rrf`` retriever where the cluster offers it, else with retrievalkit's own fusion.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from retrievalkit.plugin_api import InputError, document_id_of
from retrievalkit_elasticsearch.connection import (
    Target,
    client_errors,
    cluster_name,
    describe_error_body,
    error_reason,
    explain,
    target_from_options,
)
from retrievalkit_elasticsearch.ephemeral import OwnsIndex, check_ephemeral_options
from retrievalkit_elasticsearch.indexing import DEFAULT_B, DEFAULT_K1
from retrievalkit_elasticsearch.query import QUERY_THEN_FETCH, parse_filter, parse_search_type

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from elasticsearch import Elasticsearch

    from retrievalkit.plugin_api import Embedder

log = logging.getLogger(__name__)

VECTOR_FIELD = "embedding"
INDEX_TYPES = ("hnsw", "flat")
#: Lucene's defaults for the HNSW graph.
DEFAULT_M = 16
DEFAULT_EF_CONSTRUCTION = 100
DEFAULT_NUM_CANDIDATES = 100
#: Elasticsearch refuses num_candidates above this.
MAX_NUM_CANDIDATES = 10000
DEFAULT_BATCH_SIZE = 64
FUSIONS = ("auto", "retrievalkit", "elasticsearch")
#: Where an ephemeral index's document embeddings are cached, as ``es index`` and the
#: ``dense`` retriever cache them.
DEFAULT_EMBEDDING_CACHE = ".retrievalkit/embeddings"


@attrs.frozen
class VectorIndex:
    """How an index's vectors were made and indexed: what its mapping's ``_meta`` records."""

    model_id: str
    dimensions: int
    similarity: str
    embedder: str | None = None
    """The ``retrievalkit.embedders`` plugin that made the vectors (None: made elsewhere)."""
    embedder_options: Mapping[str, Any] = attrs.field(factory=dict)
    field: str = VECTOR_FIELD
    index_type: str = "hnsw"
    m: int | None = None
    ef_construction: int | None = None

    def mapping(self) -> dict[str, Any]:
        """The ``dense_vector`` field's mapping."""
        options: dict[str, Any] = {"type": self.index_type}
        if self.index_type == "hnsw":
            options["m"] = self.m or DEFAULT_M
            options["ef_construction"] = self.ef_construction or DEFAULT_EF_CONSTRUCTION
        return {
            "type": "dense_vector",
            "dims": self.dimensions,
            "index": True,
            "similarity": self.similarity,
            "index_options": options,
        }

    def meta(self) -> dict[str, Any]:
        """The ``_meta.retrievalkit.embedding`` entry of the mapping."""
        return {
            "model_id": self.model_id,
            "dimensions": self.dimensions,
            "similarity": self.similarity,
            "embedder": self.embedder,
            "embedder_options": dict(self.embedder_options),
            "field": self.field,
            "index_type": self.index_type,
            "m": self.m,
            "ef_construction": self.ef_construction,
        }


def vector_index_for(
    embedder: Embedder,
    *,
    name: str,
    options: Mapping[str, Any],
    index_type: str = "hnsw",
    m: int = DEFAULT_M,
    ef_construction: int = DEFAULT_EF_CONSTRUCTION,
) -> VectorIndex:
    """The vector setup ``es index --embedder`` creates for an embedder plugin."""
    if index_type not in INDEX_TYPES:
        raise InputError(
            f"unknown vector index type {index_type!r}",
            field="--vector-index",
            hint="use hnsw (approximate) or flat (exact)",
        )
    if embedder.similarity == "max_inner_product" and index_type == "flat":
        log.info("max_inner_product with a flat index: Elasticsearch scores raw inner products")
    hnsw = index_type == "hnsw"
    return VectorIndex(
        model_id=embedder.model_id,
        dimensions=embedder.dimensions,
        similarity=embedder.similarity,
        embedder=name,
        embedder_options=dict(options),
        index_type=index_type,
        m=m if hnsw else None,
        ef_construction=ef_construction if hnsw else None,
    )


def read_vector_index(
    client: Elasticsearch, target: Target, index: str, *, field: str | None = None
) -> VectorIndex:
    """The vector setup of an existing index, from its mapping; errors say what to do.

    An index made by ``retrievalkit es index --embedder`` records its embedder in
    ``_meta``; another index with a ``dense_vector`` field gives its dimensions and
    similarity, and the model must then be named with the ``embedder`` option.
    """
    try:
        mappings = client.indices.get_mapping(index=index).body
    except client_errors() as error:
        raise explain(error, target, action=f"read the mapping of '{index}'", index=index) from None
    if not mappings:
        raise InputError(f"no index on {target.where} matches '{index}'", field="index")
    found: dict[str, VectorIndex] = {}
    for name, entry in sorted(mappings.items()):
        mapping = entry.get("mappings", {})
        recorded = mapping.get("_meta", {}).get("retrievalkit", {}).get("embedding")
        wanted = field or (recorded or {}).get("field") or VECTOR_FIELD
        properties = mapping.get("properties", {})
        vector = properties.get(wanted, {})
        if vector.get("type") != "dense_vector":
            others = sorted(k for k, v in properties.items() if v.get("type") == "dense_vector")
            raise InputError(
                f"index '{name}' on {target.where} has no vectors: no dense_vector field "
                f"'{wanted}'" + (f" (its vector fields: {', '.join(others)})" if others else ""),
                field="vector_field" if others else "index",
                hint="name the field with vector_field"
                if others
                else "create the index with 'retrievalkit es index --embedder NAME'",
            )
        options = vector.get("index_options", {})
        if recorded:
            found[name] = VectorIndex(
                model_id=str(recorded["model_id"]),
                dimensions=int(vector.get("dims", recorded["dimensions"])),
                similarity=str(vector.get("similarity", recorded["similarity"])),
                embedder=recorded.get("embedder"),
                embedder_options=recorded.get("embedder_options") or {},
                field=wanted,
                index_type=str(options.get("type", recorded.get("index_type", "hnsw"))),
                m=options.get("m"),
                ef_construction=options.get("ef_construction"),
            )
        else:
            found[name] = VectorIndex(
                model_id="",
                dimensions=int(vector.get("dims", 0)),
                similarity=str(vector.get("similarity", "cosine")),
                field=wanted,
                index_type=str(options.get("type", "hnsw")),
                m=options.get("m"),
                ef_construction=options.get("ef_construction"),
            )
    setups = {(v.model_id, v.dimensions, v.similarity, v.field) for v in found.values()}
    if len(setups) > 1:
        raise InputError(
            f"the indices behind '{index}' hold vectors of different models or sizes: "
            + "; ".join(
                f"{name}: {v.model_id or '?'} ({v.dimensions} dimensions)"
                for name, v in found.items()
            ),
            field="index",
            hint="query one index at a time: their questions need different embeddings",
        )
    return next(iter(found.values()))


def embedder_for(
    vectors: VectorIndex,
    index: str,
    *,
    embedder: str | None,
    embedder_options: Mapping[str, Any] | None,
) -> Embedder:
    """The index's own embedder (or the one named), checked against the index's vectors."""
    from retrievalkit.plugin_api import create_embedder

    name = embedder or vectors.embedder
    if not name:
        raise InputError(
            f"index '{index}' does not say which model made its vectors",
            field="embedder",
            hint='name the embedder plugin that made them, e.g. embedder = "wordllama"',
        )
    options = vectors.embedder_options if embedder_options is None else embedder_options
    made = create_embedder(name, options)
    if made.dimensions != vectors.dimensions:
        raise InputError(
            f"embedder '{name}' ({made.model_id}) makes {made.dimensions}-dimension vectors, "
            f"but index '{index}' holds {vectors.dimensions}-dimension vectors"
            + (f" made by {vectors.model_id}" if vectors.model_id else ""),
            field="embedder_options" if embedder_options is not None else "embedder",
            hint="query with the model that built the index (leave out embedder to use it), "
            "or re-index with 'retrievalkit es index --embedder NAME --recreate'",
        )
    if vectors.model_id and made.model_id != vectors.model_id:
        raise InputError(
            f"embedder '{name}' is {made.model_id}, but index '{index}' was built with "
            f"{vectors.model_id}",
            field="embedder_options" if embedder_options is not None else "embedder",
            hint="questions must be embedded by the model that embedded the documents",
        )
    return made


class ElasticsearchKnnRetriever(OwnsIndex):
    """Top-k nearest neighbours of the question's vector in an index's ``dense_vector`` field.

    ``k`` is the limit asked (or the ``k`` option), ``num_candidates`` the candidates each
    shard considers (raised to ``k`` when smaller). With a flat index the search is exact.
    """

    embedding_backend = "elasticsearch"

    def __init__(
        self,
        client: Elasticsearch,
        target: Target,
        index: str,
        vectors: VectorIndex,
        embedder: Embedder,
        *,
        k: int | None = None,
        num_candidates: int = DEFAULT_NUM_CANDIDATES,
        filters: Sequence[Mapping[str, Any]] = (),
        doc_id_separator: str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        cluster: str | None = None,
    ) -> None:
        self.identifier = f"elasticsearch-knn:{index}"
        self._client = client
        self._target = target
        self._index = index
        self.vectors = vectors
        self.embedder = embedder
        self.embedding_model_id = embedder.model_id
        self._k = k
        self._num_candidates = num_candidates
        self._filters = [dict(clause) for clause in filters]
        self._separator = doc_id_separator
        self._batch_size = batch_size
        self._cluster = cluster

    def describe(self) -> dict[str, str]:
        setup = self.vectors.index_type
        if setup == "hnsw":
            setup += f" (m={self.vectors.m}, ef_construction={self.vectors.ef_construction})"
        described = {
            "elasticsearch.index": self._index,
            "knn.field": self.vectors.field,
            "knn.index_type": setup,
            "knn.num_candidates": str(self._num_candidates),
            "knn.k": str(self._k) if self._k else "the limit asked",
            "embedding.dimensions": str(self.vectors.dimensions),
            "embedding.similarity": self.vectors.similarity,
        }
        if self._cluster:
            described["elasticsearch.cluster"] = self._cluster
        return described

    def body(self, vector: npt.NDArray[np.float32], limit: int) -> dict[str, Any]:
        k = self._k or limit
        knn: dict[str, Any] = {
            "field": self.vectors.field,
            "query_vector": [float(value) for value in vector],
            "k": k,
            "num_candidates": min(max(self._num_candidates, k), MAX_NUM_CANDIDATES),
        }
        if self._filters:
            knn["filter"] = self._filters
        return {"knn": knn, "size": limit, "_source": False, "track_total_hits": False}

    def retrieve(self, question: str, limit: int) -> list[str]:
        return [doc for doc, _ in self.retrieve_scored(question, limit)]

    def retrieve_scored(self, question: str, limit: int) -> list[tuple[str, float]]:
        from retrievalkit.plugin_api import embed_queries

        if limit <= 0:
            return []
        vector = embed_queries(self.embedder, [question])[0]
        try:
            response = self._client.search(index=self._index, body=self.body(vector, limit))
        except client_errors() as error:
            raise RuntimeError(self._failure(error)) from None
        return self._hits(response.body)[:limit]

    def retrieve_many(
        self, questions: Sequence[str], limit: int
    ) -> list[Sequence[str] | BaseException]:
        """Questions embedded in one call per batch and searched through ``_msearch``."""
        from retrievalkit.plugin_api import embed_queries

        if limit <= 0:
            return [[] for _ in questions]
        answers: list[Sequence[str] | BaseException] = []
        for start in range(0, len(questions), self._batch_size):
            batch = list(questions[start : start + self._batch_size])
            vectors = embed_queries(self.embedder, batch)
            searches: list[Mapping[str, Any]] = []
            for vector in vectors:
                searches += [{}, self.body(vector, limit)]
            try:
                response = self._client.msearch(index=self._index, searches=searches)
            except client_errors() as error:
                failure = RuntimeError(self._failure(error))
                answers += [failure] * len(batch)
                continue
            responses = response.get("responses", [])
            if len(responses) != len(batch):
                answers += [RuntimeError("_msearch answered a different number of searches")] * len(
                    batch
                )
                continue
            for item in responses:
                if "error" in item:
                    answers.append(
                        RuntimeError(
                            f"Elasticsearch rejected the kNN search of '{self._index}': "
                            f"{describe_error_body(item['error'])}"
                        )
                    )
                else:
                    answers.append([doc for doc, _ in self._hits(item)][:limit])
        return answers

    def _hits(self, response: Mapping[str, Any]) -> list[tuple[str, float]]:
        return [
            (document_id_of(str(hit["_id"]), self._separator), float(hit.get("_score") or 0.0))
            for hit in response.get("hits", {}).get("hits", [])
        ]

    def _failure(self, error: Exception) -> str:
        return str(explain(error, self._target, action="run a kNN search", index=self._index))


def _whole(value: Any, field: str, *, low: int = 1, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InputError(f"must be a whole number >= {low}, got {value!r}", field=field)
    if high is not None and value > high:
        raise InputError(f"must be at most {high}, got {value}", field=field)
    return value


def _refuse_secrets(password: Any, api_key: Any) -> None:
    for name, value in (("password", password), ("api_key", api_key)):
        if value is not None:
            raise InputError(
                f"secrets are not accepted in the configuration ({name} = ...)",
                field=name,
                hint=f"remove it, and set {name}_env to the name of an environment variable "
                "that holds the secret",
            )


def create_elasticsearch_knn(
    *,
    index: str | None = None,
    k: int | None = None,
    num_candidates: int = DEFAULT_NUM_CANDIDATES,
    filter: str | Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    vector_field: str | None = None,
    embedder: str | None = None,
    embedder_options: Mapping[str, Any] | None = None,
    doc_id_separator: str | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    search_type: Any = None,
    password: Any = None,
    api_key: Any = None,
    ephemeral: bool = False,
    corpus: str | None = None,
    vector_index: str = "hnsw",
    hnsw_m: int = DEFAULT_M,
    hnsw_ef_construction: int = DEFAULT_EF_CONSTRUCTION,
    embedding_cache: str | None = DEFAULT_EMBEDDING_CACHE,
    k1: float = DEFAULT_K1,
    b: float = DEFAULT_B,
    analyzer: str = "standard",
    **connection: Any,
) -> ElasticsearchKnnRetriever:
    """Factory of the ``elasticsearch-knn`` plugin; see docs/elasticsearch.md for the options.

    Options: ``index``; ``k`` (neighbours asked; default: as many as the evaluation asks),
    ``num_candidates`` (per shard, 100), ``filter`` (query clauses the neighbours must
    match), ``vector_field`` (default: the one the index records), ``embedder`` and
    ``embedder_options`` (default: the ones the index records; given, they must make the
    index's vectors), ``doc_id_separator``, ``batch_size`` (questions per ``_msearch``, 64),
    and the connection options of ``elasticsearch-bm25`` (``url``, ``api_key_env``, ...).

    With ``ephemeral = true`` the index is built here, as ``es index --embedder`` builds
    it: ``corpus`` embedded by ``embedder`` (from ``embedding_cache`` when there; "" for
    none) into a ``vector_index`` (``hnsw`` with ``hnsw_m`` and ``hnsw_ef_construction``,
    or ``flat``), BM25 text fields with ``k1``, ``b`` and ``analyzer``; it is deleted
    when the run ends.
    """
    _refuse_secrets(password, api_key)
    if search_type is not None:
        parse_search_type(search_type)  # an unknown value gets the same message everywhere
        raise InputError(
            "search_type does not apply to elasticsearch-knn: vector similarities use no "
            "collection statistics, so a kNN score is the same on any number of shards "
            "(and Elasticsearch already collects the top-level kNN in its DFS phase)",
            field="search_type",
            hint="remove it; it applies to elasticsearch-bm25 and to the BM25 leg of "
            "elasticsearch-hybrid",
        )
    if not isinstance(index, str) or not index.strip():
        raise InputError(
            "the elasticsearch-knn retriever needs the option 'index'",
            field="index",
            hint="an index created with 'retrievalkit es index --embedder NAME'",
        )
    if k is not None:
        _whole(k, "k", high=MAX_NUM_CANDIDATES)
    _whole(num_candidates, "num_candidates", high=MAX_NUM_CANDIDATES)
    _whole(batch_size, "batch_size")
    filters = parse_filter(filter)
    check_ephemeral_options(ephemeral, corpus)
    target = target_from_options(**connection)
    client = target.connect()
    cluster = cluster_name(client, target, action="check cluster health")

    def make() -> ElasticsearchKnnRetriever:
        vectors = read_vector_index(client, target, index, field=vector_field)
        made = embedder_for(vectors, index, embedder=embedder, embedder_options=embedder_options)
        retriever = ElasticsearchKnnRetriever(
            client,
            target,
            index,
            vectors,
            made,
            k=k,
            num_candidates=num_candidates,
            filters=filters,
            doc_id_separator=doc_id_separator,
            batch_size=batch_size,
            cluster=cluster,
        )
        if filters:
            _probe(retriever, "filter")
        return retriever

    if not ephemeral:
        return make()
    from retrievalkit_elasticsearch.ephemeral import build_ephemeral, owned

    setup = _embedded_corpus(
        index, corpus, embedder, embedder_options, vector_field, vector_index,
        hnsw_m, hnsw_ef_construction, embedding_cache,
    )  # fmt: skip
    build_ephemeral(client, target, index, corpus, k1=k1, b=b, analyzer=analyzer, vectors=setup)
    return owned(target, index, make)


def _embedded_corpus(
    index: str,
    corpus: Any,
    embedder: str | None,
    embedder_options: Mapping[str, Any] | None,
    vector_field: str | None,
    vector_index: str,
    hnsw_m: int,
    hnsw_ef_construction: int,
    embedding_cache: str | None,
) -> tuple[VectorIndex, Any]:
    """The vector setup and the corpus's vectors of an ephemeral kNN index."""
    from retrievalkit.plugin_api import create_embedder, embed_corpus

    if not embedder:
        raise InputError(
            "an ephemeral elasticsearch-knn retriever embeds its corpus, and needs the "
            "option 'embedder' to do it",
            field="embedder",
            hint='e.g. embedder = "wordllama"',
        )
    if not isinstance(corpus, str) or not corpus:
        raise InputError(
            "an ephemeral Elasticsearch retriever needs the option 'corpus' to build its "
            "index from",
            field="corpus",
            hint='e.g. corpus = "data/corpus.jsonl"',
        )
    _whole(hnsw_m, "hnsw_m", low=2)
    _whole(hnsw_ef_construction, "hnsw_ef_construction")
    options = dict(embedder_options or {})
    made = create_embedder(embedder, options)
    try:
        setup = vector_index_for(
            made, name=embedder, options=options, index_type=vector_index, m=hnsw_m,
            ef_construction=hnsw_ef_construction,
        )  # fmt: skip
    except InputError as error:
        raise InputError(error.detail, field="vector_index", hint=error.hint) from None
    if vector_field:
        setup = attrs.evolve(setup, field=vector_field)
    embedded = embed_corpus(
        corpus, made, cache_dir=embedding_cache or None, label=f"ephemeral index {index}"
    )
    return setup, embedded.matrix


def _probe(retriever: ElasticsearchKnnRetriever, field: str) -> None:
    """One search at start, so a filter Elasticsearch refuses is reported before any question."""
    import numpy as np

    # Unit length: Elasticsearch refuses other query vectors for dot_product.
    dimensions = retriever.vectors.dimensions
    vector = np.full(dimensions, 1 / np.sqrt(dimensions), dtype=np.float32)
    try:
        retriever._client.search(index=retriever._index, body=retriever.body(vector, 1))
    except client_errors() as error:
        raise InputError(
            f"Elasticsearch rejects this kNN search: {error_reason(error)}", field=field
        ) from None


# --- hybrid ----------------------------------------------------------------------------------


class ElasticsearchRrfRetriever:
    """BM25 and kNN fused by Elasticsearch's own ``rrf`` retriever, in one search."""

    embedding_backend = "elasticsearch"

    def __init__(
        self,
        knn: ElasticsearchKnnRetriever,
        query: Mapping[str, Any],
        *,
        rank_constant: int,
        window: int,
        search_type: str = QUERY_THEN_FETCH,
    ) -> None:
        self.identifier = f"elasticsearch-hybrid:{knn._index}"
        self._knn = knn
        self._query = query
        self._rank_constant = rank_constant
        self._window = window
        self.search_type = search_type
        self.embedding_model_id = knn.embedding_model_id

    def close(self) -> None:
        """Close the client; an ephemeral index is deleted now."""
        self._knn.close()

    def describe(self) -> dict[str, str]:
        return {
            **self._knn.describe(),
            "hybrid.fusion": f"elasticsearch rrf (rank_constant={self._rank_constant}, "
            f"rank_window_size={self._window})",
            "elasticsearch.search_type": self.search_type,
        }

    def body(self, question: str, limit: int) -> dict[str, Any]:
        from retrievalkit.plugin_api import embed_queries

        vector = embed_queries(self._knn.embedder, [question])[0]
        window = max(self._window, limit)
        knn = self._knn.body(vector, window)["knn"]
        knn["k"] = window
        knn["num_candidates"] = min(max(knn["num_candidates"], window), MAX_NUM_CANDIDATES)
        standard: dict[str, Any] = {"query": _question_query(self._query, question)}
        if self._knn._filters:
            standard["filter"] = self._knn._filters
        return {
            "retriever": {
                "rrf": {
                    "retrievers": [{"standard": standard}, {"knn": knn}],
                    "rank_constant": self._rank_constant,
                    "rank_window_size": window,
                }
            },
            "size": limit,
            "_source": False,
        }

    def retrieve(self, question: str, limit: int) -> list[str]:
        if limit <= 0:
            return []
        response = self._knn._client.search(
            index=self._knn._index, body=self.body(question, limit), search_type=self.search_type
        )
        return [doc for doc, _ in self._knn._hits(response.body)][:limit]


def _question_query(query: Mapping[str, Any], question: str) -> dict[str, Any]:
    clause = dict(query["multi_match"])
    clause["query"] = question
    return {"multi_match": clause}


def create_elasticsearch_hybrid(
    *,
    index: str | None = None,
    fields: Sequence[str] | None = None,
    method: str = "rrf",
    rrf_k: int = 60,
    alpha: float = 0.5,
    depth: int = 100,
    fusion: str = "auto",
    k: int | None = None,
    num_candidates: int = DEFAULT_NUM_CANDIDATES,
    filter: str | Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    vector_field: str | None = None,
    embedder: str | None = None,
    embedder_options: Mapping[str, Any] | None = None,
    doc_id_separator: str | None = None,
    search_type: Any = None,
    password: Any = None,
    api_key: Any = None,
    ephemeral: bool = False,
    corpus: str | None = None,
    vector_index: str = "hnsw",
    hnsw_m: int = DEFAULT_M,
    hnsw_ef_construction: int = DEFAULT_EF_CONSTRUCTION,
    embedding_cache: str | None = DEFAULT_EMBEDDING_CACHE,
    k1: float = DEFAULT_K1,
    b: float = DEFAULT_B,
    analyzer: str = "standard",
    **connection: Any,
) -> Any:
    """Factory of the ``elasticsearch-hybrid`` plugin: BM25 and kNN over one index, fused.

    Options: those of ``elasticsearch-knn``, ``fields`` (BM25 fields, title and text),
    ``method`` (``rrf`` or ``weighted``: min-max scores, ``alpha`` for the kNN leg),
    ``rrf_k`` (the RRF constant, 60), ``depth`` (results of each leg fused, 100) and
    ``fusion``: ``elasticsearch`` (its ``rrf`` retriever, one search per question),
    ``retrievalkit`` (two searches fused here) or ``auto`` (Elasticsearch's where the
    cluster offers it and the method is rrf, else retrievalkit's). ``search_type``
    (``dfs_query_then_fetch``: BM25 statistics over every shard) applies to the BM25 leg,
    and to Elasticsearch's fused search as a whole. With ``ephemeral = true`` the one
    index both legs search is built as ``elasticsearch-knn`` builds it, and deleted when
    the run ends.
    """
    _refuse_secrets(password, api_key)
    if fusion not in FUSIONS:
        raise InputError(
            f"unknown fusion {fusion!r}", field="fusion", hint="use " + ", ".join(FUSIONS)
        )
    if fusion == "elasticsearch" and method != "rrf":
        raise InputError(
            "Elasticsearch fuses by rrf only", field="method", hint='use fusion = "retrievalkit"'
        )
    _whole(rrf_k, "rrf_k")
    _whole(depth, "depth", high=MAX_NUM_CANDIDATES)
    checked_search_type = parse_search_type(search_type)
    knn = create_elasticsearch_knn(
        index=index,
        k=k,
        num_candidates=num_candidates,
        filter=filter,
        vector_field=vector_field,
        embedder=embedder,
        embedder_options=embedder_options,
        doc_id_separator=doc_id_separator,
        ephemeral=ephemeral,
        corpus=corpus,
        vector_index=vector_index,
        hnsw_m=hnsw_m,
        hnsw_ef_construction=hnsw_ef_construction,
        embedding_cache=embedding_cache,
        k1=k1,
        b=b,
        analyzer=analyzer,
        **connection,
    )
    try:
        return _fused(knn, index, fields, method, rrf_k, alpha, depth, fusion, filter,
                      doc_id_separator, checked_search_type, connection)  # fmt: skip
    except BaseException:
        knn.close()  # an ephemeral index built for the kNN leg goes with it
        raise


def _fused(
    knn: ElasticsearchKnnRetriever,
    index: str | None,
    fields: Sequence[str] | None,
    method: str,
    rrf_k: int,
    alpha: float,
    depth: int,
    fusion: str,
    filter: Any,
    doc_id_separator: str | None,
    checked_search_type: str,
    connection: Mapping[str, Any],
) -> Any:
    """The hybrid over ``knn``'s index: Elasticsearch's rrf where it can, else retrievalkit's."""
    from retrievalkit.plugin_api import ResolvedRetriever, build_hybrid
    from retrievalkit_elasticsearch.query import parse_multi_match
    from retrievalkit_elasticsearch.retriever import create_elasticsearch_bm25

    field_list = list(fields) if fields is not None else ["title", "text"]
    if fusion != "retrievalkit" and method == "rrf":
        multi = parse_multi_match(field_list, "best_fields", None)
        native = ElasticsearchRrfRetriever(
            knn,
            multi.query(""),
            rank_constant=rrf_k,
            window=depth,
            search_type=checked_search_type,
        )
        refusal = _rrf_refusal(native)
        if refusal is None:
            return native
        if fusion == "elasticsearch":
            raise InputError(
                f"Elasticsearch at {knn._target.where} cannot fuse: {refusal}",
                field="fusion",
                hint="its rrf retriever needs a distribution with it (the integ-test zip has "
                'none); use fusion = "retrievalkit" or "auto"',
            )
        log.info("no rrf retriever on %s (%s): retrievalkit fuses", knn._target.where, refusal)
    bm25 = create_elasticsearch_bm25(
        index=index,
        fields=field_list,
        filter=filter,
        doc_id_separator=doc_id_separator,
        search_type=checked_search_type,
        **connection,
    )
    hybrid = build_hybrid(
        ResolvedRetriever(
            "bm25", "elasticsearch-bm25", {"index": index, "fields": field_list}, bm25
        ),
        ResolvedRetriever("knn", "elasticsearch-knn", {"index": index}, knn),
        method=method,
        k=rrf_k,
        alpha=alpha,
        depth=depth,
        identifier=f"elasticsearch-hybrid:{index}",
    )
    return _DescribedHybrid(hybrid, knn, bm25, fusion, checked_search_type)


class _DescribedHybrid:
    """retrievalkit's fusion of the two legs, with the kNN leg's facts in the manifest."""

    embedding_backend = "elasticsearch"

    def __init__(
        self,
        hybrid: Any,
        knn: ElasticsearchKnnRetriever,
        bm25: Any,
        fusion: str,
        search_type: str,
    ) -> None:
        self._hybrid = hybrid
        self._knn = knn
        self._bm25 = bm25
        self._fusion = fusion
        self._search_type = search_type
        self.identifier = hybrid.identifier
        self.embedding_model_id = knn.embedding_model_id

    def describe(self) -> dict[str, str]:
        why = " (the cluster offers no rrf retriever)" if self._fusion == "auto" else ""
        return {
            **self._knn.describe(),
            **self._hybrid.describe(),
            "hybrid.fusion": "retrievalkit" + why,
            "elasticsearch.search_type": self._search_type,
        }

    def retrieve(self, question: str, limit: int) -> list[str]:
        return list(self._hybrid.retrieve(question, limit))

    def close(self) -> None:
        """Close both legs; an ephemeral index is deleted now."""
        self._bm25.close()
        self._knn.close()

    def retrieve_scored(self, question: str, limit: int) -> list[tuple[str, float]]:
        return list(self._hybrid.retrieve_scored(question, limit))


def _rrf_refusal(native: ElasticsearchRrfRetriever) -> str | None:
    """None when the cluster runs an ``rrf`` search, else its reason for refusing one."""
    import elasticsearch

    try:
        native._knn._client.search(
            index=native._knn._index,
            body=native.body("retrievalkit configuration check", 1),
            search_type=native.search_type,
        )
    except elasticsearch.BadRequestError as error:
        return error_reason(error)
    except client_errors() as error:
        raise explain(
            error, native._knn._target, action="run an rrf search", index=native._knn._index
        ) from None
    return None
