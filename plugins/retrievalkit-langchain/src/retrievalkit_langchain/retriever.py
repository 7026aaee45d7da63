"""The ``langchain`` retriever: any LangChain ``BaseRetriever``, built by the team's code.

Each question is one ``invoke`` (many questions are one ``batch``, which LangChain runs on
its thread pool). The number of results asked for is handed through as LangChain allows:
``search_kwargs["k"]`` of a vector-store retriever (``fetch_k`` raised with it for MMR), the
``k`` field of retrievers such as ``BM25Retriever``, and the same for the parts of an
``EnsembleRetriever`` or ``MergerRetriever`` and the inner retriever of a
``ContextualCompressionRetriever`` or ``MultiQueryRetriever``; the answer is then cut to
the limit. The stages are the retrievers a composite's run calls (seen through
LangChain's callbacks), so an ensemble reports each part and then its fused answer; a
retriever that calls no other is not staged. Ids come from ``id_field``
(``metadata.doc_id`` by default, ``metadata.source``, ``id``...), chunk ids collapsed by
``doc_id_separator``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from retrievalkit.plugin_api import InputError, PluginError, load_factory

from retrievalkit_langchain.documents import check_id_field, ranked_ids
from retrievalkit_langchain.stages import StageRecorder

#: Fields that hold the one retriever a composite calls.
INNER_FIELDS = ("base_retriever", "retriever")


def with_limit(retriever: Any, limit: int) -> Any:
    """A copy of ``retriever`` (and of its inner retrievers) asking for ``limit`` results.

    Copies, never changes: the team's object may be shared, and questions run at once.
    A retriever with no ``k`` of its own is returned as it is.
    """
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnableBinding

    update: dict[str, Any] = {}
    if isinstance(retriever, RunnableBinding):
        bound = with_limit(retriever.bound, limit)
        return (
            retriever if bound is retriever.bound else retriever.model_copy(update={"bound": bound})
        )
    if not isinstance(retriever, BaseRetriever):
        return retriever
    fields = type(retriever).model_fields
    search_kwargs = getattr(retriever, "search_kwargs", None)
    if "search_kwargs" in fields and isinstance(search_kwargs, dict):
        asked = {**search_kwargs, "k": limit}
        if getattr(retriever, "search_type", None) == "mmr":
            asked["fetch_k"] = max(int(search_kwargs.get("fetch_k", 20)), limit)
        update["search_kwargs"] = asked
    k = getattr(retriever, "k", None)
    if "k" in fields and isinstance(k, int) and not isinstance(k, bool):
        update["k"] = limit
    parts = getattr(retriever, "retrievers", None)
    if "retrievers" in fields and isinstance(parts, list):
        update["retrievers"] = [with_limit(part, limit) for part in parts]
    for name in INNER_FIELDS:  # a compression retriever's base, a multi-query one's
        inner = getattr(retriever, name, None)
        if name in fields and inner is not None:
            update[name] = with_limit(inner, limit)
    return retriever.model_copy(update=update) if update else retriever


class LangChainRetriever:
    """Ranked document ids from a LangChain retriever (any ``BaseRetriever`` or retriever
    runnable)."""

    def __init__(
        self,
        target: Any,
        *,
        id_field: str = "metadata.doc_id",
        doc_id_separator: str | None = None,
        set_k: bool = True,
        max_concurrency: int | None = None,
        identifier: str = "langchain",
    ) -> None:
        from langchain_core.retrievers import BaseRetriever
        from langchain_core.runnables import Runnable

        if not isinstance(target, (BaseRetriever, Runnable)):
            raise InputError(
                f"the factory returned {type(target).__name__}, not a LangChain retriever "
                "(a langchain_core BaseRetriever)",
                field="factory",
            )
        if not isinstance(set_k, bool):
            raise InputError(f"must be true or false, got {set_k!r}", field="set_k")
        if max_concurrency is not None and (
            isinstance(max_concurrency, bool)
            or not isinstance(max_concurrency, int)
            or max_concurrency < 1
        ):
            raise InputError(
                f"must be a whole number >= 1, got {max_concurrency!r}", field="max_concurrency"
            )
        self.identifier = identifier
        self.id_field = id_field
        self._path = check_id_field(id_field)
        self._separator = doc_id_separator or None
        self._target = target
        self._set_k = set_k
        self._max_concurrency = max_concurrency
        self._limited: dict[int, Any] = {}

    def _asking(self, limit: int) -> Any:
        """The retriever to ask for ``limit`` results (copies kept per limit)."""
        if not self._set_k:
            return self._target
        found = self._limited.get(limit)
        if found is None:
            found = self._limited[limit] = with_limit(self._target, limit)
        return found

    def _ids(self, documents: Any, call: str, limit: int) -> list[str]:
        if not isinstance(documents, list):
            raise PluginError(
                f"{call} of {type(self._target).__name__} returned "
                f"{type(documents).__name__}, not a list of documents"
            )
        return ranked_ids(documents, self._path, self.id_field, self._separator)[:limit]

    def _config(self, callbacks: list[Any] | None = None) -> dict[str, Any]:
        config: dict[str, Any] = {}
        if callbacks:
            config["callbacks"] = callbacks
        if self._max_concurrency is not None:
            config["max_concurrency"] = self._max_concurrency
        return config

    def retrieve(self, question: str, limit: int) -> list[str]:
        documents = self._asking(limit).invoke(question, config=self._config())
        return self._ids(documents, "invoke()", limit)

    def retrieve_many(
        self, questions: Sequence[str], limit: int
    ) -> list[list[str] | BaseException]:
        """One ``batch`` call; a question that failed gets its exception."""
        answers = self._asking(limit).batch(
            list(questions), config=self._config(), return_exceptions=True
        )
        return [
            answer if isinstance(answer, BaseException) else self._safe_ids(answer, limit)
            for answer in answers
        ]

    def _safe_ids(self, documents: Any, limit: int) -> list[str] | BaseException:
        try:
            return self._ids(documents, "batch()", limit)
        except PluginError as error:
            failed: BaseException = error
            return failed


def is_composite(target: Any) -> bool:
    """Whether ``target`` calls other retrievers: an ensemble or merger (``retrievers``), a
    compression retriever (``base_retriever``) or a multi-query one (``retriever``)."""
    from langchain_core.runnables import Runnable, RunnableBinding

    while isinstance(target, RunnableBinding):
        target = target.bound
    fields = getattr(type(target), "model_fields", {})
    parts = getattr(target, "retrievers", None) if "retrievers" in fields else None
    return (isinstance(parts, list) and bool(parts)) or any(
        name in fields and isinstance(getattr(target, name, None), Runnable)
        for name in INNER_FIELDS
    )


class StagedLangChainRetriever(LangChainRetriever):
    """A composite LangChain retriever, its inner retrievers reported as stages."""

    def retrieve_stages(self, question: str, limit: int) -> dict[str, list[str]]:
        """Every retriever the run called, inner ones first, the answer last."""
        recorder = StageRecorder()
        documents = self._asking(limit).invoke(question, config=self._config([recorder]))
        return self._stages(recorder, documents, limit)

    def retrieve_many_stages(
        self, questions: Sequence[str], limit: int
    ) -> list[dict[str, list[str]] | BaseException]:
        recorders = [StageRecorder() for _ in questions]
        answers = self._asking(limit).batch(
            list(questions),
            config=[self._config([recorder]) for recorder in recorders],
            return_exceptions=True,
        )
        out: list[dict[str, list[str]] | BaseException] = []
        for recorder, answer in zip(recorders, answers, strict=True):
            try:
                if isinstance(answer, BaseException):
                    raise answer
                out.append(self._stages(recorder, answer, limit))
            except Exception as error:
                out.append(error)
        return out

    def _stages(self, recorder: StageRecorder, documents: Any, limit: int) -> dict[str, list[str]]:
        answer = self._ids(documents, "invoke()", limit)
        stages = {
            name: ranked_ids(found, self._path, self.id_field, self._separator)[:limit]
            for name, found in recorder.inner_stages()
        }
        stages[recorder.answer_name()] = answer
        return stages


def wrap(target: Any, **options: Any) -> LangChainRetriever:
    """The adapter for ``target``: staged when it calls other retrievers, else plain (a
    plain retriever's one ranking is its answer, and keeps retrievalkit's chunk scoring)."""
    staged = is_composite(target)
    return (StagedLangChainRetriever if staged else LangChainRetriever)(target, **options)


def create_langchain(
    factory: str | None = None,
    *,
    factory_options: Mapping[str, Any] | None = None,
    id_field: str = "metadata.doc_id",
    doc_id_separator: str | None = None,
    set_k: bool = True,
    max_concurrency: int | None = None,
) -> LangChainRetriever:
    """Factory of the ``langchain`` retriever plugin.

    Options: ``factory`` (``"module:function"`` returning a LangChain retriever),
    ``factory_options`` (keyword arguments for it), ``id_field`` (``metadata.doc_id``,
    ``metadata.source``, ``id``...), ``doc_id_separator``, ``set_k`` (hand the
    number of results asked for to the retrievers' ``k``; false asks them as built) and
    ``max_concurrency`` (threads of a ``batch``; LangChain's default otherwise).
    """
    if factory is None:
        raise InputError(
            "the langchain retriever needs the option 'factory'",
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
    return wrap(
        target,
        id_field=id_field,
        doc_id_separator=doc_id_separator,
        set_k=set_k,
        max_concurrency=max_concurrency,
    )
