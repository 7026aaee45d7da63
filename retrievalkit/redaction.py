"""Keep secrets out of everything retrievalkit writes: records, reports, logs and error messages.

An option is secret when a word of its name looks like one (``password``, ``api-key``,
``X-API-Key``, ``pwd``, ``auth``, ``passphrase``, ``token``, ``cookie``...), and so is
everything nested under it; a ``*_env`` option names an environment variable whose
*value* is secret (or, as a table such as ``headers_env = {Authorization = "AUTH"}``,
maps names to such variables); a URL may carry a password (which may hold ``@``) in its
``user:password@`` part or a key in its query string (``?api_key=...``, ``&code=...``).
Secret values are replaced by ``***`` in the options a manifest keeps, scrubbed from any
text that passes through retrievalkit on its way out (a retriever's exception, a
plugin's error message, log records, warnings, stdout and stderr), and enter the options
hash only through a slow key derivation, so the stored hash does not help to guess a
weak password.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "***"
#: Joined lower-case option names (``X-API-Key`` -> ``xapikey``) holding one of these are
#: secret wherever it appears.
_SECRET_PARTS = (
    "password",
    "passwd",
    "passphrase",
    "apikey",
    "accesskey",
    "secretkey",
    "privatekey",
    "secret",
    "credential",
    "authorization",
    "cookie",
    "bearer",
    "sessionid",
)
#: Words that are secret as a whole word of the name (``auth``, ``db_pwd``), not inside
#: another word (``author``, ``tokenizer``).
_SECRET_WORDS = frozenset(
    {"pwd", "pass", "pw", "auth", "token", "tokens", "jwt", "otp", "pin", "session", "sas"}
)
#: Every name the matcher knows, as one pattern of literals (documentation and tests
#: enumerate it; `is_secret_option` applies parts anywhere, words as whole words).
_SECRET_NAME = re.compile("|".join(sorted({*_SECRET_PARTS, *_SECRET_WORDS})))
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
#: Text scrubbing replaces a secret shorter than this only where it stands as a whole
#: word: a two-letter password must not garble every word that contains its letters.
MIN_SCRUB_LENGTH = 6
_URL_PASSWORD_ANYWHERE = re.compile(
    r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^/@\s:'\"]*:)[^\s'\"]+@"
)
#: Query-string parameters whose values are keys: secret option names, and the short
#: names services use (``key``, ``sig``, Azure Functions' ``code``). A parameter may
#: also follow the ``#``: OAuth's implicit flow returns ``#access_token=...``.
_SECRET_QUERY_NAMES = frozenset({"key", "apikey", "sig", "signature", "code", "auth", "accesskey"})
_QUERY_PARAMETER = re.compile(r"(?P<head>[?&;#](?P<name>[^=&;#?\s]+)=)(?P<value>[^&;#\s]*)")
#: Every secret value this process has read from a configuration, for the last line of
#: defence: log records, warnings, output streams and the final error message are
#: scrubbed of them too.
_KNOWN: set[str] = set()
#: Slow on purpose: a stored options hash must not make a weak password cheap to guess.
_HASH_ROUNDS = 10_000
_HASH_SALT = b"retrievalkit options hash v1"


def is_secret_option(name: str) -> bool:
    """True for option names whose values must never be shown or stored.

    Matched on the name's words, whatever their separators or case: ``api-key``,
    ``X-API-Key``, ``apiKey``, ``db_pwd``, ``auth``, ``passphrase``, ``session_cookie``.
    ``*_env`` options hold the NAME of an environment variable, which is not secret.
    """
    if name.lower().endswith("_env"):
        return False
    words = [word.lower() for word in _WORD.findall(name)]
    joined = "".join(words)
    if any(part in joined for part in _SECRET_PARTS):
        return True
    return any(word in _SECRET_WORDS for word in words)


def split_url_password(value: str) -> tuple[str, str, str] | None:
    """``scheme://user:PASSWORD@host...`` as (before, password, after), or None.

    Passwords are often written unencoded, so one may hold ``@``, ``:``, ``?``, ``#`` or
    ``/``, and a user name may be an e-mail address: the password runs from the first
    ``:`` after the user to the LAST ``@`` of the value. (An ``@`` later in a path or
    query then hides more than the password: too much, never too little.)
    """
    scheme, separator, rest = value.partition("://")
    if not separator or not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", scheme):
        return None
    userinfo, at, _ = rest.rpartition("@")
    user, colon, password = userinfo.partition(":")
    if not at or not colon or not password or "/" in user:
        return None
    head = f"{scheme}://{user}:"
    return head, password, value[len(head) + len(password) :]


def _is_secret_query_name(name: str) -> bool:
    return name.lower().replace("_", "").replace("-", "") in _SECRET_QUERY_NAMES or (
        is_secret_option(name)
    )


def _query_secrets(url: str) -> list[str]:
    """Values of the secret-named query parameters of ``url`` (placeholders excluded),
    after the ``#`` too: `redact_url` hides those, so text must be scrubbed of them."""
    return [
        match["value"]
        for match in _QUERY_PARAMETER.finditer(url)
        if _is_secret_query_name(match["name"])
        and match["value"]
        and not match["value"].startswith("{")
    ]


def redact_url(url: str) -> str:
    """``url`` without the password of its ``user:password@`` part or its query-string keys."""
    parts = split_url_password(url)
    if parts is not None:
        url = f"{parts[0]}{REDACTED}{parts[2]}"
    if "?" not in url and "#" not in url:
        return url

    def hide(match: re.Match[str]) -> str:
        value = match["value"]
        if not value or value.startswith("{") or not _is_secret_query_name(match["name"]):
            return match[0]
        return f"{match['head']}{REDACTED}"

    return _QUERY_PARAMETER.sub(hide, url)


def _redact_value(value: Any, *, secret: bool = False) -> Any:
    if isinstance(value, Mapping):
        # Everything under a secret name is secret, however deep.
        if secret:
            return {str(name): _redact_value(item, secret=True) for name, item in value.items()}
        return redact_options(value)
    if isinstance(value, (list, tuple)):
        return [_redact_value(item, secret=secret) for item in value]
    if secret:
        return REDACTED
    if isinstance(value, str) and "://" in value:
        return redact_url(value)
    return value


def redact_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options with every secret value replaced by ``***``, recursively.

    A secret name hides everything under it (``credentials = {user = ..., pass = ...}``
    keeps its shape, every value ``***``); ``*_env`` options keep their value: it is the
    NAME of an environment variable (or a table of such names).
    """
    return {
        str(name): (
            value
            if _is_env_option(str(name))
            else _redact_value(value, secret=is_secret_option(str(name)))
        )
        for name, value in options.items()
    }


def _is_env_option(name: str) -> bool:
    return name.lower().endswith("_env")


def _env_names(value: Any) -> list[str]:
    """The environment variables a ``*_env`` option names: one, or a table's values."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [item for item in value.values() if isinstance(item, str)]
    return []


def _values(value: Any, *, secret: bool) -> Iterable[str]:
    if isinstance(value, Mapping):
        for name, item in value.items():
            name = str(name)
            if _is_env_option(name):
                yield from (os.environ.get(variable, "") for variable in _env_names(item))
            else:
                yield from _values(item, secret=secret or is_secret_option(name))
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _values(item, secret=secret)
    elif secret and value is not None and not isinstance(value, bool):
        yield str(value)
    elif isinstance(value, str) and "://" in value:
        import urllib.parse  # here: every start of the command line imports this module

        parts = split_url_password(value)
        if parts is not None:
            yield parts[1]
            yield urllib.parse.unquote(parts[1])
        for key in _query_secrets(value):
            yield key
            yield urllib.parse.unquote_plus(key)


def secret_values(options: Mapping[str, Any]) -> list[str]:
    """Every secret value the options hold or point to, longest first, for `scrub`."""
    found = set(_values(options, secret=False))
    found.discard("")
    return sorted(found, key=lambda text: (-len(text), text))


def _pattern(secret: str) -> re.Pattern[str]:
    if len(secret) >= MIN_SCRUB_LENGTH:
        return re.compile(re.escape(secret))
    # A short secret only as a whole word: "pw" stays inside "pwd" and "upward".
    return re.compile(rf"(?<![0-9A-Za-z]){re.escape(secret)}(?![0-9A-Za-z])")


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of every secret replaced by ``***``.

    Secrets shorter than `MIN_SCRUB_LENGTH` are replaced where they stand as a
    whole word only; longer ones wherever they occur. Longest first, so a secret that
    holds another is replaced whole. The password of any URL in the text goes too.
    """
    if "://" in text:
        text = _URL_PASSWORD_ANYWHERE.sub(lambda match: f"{match['head']}{REDACTED}@", text)
    for secret in sorted({s for s in secrets if s}, key=lambda value: (-len(value), value)):
        if secret in text:
            text = _pattern(secret).sub(REDACTED, text)
    return text


def remember(values: Iterable[str]) -> None:
    """Add secret values to those every log line and error message is scrubbed of."""
    _KNOWN.update(value for value in values if value)


def scrub_known(text: str) -> str:
    """``text`` without any remembered secret, and without the password of any URL in it."""
    return scrub(text, _KNOWN)


class RedactingFilter(logging.Filter):
    """A logging filter that scrubs secrets (see `scrub_known`) from each record."""

    def filter(self, record: logging.LogRecord) -> bool:
        _scrub_record(record)
        return True


def _scrub_record(record: logging.LogRecord) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a plugin's malformed format string: logging reports it itself
        return
    clean = scrub_known(message)
    if clean != message:
        record.msg, record.args = clean, None
    if record.exc_info and record.exc_text is None and record.exc_info[0] is not None:
        # The traceback of a logged exception may quote a secret too.
        record.exc_text = scrub_known(logging.Formatter().formatException(record.exc_info))
        record.exc_info = None


def scrub_logs_and_warnings() -> None:
    """From now on, every log record and warning of this process is scrubbed of secrets.

    A plugin may log or warn with its options in the text, through its own loggers and
    handlers; the record factory is where every record passes, whoever handles it.
    """
    import warnings

    factory = logging.getLogRecordFactory()
    if not getattr(factory, "retrievalkit_scrubbing", False):

        def scrubbed_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = factory(*args, **kwargs)
            _scrub_record(record)
            return record

        scrubbed_record.retrievalkit_scrubbing = True  # type: ignore[attr-defined]
        logging.setLogRecordFactory(scrubbed_record)
    show = warnings.showwarning
    if not getattr(show, "retrievalkit_scrubbing", False):

        def scrubbed_warning(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: Any = None,
            line: str | None = None,
        ) -> None:
            show(scrub_known(str(message)), category, filename, lineno, file, line)

        scrubbed_warning.retrievalkit_scrubbing = True  # type: ignore[attr-defined]
        warnings.showwarning = scrubbed_warning


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
        if _is_env_option(str(name)) and isinstance(value, (str, Mapping))
    }
    import hashlib  # here: every start of the command line imports this module
    import json

    payload = json.dumps({"options": options, "env": environment}, sort_keys=True, default=str)
    digest = hashlib.pbkdf2_hmac("sha256", payload.encode("utf-8"), _HASH_SALT, _HASH_ROUNDS)
    return digest.hex()[:16]
