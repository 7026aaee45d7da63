"""Where a Qdrant collection lives, and one client for it: a folder, memory, or a server.

``path`` opens Qdrant's local mode, embedded in this process and kept in a folder (or
``:memory:``, gone with the process). Local mode locks its folder, so every retriever
and command of one process over the same folder shares one client (`acquire`), and the
folder is released when the last of them closes. ``url`` talks to a Qdrant server; its
API key is read from the environment variable ``api_key_env`` names, never from a
configuration, and never enters a message, a record or a log.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import threading
import urllib.parse
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from retrievalkit.plugin_api import EvaluationError, InputError

if TYPE_CHECKING:
    from qdrant_client import QdrantClient

log = logging.getLogger(__name__)

MEMORY = ":memory:"
DEFAULT_TIMEOUT = 10


@attrs.frozen
class Location:
    """A Qdrant to talk to: ``path`` (a folder or ``:memory:``) or ``url``, never both."""

    path: str | None = None
    url: str | None = None
    api_key_env: str | None = None
    timeout: int = DEFAULT_TIMEOUT

    @property
    def mode(self) -> str:
        """``local`` (a folder), ``memory`` or ``server``."""
        if self.url is not None:
            return "server"
        return "memory" if self.path == MEMORY else "local"

    @property
    def where(self) -> str:
        """The location for messages and manifests: the folder, or the URL (no secrets)."""
        if self.url is not None:
            return self.url
        return MEMORY if self.path == MEMORY else str(Path(self.path or ".").resolve())


def location_from_options(
    path: Any,
    url: Any,
    api_key_env: Any = None,
    timeout: Any = DEFAULT_TIMEOUT,
    *,
    prefix: str = "",
) -> Location:
    """A checked `Location`; ``prefix`` is ``--`` for command-line options in messages."""
    if (path is None) == (url is None):
        raise InputError(
            "give exactly one of 'path' (Qdrant's local mode: a folder, or ':memory:') "
            "and 'url' (a Qdrant server)",
            field=f"{prefix}path",
            hint='e.g. path = ".retrievalkit/qdrant" or url = "http://127.0.0.1:6333"',
        )
    if path is not None and (not isinstance(path, str) or not path.strip()):
        raise InputError(f"expected a folder or ':memory:', got {path!r}", field=f"{prefix}path")
    if url is not None:
        if not isinstance(url, str):
            raise InputError(f"expected a URL, got {url!r}", field=f"{prefix}url")
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise InputError(
                f"expected an http:// or https:// URL such as http://127.0.0.1:6333, got {url!r}",
                field=f"{prefix}url",
            )
        if parsed.username or parsed.password or parsed.query:
            raise InputError(
                "the URL may not carry credentials or parameters",
                field=f"{prefix}url",
                hint="put the API key in an environment variable and name it with api_key_env",
            )
    elif api_key_env is not None:
        raise InputError(
            "api_key_env applies only to a server (url = ...)", field=f"{prefix}api-key-env"
        )
    if api_key_env is not None and (not isinstance(api_key_env, str) or not api_key_env):
        raise InputError(
            f"expected the name of an environment variable, got {api_key_env!r}",
            field=f"{prefix}api-key-env",
        )
    if isinstance(timeout, bool) or not isinstance(timeout, int) or not 1 <= timeout <= 3600:
        raise InputError(
            f"must be a whole number of seconds from 1 to 3600, got {timeout!r}",
            field=f"{prefix}timeout",
        )
    return Location(path=path, url=url, api_key_env=api_key_env, timeout=timeout)


def api_key(location: Location, *, prefix: str = "") -> str | None:
    """The server's API key from the environment variable ``api_key_env`` names."""
    if location.api_key_env is None:
        return None
    key = os.environ.get(location.api_key_env)
    if not key:
        raise InputError(
            f"the environment variable {location.api_key_env} (api_key_env) is not set",
            field=f"{prefix}api-key-env",
            hint=f"export {location.api_key_env}=... with the Qdrant server's API key",
        )
    return key


class Handle:
    """One process's use of a Qdrant client; `release` once when done."""

    def __init__(self, location: Location, client: QdrantClient) -> None:
        self.location = location
        self.client = client
        self._released = False

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        _release(self.location, self.client)


#: Local-mode clients in use in this process, by folder: (client, users).
_LOCAL: dict[str, tuple[Any, int]] = {}
_LOCK = threading.Lock()


def acquire(location: Location, *, prefix: str = "") -> Handle:
    """A client for ``location``; a folder's client is shared by everyone in this process."""
    from qdrant_client import QdrantClient

    if location.mode == "server":
        key = api_key(location, prefix=prefix)
        host = urllib.parse.urlsplit(location.url or "").hostname or ""
        if key and location.url and location.url.startswith("http://") and not _loopback(host):
            log.warning(
                "the API key in %s goes to %s over plain http; use https",
                location.api_key_env,
                location.url,
            )
        with warnings.catch_warnings():
            # The client warns of any key over http; the warning above names the server.
            warnings.filterwarnings("ignore", message="Api key is used with an insecure")
            client = QdrantClient(
                url=location.url,
                api_key=key,
                timeout=location.timeout,
                check_compatibility=False,  # it would ask the server at once, and only warn
            )
        return Handle(location, client)
    if location.mode == "memory":
        return Handle(location, QdrantClient(location=MEMORY))
    folder = location.where
    with _LOCK:
        shared = _LOCAL.get(folder)
        if shared is None:
            try:
                Path(folder).mkdir(parents=True, exist_ok=True)
                client = QdrantClient(path=folder)
            except RuntimeError as error:  # the folder is locked by another process
                raise EvaluationError(
                    f"Qdrant's local folder {folder} is in use by another process ({error})"
                ) from None
            except OSError as error:
                raise InputError(
                    f"cannot open Qdrant's local folder: {error.strerror or error}",
                    source=folder,
                    field=f"{prefix}path",
                ) from None
            shared = (client, 0)
        _LOCAL[folder] = (shared[0], shared[1] + 1)
        return Handle(location, shared[0])


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _release(location: Location, client: Any) -> None:
    if location.mode != "local":
        client.close()
        return
    with _LOCK:
        shared = _LOCAL.get(location.where)
        if shared is None or shared[0] is not client:
            return
        if shared[1] <= 1:
            del _LOCAL[location.where]
            client.close()
        else:
            _LOCAL[location.where] = (client, shared[1] - 1)


def is_unreachable(error: BaseException) -> bool:
    """Whether a client error means the server did not answer (refused, timed out, DNS)."""
    from qdrant_client.http.exceptions import ResponseHandlingException

    return isinstance(error, ResponseHandlingException | ConnectionError | TimeoutError)


def server_error(location: Location, error: BaseException, doing: str) -> EvaluationError:
    """A failure to talk to Qdrant as one line naming the server, what was done, and why."""
    reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    key = api_key_value(location)
    if key:
        reason = reason.replace(key, "***")
    if is_unreachable(error):
        return EvaluationError(
            f"cannot reach Qdrant at {location.where} while {doing}: {reason}; is the server "
            "running, and is the url right?"
        )
    return EvaluationError(f"Qdrant at {location.where} failed while {doing}: {reason}")


def api_key_value(location: Location) -> str | None:
    """The key, only to scrub it from a message the client library wrote."""
    return os.environ.get(location.api_key_env) if location.api_key_env else None
