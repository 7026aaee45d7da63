"""The ``fusion`` retriever: one ranking from several configured retrievers.

Reciprocal rank fusion (``rrf``: each part adds ``weight / (k + rank)``) needs nothing
but rankings. ``combsum`` and ``combmnz`` add min-max normalised scores (CombMNZ then
multiplies by how many parts returned the document), so every part must offer
``retrieve_scored``. Ties keep the order in which documents were first seen.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from retrievalkit.errors import InputError
from retrievalkit.formats.ids import returned_id

if TYPE_CHECKING:
    from retrievalkit.plugins.resolution import Resolver

METHODS = ("rrf", "combsum", "combmnz")


class FusionRetriever:
    """Fuses the rankings of its parts, asking each for ``depth`` results (default: limit)."""

    def __init__(
        self,
        parts: Sequence[Any],
        *,
        method: str = "rrf",
        k: int = 60,
        depth: int | None = None,
        weights: Sequence[float] | None = None,
        identifier: str = "fusion",
    ) -> None:
        self.identifier = identifier
        self._parts = list(parts)
        self._method = method
        self._k = k
        self._depth = depth
        self._weights = list(weights) if weights is not None else [1.0] * len(self._parts)

    def describe(self) -> dict[str, str]:
        """What the manifest records: the method and each part with its options hash."""
        from retrievalkit.pipeline.engine.record import options_hash

        parts = ", ".join(
            f"{part.name} (plugin {part.plugin}, options {options_hash(part.options)})"
            for part in self._parts
        )
        return {"fusion.method": f"{self._method} (k={self._k})", "fusion.parts": parts}

    @property
    def embedding_backend(self) -> str | None:
        """Where the vectors of the parts that have them live (None: no part has vectors)."""
        return _joined(getattr(part.retriever, "embedding_backend", None) for part in self._parts)

    @property
    def embedding_model_id(self) -> str | None:
        """The embedding models of the parts that have vectors, in part order."""
        return _joined(getattr(part.retriever, "embedding_model_id", None) for part in self._parts)

    def retrieve(self, question: str, limit: int) -> list[str]:
        return [doc_id for doc_id, _ in self.retrieve_scored(question, limit)]

    def retrieve_scored(self, question: str, limit: int) -> list[tuple[str, float]]:
        return self._fuse(question, limit, None)

    def retrieve_stages(self, question: str, limit: int) -> dict[str, Sequence[str]]:
        """Each part's ranking (a part with stages of its own reports them under its name),
        then the fused ranking as ``fusion``."""
        stages: dict[str, Sequence[str]] = {}
        fused = self._fuse(question, limit, stages)
        stages["fusion"] = [doc_id for doc_id, _ in fused]
        return stages

    def _fuse(
        self, question: str, limit: int, stages: dict[str, Sequence[str]] | None
    ) -> list[tuple[str, float]]:
        """The fused ranking; with ``stages``, each part's stages are written into it as
        the part is asked (for score fusion, the part's scored ranking is its one stage)."""
        from retrievalkit.pipeline.engine.stages import answer_of, has_stages, part_stages

        fetch = max(limit, self._depth or limit)
        totals: dict[str, float] = {}
        voters: dict[str, int] = {}
        spelled: dict[str, str] = {}
        for part, weight in zip(self._parts, self._weights, strict=True):
            if self._method == "rrf":
                if stages is not None and has_stages(part.retriever):
                    own = part_stages(part, question, fetch)
                    stages.update(own)
                    ranked = answer_of(own)
                else:
                    ranked = list(part.retriever.retrieve(question, fetch))
                    if stages is not None:
                        stages[part.name] = ranked
                ids = _distinct(ranked)
                contributions = {doc: weight / (self._k + rank) for rank, doc in enumerate(ids, 1)}
            else:
                scored = part.retriever.retrieve_scored(question, fetch)
                if stages is not None:
                    stages[part.name] = [doc for doc, _ in scored]
                contributions = {doc: weight * value for doc, value in _min_max(scored)}
            for doc, value in contributions.items():
                # "doc-7 " from one part and "doc-7" from another are one document, as the
                # evaluator compares ids (formats/ids.py): their votes add up, and the
                # first spelling seen is kept, for the evaluator to count.
                key = _key(doc)
                spelled.setdefault(key, doc)
                totals[key] = totals.get(key, 0.0) + value
                voters[key] = voters.get(key, 0) + 1
        if self._method == "combmnz":
            totals = {doc: value * voters[doc] for doc, value in totals.items()}
        order = sorted(totals, key=lambda doc: -totals[doc])  # stable: first seen wins ties
        return [(spelled[key], totals[key]) for key in order[:limit]]


def _key(doc: Any) -> Any:
    """What a part's id is compared as: the evaluator's identity (`formats.ids`)."""
    return returned_id(doc) if isinstance(doc, str) and doc else doc


def _distinct(ranked: Sequence[Any]) -> list[Any]:
    """Each document's first occurrence, in order ("doc-7 " and "doc-7" are one)."""
    first: dict[Any, Any] = {}
    for doc in ranked:
        first.setdefault(_key(doc), doc)
    return list(first.values())


def _joined(values: Iterable[Any]) -> str | None:
    """Distinct non-empty strings joined with ' + ', or None when there are none."""
    distinct = list(dict.fromkeys(value for value in values if isinstance(value, str) and value))
    return " + ".join(distinct) or None


def _min_max(pairs: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
    """Scores scaled to [0, 1] within one ranking; all-equal scores become 1."""
    distinct: dict[str, float] = {}
    for doc, score in pairs:
        distinct.setdefault(doc, float(score))
    if not distinct:
        return []
    low, high = min(distinct.values()), max(distinct.values())
    span = high - low
    return [(doc, (score - low) / span if span > 0 else 1.0) for doc, score in distinct.items()]


def create_fusion(
    retrievers: Sequence[str] | None = None,
    *,
    method: str = "rrf",
    k: int = 60,
    depth: int | None = None,
    weights: Sequence[float] | None = None,
    resolver: Resolver | None = None,
) -> FusionRetriever:
    """Factory of the ``fusion`` plugin.

    Options: ``retrievers`` (names of configured retrievers or option-less plugins,
    at least two), ``method`` (rrf, combsum, combmnz), ``k`` (the RRF constant, 60),
    ``depth`` (how many results to ask each part for, at least 1), ``weights`` (one
    number >= 0 per part, not all 0).
    It reports its stages: each part's ranking under the part's name, then ``fusion``.
    """
    from retrievalkit.plugins.resolution import Resolver

    if not retrievers or isinstance(retrievers, str) or len(retrievers) < 2:
        raise InputError(
            "needs at least two retriever names",
            field="retrievers",
            hint='e.g. retrievers = ["title-bm25", "body-bm25"]',
        )
    if method not in METHODS:
        raise InputError(
            f"unknown method {method!r}", field="method", hint="use " + ", ".join(METHODS)
        )
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(f"must be a whole number >= 1, got {k!r}", field="k")
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
        raise InputError(f"must be a whole number >= 1, got {depth!r}", field="depth")
    if weights is not None and (isinstance(weights, str) or len(weights) != len(retrievers)):
        raise InputError("needs one weight per retriever", field="weights")
    for weight in weights or ():
        if (
            isinstance(weight, bool)
            or not isinstance(weight, (int, float))
            or not 0 <= weight < math.inf
        ):
            raise InputError(f"every weight must be a number >= 0, got {weight!r}", field="weights")
    if weights is not None and not any(weights):
        raise InputError("at least one weight must be above 0", field="weights")
    finder = resolver or Resolver()
    parts = [finder.retriever(name) for name in retrievers]
    if method != "rrf":
        for part in parts:
            if not callable(getattr(part.retriever, "retrieve_scored", None)):
                raise InputError(
                    f"retriever '{part.name}' gives no scores (no retrieve_scored), which "
                    f"{method} needs",
                    field="method",
                    hint='use method = "rrf", which needs only rankings',
                )
    return FusionRetriever(parts, method=method, k=k, depth=depth, weights=weights)
