"""The ``rerank-api`` reranker: a hosted reranker in Cohere's ``/v1/rerank`` shape, Jina's or TEI's.

``format = "cohere"`` (and ``"jina"``, the same shape) sends ``{model, query, documents,
top_n}`` and reads ``{"results": [{index, relevance_score}]}``; ``format = "tei"`` (Hugging
Face text-embeddings-inference) sends ``{query, texts}`` and reads ``[{index, score}]``.
Every chunk of every candidate is sent, ``batch_size`` per request, each request with its
own deadline and retries (`retrievalkit.embedders.json_post`); a document takes its best
chunk's score. Scores from different requests are compared directly, which holds for
these services' relevance scores (each pair is scored on its own).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from retrievalkit.embedders.json_post import JSONPoster, ModelServerError, check_url
from retrievalkit.errors import InputError, PluginError
from retrievalkit.rerankers.passages import CandidatePassages, collapse_max
from retrievalkit.usage import record_usage, usage_of

FORMATS = ("cohere", "jina", "tei")


class RerankAPIReranker:
    """Candidate chunks scored by a rerank endpoint; documents keep their best chunk."""

    def __init__(
        self,
        passages: CandidatePassages,
        *,
        url: str,
        model: str | None = None,
        format: str = "cohere",
        api_key_env: str | None = None,
        batch_size: int = 100,
        deadline: float = 60.0,
        retries: int = 3,
        backoff: float = 0.5,
    ) -> None:
        if format not in FORMATS:
            raise InputError(f"must be one of {', '.join(FORMATS)}, got {format!r}", field="format")
        if format != "tei" and (not isinstance(model, str) or not model):
            raise InputError(
                f"the {format} format needs the model name the service expects", field="model",
                hint='e.g. model = "rerank-english-v3.0"',
            )  # fmt: skip
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InputError(f"must be a whole number >= 1, got {batch_size!r}", field="batch_size")
        self._passages = passages
        self.format = format
        self.model = model
        self.batch_size = batch_size
        self._poster = JSONPoster(
            check_url(url),
            api_key_env=api_key_env,
            deadline=deadline,
            retries=retries,
            backoff=backoff,
        )

    def score_passages(self, question: str, passages: Sequence[str]) -> list[float]:
        """The service's score of each passage for the question, in passage order."""
        scores: list[float] = []
        for start in range(0, len(passages), self.batch_size):
            scores.extend(self._request(question, list(passages[start : start + self.batch_size])))
        return scores

    def rerank(self, question: str, candidates: Sequence[str]) -> list[tuple[str, float]]:
        records, owners = self._passages.expand(candidates)
        scores = self.score_passages(question, [self._passages.texts[r] for r in records])
        return collapse_max(candidates, owners, scores)

    def _request(self, question: str, texts: list[str]) -> list[float]:
        body: dict[str, Any]
        if self.format == "tei":
            body = {"query": question, "texts": texts, "raw_scores": False, "truncate": True}
        else:
            body = {"model": self.model, "query": question, "documents": texts,
                    "top_n": len(texts)}  # fmt: skip
            if self.format == "jina":
                body["return_documents"] = False
        try:
            reply = self._poster.post(body)
        except ModelServerError as error:
            raise PluginError(f"reranker rerank-api ({self.format}): {error}") from None
        scores = self._read(reply, len(texts))
        usage = usage_of(reply)
        if usage is not None:  # the question being asked pays for it (`retrievalkit.usage`)
            record_usage(self.model or "rerank-api", *usage)
        return scores

    def _read(self, reply: Any, count: int) -> list[float]:
        where = f"{self._poster.url} ({self.format} format)"
        if self.format == "tei":
            results, score_key = reply, "score"
        else:
            results = reply.get("results") if isinstance(reply, dict) else None
            score_key = "relevance_score"
        if not isinstance(results, list) or len(results) != count:
            raise PluginError(f"{where} did not return {count} results: {str(reply)[:120]}")
        scores: list[float | None] = [None] * count
        for position, item in enumerate(results):
            index = item.get("index") if isinstance(item, dict) else None
            score = item.get(score_key) if isinstance(item, dict) else None
            if (
                isinstance(index, bool)
                or not isinstance(index, int)
                or not 0 <= index < count
                or scores[index] is not None
                or isinstance(score, bool)
                or not isinstance(score, (int, float))
            ):
                raise PluginError(
                    f"{where}: result {position} is not a new {{index, {score_key}}}: "
                    f"{str(item)[:80]}"
                )
            scores[index] = float(score)
        return [float(score) for score in scores if score is not None]


def create_rerank_api(
    corpus: str | None = None,
    *,
    url: str | None = None,
    model: str | None = None,
    format: str = "cohere",
    api_key_env: str | None = None,
    batch_size: int = 100,
    doc_id_separator: str | None = None,
    deadline: float = 60.0,
    retries: int = 3,
    backoff: float = 0.5,
) -> RerankAPIReranker:
    """Factory of the ``rerank-api`` reranker.

    Options: ``corpus`` (the BEIR corpus.jsonl the candidates come from), ``url`` (the
    endpoint itself, e.g. ``https://api.cohere.com/v1/rerank`` or TEI's
    ``http://host:8080/rerank``), ``model``, ``format`` (``cohere``, ``jina``, ``tei``),
    ``api_key_env``, ``batch_size`` (passages per request, 100), ``doc_id_separator``,
    ``deadline`` (seconds per request with its retries, 60), ``retries`` (3), ``backoff``.
    """
    if corpus is None or url is None:
        raise InputError(
            "the rerank-api reranker needs the options 'corpus' and 'url'",
            field="corpus" if corpus is None else "url",
            hint='e.g. corpus = "corpus.jsonl", url = "https://api.cohere.com/v1/rerank"',
        )
    return RerankAPIReranker(
        CandidatePassages(corpus, doc_id_separator=doc_id_separator),
        url=url,
        model=model,
        format=format,
        api_key_env=api_key_env,
        batch_size=batch_size,
        deadline=deadline,
        retries=retries,
        backoff=backoff,
    )
