"""SciFact over one shard and five, with and without dfs: the figures of docs/elasticsearch.md.

BEIR's BM25 setup (``english`` analyzer on ``title`` and ``text``, ``best_fields`` with
``tie_breaker`` 0.5, BM25 k1 1.2, b 0.75), indexed by ``retrievalkit es index`` once with
one primary shard and once with five (each with ``--replicas``), then evaluated through
``retrievalkit eval`` over the 300 test questions with ``search_type`` ``query_then_fetch``
(Elasticsearch's default: each shard scores with its own term statistics) and
``dfs_query_then_fetch`` (statistics gathered from every shard first). Prints nDCG@10 and
recall@100 of each, and how many questions' top 10 differ from the one-shard ranking.
Not part of ``nox -s bench``: it measures scores, not speed.

    python benchmarks/scifact_shards.py [--url http://127.0.0.1:9210] [--replicas 1]

The default URL is the three-node cluster (``scripts/elasticsearch.py up --nodes 3
--port 9210``); every node found there is given to the retriever as ``hosts``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_URL = "http://127.0.0.1:9210"
SEARCH_TYPES = ("query_then_fetch", "dfs_query_then_fetch")
SHARDS = (1, 5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("RETRIEVALKIT_ES_CLUSTER_URL", DEFAULT_URL))
    parser.add_argument("--data", type=Path, default=_scifact(), help="a BEIR SciFact folder")
    parser.add_argument("--replicas", type=int, default=1, help="replicas of each shard (1)")
    args = parser.parse_args()

    from elasticsearch import Elasticsearch

    es = Elasticsearch(args.url, request_timeout=300)
    nodes = es.nodes.info(metric="http")["nodes"]
    hosts = sorted(f"http://{node['http']['publish_address']}" for node in nodes.values())
    version = next(iter(nodes.values()))["version"]
    print(f"Elasticsearch {version}, {len(hosts)} node(s): {', '.join(hosts)}")
    prefix = f"rk-shards-{uuid.uuid4().hex[:6]}"
    work = Path(tempfile.mkdtemp(prefix="rk-shards-"))
    results: dict[tuple[int, str], tuple[dict[str, Any], dict[str, list[str]]]] = {}
    try:
        for shards in SHARDS:
            index = f"{prefix}-{shards}"
            done = _cli(
                "es", "index", "--corpus", str(args.data / "corpus.jsonl"), "--index", index,
                "--url", args.url, "--analyzer", "english", "--shards", str(shards),
                "--replicas", str(args.replicas), "--quiet",
            )  # fmt: skip
            print(done.stdout.strip())
            for search_type in SEARCH_TYPES:
                results[shards, search_type] = _evaluate(
                    work / f"{shards}-{search_type}", args.data, hosts, index, search_type
                )
    finally:
        for shards in SHARDS:
            es.options(ignore_status=404).indices.delete(index=f"{prefix}-{shards}")
    reference = results[1, "query_then_fetch"][1]
    print()
    print("| index | search_type | nDCG@10 | R@100 | top 10 differs from 1 shard |")
    print("|---|---|---|---|---|")
    for (shards, search_type), (metrics, rankings) in results.items():
        differ = sum(rankings[qid][:10] != reference[qid][:10] for qid in reference)
        print(
            f"| {shards} shard(s) x {1 + args.replicas} copies | `{search_type}` | "
            f"{metrics['ndcg@10']['mean']:.4f} | {metrics['recall@100']['mean']:.4f} | "
            f"{differ} of {len(reference)} |"
        )
    return 0


def _evaluate(
    folder: Path, data: Path, hosts: list[str], index: str, search_type: str
) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """``retrievalkit eval`` of BEIR's setup; the metrics and each question's ranking."""
    folder.mkdir(parents=True)
    (folder / "retrievalkit.toml").write_text(
        "[retrievers.scifact]\n"
        'plugin = "elasticsearch-bm25"\n'
        f"hosts = {json.dumps(hosts)}\n"
        f'index = "{index}"\n'
        'fields = ["title", "text"]\n'
        'query_type = "best_fields"\n'
        "tie_breaker = 0.5\n"
        f'search_type = "{search_type}"\n',
        encoding="utf-8",
    )
    _cli(
        "eval", "--set", str(data), "--retriever", "scifact", "--k", "10,100", "--no-save",
        "--format", "json", "--output-dir", str(folder / "out"), "--quiet", cwd=folder,
    )  # fmt: skip
    summary = json.loads((folder / "out" / "summary.json").read_text(encoding="utf-8"))
    lines = (folder / "out" / "per_question.jsonl").read_text(encoding="utf-8").splitlines()
    rankings = {
        line["question_id"]: list(line["ranking"]) for line in (json.loads(t) for t in lines)
    }
    return summary["metrics"], rankings


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "retrievalkit", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
    )
    if done.returncode != 0:
        raise SystemExit(f"retrievalkit {' '.join(args[:2])} failed:\n{done.stdout}{done.stderr}")
    return done


def _scifact() -> Path:
    for candidate in (REPO.parent / "shared" / "data", REPO / "shared" / "data"):
        if (candidate / "scifact" / "corpus.jsonl").is_file():
            return candidate / "scifact"
    return REPO.parent / "shared" / "data" / "scifact"


if __name__ == "__main__":
    sys.exit(main())
