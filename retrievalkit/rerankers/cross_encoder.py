"""The ``cross-encoder`` reranker: a local sentence-transformers CrossEncoder reads each pair.

Every chunk of every candidate is scored with the question (``predict`` on
``(question, passage)`` pairs, ``batch_size`` at a time); a document then takes its best
chunk's score. The model is loaded from disk only (a folder, a name in the Hugging Face
cache, or ``package:NAME``), as the ``sentence-transformers`` embedder loads its models.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from retrievalkit.embedders import missing_extra
from retrievalkit.embedders.sentence_transformer import EXTRA, hub_cache_folder, resolve_model
from retrievalkit.errors import InputError
from retrievalkit.rerankers.passages import CandidatePassages, collapse_max


class CrossEncoderReranker:
    """Scores (question, chunk) pairs with a CrossEncoder; documents keep their best chunk."""

    def __init__(
        self,
        passages: CandidatePassages,
        *,
        model: str,
        device: str = "cpu",
        batch_size: int = 32,
        max_length: int | None = None,
        allow_download: bool = False,
        cache_folder: str | None = None,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InputError(f"must be a whole number >= 1, got {batch_size!r}", field="batch_size")
        self._passages = passages
        self.batch_size = batch_size
        target, _ = resolve_model(model, cache_folder)
        self.model_name = model
        self._model = _load(target, model, device, max_length, allow_download, cache_folder)

    def score_pairs(self, question: str, passages: Sequence[str]) -> list[float]:
        """The model's score of each ``(question, passage)`` pair, higher is better."""
        if not passages:
            return []
        scores = self._model.predict(
            [(question, passage) for passage in passages],
            batch_size=self.batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        return [float(value) for value in scores.reshape(len(passages), -1)[:, -1]]

    def rerank(self, question: str, candidates: Sequence[str]) -> list[tuple[str, float]]:
        records, owners = self._passages.expand(candidates)
        scores = self.score_pairs(question, [self._passages.texts[r] for r in records])
        return collapse_max(candidates, owners, scores)


def _load(
    target: str,
    model: str,
    device: str,
    max_length: int | None,
    allow_download: bool,
    cache_folder: str | None,
) -> Any:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        from sentence_transformers import CrossEncoder
    except ImportError as error:
        raise missing_extra("sentence-transformers", error, extra=EXTRA) from None
    try:
        return CrossEncoder(
            target,
            device=device,
            max_length=max_length,
            local_files_only=not allow_download,
            cache_folder=cache_folder,
        )
    except OSError:
        raise InputError(
            f"the cross-encoder model {model} is not on this machine: looked in "
            f"{target if Path(target).is_dir() else hub_cache_folder(cache_folder)} "
            "(nothing is downloaded unless allowed)",
            field="model",
            hint="give a folder holding a CrossEncoder model, or allow_download = true",
        ) from None


def create_cross_encoder(
    corpus: str | None = None,
    *,
    model: str | None = None,
    device: str = "cpu",
    batch_size: int = 32,
    max_length: int | None = None,
    doc_id_separator: str | None = None,
    allow_download: bool = False,
    cache_folder: str | None = None,
) -> CrossEncoderReranker:
    """Factory of the ``cross-encoder`` reranker.

    Options: ``corpus`` (the BEIR corpus.jsonl the candidates come from), ``model`` (a
    folder, a Hugging Face cache name such as ``cross-encoder/ms-marco-MiniLM-L6-v2``,
    or ``package:NAME``), ``device``, ``batch_size`` (pairs per forward pass, 32),
    ``max_length`` (tokens per pair), ``doc_id_separator`` (chunks of one document),
    ``allow_download`` (false) and ``cache_folder``.
    """
    if corpus is None or model is None:
        raise InputError(
            "the cross-encoder reranker needs the options 'corpus' and 'model'",
            field="corpus" if corpus is None else "model",
            hint='e.g. corpus = "corpus.jsonl", model = "path/to/cross-encoder"',
        )
    return CrossEncoderReranker(
        CandidatePassages(corpus, doc_id_separator=doc_id_separator),
        model=model,
        device=device,
        batch_size=batch_size,
        max_length=max_length,
        allow_download=allow_download,
        cache_folder=cache_folder,
    )
