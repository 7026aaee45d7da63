"""The ``dense`` reranker: a bi-encoder rescoring of the first stage's candidates.

Any embedder plugin embeds the corpus once (the ``dense`` retriever's cache, keyed by the
corpus's hash and the embedder's ``model_id``, so the two share the vectors) and the
question per call; each candidate chunk is scored by the embedder's similarity and a
document takes its best chunk's score. BM25's top 100 rescored this way costs one
question embedding per question, however many candidates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from retrievalkit.embedders import Embedder, create_embedder, embed_queries
from retrievalkit.errors import InputError
from retrievalkit.rerankers.passages import CandidatePassages, collapse_max
from retrievalkit.retrievers.dense import DEFAULT_BATCH_SIZE, DEFAULT_CACHE_DIR, embed_corpus


class DenseReranker:
    """Candidates rescored by the similarity of their embedded chunks to the question."""

    def __init__(
        self,
        corpus: str | Path,
        embedder: Embedder,
        *,
        doc_id_separator: str | None = None,
        cache_dir: str | Path | None = DEFAULT_CACHE_DIR,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        self.embedder = embedder
        self.embedding_model_id = embedder.model_id
        embedded = embed_corpus(
            corpus, embedder, cache_dir=cache_dir, batch_size=batch_size, label="dense reranker"
        )
        self._matrix = embedded.matrix
        self._passages = CandidatePassages(corpus, doc_id_separator=doc_id_separator)

    def rerank(self, question: str, candidates: Sequence[str]) -> list[tuple[str, float]]:
        import numpy as np

        records, owners = self._passages.expand(candidates)
        if not records:
            return []
        query = embed_queries(self.embedder, [question])[0].astype(np.float32)
        rows = np.asarray(self._matrix[[self._passages.rows[r] for r in records]])
        scores = rows @ query
        similarity = self.embedder.similarity
        if similarity in ("cosine", "l2_norm"):
            norms = np.linalg.norm(rows, axis=1)
            query_norm = np.float32(np.linalg.norm(query))
            if similarity == "cosine":
                scale = norms * query_norm
                scores = np.divide(scores, scale, out=np.zeros_like(scores), where=scale > 0)
            else:
                scores = -np.sqrt(np.maximum(norms**2 + query_norm**2 - 2 * scores, 0))
        return collapse_max(candidates, owners, scores.tolist())


def create_dense_reranker(
    corpus: str | None = None,
    *,
    embedder: str = "wordllama",
    embedder_options: Mapping[str, Any] | None = None,
    doc_id_separator: str | None = None,
    cache_dir: str | None = str(DEFAULT_CACHE_DIR),
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> DenseReranker:
    """Factory of the ``dense`` reranker.

    Options: ``corpus`` (the BEIR corpus.jsonl the candidates come from), ``embedder``
    (any ``retrievalkit.embedders`` plugin, ``wordllama`` by default),
    ``embedder_options`` (a table), ``doc_id_separator``, ``cache_dir`` (shared with the
    ``dense`` retriever; "" keeps vectors in memory) and ``batch_size``.
    """
    if corpus is None:
        raise InputError(
            "the dense reranker needs the option 'corpus'",
            field="corpus",
            hint='e.g. corpus = "corpus.jsonl", embedder = "sentence-transformers"',
        )
    return DenseReranker(
        corpus,
        create_embedder(embedder, embedder_options),
        doc_id_separator=doc_id_separator,
        cache_dir=cache_dir or None,
        batch_size=batch_size,
    )
