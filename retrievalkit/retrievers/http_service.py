"""The ``http`` retriever: evaluate a search service over HTTP, configured rather than coded.

Each question becomes one request: a GET to a URL template, or a POST of a JSON body
template (see `retrievalkit.retrievers.templates` for the placeholders and how
each is encoded). The response is JSON; ``hits`` is the dotted path to the list of
hits in it, ``id_field`` the dotted path to a hit's id and ``score_field`` (optional)
to its score, which makes the retriever usable by score fusion. Header values and
query parameters that are secrets come from environment variables (``headers_env``,
``params_env``) and never enter a record.

Failures are bounded: a timeout per request, at most ``retries`` further attempts on
429, 5xx and broken connections, each after a backoff that doubles (or after the
server's ``Retry-After``), a cap on the size of a response, and redirects refused
unless ``follow_redirects`` is set. Every failure ends as an error outcome for that
question with a message naming the endpoint and what to do. httpx is imported only
when an ``http`` retriever is created.
"""

from __future__ import annotations

import email.utils
import json
import math
import os
import queue
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from retrievalkit.errors import EvaluationError, InputError
from retrievalkit.redaction import REDACTED, redact_url, scrub, secret_values
from retrievalkit.retrievers.contract import document_id_of
from retrievalkit.retrievers.templates import (
    BodyTemplate,
    QuestionLookup,
    Template,
    context_for,
    question_lookup,
)

if TYPE_CHECKING:
    import httpx

#: Status codes worth another attempt: rate limiting and the server-side failures that
#: usually pass (a restarting instance, an overloaded gateway).
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
DEFAULT_MAX_RESPONSE_BYTES = 10 * 1024 * 1024


class ServiceError(EvaluationError):
    """A request to the service failed; the message names the endpoint and the cause."""


def _dig(node: Any, path: str, what: str) -> Any:
    """The value at dotted ``path`` in ``node`` (``data.hits``); list items by number."""
    if not path:
        return node
    for step in path.split("."):
        if isinstance(node, Mapping) and step in node:
            node = node[step]
        elif isinstance(node, list) and step.isdigit() and int(step) < len(node):
            node = node[int(step)]
        else:
            have = (
                f"keys: {', '.join(sorted(map(str, node))[:8]) or 'none'}"
                if isinstance(node, Mapping)
                else f"a {type(node).__name__}"
            )
            raise ServiceError(f"the response has no {what} at '{path}' ('{step}' missing; {have})")
    return node


class HttpRetriever:
    """Asks a search service over HTTP; one pooled, thread-safe client for every question."""

    #: Present only when ``score_field`` is set (fusion by score needs it).
    retrieve_scored: Callable[[str, int], list[tuple[str, float]]]
    #: Present only with a batch endpoint or ``concurrency`` > 1.
    retrieve_many: Callable[[Sequence[str], int], list[list[str] | BaseException]]

    def __init__(
        self,
        url: str,
        *,
        method: str,
        body: BodyTemplate | None,
        headers: Mapping[str, str],
        headers_env: Mapping[str, str],
        params_env: Mapping[str, str],
        hits: str,
        id_field: str,
        score_field: str | None,
        doc_id_separator: str | None,
        lookup: QuestionLookup | None,
        timeout: float,
        retries: int,
        backoff: float,
        max_retry_after: float,
        concurrency: int,
        max_response_bytes: int,
        follow_redirects: bool,
        verify: bool | str,
        client_cert: str | None,
        client_key: str | None,
        batch_url: str | None,
        batch_size: int,
        batch_key: str,
        batch_results: str,
        identifier: str = "http",
    ) -> None:
        self.identifier = identifier
        self._url = Template(url, "url")
        self._method = method
        self._body = body
        self._hits = hits
        self._id_field = id_field
        self._score_field = score_field
        self._separator = doc_id_separator
        self._lookup = lookup
        self._retries = retries
        self._timeout = timeout
        self._backoff = backoff
        self._max_retry_after = max_retry_after
        self._concurrency = concurrency
        self._max_bytes = max_response_bytes
        self._batch_url = batch_url
        self._batch_size = batch_size
        self._batch_key = batch_key
        self._batch_results = batch_results
        self._endpoint = f"{method} {_public_url(url)}"
        self._params = urllib.parse.urlencode(
            {name: os.environ[variable] for name, variable in params_env.items()},
            quote_via=urllib.parse.quote,
        )
        self._headers = dict(headers)
        self._headers.update({name: os.environ[variable] for name, variable in headers_env.items()})
        self._secrets = secret_values({"headers_env": headers_env, "params_env": params_env})
        self._secrets += secret_values({"url": url, "batch_url": batch_url or ""})
        self._described = {
            "http.endpoint": self._endpoint,
            "http.hits": f"{hits or '(the response)'} -> id {id_field or '(the hit)'}"
            + (f", score {score_field}" if score_field else ""),
        }
        if params_env:
            self._described["http.params_env"] = ", ".join(
                f"{name}={REDACTED}" for name in sorted(params_env)
            )
        if batch_url:
            self._described["http.batch_endpoint"] = (
                f"POST {_public_url(batch_url)} ({batch_size} a request)"
            )
        self._client = _client(
            timeout=timeout,
            pool=max(concurrency, 1),
            follow_redirects=follow_redirects,
            verify=verify,
            client_cert=client_cert,
            client_key=client_key,
        )
        if score_field is not None:
            self.retrieve_scored = self._retrieve_scored
        if batch_url is not None or concurrency > 1:
            self.retrieve_many = self._retrieve_many

    def describe(self) -> dict[str, str]:
        """The endpoint (no credentials, no query-string keys) and the hit mapping."""
        return dict(self._described)

    def close(self) -> None:
        self._client.close()

    # --- one question -------------------------------------------------------------------

    def retrieve(self, question: str, limit: int) -> list[str]:
        return [doc_id for doc_id, _ in self._ask(question, limit)]

    def _retrieve_scored(self, question: str, limit: int) -> list[tuple[str, float]]:
        return [(doc_id, score or 0.0) for doc_id, score in self._ask(question, limit)]

    def _ask(self, question: str, limit: int) -> list[tuple[str, float | None]]:
        if limit <= 0:
            return []
        context = context_for(self._lookup, question, limit)
        url = self._url.fill(context, url_component=True)
        content = None
        if self._body is not None:
            content = json.dumps(self._body.fill(context), ensure_ascii=False).encode("utf-8")
        document = self._send(self._method, url, content, self._endpoint)
        try:
            return self._hits_of(document, limit)
        except ServiceError as error:
            raise ServiceError(f"{self._endpoint}: {error}") from None

    def _hits_of(self, document: Any, limit: int) -> list[tuple[str, float | None]]:
        if isinstance(document, Mapping) and isinstance(document.get("error"), str):
            text = " ".join(document["error"].split())[:200]
            raise ServiceError(f"the service answered with an error: {text}")
        listed = _dig(document, self._hits, "list of hits")
        if not isinstance(listed, list):
            raise ServiceError(
                f"the hits at '{self._hits or '(the response)'}' are a "
                f"{type(listed).__name__}, not a list"
            )
        found: list[tuple[str, float | None]] = []
        for rank, hit in enumerate(listed[:limit], start=1):
            raw = hit if isinstance(hit, str) and not self._id_field else None
            if raw is None:
                if isinstance(hit, str):
                    raw = hit
                else:
                    raw = _dig(hit, self._id_field, f"id of hit {rank}")
            if isinstance(raw, bool) or not isinstance(raw, (str, int)):
                raise ServiceError(
                    f"hit {rank} has a {type(raw).__name__} id ({raw!r}) at "
                    f"'{self._id_field}'; ids are strings or whole numbers"
                )
            score: float | None = None
            if self._score_field is not None:
                value = _dig(hit, self._score_field, f"score of hit {rank}")
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise ServiceError(
                        f"hit {rank} has a {type(value).__name__} score ({value!r}) at "
                        f"'{self._score_field}', not a number"
                    )
                score = float(value)
                if not math.isfinite(score):
                    raise ServiceError(f"hit {rank} has the score {value!r}")
            found.append((document_id_of(str(raw), self._separator), score))
        return found

    # --- many questions -----------------------------------------------------------------

    def _retrieve_many(
        self, questions: Sequence[str], limit: int
    ) -> list[list[str] | BaseException]:
        """One ranking (or the error that replaced it) per question, in order."""
        if self._batch_url is not None:
            chunks = [
                list(questions[start : start + self._batch_size])
                for start in range(0, len(questions), self._batch_size)
            ]
            answers: list[list[str] | BaseException] = []
            parts = self._map(lambda chunk: self._ask_batch(chunk, limit), chunks)
            for chunk, part in zip(chunks, parts, strict=True):
                answers += [part] * len(chunk) if isinstance(part, BaseException) else part
            return answers
        return self._map(lambda question: self.retrieve(question, limit), list(questions))

    def _map(self, work: Callable[[Any], Any], items: list[Any]) -> list[Any]:
        """``work`` over ``items`` with up to ``concurrency`` in flight; errors kept in place."""

        def guarded(item: Any) -> Any:
            try:
                return work(item)
            except Exception as error:
                return error

        if self._concurrency <= 1 or len(items) <= 1:
            return [guarded(item) for item in items]
        # Daemon threads, as the evaluator's: a Ctrl-C or a hung request must not keep the
        # process alive the way an executor's worker threads would.
        results: list[Any] = [None] * len(items)
        pending: queue.Queue[int] = queue.Queue()
        for index in range(len(items)):
            pending.put(index)

        def drain() -> None:
            while True:
                try:
                    index = pending.get_nowait()
                except queue.Empty:
                    return
                results[index] = guarded(items[index])

        workers = [
            threading.Thread(target=drain, name=f"retrievalkit-http-{number}", daemon=True)
            for number in range(min(self._concurrency, len(items)))
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        return results

    def _ask_batch(self, questions: list[str], limit: int) -> list[list[str] | BaseException]:
        assert self._batch_url is not None
        bodies = []
        for question in questions:
            context = context_for(self._lookup, question, limit)
            bodies.append(
                self._body.fill(context)
                if self._body is not None
                else {"question": question, "limit": limit}
            )
        content = json.dumps({self._batch_key: bodies}, ensure_ascii=False).encode("utf-8")
        endpoint = self._described["http.batch_endpoint"]
        document = self._send("POST", self._batch_url, content, endpoint)
        results = _dig(document, self._batch_results, "list of results")
        if not isinstance(results, list) or len(results) != len(questions):
            count = len(results) if isinstance(results, list) else type(results).__name__
            raise ServiceError(
                f"{endpoint}: answered {count} results for {len(questions)} questions"
            )
        answers: list[list[str] | BaseException] = []
        for result in results:
            try:
                answers.append([doc_id for doc_id, _ in self._hits_of(result, limit)])
            except ServiceError as error:
                answers.append(ServiceError(f"{endpoint}: {error}"))
        return answers

    # --- the wire -----------------------------------------------------------------------

    def _send(self, method: str, url: str, content: bytes | None, endpoint: str) -> Any:
        """The JSON document the service answered, after bounded retries."""
        import httpx

        if self._params:
            # Appended, not passed as params=: httpx would replace the template's query.
            url += ("&" if urllib.parse.urlsplit(url).query else "?") + self._params
        headers = dict(self._headers)
        if content is not None:
            headers["Content-Type"] = "application/json"
        from retrievalkit.retrievers.deadlines import deadline

        attempts = self._retries + 1
        for attempt in range(1, attempts + 1):
            try:
                with (
                    deadline(self._timeout),
                    self._client.stream(method, url, content=content, headers=headers) as response,
                ):
                    if response.status_code in RETRY_STATUS and attempt < attempts:
                        wait = self._wait_before_retry(response, attempt, endpoint)
                        response.close()
                        time.sleep(wait)
                        continue
                    return self._read(response, endpoint, attempt)
            except httpx.TimeoutException as error:
                raise ServiceError(
                    self._clean(
                        f"{endpoint}: no answer within {self._timeout:g} s ({_kind(error)}); "
                        "raise timeout if the service is slow"
                    )
                ) from None
            except httpx.TransportError as error:
                # Refused, reset or cut off mid-answer: worth another try after a pause.
                if attempt < attempts:
                    time.sleep(self._backoff * 2 ** (attempt - 1))
                    continue
                raise ServiceError(
                    self._clean(
                        f"{endpoint}: cannot reach the service after {attempts} attempt"
                        f"{'s' if attempts > 1 else ''} ({_kind(error)}: {error})"
                    )
                ) from None
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _wait_before_retry(self, response: httpx.Response, attempt: int, endpoint: str) -> float:
        asked = _retry_after(response.headers.get("Retry-After"))
        if asked is None:
            return float(self._backoff * 2 ** (attempt - 1))
        if asked > self._max_retry_after:
            raise ServiceError(
                f"{endpoint}: HTTP {response.status_code}, and the service asks to retry after "
                f"{asked:g} s, longer than max_retry_after ({self._max_retry_after:g} s); "
                "lower --concurrency or raise max_retry_after"
            )
        return asked

    def _read(self, response: httpx.Response, endpoint: str, attempts: int) -> Any:
        status = response.status_code
        if 300 <= status < 400:
            target = _public_url(response.headers.get("Location", "(no Location header)"))
            raise ServiceError(
                f"{endpoint}: HTTP {status} redirect to {target}; point the url at the final "
                "address, or set follow_redirects = true"
            )
        declared = response.headers.get("Content-Length")
        if declared is not None and declared.isdigit() and int(declared) > self._max_bytes:
            raise ServiceError(self._too_big(endpoint, f"{int(declared)} bytes announced"))
        body = bytearray()
        for piece in response.iter_bytes():
            body += piece
            if len(body) > self._max_bytes:
                raise ServiceError(self._too_big(endpoint, f"over {self._max_bytes} bytes read"))
        if status >= 400:
            tried = f" after {attempts} attempts" if attempts > 1 else ""
            snippet = " ".join(body[:200].decode("utf-8", "replace").split())
            raise ServiceError(
                self._clean(
                    f"{endpoint}: HTTP {status} {response.reason_phrase}{tried}"
                    + (f": {snippet}" if snippet else "")
                )
            )
        kind = response.headers.get("Content-Type", "")
        media = kind.split(";")[0].strip().lower()
        if media != "application/json" and not media.endswith("+json"):
            snippet = " ".join(body[:80].decode("utf-8", "replace").split())
            raise ServiceError(
                self._clean(
                    f"{endpoint}: answered Content-Type '{kind or '(none)'}', not JSON "
                    f"(starts {snippet!r})"
                )
            )
        try:
            return json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ServiceError(f"{endpoint}: the response is not valid JSON ({error})") from None

    def _too_big(self, endpoint: str, seen: str) -> str:
        return (
            f"{endpoint}: the response is larger than max_response_bytes "
            f"({self._max_bytes}; {seen}); ask for fewer hits or raise max_response_bytes"
        )

    def _clean(self, text: str) -> str:
        return scrub(text, self._secrets)


def _kind(error: BaseException) -> str:
    return type(error).__name__


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header: a number of seconds or an HTTP date."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        moment = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return max(0.0, moment.timestamp() - time.time())


def _public_url(url: str) -> str:
    """``url`` as a record may show it: no user or password, query-string keys hidden."""
    parts = urllib.parse.urlsplit(redact_url(url))
    netloc = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


def _client(
    *,
    timeout: float,
    pool: int,
    follow_redirects: bool,
    verify: bool | str,
    client_cert: str | None,
    client_key: str | None,
) -> httpx.Client:
    import ssl

    import httpx

    context: ssl.SSLContext | bool
    if verify is False:
        context = False
        if client_cert:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
    else:
        context = ssl.create_default_context(cafile=verify if isinstance(verify, str) else None)
    if client_cert and isinstance(context, ssl.SSLContext):
        context.load_cert_chain(client_cert, client_key)
    from retrievalkit.retrievers.deadlines import held_to_deadlines

    size = max(pool, 10)
    transport = httpx.HTTPTransport(
        verify=context,
        limits=httpx.Limits(max_connections=size, max_keepalive_connections=size),
        trust_env=False,
    )
    # httpx's timeouts bound each read; the deadline bounds the whole request.
    held_to_deadlines(transport)
    return httpx.Client(
        timeout=httpx.Timeout(timeout),
        follow_redirects=follow_redirects,
        transport=transport,
        trust_env=False,
    )


def _check_number(name: str, value: Any, *, minimum: float, whole: bool = False) -> None:
    wrong_kind = not isinstance(value, (int, float)) or (whole and not isinstance(value, int))
    if isinstance(value, bool) or wrong_kind or value < minimum:
        noun = "a whole number" if whole else "a number"
        raise InputError(f"must be {noun} >= {minimum:g}, got {value!r}", field=name)


def _check_env_table(name: str, table: Any) -> dict[str, str]:
    if table is None:
        return {}
    if not isinstance(table, Mapping) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in table.items()
    ):
        raise InputError(
            "must be a table of names to environment variable names",
            field=name,
            hint=f'e.g. {name} = {{ Authorization = "SEARCH_AUTH" }}',
        )
    missing = [variable for variable in table.values() if variable not in os.environ]
    if missing:
        raise InputError(
            f"the environment variable {missing[0]} is not set",
            field=name,
            hint=f"export {missing[0]}=... before running retrievalkit",
        )
    return dict(table)


def _check_url(name: str, url: Any) -> str:
    if not isinstance(url, str) or not url.strip():
        raise InputError(
            "needs the service's address",
            field=name,
            hint='e.g. url = "http://127.0.0.1:8080/search?q={question}&size={limit}"',
        )
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme not in ("http", "https"):
        raise InputError(f"must start with http:// or https://, got {url!r}", field=name)
    return url


def _check_file(name: str, path: Any) -> str | None:
    if path is None:
        return None
    if not isinstance(path, str) or not os.path.isfile(path):
        raise InputError(f"no such file: {path!r}", field=name)
    return path


def create_http(
    url: str | None = None,
    *,
    method: str | None = None,
    body: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
    headers_env: Mapping[str, str] | None = None,
    params_env: Mapping[str, str] | None = None,
    hits: str = "hits",
    id_field: str = "id",
    score_field: str | None = None,
    doc_id_separator: str | None = None,
    questions: str | None = None,
    timeout: float = 10.0,
    retries: int = 3,
    backoff: float = 0.5,
    max_retry_after: float = 60.0,
    concurrency: int = 1,
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    follow_redirects: bool = False,
    verify: bool = True,
    ca_file: str | None = None,
    client_cert: str | None = None,
    client_key: str | None = None,
    batch_url: str | None = None,
    batch_size: int = 32,
    batch_key: str = "requests",
    batch_results: str = "responses",
) -> HttpRetriever:
    """Factory of the ``http`` plugin: a search service asked over HTTP.

    Options: ``url`` (a template: ``{question}``, ``{limit}``, ``{question_id}``, meta
    fields), ``method`` (GET, or POST when ``body`` is given), ``body`` (a table: the JSON
    request body template), ``headers`` (plain header values), ``headers_env`` and
    ``params_env`` (header / query parameter -> environment variable holding a secret),
    ``hits`` (dotted path to the list of hits, "" for the whole response), ``id_field``
    ("id"; "" when hits are plain ids), ``score_field``, ``doc_id_separator``,
    ``questions`` (the set the ids and meta fields come from), ``timeout`` (seconds per
    request), ``retries`` (3), ``backoff`` (0.5 s, doubling), ``max_retry_after`` (60 s),
    ``concurrency`` (requests in flight), ``max_response_bytes``, ``follow_redirects``,
    ``verify``, ``ca_file``, ``client_cert``, ``client_key``, and a batch endpoint:
    ``batch_url``, ``batch_size``, ``batch_key``, ``batch_results``.
    """
    try:
        import httpx  # noqa: F401
    except ImportError:
        raise InputError(
            "the http retriever needs the httpx package",
            hint="pip install 'retrievalkit-eval[http]'",
        ) from None
    url = _check_url("url", url)
    if batch_url is not None:
        batch_url = _check_url("batch_url", batch_url)
    chosen = (method or ("POST" if body is not None else "GET")).upper()
    if chosen not in ("GET", "POST"):
        raise InputError(f"must be GET or POST, got {method!r}", field="method")
    if body is not None and not isinstance(body, Mapping):
        raise InputError(
            "must be a table (the JSON body, built as a structure)",
            field="body",
            hint='e.g. body = { query = "{question}", size = "{limit}" }',
        )
    if chosen == "GET" and body is not None:
        raise InputError("a GET request has no body", field="method", hint="use POST")
    template = BodyTemplate(body, "body") if body is not None else None
    url_template = Template(url, "url")
    if headers is not None and (
        not isinstance(headers, Mapping)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())
    ):
        raise InputError("must be a table of header names to values", field="headers")
    for name in headers or {}:
        from retrievalkit.redaction import is_secret_option

        # Header names use hyphens where option names use underscores: X-Api-Key, X-Auth-Token.
        if is_secret_option(name.replace("-", "_")):
            raise InputError(
                f"header '{name}' holds a secret, which must not be written in a config file",
                field=f"headers.{name}",
                hint=f'use headers_env = {{ {name} = "ENV_VARIABLE" }} instead',
            )
    numbers: tuple[tuple[str, Any, float, bool], ...] = (
        ("timeout", timeout, 0.001, False),
        ("retries", retries, 0, True),
        ("backoff", backoff, 0, False),
        ("max_retry_after", max_retry_after, 0, False),
        ("concurrency", concurrency, 1, True),
        ("max_response_bytes", max_response_bytes, 1, True),
        ("batch_size", batch_size, 1, True),
    )
    for name, number, minimum, whole in numbers:
        _check_number(name, number, minimum=minimum, whole=whole)
    paths = (("hits", hits), ("id_field", id_field), ("batch_results", batch_results))
    for name, path in paths:
        if not isinstance(path, str):
            raise InputError(f"must be a dotted path such as 'data.hits', got {path!r}", field=name)
    if verify is not True and verify is not False:
        raise InputError(f"must be true or false, got {verify!r}", field="verify")
    ca = _check_file("ca_file", ca_file)
    cert = _check_file("client_cert", client_cert)
    key = _check_file("client_key", client_key)
    if key and not cert:
        raise InputError("client_key needs client_cert", field="client_key")
    names = url_template.names + (template.names if template else ())
    lookup = question_lookup(questions, names, "http")
    try:
        return HttpRetriever(
            url,
            method=chosen,
            body=template,
            headers=headers or {},
            headers_env=_check_env_table("headers_env", headers_env),
            params_env=_check_env_table("params_env", params_env),
            hits=hits,
            id_field=id_field,
            score_field=score_field,
            doc_id_separator=doc_id_separator,
            lookup=lookup,
            timeout=float(timeout),
            retries=retries,
            backoff=float(backoff),
            max_retry_after=float(max_retry_after),
            concurrency=concurrency,
            max_response_bytes=max_response_bytes,
            follow_redirects=bool(follow_redirects),
            verify=ca if ca and verify else verify,
            client_cert=cert,
            client_key=key,
            batch_url=batch_url,
            batch_size=batch_size,
            batch_key=batch_key,
            batch_results=batch_results,
        )
    except OSError as error:  # a CA file or certificate that ssl cannot read
        raise InputError(
            f"cannot load the TLS files: {error}", field="client_cert" if cert else "ca_file"
        ) from None
