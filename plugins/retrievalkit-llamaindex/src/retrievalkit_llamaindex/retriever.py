"""The ``llamaindex`` retriever: any LlamaIndex ``BaseRetriever``, built by the team's code.

Each question is one ``retrieve``; the number of results asked for is set as
``similarity_top_k`` on a copy of the retriever (``VectorIndexRetriever``, the BM25
retriever, capped at its number of nodes as bm25s needs, ``QueryFusionRetriever`` and each
of its parts), and the answer is cut to the limit. A ``QueryFusionRetriever``'s parts are
its stages, each asked the question, then ``fusion``; other retrievers are not staged.
Ids come from ``id_field`` (``node.ref_doc_id`` by default: the document a node was parsed
from; ``metadata.doc_id``, ``node_id``...), chunk ids collapsed by ``doc_id_separator``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from retrievalkit.plugin_api import InputError, PluginError, load_factory

from retrievalkit_llamaindex.documents import check_id_field, ranked_ids


def _parts(retriever: Any) -> list[Any] | None:
    """The retrievers a ``QueryFusionRetriever`` fuses (None for any other retriever)."""
    from llama_index.core.retrievers import QueryFusionRetriever

    if isinstance(retriever, QueryFusionRetriever):
        return list(retriever._retrievers)  # its only handle on them
    return None


def with_limit(retriever: Any, limit: int) -> Any:
    """A copy of ``retriever`` (and of a fusion's parts) asking ``similarity_top_k = limit``.

    Copies, never changes: the team's object may be shared, and questions run at once.
    A retriever with no ``similarity_top_k`` is returned as it is.
    """
    top_k = getattr(retriever, "similarity_top_k", None)
    parts = _parts(retriever)
    if (not isinstance(top_k, int) or isinstance(top_k, bool)) and parts is None:
        return retriever
    limited = copy.copy(retriever)
    if isinstance(top_k, int):
        scores = getattr(getattr(retriever, "bm25", None), "scores", None)
        count = scores.get("num_docs") if isinstance(scores, dict) else None
        # bm25s refuses a k above its number of documents; the retriever caps it when built.
        limited.similarity_top_k = min(limit, int(count)) if count else limit
    if parts is not None:
        limited._retrievers = [with_limit(part, limit) for part in parts]
    return limited


def part_names(parts: list[Any]) -> list[str]:
    """Stage names of a fusion's parts: class names, a repeated one numbered (``-2``)."""
    seen: dict[str, int] = {}
    names = []
    for part in parts:
        name = type(part).__name__.replace(".", "_")
        seen[name] = seen.get(name, 0) + 1
        names.append(name if seen[name] == 1 else f"{name}-{seen[name]}")
    return names


class LlamaIndexRetriever:
    """Ranked document ids from a LlamaIndex retriever (any ``BaseRetriever``)."""

    def __init__(
        self,
        target: Any,
        *,
        id_field: str = "node.ref_doc_id",
        doc_id_separator: str | None = None,
        set_top_k: bool = True,
        identifier: str = "llamaindex",
    ) -> None:
        from llama_index.core.base.base_retriever import BaseRetriever

        if not isinstance(target, BaseRetriever):
            raise InputError(
                f"the factory returned {type(target).__name__}, not a LlamaIndex retriever "
                "(a llama_index.core BaseRetriever; an index gives one with as_retriever())",
                field="factory",
            )
        if not isinstance(set_top_k, bool):
            raise InputError(f"must be true or false, got {set_top_k!r}", field="set_top_k")
        self.identifier = identifier
        self.id_field = id_field
        self._path = check_id_field(id_field)
        self._separator = doc_id_separator or None
        self._target = target
        self._set_top_k = set_top_k
        self._limited: dict[int, Any] = {}

    def _asking(self, limit: int) -> Any:
        if not self._set_top_k:
            return self._target
        found = self._limited.get(limit)
        if found is None:
            found = self._limited[limit] = with_limit(self._target, limit)
        return found

    def _ask(self, retriever: Any, question: str, limit: int) -> list[str]:
        nodes = retriever.retrieve(question)
        if not isinstance(nodes, list):
            raise PluginError(
                f"{type(retriever).__name__}.retrieve() returned {type(nodes).__name__}, "
                "not a list of nodes"
            )
        return ranked_ids(nodes, self._path, self.id_field, self._separator)[:limit]

    def retrieve(self, question: str, limit: int) -> list[str]:
        return self._ask(self._asking(limit), question, limit)


class StagedLlamaIndexRetriever(LlamaIndexRetriever):
    """A ``QueryFusionRetriever``, its parts reported as stages."""

    def retrieve_stages(self, question: str, limit: int) -> dict[str, list[str]]:
        """Each part, asked the question, under its class name, then ``fusion``."""
        asking = self._asking(limit)
        parts = _parts(asking) or []
        stages = {
            name: self._ask(part, question, limit)
            for name, part in zip(part_names(parts), parts, strict=True)
        }
        stages["fusion"] = self._ask(asking, question, limit)
        return stages


def wrap(target: Any, **options: Any) -> LlamaIndexRetriever:
    """The adapter for ``target``: staged for a ``QueryFusionRetriever``, else plain (a
    plain retriever's one ranking is its answer, and keeps retrievalkit's chunk scoring)."""
    staged = _parts(target) is not None
    return (StagedLlamaIndexRetriever if staged else LlamaIndexRetriever)(target, **options)


def create_llamaindex(
    factory: str | None = None,
    *,
    factory_options: Mapping[str, Any] | None = None,
    id_field: str = "node.ref_doc_id",
    doc_id_separator: str | None = None,
    set_top_k: bool = True,
) -> LlamaIndexRetriever:
    """Factory of the ``llamaindex`` retriever plugin.

    Options: ``factory`` (``"module:function"`` returning a LlamaIndex retriever),
    ``factory_options`` (keyword arguments for it), ``id_field`` (``node.ref_doc_id``,
    ``metadata.doc_id``, ``node_id``...), ``doc_id_separator`` and ``set_top_k`` (set
    ``similarity_top_k`` to the number of results asked for; false asks as built).
    """
    if factory is None:
        raise InputError(
            "the llamaindex retriever needs the option 'factory'",
            field="factory",
            hint='e.g. factory = "my_rag.retrievers:build_retriever"',
        )
    try:
        target = load_factory(factory)(**dict(factory_options or {}))
    except InputError:
        raise
    except Exception as error:
        raise PluginError(
            f"{factory} failed while building the retriever: {type(error).__name__}: {error}"
        ) from error
    return wrap(target, id_field=id_field, doc_id_separator=doc_id_separator, set_top_k=set_top_k)
