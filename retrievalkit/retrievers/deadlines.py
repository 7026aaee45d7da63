"""One deadline for a whole HTTP request: connect, send and every read of the answer.

httpx's timeouts bound each network operation, so a service that drips one byte every
0.9 s never trips a 1 s read timeout and a request can take as long as the service
likes. `DeadlineBackend` wraps httpcore's network backend: each connect, read and
write waits at most until the deadline of the request the calling thread is making
(`deadline`), and one past it raises httpcore's own timeout, which httpx reports as
``httpx.ReadTimeout`` (or ``WriteTimeout``, ``ConnectTimeout``).
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpcore

_local = threading.local()


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Every network operation of this thread ends within ``seconds`` from now."""
    previous = getattr(_local, "deadline", None)
    _local.deadline = time.monotonic() + seconds
    try:
        yield
    finally:
        _local.deadline = previous


def _remaining(timeout: float | None, late: type[Exception]) -> float | None:
    """``timeout`` cut to what is left of this thread's deadline; ``late`` once it passed."""
    end: float | None = getattr(_local, "deadline", None)
    if end is None:
        return timeout
    left = end - time.monotonic()
    if left <= 0:
        raise late("the request's deadline passed")
    return left if timeout is None else min(timeout, left)


class DeadlineStream(httpcore.NetworkStream):
    """A network stream whose every read and write ends by the thread's deadline."""

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _remaining(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _remaining(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        wait = _remaining(timeout, httpcore.ConnectTimeout)
        return DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, wait))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's network backend with every stream it opens held to the deadline."""

    def __init__(self, backend: httpcore.NetworkBackend | None = None) -> None:
        self._backend = backend or httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        wait = _remaining(timeout, httpcore.ConnectTimeout)
        return DeadlineStream(
            self._backend.connect_tcp(host, port, wait, local_address, socket_options)
        )

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        wait = _remaining(timeout, httpcore.ConnectTimeout)
        return DeadlineStream(self._backend.connect_unix_socket(path, wait, socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def held_to_deadlines(transport: Any) -> None:
    """Make an ``httpx.HTTPTransport`` open its connections through `DeadlineBackend`.

    httpx takes no network backend, so the one of its connection pool is replaced; a
    transport whose pool has none (a proxy of another kind) is left as it is.
    """
    pool = getattr(transport, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if pool is not None and isinstance(backend, httpcore.NetworkBackend):
        pool._network_backend = DeadlineBackend(backend)
