"""Reach an Elasticsearch cluster from plugin options, and say plainly why that failed.

Credentials come only from the environment (``api_key_env``, or ``username`` with
``password_env``): options hold the *names* of variables, so a configuration file, a
run record or an error message never holds a secret. Every failure of the client is
turned into a retrievalkit error that names the cluster and, for credentials, the user
or the variable: an `InputError` (exit code 2) when the configuration must
change, an `EvaluationError` (exit code 3) when the cluster could not be used.
"""

from __future__ import annotations

import logging
import os
import re
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from retrievalkit.plugin_api import EvaluationError, InputError, RetrievalkitError

if TYPE_CHECKING:
    from elasticsearch import Elasticsearch

DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_RETRIES = 3

log = logging.getLogger(__name__)


@attrs.frozen
class Target:
    """Where a cluster is and how to authenticate to it: variable names, never secret values."""

    hosts: tuple[str, ...]
    timeout: float = DEFAULT_TIMEOUT
    max_retries: int = DEFAULT_MAX_RETRIES
    verify_certs: bool = True
    ca_certs: str | None = None
    api_key_env: str | None = None
    username: str | None = None
    password_env: str | None = None

    @property
    def where(self) -> str:
        """The hosts, for messages."""
        return ", ".join(self.hosts)

    @property
    def credentials(self) -> str:
        """How this target authenticates, for messages: the user and variable, not the secret."""
        if self.api_key_env:
            return f"the API key in ${self.api_key_env}"
        if self.username:
            return f"user '{self.username}' (password from ${self.password_env})"
        return "no credentials"

    @property
    def credential_field(self) -> str | None:
        """The option to fix when the cluster rejects the credentials."""
        if self.api_key_env:
            return "api_key_env"
        if self.username:
            return "password_env"
        return None

    def connect(self) -> Elasticsearch:
        """A client for this target; secrets are read from the environment now."""
        from elasticsearch import Elasticsearch

        options: dict[str, Any] = {
            "request_timeout": self.timeout,
            "max_retries": self.max_retries,
            "retry_on_timeout": True,
        }
        if self.api_key_env:
            options["api_key"] = _secret(self.api_key_env, "api_key_env")
        elif self.username:
            assert self.password_env is not None  # checked in target_from_options
            options["basic_auth"] = (self.username, _secret(self.password_env, "password_env"))
        if any(host.startswith("https:") for host in self.hosts):
            options["verify_certs"] = self.verify_certs
            if self.ca_certs:
                options["ca_certs"] = self.ca_certs
            if not self.verify_certs:
                options["ssl_show_warn"] = False
                log.warning(
                    "TLS certificates of %s are not verified (verify_certs = false)", self.where
                )
        return Elasticsearch(list(self.hosts), **options)


def _secret(variable: str, option: str) -> str:
    value = os.environ.get(variable, "")
    if not value:
        raise InputError(
            f"the environment variable {variable} is not set or empty",
            field=option,
            hint=f"export {variable} before running, or name another variable in {option}",
        )
    return value


def target_from_options(
    *,
    url: str | None = None,
    hosts: Sequence[str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    max_retries: int = DEFAULT_MAX_RETRIES,
    verify_certs: bool = True,
    ca_certs: str | None = None,
    api_key_env: str | None = None,
    username: str | None = None,
    password_env: str | None = None,
) -> Target:
    """Check connection options as a config file gives them; each error names its option."""
    if url is not None and hosts is not None:
        raise InputError("give either url or hosts, not both", field="hosts")
    if url is None and hosts is None:
        raise InputError("no cluster given", field="url", hint='e.g. url = "http://127.0.0.1:9200"')
    checked: tuple[str, ...]
    if url is not None:
        if not isinstance(url, str):
            raise InputError(f"expected a URL string, got {url!r}", field="url")
        checked = (_check_host(url, "url"),)
    else:
        if isinstance(hosts, str) or not isinstance(hosts, Sequence) or not hosts:
            raise InputError(
                "expected a non-empty list of URLs",
                field="hosts",
                hint='e.g. hosts = ["https://es1:9200", "https://es2:9200"]',
            )
        checked = tuple(_check_host(host, "hosts") for host in hosts)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise InputError(f"expected a number of seconds > 0, got {timeout!r}", field="timeout")
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise InputError(f"expected a whole number >= 0, got {max_retries!r}", field="max_retries")
    if not isinstance(verify_certs, bool):
        raise InputError(f"expected true or false, got {verify_certs!r}", field="verify_certs")
    if ca_certs is not None and not Path(ca_certs).is_file():
        raise InputError(f"no such file: {ca_certs}", field="ca_certs")
    for name, value in (
        ("api_key_env", api_key_env),
        ("username", username),
        ("password_env", password_env),
    ):
        if value is not None and (not isinstance(value, str) or not value):
            raise InputError(f"expected a non-empty string, got {value!r}", field=name)
    if api_key_env and username:
        raise InputError(
            "give either api_key_env or username + password_env, not both", field="username"
        )
    if username and not password_env:
        raise InputError(
            f"user '{username}' needs a password_env: the name of the environment variable "
            "that holds the password",
            field="password_env",
        )
    if password_env and not username:
        raise InputError("password_env is set but username is not", field="username")
    return Target(
        hosts=checked,
        timeout=float(timeout),
        max_retries=max_retries,
        verify_certs=verify_certs,
        ca_certs=ca_certs,
        api_key_env=api_key_env,
        username=username,
        password_env=password_env,
    )


def _check_host(text: Any, field: str) -> str:
    if not isinstance(text, str):
        raise InputError(f"expected a URL string, got {text!r}", field=field)
    parts = urllib.parse.urlsplit(text.strip())
    if parts.username is not None or parts.password is not None:
        # Never echo the URL: its password would end up in logs and CI output.
        shown = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
        raise InputError(
            f"the URL {shown} carries credentials; they must not live in the configuration",
            field=field,
            hint="remove them from the URL and set username + password_env (or api_key_env) "
            "to the names of environment variables",
        )
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(
            f"{text!r} is not an http(s) URL",
            field=field,
            hint="e.g. http://127.0.0.1:9200 or https://search.example.com:9200",
        )
    return text.strip().rstrip("/")


# --- failures -----------------------------------------------------------------------------


def client_errors() -> tuple[type[Exception], ...]:
    """The exceptions the client raises for a failed request (not for a bug in our code)."""
    import elasticsearch
    from elastic_transport import TransportError

    return (elasticsearch.ApiError, TransportError, elasticsearch.UnsupportedProductError)


def error_type(error: Exception) -> str:
    """Elasticsearch's error type (``index_not_found_exception``), or ''."""
    body = getattr(error, "body", None)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("type", ""))
    return str(getattr(error, "message", "") or "")


def error_reason(error: Exception) -> str:
    """The most specific reason Elasticsearch gave (the first root cause), or the error text."""
    body = getattr(error, "body", None)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return describe_error_body(body["error"])
    if isinstance(body, dict) and "error" in body:
        return str(body["error"])
    return _short(error)


def describe_error_body(error: Any) -> str:
    """``type: reason`` from an error object of a response, preferring its first root cause."""
    if not isinstance(error, dict):
        return str(error)
    causes = error.get("root_cause")
    cause = causes[0] if isinstance(causes, list) and causes else error
    text = f"{cause.get('type', 'error')}: {cause.get('reason', '')}".rstrip(": ")
    if cause is not error and error.get("reason") and error.get("reason") != cause.get("reason"):
        text += f" ({error.get('type')}: {error.get('reason')})"
    return text


_ERRNO = re.compile(r"\[Errno -?\d+\][^)>\]'\"]*|Name or service not known|Connection refused")


def _short(error: Exception) -> str:
    """A transport error without the nested reprs the client wraps around the cause."""
    text = str(error)
    # Depending on retries, the cause is in the message, in .errors or only in __cause__.
    underneath = [str(item) for item in getattr(error, "errors", ()) or ()]
    underneath += [str(error.__cause__)] if error.__cause__ is not None else []
    found = _ERRNO.search(" ".join([text, *underneath]))
    if found:
        return found.group(0).strip()
    return text if len(text) <= 300 else text[:300] + "..."


def explain(
    error: Exception, target: Target, *, action: str, index: str | None = None
) -> RetrievalkitError:
    """A retrievalkit error for a failed request: what was tried, where, and what to change."""
    import elasticsearch

    where = target.where
    status = getattr(getattr(error, "meta", None), "status", None)
    if isinstance(error, elasticsearch.AuthenticationException):
        if target.credential_field is None:
            return InputError(
                f"Elasticsearch at {where} requires credentials (401 while trying to {action})",
                field="api_key_env",
                hint="set api_key_env, or username and password_env, to the NAMES of "
                "environment variables that hold them",
            )
        return InputError(
            f"Elasticsearch at {where} rejected the credentials of {target.credentials} "
            f"(401 while trying to {action})",
            field=target.credential_field,
            hint="check the user name and the secret in that environment variable",
        )
    if isinstance(error, elasticsearch.AuthorizationException):
        return InputError(
            f"{target.credentials} may not {action} on {where} (403: {error_reason(error)})",
            field=target.credential_field,
            hint="grant this user the read and view_index_metadata privileges on the index",
        )
    kind = error_type(error)
    if kind == "index_not_found_exception" and index is not None:
        return InputError(
            f"Elasticsearch at {where} has no index '{index}'",
            field="index",
            hint="check the name (GET /_cat/indices) or create it with 'retrievalkit es index'",
        )
    if kind == "media_type_header_exception":
        return InputError(
            f"the elasticsearch client {_client_version()} cannot talk to the server at {where}: "
            f"{error_reason(error)}",
            hint="install the client major that matches the server: 'elasticsearch>=8,<9' for "
            "an 8.x cluster, 'elasticsearch>=9,<10' for 9.x",
        )
    if isinstance(error, elasticsearch.UnsupportedProductError):
        return EvaluationError(
            f"the server at {where} does not identify itself as Elasticsearch ({error}); "
            "check the url"
        )
    if isinstance(error, elasticsearch.ApiError):
        return EvaluationError(
            f"Elasticsearch at {where} answered {status} when asked to {action}: "
            f"{error_reason(error)}"
        )
    if isinstance(error, elasticsearch.SSLError):
        return EvaluationError(
            f"TLS failed with Elasticsearch at {where} ({action}): {_short(error)}; set ca_certs "
            "to the cluster's CA certificate file (verify_certs = false only for a test cluster)"
        )
    if isinstance(error, elasticsearch.ConnectionTimeout):
        return EvaluationError(
            f"Elasticsearch at {where} did not answer within {target.timeout:g} s when asked "
            f"to {action}; raise the timeout option or check the cluster's load"
        )
    if isinstance(error, elasticsearch.ConnectionError):
        return EvaluationError(
            f"cannot reach Elasticsearch at {where} ({action}): {_short(error)}; is the node "
            "running, and is the url right?"
        )
    return EvaluationError(
        f"Elasticsearch at {where} failed when asked to {action}: "
        f"{type(error).__name__}: {_short(error)}"
    )


def _client_version() -> str:
    import importlib.metadata

    return importlib.metadata.version("elasticsearch")


def server_versions(client: Elasticsearch) -> list[str]:
    """The versions of the cluster's nodes; empty when the user may not read node information."""
    try:
        nodes = client.nodes.info(node_id="_local", metric="_none", filter_path="nodes.*.version")
    except client_errors():
        return []
    return sorted({str(node.get("version")) for node in nodes.get("nodes", {}).values()})


def version_mismatch(client: Elasticsearch, target: Target) -> InputError | None:
    """An error naming both versions when the client's major is not the server's.

    A client of another major can get odd 400 answers instead of a clear refusal (the
    9.x client's field-capabilities request to a 7.x server, for one), so a request that
    fails unexpectedly is worth this one extra question.
    """
    client_major = _client_version().split(".")[0]
    majors = {version.split(".")[0] for version in server_versions(client)}
    if not majors or majors == {client_major}:
        return None
    return InputError(
        f"Elasticsearch at {target.where} runs {', '.join(sorted(majors))}.x but the "
        f"elasticsearch client is {_client_version()}",
        hint="install the client major that matches the server: 'elasticsearch>=8,<9' for "
        "an 8.x cluster, 'elasticsearch>=9,<10' for 9.x",
    )


def cluster_name(client: Elasticsearch, target: Target, *, action: str) -> str | None:
    """Health check: the cluster's name, or None when the user may not read cluster health.

    A user limited to searching one index lacks the ``monitor`` privilege; a 403 here
    still proves the cluster is reachable and the credentials valid, so it is no error.
    """
    import elasticsearch

    try:
        health = client.cluster.health()
    except elasticsearch.AuthorizationException:
        return None
    except client_errors() as error:
        raise explain(error, target, action=action) from None
    if health.get("status") == "red":
        log.warning("Elasticsearch at %s reports cluster health red", target.where)
    name = health.get("cluster_name")
    return str(name) if name is not None else None
