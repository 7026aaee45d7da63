"""The embedded ``dense`` retriever: exact nearest neighbours over a corpus's embeddings.

Every document (title and text) is embedded once with an embedder plugin; the vectors
are cached on disk as a ``.npy`` file named by the corpus's content hash and the
embedder's ``model_id``, so a rerun reads them back (memory-mapped) and a changed corpus
or model embeds anew. Search is exact: every document is scored against the question,
a block of rows at a time, so memory stays bounded whatever the corpus size.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from retrievalkit.embedders import Embedder, create_embedder, describe_embedder, embed_queries
from retrievalkit.errors import InputError
from retrievalkit.formats.corpus import CorpusDocument, read_corpus
from retrievalkit.retrievers.contract import document_id_of

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

log = logging.getLogger(__name__)

#: Where embeddings are cached unless the ``cache_dir`` option says otherwise.
DEFAULT_CACHE_DIR = Path(".retrievalkit") / "embeddings"
#: Bumped when the cache layout or the text given to the embedder changes.
CACHE_FORMAT = 1
#: Documents embedded per call: bounds the memory an embedder call takes.
DEFAULT_BATCH_SIZE = 256
#: Rows scored at once: bounds the memory of a search over a memory-mapped matrix.
SEARCH_BLOCK = 65536


def document_text(document: CorpusDocument) -> str:
    """What is embedded for a document: its title and text, as the BM25 retriever indexes."""
    return f"{document.title}\n{document.text}" if document.title else document.text


def corpus_hash(documents: Sequence[CorpusDocument]) -> str:
    """sha256 over every document's id, title and text, in corpus order."""
    digest = hashlib.sha256()
    for document in documents:
        for part in (document.id, document.title, document.text):
            encoded = part.encode("utf-8")
            digest.update(len(encoded).to_bytes(8, "little"))
            digest.update(encoded)
    return digest.hexdigest()


class EmbeddingCache:
    """A folder of ``KEY.npy`` matrices, each written whole (temporary file, then rename)."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder

    @staticmethod
    def key(corpus_digest: str, embedder: Embedder) -> str:
        facts = {"corpus": corpus_digest, "format": CACHE_FORMAT, **describe_embedder(embedder)}
        return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:32]

    def load(self, key: str, rows: int, dimensions: int) -> npt.NDArray[np.float32] | None:
        import numpy as np

        if self.folder is None:
            return None
        path = self.folder / f"{key}.npy"
        if not path.is_file():
            return None
        try:
            matrix = np.load(path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as error:
            log.warning("embedding cache %s is unreadable (%s): embedding again", path, error)
            return None
        if matrix.dtype != np.float32 or matrix.shape != (rows, dimensions):
            log.warning(
                "embedding cache %s holds %s %s, not float32 (%d, %d): embedding again",
                path,
                matrix.dtype,
                matrix.shape,
                rows,
                dimensions,
            )
            return None
        log.info("embeddings read from cache %s", path)
        return matrix  # type: ignore[no-any-return]

    def fill(
        self,
        key: str,
        shape: tuple[int, int],
        write: Callable[[npt.NDArray[np.float32]], None],
    ) -> npt.NDArray[np.float32]:
        """A matrix filled by ``write``: on disk (then memory-mapped) when caching, else in RAM."""
        import numpy as np

        if self.folder is None:
            matrix = np.zeros(shape, dtype=np.float32)
            write(matrix)
            return matrix
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(prefix=f".{key}.", suffix=".npy", dir=self.folder)
            os.close(handle)
        except OSError as error:
            raise InputError(
                f"cannot write the embedding cache: {error.strerror or error}",
                source=str(self.folder),
                field="cache_dir",
                hint='give a writable cache_dir, or cache_dir = "" to keep embeddings in memory',
            ) from None
        try:
            on_disk = np.lib.format.open_memmap(temporary, mode="w+", dtype=np.float32, shape=shape)
            write(on_disk)
            on_disk.flush()
            del on_disk
            os.replace(temporary, self.folder / f"{key}.npy")
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        log.info("embeddings cached in %s", self.folder / f"{key}.npy")
        loaded = np.load(self.folder / f"{key}.npy", mmap_mode="r", allow_pickle=False)
        return loaded  # type: ignore[no-any-return]


@attrs.frozen
class EmbeddedCorpus:
    """A corpus's documents and their vectors, row ``i`` for ``documents[i]``."""

    documents: list[CorpusDocument]
    matrix: npt.NDArray[np.float32]
    corpus_hash: str
    cache_key: str


def embed_corpus(
    corpus: str | Path,
    embedder: Embedder,
    *,
    cache_dir: str | Path | None = DEFAULT_CACHE_DIR,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: bool | None = None,
    label: str = "dense",
) -> EmbeddedCorpus:
    """Every document of a BEIR corpus embedded (title and text), from the cache when there.

    Shared by the ``dense`` retriever and the indexing commands of backend plugins, so an
    index and exact search over the same corpus use the very same vectors.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"must be a whole number >= 1, got {batch_size!r}", field="batch_size")
    documents = list(read_corpus(Path(corpus)))
    if not documents:
        raise InputError("the corpus holds no documents", source=str(corpus))
    digest = corpus_hash(documents)
    cache = EmbeddingCache(Path(cache_dir) if cache_dir else None)
    key = cache.key(digest, embedder)
    shape = (len(documents), embedder.dimensions)
    matrix = cache.load(key, *shape)
    if matrix is None:
        texts = [document_text(doc) for doc in documents]
        show = sys.stderr.isatty() if progress is None else progress
        matrix = cache.fill(
            key, shape, lambda out: _embed_into(out, texts, embedder, batch_size, show, label)
        )
    return EmbeddedCorpus(documents, matrix, digest, key)


class DenseRetriever:
    """Exact nearest-neighbour search over a corpus embedded by an embedder plugin.

    Scores follow the embedder's similarity: cosine (vectors scaled to unit length),
    the inner product (``dot_product``, ``max_inner_product``) or minus the Euclidean
    distance (``l2_norm``). Equal scores keep corpus order, so rankings are deterministic.
    """

    embedding_backend = "embedded"

    def __init__(
        self,
        corpus: str | Path,
        embedder: Embedder,
        *,
        cache_dir: str | Path | None = DEFAULT_CACHE_DIR,
        batch_size: int = DEFAULT_BATCH_SIZE,
        doc_id_separator: str | None = None,
        progress: bool | None = None,
        identifier: str = "dense",
    ) -> None:
        self.identifier = identifier
        self.embedder = embedder
        self.embedding_model_id = embedder.model_id
        embedded = embed_corpus(
            corpus,
            embedder,
            cache_dir=cache_dir,
            batch_size=batch_size,
            progress=progress,
            label=identifier,
        )
        self._ids = [document_id_of(doc.id, doc_id_separator) for doc in embedded.documents]
        self.corpus_hash = embedded.corpus_hash
        self.cache_key = embedded.cache_key
        matrix = embedded.matrix
        self._matrix = matrix
        self._norms = _row_norms(matrix) if embedder.similarity in ("cosine", "l2_norm") else None

    def describe(self) -> dict[str, str]:
        """What the manifest records beside the embedding model: its size and similarity."""
        return {
            "embedding.dimensions": str(self.embedder.dimensions),
            "embedding.similarity": self.embedder.similarity,
            "embedding.corpus_hash": self.corpus_hash[:16],
        }

    def retrieve(self, question: str, limit: int) -> list[str]:
        return [doc_id for doc_id, _ in self.retrieve_scored(question, limit)]

    def retrieve_scored(self, question: str, limit: int) -> list[tuple[str, float]]:
        """(document id, similarity) pairs, best first."""
        if limit <= 0:
            return []
        return self._search(embed_queries(self.embedder, [question])[0], limit)

    def retrieve_many(self, questions: Sequence[str], limit: int) -> list[list[str]]:
        """One ranking per question; the questions are embedded in one call."""
        if limit <= 0:
            return [[] for _ in questions]
        vectors = embed_queries(self.embedder, list(questions))
        return [[doc for doc, _ in self._search(vector, limit)] for vector in vectors]

    def _search(self, query: npt.NDArray[np.float32], limit: int) -> list[tuple[str, float]]:
        import numpy as np

        if query.shape != (self.embedder.dimensions,):
            raise ValueError(
                f"the embedder gave a question vector of shape {query.shape}, "
                f"not ({self.embedder.dimensions},)"
            )
        scores = np.empty(len(self._ids), dtype=np.float32)
        similarity = self.embedder.similarity
        query_norm = np.float32(np.linalg.norm(query))
        for start in range(0, len(self._ids), SEARCH_BLOCK):
            block = np.asarray(self._matrix[start : start + SEARCH_BLOCK])
            part = block @ query
            if similarity == "cosine":
                assert self._norms is not None
                norms = self._norms[start : start + SEARCH_BLOCK] * query_norm
                part = np.divide(part, norms, out=np.zeros_like(part), where=norms > 0)
            elif similarity == "l2_norm":
                assert self._norms is not None
                squared = self._norms[start : start + SEARCH_BLOCK] ** 2 + query_norm**2 - 2 * part
                part = -np.sqrt(np.maximum(squared, 0))
            scores[start : start + len(part)] = part
        take = min(limit, len(scores))
        candidates = np.argpartition(-scores, take - 1)[:take] if take < len(scores) else None
        if candidates is None:
            candidates = np.arange(len(scores))
        else:
            # Everything tied with the last kept score competes, so ties resolve by corpus order.
            floor = scores[candidates].min()
            candidates = np.flatnonzero(scores >= floor)
        order = candidates[np.lexsort((candidates, -scores[candidates]))][:take]
        return [(self._ids[index], float(scores[index])) for index in order]


def _row_norms(matrix: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    import numpy as np

    norms = np.empty(matrix.shape[0], dtype=np.float32)
    for start in range(0, matrix.shape[0], SEARCH_BLOCK):
        block = np.asarray(matrix[start : start + SEARCH_BLOCK])
        norms[start : start + len(block)] = np.linalg.norm(block, axis=1)
    return norms


def _embed_into(
    out: npt.NDArray[np.float32],
    texts: list[str],
    embedder: Embedder,
    batch_size: int,
    progress: bool,
    label: str,
) -> None:
    """Embed ``texts`` batch by batch into ``out``, checking every batch's shape."""
    import numpy as np

    from retrievalkit.errors import PluginError

    def run(advance: Callable[[int], None]) -> None:
        for start in range(0, len(texts), batch_size):
            batch = texts[start : start + batch_size]
            vectors = np.asarray(embedder.embed(batch))
            if vectors.shape != (len(batch), embedder.dimensions):
                raise PluginError(
                    f"embedder {embedder.model_id} returned shape {vectors.shape} for "
                    f"{len(batch)} texts, but declares {embedder.dimensions} dimensions"
                )
            if not np.isfinite(vectors).all():
                raise PluginError(f"embedder {embedder.model_id} returned NaN or infinity")
            out[start : start + len(batch)] = vectors
            advance(len(batch))

    if not progress:
        run(lambda _done: None)
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(f"{label}: embedding {len(texts)} documents", total=len(texts))
        run(lambda done: bar.advance(task, done))


def create_dense(
    corpus: str | None = None,
    *,
    embedder: str = "wordllama",
    embedder_options: Mapping[str, Any] | None = None,
    cache_dir: str | None = str(DEFAULT_CACHE_DIR),
    batch_size: int = DEFAULT_BATCH_SIZE,
    doc_id_separator: str | None = None,
) -> DenseRetriever:
    """Factory of the ``dense`` plugin: exact nearest neighbours over the ``corpus``.

    Options: ``corpus`` (a BEIR corpus.jsonl), ``embedder`` (a ``retrievalkit.embedders``
    plugin, ``wordllama`` by default), ``embedder_options`` (a table), ``cache_dir``
    (where embeddings are kept, ``.retrievalkit/embeddings``; "" keeps them in memory
    only), ``batch_size`` (documents per embedder call, 256) and ``doc_id_separator``.
    """
    if corpus is None:
        raise InputError(
            "the dense retriever needs the option 'corpus'",
            field="corpus",
            hint='set corpus = "path/to/corpus.jsonl" in a [retrievers.NAME] block with '
            'plugin = "dense"',
        )
    return DenseRetriever(
        corpus,
        create_embedder(embedder, embedder_options),
        cache_dir=cache_dir or None,
        batch_size=batch_size,
        doc_id_separator=doc_id_separator,
    )


def create_dense_demo() -> DenseRetriever:
    """Factory of the ``dense-demo`` plugin: WordLlama over the bundled demo corpus."""
    from retrievalkit.demo import DEMO_CORPUS

    return DenseRetriever(
        DEMO_CORPUS,
        create_embedder("wordllama"),
        doc_id_separator="#",
        identifier="dense-demo",
    )
