"""Build each distinct retriever of a sweep once and remember what it answered.

Configurations of a grid that vary only a fusion's or a reranker's options share their
first stage: the same retriever with the same options, asked the same questions. Such
a retriever is built once, and each question it is asked again is answered from what it
answered the first time (the same list), as if it were asked again. Latency stays
honest: a remembered answer is charged the time the first asking took, added to the
latency of the question whose asking used it (`SharedRetrievers.charges`).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from retrievalkit.formats.config import Config
    from retrievalkit.plugins.resolution import ResolvedRetriever

#: The methods whose answers are remembered (those of the retriever contract).
REMEMBERED = frozenset(
    {"retrieve", "retrieve_scored", "retrieve_many", "retrieve_stages", "retrieve_many_stages"}
)


def referenced(name: str, config: Config) -> list[str]:
    """``name`` and every configured retriever its options name, directly or through
    another (a fusion's parts, a rerank's first stage), each once, in order met."""
    seen: list[str] = []
    pending = [name]
    while pending:
        current = pending.pop(0)
        if current in seen:
            continue
        seen.append(current)
        entry = config.retrievers.get(current)
        if entry is None:
            continue
        for value in entry.options.values():
            for text in value if isinstance(value, list) else [value]:
                if isinstance(text, str) and text in config.retrievers and text not in seen:
                    pending.append(text)
    return seen


def retriever_key(name: str, config: Config) -> str:
    """What makes two retrievers the same: the plugin and options of ``name`` and of
    every configured retriever it reaches (sha256 of their canonical JSON)."""
    closure: list[list[Any]] = []
    for each in referenced(name, config):
        entry = config.retrievers.get(each)
        closure.append(
            [each, None, {}] if entry is None else [each, entry.plugin, dict(entry.options)]
        )
    text = json.dumps(closure, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class _Local(threading.local):
    """Per thread: how deep in remembered calls, and the time remembered answers saved."""

    def __init__(self) -> None:
        self.depth = 0
        self.charged = 0.0


class SharedRetrievers:
    """A `retrievalkit.plugins.resolution.Builder` for a sweep: one instance a
    `retriever_key`, each remembering its answers."""

    def __init__(self) -> None:
        self._built: dict[str, ResolvedRetriever] = {}
        self._local = _Local()
        self._lock = threading.Lock()
        self._charges: dict[str, list[float]] = {}
        self.reused = 0
        """How many answers were given from memory instead of asking again."""

    def __call__(
        self,
        name: str,
        config: Config,
        build: Callable[[str, Config], ResolvedRetriever],
    ) -> ResolvedRetriever:
        key = retriever_key(name, config)
        found = self._built.get(key)
        if found is None:
            resolved = build(name, config)
            found = attrs.evolve(resolved, retriever=Remembering(resolved.retriever, self))
            self._built[key] = found
        return found

    def charges(self, texts: Sequence[str]) -> list[float]:
        """The remembered time (ms) to add to each of these questions' measured latency,
        in their order, for the askings since the last call; then forgets them all."""
        with self._lock:
            pending = self._charges
            self._charges = {}
        return [pending.get(text, [0.0]).pop(0) if pending.get(text) else 0.0 for text in texts]

    def _charge(self, texts: Sequence[str], milliseconds: float) -> None:
        each = milliseconds / max(1, len(texts))
        with self._lock:
            for text in texts:
                self._charges.setdefault(text, []).append(each)


class Remembering:
    """A retriever that answers a question it was asked before (same method, question
    and limit) with the answer it gave then; everything else is the retriever's own."""

    def __init__(self, inner: Any, shared: SharedRetrievers) -> None:
        self._inner = inner
        self._shared = shared
        self._answers: dict[tuple[Any, ...], tuple[Any, float]] = {}

    def __getattr__(self, attribute: str) -> Any:
        value = getattr(self._inner, attribute)
        if attribute in REMEMBERED and callable(value):
            return functools.partial(self._ask, attribute, value)
        return value

    def _ask(self, method: str, call: Callable[[Any, int], Any], asked: Any, limit: int) -> Any:
        texts = [asked] if isinstance(asked, str) else list(asked)
        key = (method, asked if isinstance(asked, str) else tuple(texts), limit)
        local = self._shared._local
        found = self._answers.get(key)
        if found is not None:
            answer, took = found
            self._shared.reused += len(texts)
            if local.depth == 0:
                self._shared._charge(texts, took)
            else:
                local.charged += took
            return _copied(answer)
        outermost = local.depth == 0
        if outermost:
            local.charged = 0.0
        before = local.charged
        local.depth += 1
        start = time.perf_counter()
        try:
            answer = call(asked, limit)
        finally:
            local.depth -= 1
        # The time it would have taken asked afresh: what it took, plus what the
        # remembered answers of its own parts saved it.
        took = (time.perf_counter() - start) * 1000.0 + (local.charged - before)
        if outermost:
            self._shared._charge(texts, local.charged)
        kept = _kept(answer)
        if kept is not None:
            self._answers[key] = (kept, took)
            return _copied(kept)
        return answer


def _kept(answer: Any) -> Any:
    """A deep copy of ``answer`` to remember (a sequence or a mapping: what retrievers
    return), or None for anything else, which is not remembered (a generator)."""
    if isinstance(answer, (list, tuple, Mapping)):
        return copy.deepcopy(answer)
    return None


def _copied(kept: Any) -> Any:
    """A fresh deep copy of a remembered answer, the same types throughout, so that the
    caller may change what it got without changing what is remembered."""
    return copy.deepcopy(kept)
