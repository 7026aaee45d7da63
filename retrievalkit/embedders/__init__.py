"""The embedder contract: texts in, one float32 vector per text out, and loading one by name.

An embedder plugin (entry-point group ``retrievalkit.embedders``) names a factory that is
called with keyword options and returns an `Embedder`. Dense retrievers and the
indexing commands of the backend plugins take an embedder by that name, so the model that
made a vector index is recorded once (``model_id``) and used again for the questions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from retrievalkit.errors import InputError, PluginError
from retrievalkit.plugins.registry import EMBEDDERS

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: The similarities an embedder can be meant for, by the names Elasticsearch uses.
#: ``cosine``: angle only; ``dot_product``: vectors are unit length, so it equals cosine;
#: ``max_inner_product``: raw inner product; ``l2_norm``: Euclidean distance.
SIMILARITIES = ("cosine", "dot_product", "max_inner_product", "l2_norm")


@runtime_checkable
class Embedder(Protocol):
    """Text to float32 vectors for one model.

    ``model_id`` names the model and everything else that changes its vectors (two
    embedders with the same ``model_id`` must give the same vectors), because caches and
    index metadata are keyed by it. ``dimensions`` is the length of every vector, and
    ``similarity`` (one of `SIMILARITIES`) the comparison the model was trained for.
    """

    model_id: str
    dimensions: int
    similarity: str

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """A ``(len(texts), dimensions)`` float32 matrix, row ``i`` for ``texts[i]``.

        A row must not depend on the other texts of the call, and the same text must give
        the same bits on every call. An embedder that treats questions differently from
        documents (a query prefix, another tower) also offers
        ``embed_queries(texts)`` with the same shape; `embed_queries` picks it.
        """
        ...


def embed_queries(embedder: Embedder, texts: Sequence[str]) -> npt.NDArray[np.float32]:
    """Questions embedded as the model wants them: ``embed_queries`` if offered, else ``embed``."""
    method = getattr(embedder, "embed_queries", None)
    return method(list(texts)) if callable(method) else embedder.embed(list(texts))


def embedding_of(retriever: Any) -> tuple[str | None, str | None]:
    """The manifest's ``(embedding_backend, embedding_model_id)`` for a retriever.

    A retriever over vectors says where they live and which model made them with the
    attributes of those names (read from its index where the index records them); any
    other retriever has neither, and both are None.
    """
    backend = getattr(retriever, "embedding_backend", None)
    model_id = getattr(retriever, "embedding_model_id", None)
    return (
        backend if isinstance(backend, str) and backend else None,
        model_id if isinstance(model_id, str) and model_id else None,
    )


def describe_embedder(embedder: Embedder) -> dict[str, Any]:
    """The facts an index or a cache records about the embedder that filled it."""
    return {
        "model_id": embedder.model_id,
        "dimensions": int(embedder.dimensions),
        "similarity": embedder.similarity,
    }


def create_embedder(
    name: str, options: Mapping[str, Any] | None = None, *, field: str = "embedder"
) -> Embedder:
    """Load the ``retrievalkit.embedders`` plugin ``name`` and call it with ``options``.

    It goes through the one factory path (`retrievalkit.plugins.factories.create_plugin`):
    errors say which plugin, which option and the closest accepted one, and no secret
    option value reaches a message; ``field`` is the option of the caller that
    named the embedder (``embedder``, ``--embedder``), for the message.
    """
    from retrievalkit.plugins import registry as plugins
    from retrievalkit.plugins.factories import create_plugin

    if not isinstance(name, str) or not name:
        raise InputError(
            f"must name an embedder plugin, got {name!r}",
            field=field,
            hint="run 'retrievalkit list' to see the installed embedders, e.g. wordllama",
        )
    try:
        plugin = plugins.find_one(EMBEDDERS, name)
    except PluginError as error:
        raise InputError(str(error), field=field) from None
    embedder: Embedder = create_plugin(
        EMBEDDERS, name, dict(options or {}), source=f"{field}_options"
    )
    check_embedder_attributes(embedder, f"embedder '{name}' ({plugin.label})")
    return embedder


def check_embedder_attributes(embedder: Any, who: str) -> None:
    """Fail with a `PluginError` when ``embedder`` lacks what the contract needs."""
    problems = []
    if not callable(getattr(embedder, "embed", None)):
        problems.append("no embed(texts) method")
    model_id = getattr(embedder, "model_id", None)
    if not isinstance(model_id, str) or not model_id.strip():
        problems.append(f"model_id is {model_id!r}, not a non-empty string")
    dimensions = getattr(embedder, "dimensions", None)
    if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1:
        problems.append(f"dimensions is {dimensions!r}, not a whole number >= 1")
    similarity = getattr(embedder, "similarity", None)
    if similarity not in SIMILARITIES:
        problems.append(f"similarity is {similarity!r}, not one of {', '.join(SIMILARITIES)}")
    if problems:
        raise PluginError(f"{who} breaks the embedder contract: " + "; ".join(problems))


def missing_extra(package: str, error: ImportError, *, extra: str = "dense") -> InputError:
    """The error for an optional dependency that is not installed: what to install."""
    return InputError(
        f"this needs the optional package '{package}', which is not installed "
        f"({type(error).__name__}: {error})",
        hint=f"pip install 'retrievalkit-eval[{extra}]'",
    )
