"""The retrievers one LangChain run called, and what each returned, as retrievalkit stages.

LangChain reports every retriever run to the callbacks of the config (``on_retriever_start``
and ``on_retriever_end``, with the run that called it as parent), composites included: an
``EnsembleRetriever`` invokes each part as a child run. The recorder turns that tree into
ordered stages: each inner run under its name (``BM25Retriever``, or the ``run_name`` given
with ``with_config``), a nested composite's parts under its name (``inner.BM25Retriever``)
and its own answer as ``inner.fusion``; the outermost run's answer comes last, as
``fusion`` when it called two or more retrievers, ``rerank`` when it called one (a
compression retriever reorders or filters its base's documents), else its own name.
"""

from __future__ import annotations

import threading
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler


class StageRecorder(BaseCallbackHandler):
    """Each retriever run of one question: its name, its caller and its documents."""

    raise_error = True

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: dict[UUID, str] = {}
        self._parents: dict[UUID, UUID | None] = {}
        self._started: list[UUID] = []
        self._documents: dict[UUID, list[Any]] = {}

    def on_retriever_start(
        self,
        serialized: dict[str, Any],
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        name = str(kwargs.get("name") or "retriever").replace(".", "_")
        with self._lock:
            self._names[run_id] = name
            self._parents[run_id] = parent_run_id
            self._started.append(run_id)

    def on_retriever_end(
        self, documents: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        with self._lock:
            self._documents[run_id] = list(documents)

    def _children(self, run: UUID) -> list[UUID]:
        return [child for child in self._started if self._parents[child] == run]

    def _root(self) -> UUID | None:
        roots = [run for run in self._started if self._parents[run] not in self._names]
        return roots[0] if roots else None

    def answer_name(self) -> str:
        """The outermost run's stage name."""
        root = self._root()
        return "answer" if root is None else self._own_name(root, self._names[root])

    def _own_name(self, run: UUID, name: str) -> str:
        children = self._children(run)
        if len(children) >= 2:
            return "fusion"
        return "rerank" if children else name

    def inner_stages(self) -> list[tuple[str, list[Any]]]:
        """Every run below the outermost one, a composite's parts before its answer."""
        root = self._root()
        stages: list[tuple[str, list[Any]]] = []
        if root is not None:
            self._walk(root, "", stages)
        return stages

    def _walk(self, run: UUID, prefix: str, stages: list[tuple[str, list[Any]]]) -> None:
        seen: dict[str, int] = {}
        for child in self._children(run):
            name = self._names[child]
            seen[name] = seen.get(name, 0) + 1
            if seen[name] > 1:  # the same retriever called again (e.g. per generated query)
                name = f"{name}-{seen[name]}"
            if self._children(child):
                self._walk(child, f"{prefix}{name}.", stages)
                name = f"{name}.{self._own_name(child, name)}"
            if child in self._documents:
                stages.append((f"{prefix}{name}", self._documents[child]))
