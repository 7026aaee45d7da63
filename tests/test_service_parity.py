"""One set, three paths, the same numbers: built-in ``bm25-demo``, ``http`` and ``command``.

``retrievalkit eval`` runs as a user runs it, from a config file: once with the
built-in BM25, once against the real search service on a loopback port (which runs the
same BM25 behind HTTP and answers chunk ids), once through the Node child that serves
the same rankings over JSON Lines. Every metric with its interval, every slice and
every question's ranking must be identical; the manifest records the endpoint and the
command, never the secret header or argument.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from child_env import child_environment
from search_service import SearchService
from stored_text import stored_text
from test_command_retriever import CHILD, node, write_rankings

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def service() -> Iterator[SearchService]:
    server = SearchService().start()
    yield server
    server.stop()


def evaluate(folder: Path, retriever: str, env: dict[str, str]) -> dict[str, Any]:
    out = folder / retriever
    completed = subprocess.run(
        [sys.executable, "-m", "retrievalkit", "eval", "--set", "demo", "--retriever", retriever,
         "--format", "json", "--store", f"jsonl:///{folder}/runs.jsonl", "--output-dir", str(out),
         "--concurrency", "4"],
        cwd=folder, env=env, capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    rankings = [
        (line["question_id"], line["ranking"], line["error"])
        for line in map(json.loads, (out / "per_question.jsonl").read_text().splitlines())
    ]
    return {"report": report, "rankings": rankings}


def test_bm25_http_and_command_give_identical_numbers(
    service: SearchService, tmp_path: Path
) -> None:
    rankings = write_rankings(tmp_path / "rankings.json")
    (tmp_path / "retrievalkit.toml").write_text(
        f"""
[retrievers.service]
plugin = "http"
url = "{service.url}/auth/search"
body = {{ query = {{ text = "{{question}}" }}, size = "{{limit}}" }}
headers_env = {{ Authorization = "DEMO_SEARCH_AUTH" }}
hits = "data.hits"
id_field = "doc.id"
score_field = "score"
doc_id_separator = "#"
concurrency = 4

[retrievers.node-ranker]
plugin = "command"
command = [{json.dumps(node())}, {json.dumps(str(CHILD))},
           "--rankings", {json.dumps(str(rankings))}, "--token", "${{RANKING_TOKEN}}"]
doc_id_separator = "#"
""",
        encoding="utf-8",
    )
    service.expected_authorization = "Bearer parity-s3cret"
    env = child_environment()
    env.update(
        NO_COLOR="1", DEMO_SEARCH_AUTH="Bearer parity-s3cret", RANKING_TOKEN="tok-parity-9876"
    )
    runs = {name: evaluate(tmp_path, name, env) for name in ("bm25-demo", "service", "node-ranker")}

    builtin = runs["bm25-demo"]
    assert builtin["report"]["errored"] == 0
    assert builtin["report"]["metrics"]["hit@10"]["mean"] > 0.5  # a real ranking, not empties
    for name in ("service", "node-ranker"):
        run = runs[name]
        assert run["report"]["errored"] == 0, run["report"]["errors"]
        assert run["rankings"] == builtin["rankings"], name
        assert run["report"]["metrics"] == builtin["report"]["metrics"], name
        assert run["report"]["slices"] == builtin["report"]["slices"], name

    manifest = runs["service"]["report"]["manifest"]
    assert manifest["extra"]["http.endpoint"] == f"POST {service.url}/auth/search"
    assert manifest["retriever_options"]["headers_env"] == {"Authorization": "DEMO_SEARCH_AUTH"}
    command = runs["node-ranker"]["report"]["manifest"]["extra"]["command"]
    assert command.endswith("--token '${RANKING_TOKEN}'")
    stored = (tmp_path / "runs.jsonl").read_text()
    everything = "".join(stored_text(tmp_path).values())
    assert "parity-s3cret" not in everything and "tok-parity-9876" not in everything
    assert stored.count('"retrieval_hit_rate"') == 3
