"""A real search service on a loopback port: BM25 over the demo corpus, with faults on demand.

The tests of the ``http`` retriever (and benchmarks/bench_http.py) start it on
127.0.0.1 with port 0. It answers with chunk ids (``doc-7#2``) in an Elasticsearch-like
shape, ``{"data": {"hits": [{"doc": {"id": ...}, "score": ...}]}}``, from the built-in
BM25 retriever, so the numbers through HTTP can be compared with those of ``bm25-demo``.

    GET  /search?q=TEXT&size=N           POST /search {"query": {"text": ...}, "size": N}
    POST /batch {"requests": [BODY, ...]} -> {"responses": [ANSWER, ...]}

A fault is chosen by the first path segment, ``/FAULT/search``:

    e500       always HTTP 500             flaky500  500 on the first try of each question
    r429       429 + Retry-After: 1 first  r429date  the same, Retry-After as an HTTP date
    r429long   429 + Retry-After: 3600     slow      answers after ``slow_seconds``
    badjson    truncated JSON              html      an HTML page (text/html)
    redirect   302 to /search              huge      a 2 MB answer with Content-Length
    hugechunked  the same, chunked         drop      connection closed on the first try
    auth       401 unless the Authorization header is ``expected_authorization``
    pair       waits until two requests are in flight at once (proves concurrency)
"""

from __future__ import annotations

import email.utils
import json
import socket
import threading
import time
import urllib.parse
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from retrievalkit.demo import DEMO_CORPUS
from retrievalkit.retrievers.bm25 import BM25Retriever

FAULTS = (
    "e500",
    "flaky500",
    "r429",
    "r429date",
    "r429long",
    "slow",
    "badjson",
    "html",
    "redirect",
    "huge",
    "hugechunked",
    "drop",
    "auth",
    "pair",
)


class SearchService(ThreadingHTTPServer):
    """The server; ``requests`` logs (path, question, arrival time) of every request."""

    daemon_threads = True

    def __init__(self, *, latency: float = 0.0) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        # Chunk ids as stored (no separator): the client maps them to documents.
        self.bm25 = BM25Retriever(DEMO_CORPUS, identifier="service")
        self.latency = latency
        self.slow_seconds = 5.0
        self.expected_authorization = ""
        self.lock = threading.Lock()
        self.requests: list[tuple[str, str, float, dict[str, str]]] = []
        self.bodies: list[Any] = []
        self.raw_paths: list[str] = []
        self.tries: dict[tuple[str, str], int] = defaultdict(int)
        self.pair = threading.Barrier(2, timeout=10)
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> SearchService:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    def answer(self, question: str, size: int) -> dict[str, Any]:
        hits = [
            {"doc": {"id": doc_id}, "score": score}
            for doc_id, score in self.bm25.retrieve_scored(question, size)
        ]
        return {"data": {"total": len(hits), "hits": hits}}

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet about clients that hang up early (the size cap does), loud about the rest."""
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def count(self, fault: str) -> int:
        with self.lock:
            return sum(1 for path, *_ in self.requests if path.startswith(f"/{fault}/"))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so the client's connection pool is used
    server: SearchService

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in two writes; without this, Nagle's algorithm and the
        # client's delayed ACK add 40 ms to every keep-alive answer, as no real server would.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: pytest shows failures, not access logs

    def do_GET(self) -> None:
        parts = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(parts.query)
        question = query.get("q", [""])[0]
        size = int(query.get("size", ["10"])[0])
        self._serve(parts.path, question, size, None)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length)
        body = json.loads(raw)
        with self.server.lock:
            self.server.bodies.append(body)
        path = urllib.parse.urlsplit(self.path).path
        if path.endswith("/batch"):
            answers = [
                self.server.answer(item["query"]["text"], int(item["size"]))
                for item in body["requests"]
            ]
            self._json(200, {"responses": answers})
            return
        self._serve(path, body["query"]["text"], int(body["size"]), body)

    def _serve(self, path: str, question: str, size: int, body: Any) -> None:
        server = self.server
        with server.lock:
            server.requests.append((path, question, time.time(), dict(self.headers.items())))
            server.raw_paths.append(self.path)
            server.tries[(path, question)] += 1
            tries = server.tries[(path, question)]
        fault = path.strip("/").split("/")[0] if path.count("/") > 1 else ""
        if server.latency:
            time.sleep(server.latency)
        if path.rstrip("/").split("/")[-1] != "search" or (fault and fault not in FAULTS):
            self._json(404, {"error": f"no such endpoint {path}"})
            return
        if fault == "e500":
            self._json(500, {"error": "index shard failed"})
        elif fault == "flaky500" and tries == 1:
            self._json(503, {"error": "warming up"})
        elif fault in ("r429", "r429date") and tries == 1:
            later = email.utils.formatdate(time.time() + 2, usegmt=True)
            after = "1" if fault == "r429" else later
            self._json(429, {"error": "slow down"}, headers={"Retry-After": after})
        elif fault == "r429long":
            self._json(429, {"error": "quota spent"}, headers={"Retry-After": "3600"})
        elif fault == "slow":
            time.sleep(server.slow_seconds)
            self._json(200, server.answer(question, size))
        elif fault == "badjson":
            self._send(200, b'{"data": {"hits": [{"doc": ', "application/json")
        elif fault == "html":
            self._send(200, b"<html><body>Service maintenance</body></html>", "text/html")
        elif fault == "redirect":
            target = self.path.replace("/redirect/search", "/search", 1)
            self._send(302, b"", "text/plain", headers={"Location": target})
        elif fault in ("huge", "hugechunked"):
            answer = server.answer(question, size)
            answer["padding"] = "x" * 2_000_000
            if fault == "huge":
                self._json(200, answer)
            else:
                self._chunked(json.dumps(answer).encode())
        elif fault == "drop" and tries == 1:
            self.close_connection = True
            self.connection.shutdown(2)
        elif fault == "auth" and self.headers.get("Authorization") != (
            server.expected_authorization
        ):
            self._json(401, {"error": "bad credentials"})
        elif fault == "pair":
            try:
                server.pair.wait()
            except threading.BrokenBarrierError:
                self._json(503, {"error": "no second request arrived while this one waited"})
                return
            self._json(200, server.answer(question, size))
        else:
            self._json(200, server.answer(question, size))

    def _json(self, status: int, document: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(document).encode(), "application/json", headers)

    def _send(
        self, status: int, payload: bytes, kind: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        try:
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client stopped reading at its cap

    def _chunked(self, payload: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for start in range(0, len(payload), 65536):
                piece = payload[start : start + 65536]
                self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client stopped reading at its cap
