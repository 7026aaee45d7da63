"""The ``rerank`` retriever: a first-stage retriever whose top candidates a reranker reorders.

A reranker plugin (entry-point group ``retrievalkit.rerankers``) is a factory called
with keyword options that returns an object with
``rerank(question, candidates) -> [(document id, score), ...]``; higher is better.
Candidates the reranker leaves out keep their first-stage order after the rest. Only
the first ``candidates`` documents are reranked; asked for more, the retriever fills the
rest from the first stage's order below them (it never returns fewer documents than the
first stage gave). It reports its stages: the first stage's, then ``rerank``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from retrievalkit.errors import InputError
from retrievalkit.rerankers import RERANKERS as RERANKERS
from retrievalkit.rerankers import Reranker

if TYPE_CHECKING:
    from retrievalkit.plugins.resolution import Resolver


class RerankRetriever:
    def __init__(self, first_stage: Any, reranker: Reranker, *, candidates: int) -> None:
        self.identifier = "rerank"
        self._first = first_stage
        self._reranker = reranker
        self._candidates = candidates

    def describe(self) -> dict[str, str]:
        from retrievalkit.pipeline.engine.record import options_hash

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
        return self._reranked(question, list(fetched), limit)

    def retrieve_stages(self, question: str, limit: int) -> dict[str, list[str]]:
        """The first stage's ranking (or its own stages, under its name), then ``rerank``."""
        from retrievalkit.pipeline.engine.stages import answer_of, part_stages

        stages = part_stages(self._first, question, max(limit, self._candidates))
        reranked = self._reranked(question, answer_of(stages), limit)
        return {**{name: list(ids) for name, ids in stages.items()}, "rerank": reranked}

    def _reranked(self, question: str, fetched: list[str], limit: int) -> list[str]:
        """The top ``candidates`` of ``fetched`` reordered by the reranker, then the rest of
        the first stage's ranking in its own order, ``limit`` ids in all: asked for more
        documents than it reranks, the retriever still returns as many as asked."""
        distinct = list(dict.fromkeys(fetched))
        pool = distinct[: self._candidates]
        scores = dict(self._reranker.rerank(question, pool))
        position = {doc: index for index, doc in enumerate(pool)}
        ranked = sorted(
            pool, key=lambda doc: (doc not in scores, -scores.get(doc, 0.0), position[doc])
        )
        return (ranked + distinct[self._candidates :])[:limit]


def create_rerank(
    first_stage: str | None = None,
    *,
    reranker: str | None = None,
    candidates: int = 50,
    reranker_options: Mapping[str, Any] | None = None,
    resolver: Resolver | None = None,
) -> RerankRetriever:
    """Factory of the ``rerank`` plugin.

    Options: ``first_stage`` (a configured retriever or option-less plugin), ``reranker``
    (a ``retrievalkit.rerankers`` plugin name such as ``tfidf-cosine``), ``candidates``
    (how many first-stage results to rerank, 50; asked for more, the first stage's order
    fills the rest) and ``reranker_options`` (a table). It reports its stages: the first
    stage's (nested under its name when it has stages of its own), then ``rerank``.
    ``resolver`` is handed in by retrievalkit and finds the parts by name.
    """
    from retrievalkit.plugins.resolution import Resolver

    if not first_stage or not reranker:
        raise InputError(
            "needs first_stage and reranker",
            field="first_stage" if not first_stage else "reranker",
            hint='e.g. first_stage = "bm25-demo", reranker = "tfidf-cosine"',
        )
    if isinstance(candidates, bool) or not isinstance(candidates, int) or candidates < 1:
        raise InputError(f"must be a whole number >= 1, got {candidates!r}", field="candidates")
    parts = resolver or Resolver()
    first = parts.retriever(first_stage)
    instance = parts.reranker(reranker, reranker_options)
    return RerankRetriever(first, instance, candidates=candidates)
