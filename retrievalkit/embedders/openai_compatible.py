"""The ``openai-compatible`` embedder: ``POST {url}/embeddings`` as OpenAI, vLLM, TEI speak it.

The request is ``{"model", "input": [texts], "dimensions"?}``; the reply's ``data`` holds
one ``{"index", "embedding"}`` per text, put back in ``index`` order. Texts go in batches
of ``batch_size``; each batch is one request with its own deadline and retries (see
`retrievalkit.embedders.json_post`). The API key is read from ``api_key_env`` per request,
never stored, never in ``model_id`` or a message. The tokens a reply's ``usage`` reports
are recorded for the question being asked (`retrievalkit.usage.record_usage`, under the
model's name), so that a run's cost can be priced from them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from retrievalkit.embedders import SIMILARITIES
from retrievalkit.embedders.json_post import JSONPoster, ModelServerError, check_url
from retrievalkit.errors import InputError, PluginError
from retrievalkit.usage import record_usage, usage_of

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: What the server is asked to embed when ``dimensions`` is not given, to learn its length.
PROBE = "dimensions probe"


class OpenAICompatibleEmbedder:
    """Vectors from an OpenAI-compatible ``/embeddings`` endpoint."""

    def __init__(
        self,
        *,
        url: str,
        model: str,
        api_key_env: str | None = None,
        dimensions: int | None = None,
        batch_size: int = 64,
        similarity: str = "cosine",
        query_prefix: str = "",
        document_prefix: str = "",
        deadline: float = 60.0,
        retries: int = 3,
        backoff: float = 0.5,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise InputError(
                "must be the model name the server expects",
                field="model",
                hint='e.g. model = "text-embedding-3-small"',
            )
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InputError(f"must be a whole number >= 1, got {batch_size!r}", field="batch_size")
        if dimensions is not None and (
            isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1
        ):
            raise InputError(f"must be a whole number >= 1, got {dimensions!r}", field="dimensions")
        if similarity not in SIMILARITIES:
            raise InputError(
                f"must be one of {', '.join(SIMILARITIES)}, got {similarity!r}", field="similarity"
            )
        for name, value in (("query_prefix", query_prefix), ("document_prefix", document_prefix)):
            if not isinstance(value, str):
                raise InputError(f"must be a string, got {value!r}", field=name)
        self._poster = JSONPoster(
            check_url(url) + "/embeddings",
            api_key_env=api_key_env,
            deadline=deadline,
            retries=retries,
            backoff=backoff,
        )
        self.model = model
        self.batch_size = batch_size
        self.similarity = similarity
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self._requested_dimensions = dimensions
        self.dimensions = dimensions or int(self._request([PROBE]).shape[1])
        self.model_id = f"openai-compatible/{model};d{self.dimensions}" + (
            f";doc-prefix={document_prefix!r}" if document_prefix else ""
        )

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self._embed([self.document_prefix + _text(t, i) for i, t in enumerate(texts)])

    def embed_queries(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self._embed([self.query_prefix + _text(t, i) for i, t in enumerate(texts)])

    def _embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        import numpy as np

        parts = [
            self._request(texts[start : start + self.batch_size])
            for start in range(0, len(texts), self.batch_size)
        ]
        if not parts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        matrix = np.concatenate(parts)
        if matrix.shape[1] != self.dimensions:
            raise PluginError(
                f"{self._poster.url} returned {matrix.shape[1]}-dimension vectors for model "
                f"{self.model}, not {self.dimensions}"
            )
        return matrix

    def _request(self, texts: list[str]) -> npt.NDArray[np.float32]:
        import numpy as np

        body: dict[str, Any] = {"model": self.model, "input": texts}
        if self._requested_dimensions is not None:
            body["dimensions"] = self._requested_dimensions
        try:
            reply = self._poster.post(body)
        except ModelServerError as error:
            raise PluginError(f"embedder openai-compatible ({self.model}): {error}") from None
        where = f"{self._poster.url} (model {self.model})"
        data = reply.get("data") if isinstance(reply, dict) else None
        if not isinstance(data, list) or len(data) != len(texts):
            raise PluginError(
                f"{where} replied without a 'data' list of {len(texts)} embeddings: "
                f"{str(reply)[:120]}"
            )
        rows: list[Any] = [None] * len(texts)
        for position, item in enumerate(data):
            index = item.get("index", position) if isinstance(item, dict) else None
            vector = item.get("embedding") if isinstance(item, dict) else None
            if (
                not isinstance(index, int)
                or not 0 <= index < len(texts)
                or rows[index] is not None
                or not isinstance(vector, list)
                or not vector
            ):
                raise PluginError(f"{where}: data[{position}] is not a new {{index, embedding}}")
            rows[index] = vector
        try:
            matrix = np.asarray(rows, dtype=np.float32)
        except (TypeError, ValueError):
            raise PluginError(
                f"{where}: the embeddings are not lists of numbers of one length"
            ) from None
        if matrix.ndim != 2 or not np.isfinite(matrix).all():
            raise PluginError(f"{where}: the embeddings are not finite vectors of one length")
        usage = usage_of(reply)
        if usage is not None:  # the question being asked pays for it (`retrievalkit.usage`)
            record_usage(self.model, *usage)
        return matrix


def _text(text: Any, position: int) -> str:
    if not isinstance(text, str):
        raise TypeError(f"texts[{position}] is {type(text).__name__}, not str")
    return text


def create_openai_embedder(
    url: str | None = None,
    *,
    model: str | None = None,
    api_key_env: str | None = None,
    dimensions: int | None = None,
    batch_size: int = 64,
    similarity: str = "cosine",
    query_prefix: str = "",
    document_prefix: str = "",
    deadline: float = 60.0,
    retries: int = 3,
    backoff: float = 0.5,
) -> OpenAICompatibleEmbedder:
    """Factory of the ``openai-compatible`` embedder plugin.

    Options: ``url`` (the API root; ``/embeddings`` is appended), ``model``,
    ``api_key_env`` (the environment variable holding the key), ``dimensions`` (sent to
    the server; asked of it with one probe request when absent), ``batch_size`` (texts
    per request, 64), ``similarity`` (cosine), ``query_prefix`` / ``document_prefix``,
    ``deadline`` (seconds one request may take with its retries, 60), ``retries`` (3)
    and ``backoff`` (seconds before the first retry, doubled each time).
    """
    if not url or not model:
        raise InputError(
            "needs url and model",
            field="url" if not url else "model",
            hint='e.g. url = "http://127.0.0.1:8080/v1", model = "all-MiniLM-L6-v2"',
        )
    return OpenAICompatibleEmbedder(
        url=url,
        model=model,
        api_key_env=api_key_env,
        dimensions=dimensions,
        batch_size=batch_size,
        similarity=similarity,
        query_prefix=query_prefix,
        document_prefix=document_prefix,
        deadline=deadline,
        retries=retries,
        backoff=backoff,
    )
