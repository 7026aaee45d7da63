"""A loopback model server for the model tests: all-MiniLM-L6-v2 behind real HTTP.

``POST /v1/embeddings`` answers in the OpenAI shape; ``POST /v1/rerank`` (Cohere and
Jina) and ``POST /rerank`` (TEI) score each document by the cosine of its MiniLM vector
with the question's, so a reranking through the API can be checked against the ``dense``
reranker over the same model. ``faults`` is a queue of what the next requests get
instead of an answer: ``429`` / ``503`` (with ``Retry-After: 0``), ``slow:SECONDS``,
``malformed`` (not JSON), ``short`` (one result too few), ``echo-auth`` (a 400 whose body
repeats the Authorization header, as a careless proxy might).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np


class ModelServer:
    def __init__(self, model: Any) -> None:
        self.model = model
        self.faults: deque[str] = deque()
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.url = ""

    def vectors(self, texts: list[str]) -> np.ndarray:
        with self.lock:  # one forward pass at a time: torch on two cores
            return np.asarray(
                self.model.encode(texts, convert_to_numpy=True, show_progress_bar=False),
                dtype=np.float32,
            )

    def answer(self, path: str, body: Any) -> Any:
        if path == "/v1/embeddings":
            texts = body["input"]
            matrix = self.vectors(texts)
            if "dimensions" in body:
                matrix = matrix[:, : body["dimensions"]]
            data = [
                {"object": "embedding", "index": i, "embedding": [float(x) for x in row]}
                for i, row in enumerate(matrix)
            ]
            # Out of order on purpose: clients must sort by index.
            return {"object": "list", "model": body["model"], "data": data[::-1]}
        if path in ("/v1/rerank", "/rerank"):
            texts = body["documents"] if path == "/v1/rerank" else body["texts"]
            matrix = self.vectors([body["query"], *texts])
            query, documents = matrix[0], matrix[1:]
            scores = documents @ query / (np.linalg.norm(documents, axis=1) * np.linalg.norm(query))
            order = np.argsort(-scores, kind="stable")
            if path == "/rerank":
                return [{"index": int(i), "score": float(scores[i])} for i in order]
            top = order[: body.get("top_n") or len(order)]
            return {
                "id": "test",
                "results": [{"index": int(i), "relevance_score": float(scores[i])} for i in top],
            }
        raise KeyError(path)


@contextmanager
def serve(model: Any) -> Iterator[ModelServer]:
    state = ModelServer(model)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            body = json.loads(raw)
            with state.lock:
                fault = state.faults.popleft() if state.faults else None
                state.requests.append(
                    {
                        "path": self.path,
                        "body": body,
                        "authorization": self.headers.get("Authorization"),
                        "fault": fault,
                    }
                )
            if fault in ("429", "503"):
                self._send(int(fault), b'{"error": "busy"}', {"Retry-After": "0"})
                return
            if fault == "echo-auth":
                echoed = json.dumps({"error": f"bad key {self.headers.get('Authorization')}"})
                self._send(400, echoed.encode())
                return
            if fault and fault.startswith("slow:"):
                time.sleep(float(fault.split(":", 1)[1]))
            try:
                reply = state.answer(self.path, body)
            except KeyError:
                self._send(404, b'{"error": "no such endpoint"}')
                return
            if fault == "malformed":
                self._send(200, b"<html>gateway says hello</html>")
                return
            if fault == "short":
                if isinstance(reply, list):
                    reply = reply[:-1]
                else:
                    key = "data" if "data" in reply else "results"
                    reply[key] = reply[key][:-1]
            self._send(200, json.dumps(reply).encode())

        def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a deadline test)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
