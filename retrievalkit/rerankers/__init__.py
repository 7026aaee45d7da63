"""Rerankers: plugins that rescore a first stage's candidates (the ``rerank`` retriever's parts).

A reranker plugin (entry-point group ``retrievalkit.rerankers``) is a factory called with
keyword options that returns an object with
``rerank(question, candidates) -> [(document id, score), ...]``; higher is better.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from retrievalkit.errors import InputError, PluginError

RERANKERS = "retrievalkit.rerankers"


@runtime_checkable
class Reranker(Protocol):
    def rerank(self, question: str, candidates: Sequence[str]) -> Sequence[tuple[str, float]]:
        """Scores for (some of) the candidate document ids; higher is better."""
        ...


def create_reranker(
    name: str, options: Mapping[str, Any] | None = None, *, field: str = "reranker"
) -> Reranker:
    """Create the ``retrievalkit.rerankers`` plugin ``name`` with ``options``.

    It goes through the one factory path (`retrievalkit.plugins.factories.create_plugin`):
    a wrong option names the plugin, the closest accepted option and all of them, and no
    secret option value reaches a message. ``field`` is the caller's option that named the
    reranker, for the message.
    """
    from retrievalkit.plugins import registry as plugins
    from retrievalkit.plugins.factories import create_plugin

    if not isinstance(name, str) or not name:
        raise InputError(
            f"must name a reranker plugin, got {name!r}",
            field=field,
            hint="run 'retrievalkit list' to see the installed rerankers, e.g. tfidf-cosine",
        )
    try:
        plugins.find_one(RERANKERS, name)
    except PluginError as error:
        raise InputError(str(error), field=field) from None
    instance = create_plugin(RERANKERS, name, dict(options or {}), source=f"{field}_options")
    if not isinstance(instance, Reranker):
        raise PluginError(
            f"reranker '{name}' returned {type(instance).__name__}, which has no "
            "rerank(question, candidates) method"
        )
    return instance
