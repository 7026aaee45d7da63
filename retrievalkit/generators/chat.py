"""A small client for OpenAI-compatible chat-completions servers (standard library only).

Used by the ``openai-compatible`` question generator and judge. Temperature is 0.
Transient failures (HTTP 429 and 5xx, timeouts, refused connections) are retried with
exponential backoff, honouring a numeric ``Retry-After``; other failures (4xx, a reply
that is not the expected JSON) are not, since asking again would get the same answer.
The API key is read from the environment variable named by ``api_key_env``, sent only
in the ``Authorization`` header and scrubbed from every error message.
"""

from __future__ import annotations

import http.client
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from retrievalkit.errors import InputError

#: Never wait longer than this between attempts, whatever Retry-After says.
MAX_BACKOFF_SECONDS = 60.0


class ChatError(Exception):
    """One request failed for good (after its retries); the message is safe to show."""

    def __init__(self, message: str, *, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


class _Transient(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ChatClient:
    """Send chat messages to ``{base_url}/chat/completions`` and return the reply's text."""

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
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise InputError(
                f"must be an http:// or https:// URL, got {base_url!r}",
                field="base_url",
                hint="the server's API root, e.g. http://127.0.0.1:8000/v1",
            )
        if not isinstance(model, str) or not model:
            raise InputError("must be the model name the server expects", field="model")
        for name, value in (("timeout", timeout), ("backoff", backoff)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise InputError(f"must be a number of seconds >= 0, got {value!r}", field=name)
        if timeout == 0:
            raise InputError("must be more than 0 seconds", field="timeout")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise InputError(f"must be a whole number >= 0, got {retries!r}", field="retries")
        self._api_key: str | None = None
        if api_key_env:
            key = os.environ.get(api_key_env)
            if not key:
                raise InputError(
                    f"the environment variable {api_key_env} is not set or empty",
                    field="api_key_env",
                    hint=f"export {api_key_env}=... (keys never go into config files)",
                )
            self._api_key = key
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.timeout = float(timeout)
        self.retries = retries
        self.backoff = float(backoff)
        self.max_tokens = max_tokens
        self._sleep = sleep

    def complete(self, messages: Sequence[Mapping[str, str]]) -> str:
        """The text of the first choice; raises `ChatError` when it cannot be had."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(message) for message in messages],
            "temperature": 0,
        }
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        payload = json.dumps(body).encode("utf-8")
        attempts = 0
        while True:
            attempts += 1
            try:
                return self._attempt(payload)
            except _Transient as error:
                if attempts > self.retries:
                    raise ChatError(
                        f"{self._scrub(str(error))} (gave up after {attempts} attempts)",
                        attempts=attempts,
                    ) from None
                wait = self.backoff * 2 ** (attempts - 1)
                if error.retry_after is not None:
                    wait = max(wait, error.retry_after)
                self._sleep(min(wait, MAX_BACKOFF_SECONDS))
            except ChatError as error:
                raise ChatError(self._scrub(str(error)), attempts=attempts) from None

    def _attempt(self, payload: bytes) -> str:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(self.url, data=payload, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as error:
            detail = _error_detail(error)
            if error.code == 429 or error.code >= 500:
                raise _Transient(
                    f"HTTP {error.code} from the server{detail}", _retry_after(error)
                ) from None
            raise ChatError(f"HTTP {error.code} from the server{detail}", attempts=1) from None
        except TimeoutError:
            raise _Transient(f"no answer within the {self.timeout:g} s timeout") from None
        except urllib.error.URLError as error:
            if isinstance(error.reason, TimeoutError):
                raise _Transient(f"no answer within the {self.timeout:g} s timeout") from None
            raise _Transient(f"cannot reach the server: {error.reason}") from None
        except (ConnectionError, OSError, http.client.HTTPException) as error:
            raise _Transient(f"connection failed: {type(error).__name__}") from None
        return _reply_text(raw)

    def _scrub(self, text: str) -> str:
        return text.replace(self._api_key, "***") if self._api_key else text


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


def _error_detail(error: urllib.error.HTTPError) -> str:
    try:
        body = error.read(300).decode("utf-8", errors="replace").strip()
    except OSError:
        body = ""
    return f": {' '.join(body.split())[:200]}" if body else ""


def _retry_after(error: urllib.error.HTTPError) -> float | None:
    value = error.headers.get("Retry-After") if error.headers else None
    try:
        return max(float(value), 0.0) if value is not None else None
    except ValueError:
        return None


def _reply_text(raw: bytes) -> str:
    try:
        document = json.loads(raw.decode("utf-8"))
        content = document["choices"][0]["message"]["content"]
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ChatError("the server's reply is not valid JSON", attempts=1) from None
    except (KeyError, IndexError, TypeError):
        raise ChatError(
            "the server's reply has no choices[0].message.content", attempts=1
        ) from None
    if not isinstance(content, str):
        raise ChatError("the server's reply content is not text", attempts=1)
    return content
