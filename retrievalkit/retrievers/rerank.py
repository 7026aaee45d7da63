"""The ``rerank`` retriever: a first-stage retriever whose top candidates a reranker reorders.

A reranker plugin (entry-point group ``retrievalkit.rerankers``) is a factory called
with keyword options that returns an object with
``rerank(question, candidates) -> [(document id, score), ...]``; higher is better.
Candidates the reranker leaves out keep their first-stage order after the rest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from retrievalkit.errors import InputError

RERANKERS = "retrievalkit.rerankers"


@runtime_checkable
class Reranker(Protocol):
    def rerank(self, question: str, candidates: Sequence[str]) -> Sequence[tuple[str, float]]:
        """Scores for (some of) the candidate document ids; higher is better."""
        ...


class RerankRetriever:
    def __init__(self, first_stage: Any, reranker: Reranker, *, candidates: int) -> None:
        self.identifier = "rerank"
        self._first = first_stage
        self._reranker = reranker
        self._candidates = candidates

    def describe(self) -> dict[str, str]:
        from retrievalkit.pipeline.record import options_hash

        return {
            "rerank.first_stage": f"{self._first.name} (plugin {self._first.plugin}, options "
            f"{options_hash(self._first.options)})",
            "rerank.candidates": str(self._candidates),
        }

    @property
    def embedding_backend(self) -> str | None:
        """The first stage's vectors, if it has any: the reranker reorders what they found."""
        return getattr(self._first.retriever, "embedding_backend", None)

    @property
    def embedding_model_id(self) -> str | None:
        return getattr(self._first.retriever, "embedding_model_id", None)

    def retrieve(self, question: str, limit: int) -> list[str]:
        fetched = self._first.retriever.retrieve(question, max(limit, self._candidates))
        pool = list(dict.fromkeys(fetched))[: self._candidates]
        scores = dict(self._reranker.rerank(question, pool))
        position = {doc: index for index, doc in enumerate(pool)}
        ranked = sorted(
            pool, key=lambda doc: (doc not in scores, -scores.get(doc, 0.0), position[doc])
        )
        return ranked[:limit]


def create_rerank(
    first_stage: str | None = None,
    *,
    reranker: str | None = None,
    candidates: int = 50,
    reranker_options: Mapping[str, Any] | None = None,
) -> RerankRetriever:
    """Factory of the ``rerank`` plugin.

    Options: ``first_stage`` (a configured retriever or option-less plugin), ``reranker``
    (a ``retrievalkit.rerankers`` plugin name such as ``tfidf-cosine``), ``candidates``
    (how many first-stage results to rerank, 50) and ``reranker_options`` (a table).
    """
    from retrievalkit.plugins import registry as plugins
    from retrievalkit.plugins.resolution import active_config, resolve_retriever

    if not first_stage or not reranker:
        raise InputError(
            "needs first_stage and reranker",
            field="first_stage" if not first_stage else "reranker",
            hint='e.g. first_stage = "bm25-demo", reranker = "tfidf-cosine"',
        )
    if isinstance(candidates, bool) or not isinstance(candidates, int) or candidates < 1:
        raise InputError(f"must be a whole number >= 1, got {candidates!r}", field="candidates")
    first = resolve_retriever(first_stage, active_config())
    factory = plugins.load(plugins.find_one(RERANKERS, reranker))
    try:
        instance = factory(**dict(reranker_options or {}))
    except TypeError as error:
        raise InputError(
            f"reranker '{reranker}' does not accept these options: {error}",
            field="reranker_options",
        ) from None
    if not isinstance(instance, Reranker):
        raise InputError(f"reranker '{reranker}' has no rerank(question, candidates) method")
    return RerankRetriever(first, instance, candidates=candidates)
