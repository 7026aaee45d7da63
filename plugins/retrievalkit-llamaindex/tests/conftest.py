"""The tests never reach the network: no OpenAI defaults, non-loopback connections refused."""

import os
import socket
from typing import Any

_LOOPBACK = ("127.0.0.1", "::1", "localhost")
_connect = socket.socket.connect
_connect_ex = socket.socket.connect_ex
_getaddrinfo = socket.getaddrinfo


def _check(address: Any) -> None:
    if isinstance(address, tuple) and str(address[0]) not in _LOOPBACK:
        raise OSError(f"a test tried to reach {address[0]}: nothing may leave the machine")


def _guarded_connect(self: socket.socket, address: Any) -> None:
    _check(address)
    _connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> int:
    _check(address)
    return _connect_ex(self, address)


def _guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    if host is not None and str(host) not in _LOOPBACK and not str(host).startswith("127."):
        raise OSError(f"a test tried to look up {host}: nothing may leave the machine")
    return _getaddrinfo(host, *args, **kwargs)


socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]
socket.getaddrinfo = _guarded_getaddrinfo

# LlamaIndex falls back to OpenAI for a model nobody named; the tests name theirs, and a
# forgotten one fails here instead of reaching out.
os.environ.pop("OPENAI_API_KEY", None)
