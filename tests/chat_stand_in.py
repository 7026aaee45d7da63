"""A local stand-in for an OpenAI-compatible chat-completions server, for tests.

It listens on 127.0.0.1 in a thread, records every request, and answers each with
what a test's ``respond`` function says: a reply text, an HTTP error, a malformed
body, or a reply held back past the client's timeout. No real model is involved.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs


@attrs.frozen
class Reply:
    """What the stand-in sends: a chat reply ``content``, or ``raw`` bytes, with a status."""

    content: str | None = None
    status: int = 200
    raw: bytes | None = None
    delay: float = 0.0
    """Seconds to hold the answer back (to outlast the client's timeout)."""
    headers: dict[str, str] = attrs.field(factory=dict)


@attrs.frozen
class Received:
    body: dict[str, Any]
    authorization: str | None

    @property
    def prompt(self) -> str:
        """Every message's content, joined: what a test dispatches on."""
        return "\n".join(message["content"] for message in self.body["messages"])


Respond = Callable[[Received, int], Reply]
"""Called with the request and how many earlier requests had the same prompt."""


class ChatStandIn:
    def __init__(self, respond: Respond) -> None:
        self.respond = respond
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean

            def do_POST(self) -> None:
                if self.path != "/v1/chat/completions":
                    self._send(404, b'{"error": {"message": "not found"}}', {})
                    return
                length = int(self.headers.get("Content-Length", "0"))
                request = Received(
                    json.loads(self.rfile.read(length)), self.headers.get("Authorization")
                )
                with stand_in._lock:
                    earlier = sum(1 for item in stand_in.received if item.prompt == request.prompt)
                    stand_in.received.append(request)
                reply = stand_in.respond(request, earlier)
                if reply.delay and stand_in._stop.wait(reply.delay):
                    return  # shutting down
                if reply.raw is not None:
                    body = reply.raw
                elif reply.status == 200:
                    body = json.dumps(
                        {
                            "id": "stand-in",
                            "object": "chat.completion",
                            "choices": [
                                {
                                    "index": 0,
                                    "message": {"role": "assistant", "content": reply.content},
                                    "finish_reason": "stop",
                                }
                            ],
                        }
                    ).encode()
                else:
                    body = json.dumps({"error": {"message": reply.content or "error"}}).encode()
                self._send(reply.status, body, reply.headers)

            def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): nothing to answer

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def count(self, marker: str) -> int:
        """How many requests had ``marker`` in their prompt."""
        with self._lock:
            return sum(1 for item in self.received if marker in item.prompt)

    def clear(self) -> None:
        with self._lock:
            self.received.clear()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def chat_stand_in(respond: Respond) -> Iterator[ChatStandIn]:
    server = ChatStandIn(respond)
    server.start()
    try:
        yield server
    finally:
        server.stop()
