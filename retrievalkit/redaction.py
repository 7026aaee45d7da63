"""Keep secrets out of everything retrievalkit writes: records, reports, logs and error messages.

An option is secret when its name looks like one (``password``, ``api_key``, ``token``,
``client_secret``, ``credentials``, ``authorization``...); a ``*_env`` option names an
environment variable whose *value* is secret (or, as a table such as
``headers_env = {Authorization = "SEARCH_AUTH"}``, maps names to such variables); a URL
option may carry a password in its ``user:password@`` part or a key in its query string
(``?api_key=...``, ``&code=...``). Secret values are replaced by ``***`` in the options a manifest
keeps, scrubbed from any text that passes through retrievalkit on its way out (a
retriever's exception, a plugin's error message), and enter the options hash only
through a slow key derivation, so the stored hash does not help to guess a weak password.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "***"
_SECRET_NAME = re.compile(
    r"(password|passwd|api_?key|token|secret|credential|authorization|private_?key|cookie)",
    re.IGNORECASE,
)
_URL_PASSWORD = re.compile(r"^(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/@\s:]*:)(?P<pw>[^/@\s]+)@")
_URL_PASSWORD_ANYWHERE = re.compile(
    r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^/@\s:'\"]*:)[^/@\s'\"]+@"
)
#: Query-string parameters whose values are keys: the option names above, and the short
#: names services use (``key``, ``sig``, Azure Functions' ``code``).
_SECRET_QUERY_NAME = re.compile(
    r"^(key|apikey|sig|signature|code|auth|access_?key)$|" + _SECRET_NAME.pattern, re.IGNORECASE
)
_QUERY_PARAMETER = re.compile(r"(?P<head>[?&;](?P<name>[^=&;#?\s]+)=)(?P<value>[^&;#\s]*)")
#: Every secret value this process has read from a configuration, for the last line of
#: defence: log records and the final error message are scrubbed of them too.
_KNOWN: set[str] = set()
#: Slow on purpose: a stored options hash must not make a weak password cheap to guess.
_HASH_ROUNDS = 10_000
_HASH_SALT = b"retrievalkit options hash v1"


def is_secret_option(name: str) -> bool:
    """True for option names whose values must never be shown or stored."""
    return bool(_SECRET_NAME.search(name)) and not name.endswith("_env")


def _is_url(value: str) -> bool:
    return "://" in value


def _query_secrets(url: str) -> list[str]:
    """Values of the secret-named query parameters of ``url`` (placeholders excluded)."""
    return [
        match["value"]
        for match in _QUERY_PARAMETER.finditer(url.partition("#")[0])
        if _SECRET_QUERY_NAME.search(match["name"])
        and match["value"]
        and not match["value"].startswith("{")
    ]


def redact_url(url: str) -> str:
    """``url`` without the password of its ``user:password@`` part or its query-string keys."""
    url = _URL_PASSWORD.sub(lambda match: f"{match['head']}{REDACTED}@", url)
    if "?" not in url:
        return url

    def hide(match: re.Match[str]) -> str:
        value = match["value"]
        if not value or value.startswith("{") or not _SECRET_QUERY_NAME.search(match["name"]):
            return match[0]
        return f"{match['head']}{REDACTED}"

    return _QUERY_PARAMETER.sub(hide, url)


def _redact_value(value: Any) -> Any:
    if isinstance(value, Mapping):
        return redact_options(value)
    if isinstance(value, (list, tuple)):
        return [_redact_value(item) for item in value]
    if isinstance(value, str):
        return redact_url(value) if _is_url(value) else value
    return value


def redact_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options with every secret value replaced by ``***``, recursively.

    ``*_env`` options keep their value: it is the NAME of an environment variable (or a
    table of such names).
    """
    return {
        name: (
            value
            if str(name).endswith("_env")
            else REDACTED
            if is_secret_option(str(name))
            else _redact_value(value)
        )
        for name, value in options.items()
    }


def _values(value: Any, *, secret: bool) -> Iterable[str]:
    if isinstance(value, Mapping):
        yield from secret_values(value)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _values(item, secret=secret)
    elif secret and value is not None and not isinstance(value, bool):
        yield str(value)
    elif isinstance(value, str):
        match = _URL_PASSWORD.match(value)
        if match:
            yield match["pw"]
            yield urllib.parse.unquote(match["pw"])
        if _is_url(value):
            for key in _query_secrets(value):
                yield key
                yield urllib.parse.unquote_plus(key)


def secret_values(options: Mapping[str, Any]) -> list[str]:
    """Every secret value the options hold or point to, longest first, for :func:`scrub`."""
    found: set[str] = set()
    for name, value in options.items():
        name = str(name)
        if name.endswith("_env"):
            found.update(os.environ.get(variable, "") for variable in _env_names(value))
        else:
            found.update(_values(value, secret=is_secret_option(name)))
    found.discard("")
    return sorted(found, key=lambda text: (-len(text), text))


def _env_names(value: Any) -> list[str]:
    """The environment variables a ``*_env`` option names: one, or a table's values."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [item for item in value.values() if isinstance(item, str)]
    return []


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of every secret replaced by ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return text


def remember(values: Iterable[str]) -> None:
    """Add secret values to those every log line and error message is scrubbed of."""
    _KNOWN.update(value for value in values if value)


def scrub_known(text: str) -> str:
    """``text`` without any remembered secret, and without the password of any URL in it."""
    text = _URL_PASSWORD_ANYWHERE.sub(lambda match: f"{match['head']}{REDACTED}@", text)
    return scrub(text, sorted(_KNOWN, key=lambda value: (-len(value), value)))


class RedactingFilter(logging.Filter):
    """A logging filter that scrubs secrets (see :func:`scrub_known`) from each record."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = scrub_known(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


def options_hash(options: Mapping[str, Any]) -> str:
    """A digest of the options and of the environment values their ``*_env`` options name.

    It changes when any option or secret changes, yet neither the secret nor a cheaply
    reversible form of it is stored: a slow key derivation (PBKDF2-SHA256) turns the
    options into the digest.
    """
    environment: dict[str, Any] = {
        name: os.environ.get(str(value), "")
        if isinstance(value, str)
        else {variable: os.environ.get(variable, "") for variable in _env_names(value)}
        for name, value in options.items()
        if name.endswith("_env") and isinstance(value, (str, Mapping))
    }
    payload = json.dumps({"options": options, "env": environment}, sort_keys=True, default=str)
    digest = hashlib.pbkdf2_hmac("sha256", payload.encode("utf-8"), _HASH_SALT, _HASH_ROUNDS)
    return digest.hex()[:16]
