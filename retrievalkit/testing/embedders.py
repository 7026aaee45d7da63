"""The embedder contract, through the dense retriever that uses it (`check_embedder`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from retrievalkit.testing.rules import (
    DEFAULT_PROBES,
    Violations,
    fail,
    load_entry_point,
    name_of,
    short,
)


class ScriptedRetriever:
    """Answers the sample set's questions from a script; one question errors."""

    identifier = "contract-check"
    _ANSWERS: Mapping[str, tuple[str, ...]] = {
        "Où est la bibliothèque ?": ("doc-2", "doc-9", "doc-1"),
        "opening hours": ("doc-7", "doc-3"),
        "fishing licence": (),
    }

    def retrieve(self, question: str, limit: int) -> list[str]:
        if question not in self._ANSWERS:
            raise ConnectionError("backend unreachable")
        return list(self._ANSWERS[question][:limit])


def check_embedder(
    factory: Callable[..., Any] | str,
    /,
    *,
    probe_texts: Sequence[str] | None = None,
    **options: Any,
) -> Any:
    """Build an embedder with ``factory(**options)`` and check it keeps the embedder contract.

    ``factory`` is an embedder factory (what a ``retrievalkit.embedders`` entry point names)
    or the entry point's name, which also checks that it is installed. ``probe_texts`` are
    added to `DEFAULT_PROBES` (which include an empty-ish, a non-ASCII and a long text).
    Returns the embedder, for further tests of your own.
    """
    import numpy as np

    if isinstance(factory, str):
        factory = load_entry_point("embedder.discovery", "EMBEDDERS", factory)
    assert callable(factory)
    try:
        embedder = factory(**options)
    except Exception as error:
        fail("embedder.factory", f"calling {name_of(factory)}(**{options!r}) raised", error)
    found = Violations()
    _check_attributes(embedder, found)
    found.raise_any()  # every rule below needs the attributes

    texts = list(dict.fromkeys([*(probe_texts or ()), *DEFAULT_PROBES, ""]))
    dimensions, similarity = embedder.dimensions, embedder.similarity

    def embed(batch: list[str], method: str = "embed") -> Any:
        call = f"{method}({len(batch)} texts)"
        try:
            matrix = getattr(embedder, method)(batch)
        except Exception as error:
            fail("embedder.matrix" if batch else "embedder.empty", f"{call} raised", error)
        rule = "embedder.matrix" if batch else "embedder.empty"
        if method != "embed":
            rule = "embedder.queries"
        if not isinstance(matrix, np.ndarray):
            fail(rule, f"{call} returned {type(matrix).__name__}")
        if matrix.dtype != np.float32:
            fail(rule, f"{call} returned dtype {matrix.dtype}")
        if matrix.shape != (len(batch), dimensions):
            fail(rule, f"{call} returned shape {matrix.shape}, not {(len(batch), dimensions)}")
        return matrix

    with found.step():
        embed([])
    with found.step():  # the rules below all read the matrix of every probe text
        _check_vectors(embed, texts, similarity, found)
    with found.step():
        if callable(getattr(embedder, "embed_queries", None)):
            embed(texts, "embed_queries")
    found.raise_any()
    return embedder


def _check_attributes(embedder: Any, found: Violations) -> None:
    """``model_id``, ``dimensions``, ``similarity`` and a callable ``embed``."""
    from retrievalkit.embedders import SIMILARITIES

    kind = type(embedder).__name__
    model_id = getattr(embedder, "model_id", None)
    dimensions = getattr(embedder, "dimensions", None)
    similarity = getattr(embedder, "similarity", None)
    for broken, detail in (
        (not isinstance(model_id, str) or not model_id.strip(), f"{kind}.model_id is {model_id!r}"),
        (
            isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1,
            f"{kind}.dimensions is {dimensions!r}",
        ),
        (similarity not in SIMILARITIES, f"{kind}.similarity is {similarity!r}"),
    ):
        with found.step():
            if broken:
                fail("embedder.attributes", detail)
    if not callable(getattr(embedder, "embed", None)):
        with found.step():
            fail("embedder.attributes", f"{kind} has no callable embed")


def _check_vectors(
    embed: Callable[[list[str]], Any], texts: list[str], similarity: str, found: Violations
) -> None:
    """The rules read from the vectors of every probe text: finite, deterministic,
    independent of the batch, unit length for ``dot_product``, not all the same."""
    import numpy as np

    matrix = embed(texts)
    with found.step():
        bad = [texts[row] for row in np.flatnonzero(~np.isfinite(matrix).all(axis=1))]
        if bad:
            fail("embedder.finite", f"the vector of {short(bad[0])} has NaN or infinity")
    with found.step():
        again = embed(texts)
        if not np.array_equal(matrix.view(np.uint32), again.view(np.uint32)):
            row = int(np.flatnonzero((matrix != again).any(axis=1))[0])
            fail("embedder.deterministic", f"{short(texts[row])} gave different bits twice")
    for row, text in enumerate(texts):
        with found.step():
            alone = embed([text])[0]
            if not np.allclose(alone, matrix[row], rtol=1e-5, atol=1e-5):
                fail(
                    "embedder.independent",
                    f"{short(text)} embedded alone differs from the same text in a batch "
                    f"of {len(texts)} by up to {float(np.abs(alone - matrix[row]).max()):.3g}",
                )
    with found.step():
        if similarity == "dot_product":
            norms = np.linalg.norm(matrix, axis=1)
            off = np.flatnonzero((norms > 0) & (np.abs(norms - 1) > 1e-3))
            if len(off):
                fail("embedder.unit", f"the vector of {short(texts[off[0]])} is not unit length")
    with found.step():
        if len({matrix[row].tobytes() for row in range(len(texts))}) < 2:
            fail("embedder.distinct", f"all {len(texts)} probe texts got the same vector")
