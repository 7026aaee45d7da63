"""The ``haystack`` retriever: a Haystack Pipeline or retriever component, built by the team's code.

A Pipeline is run once per question with the question on its ``inputs`` sockets and the
limit on its ``top_k_inputs``; the documents at ``output`` (``component.socket``) are the
answer, and the documents every component puts out are the stages (in the pipeline's
order, the answer last) for retrievalkit's stage view. A component is called as
``run(query=question, top_k=limit)`` and its ``documents`` are the answer. Ids come from
``id_field`` (``id``, ``meta.doc_id``, ``meta.source``...), chunk ids collapsed by
``doc_id_separator``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from retrievalkit.plugin_api import InputError, PluginError, load_factory

from retrievalkit_haystack.documents import check_id_field, ranked_ids

#: Input sockets that take the question, and the result count, unless named.
QUESTION_SOCKETS = ("query", "text")
LIMIT_SOCKETS = ("top_k",)


def _socket(reference: Any, field: str) -> tuple[str, str]:
    if not isinstance(reference, str) or reference.count(".") != 1 or "" in reference.split("."):
        raise InputError(
            f"must be 'component.socket', got {reference!r}",
            field=field,
            hint='e.g. output = "joiner.documents"',
        )
    component, socket = reference.split(".")
    return component, socket


class HaystackRetriever:
    """Ranked document ids from a Haystack Pipeline or retriever component."""

    def __init__(
        self,
        target: Any,
        *,
        output: str | None = None,
        inputs: Sequence[str] | None = None,
        top_k_inputs: Sequence[str] | None = None,
        id_field: str = "id",
        doc_id_separator: str | None = None,
        identifier: str = "haystack",
    ) -> None:
        from haystack import Pipeline

        self.identifier = identifier
        self.id_field = id_field
        self._path = check_id_field(id_field)
        self._separator = doc_id_separator or None
        self._target = target
        self._pipeline = isinstance(target, Pipeline)
        if not self._pipeline:
            if not callable(getattr(target, "run", None)):
                raise InputError(
                    f"the factory returned {type(target).__name__}, neither a haystack "
                    "Pipeline nor a component with run()",
                    field="factory",
                )
            return
        given = target.inputs()
        self._question_sockets = (
            [_socket(name, "inputs") for name in inputs]
            if inputs
            else [(c, s) for c, sockets in given.items() for s in sockets if s in QUESTION_SOCKETS]
        )
        self._limit_sockets = (
            [_socket(name, "top_k_inputs") for name in top_k_inputs]
            if top_k_inputs is not None
            else [(c, s) for c, sockets in given.items() for s in sockets if s in LIMIT_SOCKETS]
        )
        for component, socket in [*self._question_sockets, *self._limit_sockets]:
            if socket not in given.get(component, {}):
                raise InputError(
                    f"the pipeline has no open input {component}.{socket}; its inputs: "
                    + ", ".join(f"{c}.{s}" for c, sockets in given.items() for s in sockets),
                    field="inputs",
                )
        if not self._question_sockets:
            raise InputError(
                "no pipeline input takes the question: name it", field="inputs",
                hint='e.g. inputs = ["bm25.query", "text_embedder.text"]',
            )  # fmt: skip
        self._order = self._document_outputs()
        if output is None:
            leaves = [name for name in self._order if name.split(".")[0] in target.outputs()]
            if len(leaves) != 1:
                raise InputError(
                    "name the pipeline output that holds the answer: "
                    + (", ".join(leaves) or "no component puts out documents"),
                    field="output",
                    hint='e.g. output = "joiner.documents"',
                )
            output = leaves[0]
        component, socket = _socket(output, "output")
        if f"{component}.{socket}" not in self._order:
            raise InputError(
                f"{output} is not a documents output of the pipeline; they are: "
                + ", ".join(self._order),
                field="output",
            )
        self.output = (component, socket)

    def _document_outputs(self) -> list[str]:
        """Every ``component.socket`` putting out a list of documents, in pipeline order."""
        import networkx

        graph = self._target.graph
        found = []
        for name in networkx.topological_sort(graph):
            for socket, spec in (graph.nodes[name].get("output_sockets") or {}).items():
                if "Document" in str(getattr(spec, "type", "")):
                    found.append(f"{name}.{socket}")
        return found

    def retrieve(self, question: str, limit: int) -> list[str]:
        if not self._pipeline:
            return self._component_answer(question, limit)
        return list(self.retrieve_stages(question, limit).values())[-1]

    def _component_answer(self, question: str, limit: int) -> list[str]:
        result = self._target.run(query=question, top_k=limit)
        documents = result.get("documents") if isinstance(result, Mapping) else None
        if not isinstance(documents, list):
            raise PluginError(f"{type(self._target).__name__}.run() returned no 'documents' list")
        return ranked_ids(documents, self._path, self.id_field, self._separator)[:limit]

    def retrieve_stages(self, question: str, limit: int) -> dict[str, list[str]]:
        """Every component's documents, in pipeline order, the named output last."""
        if not self._pipeline:
            return {"component": self._component_answer(question, limit)}
        data: dict[str, dict[str, Any]] = {}
        for component, socket in self._question_sockets:
            data.setdefault(component, {})[socket] = question
        for component, socket in self._limit_sockets:
            data.setdefault(component, {})[socket] = limit
        components = {name.split(".")[0] for name in self._order}
        result = self._target.run(data, include_outputs_from=components)
        answer = ".".join(self.output)
        stages: dict[str, list[str]] = {}
        for name in [*(n for n in self._order if n != answer), answer]:
            component, socket = name.split(".")
            documents = result.get(component, {}).get(socket)
            if documents is None:
                if name == answer:
                    raise PluginError(f"the pipeline run returned nothing at {answer}")
                continue
            stages[name] = ranked_ids(documents, self._path, self.id_field, self._separator)[:limit]
        return stages


def create_haystack(
    factory: str | None = None,
    *,
    factory_options: Mapping[str, Any] | None = None,
    output: str | None = None,
    inputs: Sequence[str] | None = None,
    top_k_inputs: Sequence[str] | None = None,
    id_field: str = "id",
    doc_id_separator: str | None = None,
) -> HaystackRetriever:
    """Factory of the ``haystack`` retriever plugin.

    Options: ``factory`` (``"module:function"`` returning a Pipeline or a retriever
    component), ``factory_options`` (keyword arguments for it), ``output`` (the
    pipeline's ``component.socket`` holding the answer; needed when there are several),
    ``inputs`` (sockets given the question; default: every open ``query`` and ``text``),
    ``top_k_inputs`` (sockets given the limit; default: every open ``top_k``),
    ``id_field`` (``id``, ``meta.doc_id``...) and ``doc_id_separator``.
    """
    if factory is None:
        raise InputError(
            "the haystack retriever needs the option 'factory'",
            field="factory",
            hint='e.g. factory = "my_rag.pipelines:build_pipeline"',
        )
    try:
        target = load_factory(factory)(**dict(factory_options or {}))
    except InputError:
        raise
    except Exception as error:
        raise PluginError(
            f"{factory} failed while building the pipeline: {type(error).__name__}: {error}"
        ) from error
    return HaystackRetriever(
        target,
        output=output,
        inputs=inputs,
        top_k_inputs=top_k_inputs,
        id_field=id_field,
        doc_id_separator=doc_id_separator,
    )
