"""The built-in offline embedder: WordLlama's ``l2_supercat`` model, read from its own wheel.

``pip install 'retrievalkit-eval[dense]'`` brings ``wordllama`` 0.4, whose wheel carries
the 256-dimension ``l2_supercat`` token embeddings and the tokenizer configuration, so
nothing is fetched at run time. WordLlama's loader looks for the tokenizer in a folder
named ``tokenizer`` while the wheel ships it in ``tokenizers``; as installed it would go
to the network for it. Here the loader is pointed at a private folder holding
``tokenizers/<the shipped file>`` with downloads disabled, so it can only read files.

A text's vector is the mean of its tokens' embeddings (the first :data:`MAX_TOKENS`
tokens), scaled to unit length: WordLlama's own pooling, computed one text at a time so a
vector never depends on the other texts of a batch and reruns give the same bits.
"""

from __future__ import annotations

import logging
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
#: Tokens gathered at once (a batch's memory is this times dimensions times 4 bytes).
TOKENS_PER_BATCH = 65536


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

        texts = list(texts)
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        start = 0
        while start < len(texts):
            ids, lengths, stop = self._tokenize_batch(texts, start)
            if ids:
                token_ids = np.clip(np.asarray(ids, dtype=np.int64), 0, len(self._table) - 1)
                vectors = self._table[token_ids]
                offsets = np.concatenate(([0], np.cumsum(lengths)[:-1]))
                nonempty = np.asarray(lengths) > 0
                sums = np.add.reduceat(vectors, offsets[nonempty], axis=0, dtype=np.float32)
                block = out[start:stop]
                block[nonempty] = sums / np.asarray(lengths, dtype=np.float32)[nonempty, None]
            start = stop
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        # A text without tokens keeps the zero vector: it is close to nothing.
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    def _tokenize_batch(self, texts: list[str], start: int) -> tuple[list[int], list[int], int]:
        """Token ids of texts[start:stop], stopping when the token budget is reached."""
        ids: list[int] = []
        lengths: list[int] = []
        stop = start
        while stop < len(texts) and (stop == start or len(ids) < TOKENS_PER_BATCH):
            text = texts[stop]
            if not isinstance(text, str):
                raise TypeError(f"texts[{stop}] is {type(text).__name__}, not str")
            encoded = self._tokenizer.encode(text, add_special_tokens=False).ids[:MAX_TOKENS]
            ids.extend(encoded)
            lengths.append(len(encoded))
            stop += 1
        return ids, lengths, stop


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
