"""The built-in offline embedder: WordLlama's ``l2_supercat`` model, read from its own wheel.

``pip install 'retrievalkit-eval[dense]'`` brings ``wordllama`` 0.4, whose wheel carries
the 256-dimension ``l2_supercat`` token embeddings and the tokenizer configuration, so
nothing is fetched at run time. WordLlama's loader looks for the tokenizer in a folder
named ``tokenizer`` while the wheel ships it in ``tokenizers``; as installed it would go
to the network for it. Here the loader is pointed at a private folder holding
``tokenizers/<the shipped file>`` with downloads disabled, so it can only read files.

A text's vector is the mean of its tokens' embeddings (the first `MAX_TOKENS`
tokens), scaled to unit length: WordLlama's own pooling, summed for each text over its
own tokens only (a sparse count matrix times the token table), so a vector never depends
on the other texts of a batch and reruns give the same bits.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrievalkit.embedders import missing_extra
from retrievalkit.errors import InputError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

CONFIG = "l2_supercat"
#: The only size the wheel ships; smaller sizes are its leading dimensions (Matryoshka).
SHIPPED_DIMENSIONS = 256
TRUNCATIONS = (64, 128, 256)
TOKENIZER_FILE = "l2_supercat_tokenizer_config.json"
#: Longer texts are cut here: it bounds the memory one batch takes.
MAX_TOKENS = 8192
#: Texts tokenized and pooled at once.
TEXTS_PER_BATCH = 512


class WordLlamaEmbedder:
    """Unit-length mean-pooled WordLlama vectors; compare them by cosine."""

    similarity = "cosine"

    def __init__(self, *, dimensions: int = SHIPPED_DIMENSIONS) -> None:
        if isinstance(dimensions, bool) or dimensions not in TRUNCATIONS:
            raise InputError(
                f"must be one of {', '.join(map(str, TRUNCATIONS))}, got {dimensions!r}",
                field="dimensions",
                hint="the wheel ships 256 dimensions; 64 and 128 are its leading parts",
            )
        self.dimensions = dimensions
        suffix = "" if dimensions == SHIPPED_DIMENSIONS else f"-d{dimensions}"
        self.model_id = f"wordllama/{CONFIG}_{SHIPPED_DIMENSIONS}{suffix}"
        self._table, self._tokenizer = _load_offline(dimensions)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        import numpy as np
        from scipy import sparse

        texts = list(texts)
        for position, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"texts[{position}] is {type(text).__name__}, not str")
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        vocabulary = len(self._table)
        for start in range(0, len(texts), TEXTS_PER_BATCH):
            batch = texts[start : start + TEXTS_PER_BATCH]
            encoded = self._tokenizer.encode_batch(batch, add_special_tokens=False)
            ids = [np.asarray(item.ids[:MAX_TOKENS], dtype=np.int64) for item in encoded]
            lengths = np.array([len(row) for row in ids], dtype=np.int64)
            if not lengths.sum():
                continue
            # Token counts per text times the token table: each row's sum depends on that
            # text's tokens only, and no (tokens x dimensions) array is ever built.
            counts = sparse.csr_matrix(
                (
                    np.ones(int(lengths.sum()), dtype=np.float32),
                    (np.repeat(np.arange(len(batch)), lengths), np.concatenate(ids)),
                ),
                shape=(len(batch), vocabulary),
            )
            counts.sum_duplicates()
            sums = np.asarray(counts @ self._table, dtype=np.float32)
            nonempty = lengths > 0
            out[start : start + len(batch)][nonempty] = sums[nonempty] / lengths[
                nonempty, None
            ].astype(np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        # A text without tokens keeps the zero vector: it is close to nothing.
        np.divide(out, norms, out=out, where=norms > 0)
        return out


def _load_offline(dimensions: int) -> tuple[Any, Any]:
    """The token table (float32, ``dimensions`` wide) and the tokenizer, without network."""
    import numpy as np

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        import wordllama
        from wordllama import WordLlama
    except ImportError as error:
        raise missing_extra("wordllama", error) from None
    finally:
        # wordllama's __init__ calls logging.basicConfig(INFO): undo it, the log is ours.
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
    shipped = Path(wordllama.__file__ or ".").parent / "tokenizers" / TOKENIZER_FILE
    if not shipped.is_file():
        raise InputError(
            f"the installed wordllama has no {shipped.name} in {shipped.parent}",
            hint="pip install 'wordllama>=0.4,<0.5' (the [dense] extra pins a version that "
            "ships it)",
        )
    folder = Path(tempfile.mkdtemp(prefix="retrievalkit-wordllama-"))
    try:
        (folder / "tokenizers").mkdir()
        shutil.copyfile(shipped, folder / "tokenizers" / TOKENIZER_FILE)
        model = WordLlama.load(
            config=CONFIG,
            dim=SHIPPED_DIMENSIONS,
            trunc_dim=None if dimensions == SHIPPED_DIMENSIONS else dimensions,
            cache_dir=folder,
            disable_download=True,
        )
    except FileNotFoundError as error:
        raise InputError(
            f"wordllama could not find its shipped model files: {error}",
            hint="reinstall it: pip install --force-reinstall 'wordllama>=0.4,<0.5'",
        ) from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    tokenizer = model.tokenizer
    # Sequential tokenizing: a tokenizer that has run threads warns on every later fork
    # (and retrievalkit forks, e.g. for git), while batches here are small anyway.
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    tokenizer.no_padding()
    tokenizer.no_truncation()
    table = np.ascontiguousarray(model.embedding[:, :dimensions], dtype=np.float32)
    return table, tokenizer


def create_wordllama(*, dimensions: int = SHIPPED_DIMENSIONS) -> WordLlamaEmbedder:
    """Factory of the ``wordllama`` embedder plugin.

    Options: ``dimensions`` (256, or 64/128: the leading part of the same vectors, which
    WordLlama trained to stand alone; a smaller, cheaper, somewhat weaker model).
    """
    return WordLlamaEmbedder(dimensions=dimensions)
