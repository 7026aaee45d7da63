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
from collections.abc import Callable, Iterator, Mapping, Sequence
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
#: Question scores held at once (questions x documents): bounds a batched search's memory
#: (these as float32, and their order as int64: 48 MiB).
SCORES_HELD = 1 << 22
#: The unit roundoff of float32.
_ROUNDOFF = 2.0**-24
#: Documents past a question's limit rescored exactly with it, so a cut between near-equal
#: scores is settled without rescoring that question's whole neighbourhood.
_SLACK = 8


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
        # A bar only where someone watches: `progress = true` never draws one into a log.
        show = progress is not False and _stderr_is_a_terminal()
        matrix = cache.fill(
            key, shape, lambda out: _embed_into(out, texts, embedder, batch_size, show, label)
        )
    return EmbeddedCorpus(documents, matrix, digest, key)


class DenseRetriever:
    """Exact nearest-neighbour search over a corpus embedded by an embedder plugin.

    Scores follow the embedder's similarity: cosine (vectors scaled to unit length),
    the inner product (``dot_product``, ``max_inner_product``) or minus the Euclidean
    distance (``l2_norm``). Equal scores keep corpus order, so rankings are deterministic.

    Many questions are searched at once (one matrix product a block of questions), and
    a ranking never depends on which other questions share its block: BLAS sums a float32
    product in an order that changes with the shapes and a row's place in them, so the
    product only picks the candidates (every document within the product's rounding bound
    of the k-th score), and each candidate's score is then summed in float64 and rounded
    to float32, which no summation order changes. So `retrieve_many` gives what
    `retrieve` gives for each question, whatever the batch.
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
        import numpy as np

        # The ids as an object array: a block's rankings are one indexing and one tolist.
        self._ids = np.empty(len(embedded.documents), dtype=object)
        self._ids[:] = [document_id_of(doc.id, doc_id_separator) for doc in embedded.documents]
        self.corpus_hash = embedded.corpus_hash
        self.cache_key = embedded.cache_key
        # A plain view (a memory map stays one, read as it is touched): indexing it skips
        # the memmap subclass's bookkeeping.
        self._matrix = np.asarray(embedded.matrix)
        self._norms = _row_norms(self._matrix)
        self._largest_norm = float(self._norms.max()) if len(self._norms) else 0.0
        with np.errstate(divide="ignore"):
            inverse = np.where(self._norms > 0, 1.0 / self._norms, 0.0)
        self._inverse_norms = inverse.astype(np.float32)

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
        return self.search(embed_queries(self.embedder, [question]), limit)[0]

    def retrieve_many(self, questions: Sequence[str], limit: int) -> list[list[str]]:
        """One ranking per question; the questions are embedded in one call and searched
        together."""
        if limit <= 0:
            return [[] for _ in questions]
        return self.search_ids(embed_queries(self.embedder, list(questions)), limit)

    def search(self, queries: npt.NDArray[np.float32], limit: int) -> list[list[tuple[str, float]]]:
        """The ``limit`` best (document id, score) pairs of each row of ``queries``."""
        found: list[list[tuple[str, float]]] = []
        for ids, scores in self._search_blocks(queries, limit):
            found.extend(map(list, map(zip, ids, scores.tolist())))
        return found

    def search_ids(self, queries: npt.NDArray[np.float32], limit: int) -> list[list[str]]:
        """The ids of `search`, without building a pair for every document found."""
        found: list[list[str]] = []
        for ids, _ in self._search_blocks(queries, limit):
            found.extend(ids)
        return found

    def _search_blocks(
        self, queries: npt.NDArray[np.float32], limit: int
    ) -> Iterator[tuple[list[list[str]], npt.NDArray[np.float32]]]:
        """(ids, scores) of each block of rows of ``queries``: `SCORES_HELD` scores at once."""
        import numpy as np

        queries = np.asarray(queries, dtype=np.float32)
        dimensions = self.embedder.dimensions
        if queries.ndim != 2 or queries.shape[1] != dimensions:
            shape = queries.shape[1:] if queries.ndim == 2 else queries.shape
            raise ValueError(
                f"the embedder gave a question vector of shape {shape}, not ({dimensions},)"
            )
        take = min(limit, len(self._ids))
        if take <= 0:
            yield [[] for _ in queries], np.zeros((len(queries), 0), dtype=np.float32)
            return
        rows = max(1, SCORES_HELD // max(len(self._ids), 1))
        for first in range(0, len(queries), rows):
            block = queries[first : first + rows]
            yield self._best(block, self._approximate(block), take)

    def _approximate(self, queries: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """(questions, documents) float32 scores from one product a block of documents."""
        import numpy as np

        similarity = self.embedder.similarity
        query_norms = np.linalg.norm(queries, axis=1).astype(np.float32)
        if similarity == "cosine":
            with np.errstate(divide="ignore", invalid="ignore"):
                queries = np.where(
                    query_norms[:, None] > 0, queries / query_norms[:, None], 0.0
                ).astype(np.float32)
        scores = np.empty((len(queries), len(self._ids)), dtype=np.float32)
        for start in range(0, len(self._ids), SEARCH_BLOCK):
            end = start + SEARCH_BLOCK
            part = scores[:, start:end]
            np.matmul(queries, self._matrix[start:end].T, out=part)
            if similarity == "cosine":
                part *= self._inverse_norms[None, start:end]
            elif similarity == "l2_norm":
                norms = self._norms[start:end].astype(np.float32)
                part *= -2.0
                part += norms[None, :] ** 2
                part += query_norms[:, None] ** 2
                np.maximum(part, 0.0, out=part)
                np.sqrt(part, out=part)
                part *= -1.0
        return scores

    def _bound(self, query_norm: float) -> float:
        """How far a float32 score of `_approximate` may lie from the exact one.

        A float32 dot product of d terms, in any order, is within gamma_d = d u / (1 - d u)
        of sum |a_i b_i| <= |a| |b| (u = 2^-24); dividing by two rounded norms adds a few
        u. For l2, sqrt(x) moves by at most sqrt of x's error. A few u more keep two exact
        scores this far apart from rounding to one float32.
        """
        import math

        dimensions = self.embedder.dimensions
        gamma = (dimensions + 8) * _ROUNDOFF / (1.0 - (dimensions + 8) * _ROUNDOFF)
        similarity = self.embedder.similarity
        if similarity == "cosine":
            return gamma + 8 * _ROUNDOFF
        reach = query_norm * self._largest_norm
        if similarity == "l2_norm":
            reach = query_norm + self._largest_norm
            return math.sqrt(2 * gamma) * reach + 4 * _ROUNDOFF * reach + 1e-30
        return (gamma + 4 * _ROUNDOFF) * reach + 1e-30

    def _best(
        self,
        queries: npt.NDArray[np.float32],
        scores: npt.NDArray[np.float32],
        take: int,
    ) -> tuple[list[list[str]], npt.NDArray[np.float32]]:
        """Each row's ``take`` best document ids and their exact scores, ties in corpus
        order.

        The ``take`` + `_SLACK` best by the product are rescored exactly, all rows at once;
        a row whose next document by the product could still belong (near-ties at the
        cut) has every document within the bound of its cut rescored instead.
        """
        import numpy as np

        count = scores.shape[1]
        norms = np.linalg.norm(queries.astype(np.float64), axis=1)
        margins = 2.0 * np.array([self._bound(norm) for norm in norms.tolist()])
        gathered = min(count, take + _SLACK)
        if gathered < count:
            split = np.argpartition(scores, count - gathered - 1, axis=1)
            candidates = split[:, count - gathered :]
            left_out = np.take_along_axis(
                scores, split[:, count - gathered - 1 : count - gathered], 1
            )
            near = np.partition(np.take_along_axis(scores, candidates, 1), gathered - take, 1)
            cut = near[:, gathered - take]
            settled = left_out[:, 0] < cut - margins
        else:
            candidates = np.broadcast_to(np.arange(count), (len(scores), count))
            settled = np.ones(len(scores), dtype=bool)
        exact = self._exact_rows(candidates, queries, norms)
        ranked = np.lexsort((candidates, -exact), axis=1)[:, :take]
        best = np.take_along_axis(candidates, ranked, 1)
        values = np.take_along_axis(exact, ranked, 1)
        for row in np.flatnonzero(~settled).tolist():
            best[row], values[row] = self._best_of_one(
                queries[row], scores[row], take, float(margins[row])
            )
        return self._ids[best].tolist(), values

    def _best_of_one(
        self,
        query: npt.NDArray[np.float32],
        scores: npt.NDArray[np.float32],
        take: int,
        margin: float,
    ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float32]]:
        """One row's best documents and scores, rescoring every document within
        ``margin`` of its cut."""
        import numpy as np

        cut = float(np.partition(scores, len(scores) - take)[len(scores) - take])
        candidates = np.flatnonzero(scores >= cut - margin)
        norm = np.array([np.linalg.norm(query.astype(np.float64))])
        exact = self._exact_rows(candidates[None, :], query[None, :], norm)[0]
        ranked = np.lexsort((candidates, -exact))[:take]
        return candidates[ranked], exact[ranked]

    def _exact_rows(
        self,
        candidates: npt.NDArray[np.intp],
        queries: npt.NDArray[np.float32],
        norms: npt.NDArray[np.float64],
    ) -> npt.NDArray[np.float32]:
        """(rows, candidates) scores summed in float64 and rounded to float32: the same
        whatever order the sums take."""
        import numpy as np

        exact = np.empty(candidates.shape, dtype=np.float32)
        step = max(1, (1 << 18) // max(candidates.shape[1] * queries.shape[1], 1))
        similarity = self.embedder.similarity
        for first in range(0, len(queries), step):
            picked = candidates[first : first + step]
            # float32 products are exact in float64; einsum casts a buffer at a time, so
            # the gathered documents are never copied whole into float64.
            dots = np.einsum(
                "qkd,qd->qk",
                self._matrix[picked],
                queries[first : first + step].astype(np.float64),
                dtype=np.float64,
                casting="safe",
            )
            if similarity == "cosine":
                scale = self._norms[picked] * norms[first : first + step, None]
                dots = np.divide(dots, scale, out=np.zeros_like(dots), where=scale > 0)
            elif similarity == "l2_norm":
                squared = self._norms[picked] ** 2 + norms[first : first + step, None] ** 2
                dots = -np.sqrt(np.maximum(squared - 2 * dots, 0))
            exact[first : first + step] = dots
        return exact


def _row_norms(matrix: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    """Each row's length, summed in float64 (as `DenseRetriever._exact` sums)."""
    import numpy as np

    norms = np.empty(matrix.shape[0], dtype=np.float64)
    for start in range(0, matrix.shape[0], SEARCH_BLOCK):
        block = np.asarray(matrix[start : start + SEARCH_BLOCK], dtype=np.float64)
        norms[start : start + len(block)] = np.sqrt(np.einsum("ij,ij->i", block, block))
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


def _stderr_is_a_terminal() -> bool:
    """Whether standard error is a terminal (``FORCE_COLOR`` does not make a pipe one)."""
    try:
        return os.isatty(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):
        return False
