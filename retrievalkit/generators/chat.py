"""A small client for OpenAI-compatible chat-completions servers (standard library only).

Used by the ``openai-compatible`` question generator and judge. Temperature is 0.
Requests go through `retrievalkit.embedders.json_post`: transient failures (HTTP 429 and
5xx, timeouts, refused connections) are retried with exponential backoff, honouring a
numeric ``Retry-After``; other failures (4xx, a reply that is not the expected JSON) are
not. The API key is read from the environment variable named by ``api_key_env``, sent
only in the ``Authorization`` header and scrubbed from every error message.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from retrievalkit.embedders.json_post import JSONPoster, ModelServerError, check_url
from retrievalkit.errors import EvaluationError, InputError

#: Never wait longer than this between attempts, whatever Retry-After says.
MAX_BACKOFF_SECONDS = 60.0


class ChatError(EvaluationError):
    """One request failed for good (after its retries); the message is safe to show."""

    def __init__(self, message: str, *, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


class ChatClient:
    """Send chat messages to ``{base_url}/chat/completions`` and return the reply's text.

    The request goes through `retrievalkit.embedders.json_post.JSONPoster`: ``timeout``
    bounds each attempt, and failed attempts are retried as that module says.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key_env: str | None = None,
        timeout: float = 60.0,
        retries: int = 3,
        backoff: float = 1.0,
        max_tokens: int | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        url = check_url(base_url, "base_url")
        if not isinstance(model, str) or not model:
            raise InputError("must be the model name the server expects", field="model")
        self._poster = JSONPoster(
            url + "/chat/completions",
            api_key_env=api_key_env or None,
            deadline=None,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            max_backoff=MAX_BACKOFF_SECONDS,
            sleep=sleep,
        )
        self.url = self._poster.url
        self.model = model
        self.timeout = float(timeout)
        self.retries = retries
        self.backoff = float(backoff)
        self.max_tokens = max_tokens

    def complete(self, messages: Sequence[Mapping[str, str]]) -> str:
        """The text of the first choice; raises `ChatError` when it cannot be had."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(message) for message in messages],
            "temperature": 0,
        }
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        try:
            return _reply_text(self._poster.post(body))
        except ModelServerError as error:
            raise ChatError(str(error), attempts=error.attempts) from None


def configured_client(
    *,
    base_url: str | None,
    model: str | None,
    api_key_env: str | None,
    timeout: float,
    retries: int,
    backoff: float,
    max_tokens: int,
    whole_numbers: Mapping[str, object],
) -> ChatClient:
    """The client a model-backed plugin's options describe, every option checked first.

    ``whole_numbers`` are the plugin's own options that must be integers >= 1 (such as
    ``concurrency``), checked here so each plugin reports them the same way.
    """
    if not base_url or not model:
        raise InputError(
            "needs base_url and model",
            field="base_url" if not base_url else "model",
            hint='e.g. base_url = "http://127.0.0.1:8000/v1", model = "llama3"',
        )
    for name, value in {**whole_numbers, "max_tokens": max_tokens}.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"must be a whole number >= 1, got {value!r}", field=name)
    return ChatClient(
        base_url=base_url,
        model=model,
        api_key_env=api_key_env,
        timeout=timeout,
        retries=retries,
        backoff=backoff,
        max_tokens=max_tokens,
    )


def _reply_text(document: Any) -> str:
    """The first choice's message text of a chat-completions reply."""
    try:
        content = document["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise ChatError(
            "the server's reply has no choices[0].message.content", attempts=1
        ) from None
    if not isinstance(content, str):
        raise ChatError("the server's reply content is not text", attempts=1)
    return content
