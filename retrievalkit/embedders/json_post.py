"""POST JSON to a model server and read JSON back: retries, Retry-After and a deadline.

Shared by the ``openai-compatible`` embedder, the ``rerank-api`` reranker and the chat
client of the question generator and judge (standard library only). HTTP 429 and 5xx,
timeouts and refused connections are retried with exponential backoff, honouring a
numeric ``Retry-After``; other 4xx answers and replies that are not JSON are not, since
asking again would get the same answer. A request may have a deadline covering all of
its attempts and waits (an attempt gets the time that is left, and no retry starts that
could not finish in time), a timeout for each attempt, or both. The API key is read from the
environment variable named by ``api_key_env`` when each request is sent, is never kept on
the client, goes only into the ``Authorization`` header, and is scrubbed from every
message.
"""

from __future__ import annotations

import http.client
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from retrievalkit.errors import InputError

#: Never wait longer than this between attempts, whatever Retry-After says.
MAX_BACKOFF_SECONDS = 30.0


class ModelServerError(Exception):
    """A request failed for good (after its retries); the message is safe to show."""

    def __init__(self, message: str, *, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


class _Transient(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def check_url(url: Any, field: str = "url") -> str:
    """``url`` if it is an http(s) URL, else an `InputError` naming ``field``."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise InputError(
            f"must be an http:// or https:// URL, got {url!r}",
            field=field,
            hint="e.g. http://127.0.0.1:8080/v1",
        )
    return url.rstrip("/")


def check_api_key_env(api_key_env: str | None) -> str | None:
    """The variable's name if it is set and not empty (the value is not returned)."""
    if api_key_env is None:
        return None
    if not isinstance(api_key_env, str) or not api_key_env:
        raise InputError(
            f"must name an environment variable, got {api_key_env!r}", field="api_key_env"
        )
    if not os.environ.get(api_key_env):
        raise InputError(
            f"the environment variable {api_key_env} is not set or empty",
            field="api_key_env",
            hint=f"export {api_key_env}=... (keys never go into config files)",
        )
    return api_key_env


class JSONPoster:
    """POST JSON bodies to one URL; `post` returns the decoded JSON reply."""

    def __init__(
        self,
        url: str,
        *,
        api_key_env: str | None = None,
        deadline: float | None = 60.0,
        timeout: float | None = None,
        retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = MAX_BACKOFF_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``deadline``: seconds for the whole request, every attempt and wait included;
        ``timeout``: seconds for each attempt. None: no such bound (at least one is given)."""
        bounds = {"deadline": deadline, "timeout": timeout}
        for name, value in {**bounds, "backoff": backoff}.items():
            if value is None and name != "backoff":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise InputError(f"must be a number of seconds >= 0, got {value!r}", field=name)
            if value == 0 and name != "backoff":
                raise InputError("must be more than 0 seconds", field=name)
        if deadline is None and timeout is None:
            raise InputError("needs a deadline or a timeout", field="deadline")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise InputError(f"must be a whole number >= 0, got {retries!r}", field="retries")
        self.url = url
        self.api_key_env = check_api_key_env(api_key_env)
        self.deadline = None if deadline is None else float(deadline)
        self.timeout = None if timeout is None else float(timeout)
        self.retries = retries
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self._sleep = sleep
        self._clock = clock

    def _left(self, began: float) -> float:
        """Seconds left before the deadline (infinite without one)."""
        if self.deadline is None:
            return float("inf")
        return self.deadline - (self._clock() - began)

    def post(self, body: Any) -> Any:
        """The reply's JSON; raises `ModelServerError` when it cannot be had in time."""
        payload = json.dumps(body).encode("utf-8")
        began = self._clock()
        attempts = 0
        while True:
            attempts += 1
            left = self._left(began)
            try:
                if left <= 0:
                    raise _Transient(f"no answer within the {self.deadline:g} s deadline")
                if self.timeout is not None and self.timeout <= left:
                    return self._attempt(payload, self.timeout, "timeout")
                return self._attempt(payload, left, None)
            except _Transient as error:
                wait = self.backoff * 2 ** (attempts - 1)
                if error.retry_after is not None:
                    wait = max(wait, error.retry_after)
                wait = min(wait, self.max_backoff)
                left = self._left(began)
                if attempts > self.retries or wait >= left:
                    why = "" if attempts > self.retries else ", no time left before the deadline"
                    raise ModelServerError(
                        f"{self._scrub(str(error))} from {self.url} "
                        f"(gave up after {attempts} attempt{'s' if attempts > 1 else ''}{why})",
                        attempts=attempts,
                    ) from None
                self._sleep(wait)
            except ModelServerError as error:
                raise ModelServerError(
                    f"{self._scrub(str(error))} from {self.url}", attempts=attempts
                ) from None

    def _attempt(self, payload: bytes, timeout: float, bound: str | None) -> Any:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(self.url, data=payload, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as error:
            detail = _error_detail(error)
            if error.code == 429 or error.code >= 500:
                raise _Transient(f"HTTP {error.code}{detail}", _retry_after(error)) from None
            raise ModelServerError(f"HTTP {error.code}{detail}", attempts=1) from None
        except TimeoutError:
            raise _Transient(_no_answer(timeout, bound)) from None
        except urllib.error.URLError as error:
            if isinstance(error.reason, TimeoutError):
                raise _Transient(_no_answer(timeout, bound)) from None
            raise _Transient(f"cannot reach the server: {error.reason}") from None
        except (ConnectionError, OSError, http.client.HTTPException) as error:
            raise _Transient(f"connection failed: {type(error).__name__}") from None
        try:
            return json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ModelServerError(
                f"the reply is not valid JSON ({error}): {raw[:80]!r}", attempts=1
            ) from None

    def _scrub(self, text: str) -> str:
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        return text.replace(key, "***") if key else text


def _no_answer(seconds: float, bound: str | None) -> str:
    """What a timed-out attempt says: the configured bound by name, else the time it had."""
    return (
        f"no answer within the {seconds:g} s {bound}"
        if bound
        else f"no answer within {seconds:.3g} s"
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
