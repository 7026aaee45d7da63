"""The ``hybrid`` retriever: a lexical leg and a dense leg fused into one ranking.

Either both legs are built over one ``corpus`` (the embedded BM25 and dense retrievers),
or ``lexical`` and ``dense`` name configured retrievers (say, an Elasticsearch BM25
index and a pgvector table). Fusion is the ``fusion`` retriever's: reciprocal rank
fusion (``rrf``), or ``weighted``: min-max normalised scores, ``alpha`` for the dense leg
and ``1 - alpha`` for the lexical one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from retrievalkit.errors import InputError
from retrievalkit.retrievers.fusion import FusionRetriever

if TYPE_CHECKING:
    from retrievalkit.plugins.resolution import Resolver

METHODS = ("rrf", "weighted")
#: How many results each leg gives the fusion by default.
DEFAULT_DEPTH = 100


class HybridRetriever(FusionRetriever):
    """A two-part fusion, lexical then dense; the manifest names the dense leg's model."""

    def __init__(self, lexical: Any, dense: Any, **fusion: Any) -> None:
        super().__init__([lexical, dense], **fusion)


def _check_fusion(method: str, k: int, alpha: float, depth: int) -> None:
    if method not in METHODS:
        raise InputError(
            f"unknown method {method!r}", field="method", hint="use " + " or ".join(METHODS)
        )
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(f"must be a whole number >= 1, got {k!r}", field="k")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 <= alpha <= 1:
        raise InputError(f"must be a number from 0 to 1, got {alpha!r}", field="alpha")
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise InputError(f"must be a whole number >= 1, got {depth!r}", field="depth")


def build_hybrid(
    lexical: Any,
    dense: Any,
    *,
    method: str = "rrf",
    k: int = 60,
    alpha: float = 0.5,
    depth: int = DEFAULT_DEPTH,
    identifier: str = "hybrid",
) -> HybridRetriever:
    """Fuse two resolved retrievers (``name``, ``plugin``, ``options``, ``retriever``)."""
    _check_fusion(method, k, alpha, depth)
    if method == "weighted":
        for leg in (lexical, dense):
            if not callable(getattr(leg.retriever, "retrieve_scored", None)):
                raise InputError(
                    f"retriever '{leg.name}' gives no scores (no retrieve_scored), which "
                    "weighted fusion needs",
                    field="method",
                    hint='use method = "rrf", which needs only rankings',
                )
    return HybridRetriever(
        lexical,
        dense,
        method="rrf" if method == "rrf" else "combsum",
        k=k,
        depth=depth,
        weights=None if method == "rrf" else [1.0 - float(alpha), float(alpha)],
        identifier=identifier,
    )


def create_hybrid(
    corpus: str | None = None,
    *,
    lexical: str | None = None,
    dense: str | None = None,
    method: str = "rrf",
    k: int = 60,
    alpha: float = 0.5,
    depth: int = DEFAULT_DEPTH,
    embedder: str = "wordllama",
    embedder_options: Mapping[str, Any] | None = None,
    cache_dir: str | None = None,
    doc_id_separator: str | None = None,
    resolver: Resolver | None = None,
) -> HybridRetriever:
    """Factory of the ``hybrid`` plugin.

    Options: ``corpus`` (BM25 and dense legs over one BEIR corpus.jsonl, with
    ``embedder``, ``embedder_options``, ``cache_dir`` and ``doc_id_separator`` as for
    ``dense``), or ``lexical`` and ``dense`` (names of configured retrievers); ``method``
    (``rrf`` or ``weighted``), ``k`` (the RRF constant, 60), ``alpha`` (the dense leg's
    weight in ``weighted``, 0.5) and ``depth`` (results asked of each leg, 100).
    """
    from retrievalkit.plugins.resolution import ResolvedRetriever, Resolver
    from retrievalkit.retrievers.bm25 import BM25Retriever
    from retrievalkit.retrievers.dense import DEFAULT_CACHE_DIR, create_dense

    _check_fusion(method, k, alpha, depth)
    if corpus is not None and (lexical or dense):
        raise InputError(
            "give either corpus, or lexical and dense, not both",
            field="corpus",
            hint="corpus builds both legs; lexical/dense name configured retrievers",
        )
    if corpus is None:
        if not lexical or not dense:
            raise InputError(
                "needs corpus, or both lexical and dense",
                field="lexical" if not lexical else "dense",
                hint='e.g. corpus = "corpus.jsonl", or lexical = "es-bm25", dense = "pg-vectors"',
            )
        finder = resolver or Resolver()
        legs = finder.retriever(lexical), finder.retriever(dense)
    else:
        dense_options: dict[str, Any] = {
            "corpus": corpus,
            "embedder": embedder,
            "embedder_options": dict(embedder_options or {}),
            "cache_dir": str(DEFAULT_CACHE_DIR) if cache_dir is None else cache_dir,
            "doc_id_separator": doc_id_separator,
        }
        legs = (
            ResolvedRetriever(
                "bm25",
                "bm25",
                {"corpus": corpus, "doc_id_separator": doc_id_separator},
                BM25Retriever(corpus, doc_id_separator=doc_id_separator),
            ),
            ResolvedRetriever("dense", "dense", dense_options, create_dense(**dense_options)),
        )
    return build_hybrid(*legs, method=method, k=k, alpha=alpha, depth=depth)


def create_hybrid_demo() -> HybridRetriever:
    """Factory of the ``hybrid-demo`` plugin: RRF of ``bm25-demo`` and ``dense-demo``."""
    from retrievalkit.plugins.resolution import ResolvedRetriever
    from retrievalkit.retrievers.bm25 import create_bm25_demo
    from retrievalkit.retrievers.dense import create_dense_demo

    return build_hybrid(
        ResolvedRetriever("bm25-demo", "bm25-demo", {}, create_bm25_demo()),
        ResolvedRetriever("dense-demo", "dense-demo", {}, create_dense_demo()),
        identifier="hybrid-demo",
    )
