"""``_msearch`` throughput with concurrency: one node against three, on one cluster.

The 1,109 SciFact claims (test and train queries) are asked through the plugin's BM25
retriever (``retrieve_many``: one ``_msearch`` of 64 questions a request, 10 hits each),
the batches spread over C client threads (C = 1, 2, 4, 8), against the three-node cluster
``scripts/elasticsearch.py up --nodes 3 --port 9210`` starts (``RETRIEVALKIT_ES_CLUSTER_URL``).
The same corpus is indexed three ways on that cluster:

* **1 node**: one shard, no replica, kept on the first node by allocation filtering, and
  every request sent to that node: one node does all the searching;
* **3 nodes, a copy each**: one shard with two replicas (a full copy on every node),
  requests spread over the three nodes (the client's round robin; each node searches its
  own copy);
* **3 nodes, 3 shards + dfs**: three primaries, one a node, no replica, requests spread
  over the three nodes, ``search_type = "dfs_query_then_fetch"`` (so scores equal one
  shard's), each question fanning out to every node.

Values before times: every layout must return the rankings of the 1-node layout (the same
scores; ties at the 10th hit may order differently, which is counted and shown). Layouts
take turns within each round; each keeps its best of ``--repeats``.

On this machine the three nodes, the client and everything else share the same CPUs
(``os.cpu_count()`` and the load average are printed): a second and third node add no
processor, so the comparison shows what spreading the work costs or gains with the CPUs
held fixed, not what three machines would give. Two things still favour three nodes
here: ``_msearch`` runs at most ``max_concurrent_searches`` sub-searches at a time, by
default the data nodes times min(processors, 10), so three nodes run three times as many
at once; and on a machine busy with other work, three JVMs' threads get a larger share
of the CPUs than one JVM's.

    python benchmarks/bench_cluster.py [--repeats 3] [--concurrency 1,2,4,8]

Exits 77 (run_all.py: skipped) when the cluster is unreachable or has fewer than 3 nodes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import EXIT_SKIPPED, REPO, ratio, table

DEFAULT_URL = "http://127.0.0.1:9210"
NODES = 3
K = 10
BATCH = 64
DFS = "dfs_query_then_fetch"
#: layout -> (label, shards, replicas, search_type, requests to every node)
LAYOUTS: dict[str, tuple[str, int, int, str | None, bool]] = {
    "one": ("1 node", 1, 0, None, False),
    "copies": ("3 nodes, a copy each", 1, 2, None, True),
    "shards": ("3 nodes, 3 shards + dfs", 3, 0, DFS, True),
}


class Unavailable(Exception):
    """The cluster or the data is missing: the benchmark is skipped."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("RETRIEVALKIT_ES_CLUSTER_URL", DEFAULT_URL))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrency", default="1,2,4,8", help="client threads, e.g. 1,2,4,8")
    args = parser.parse_args()
    levels = [int(level) for level in args.concurrency.split(",")]
    try:
        client, hosts, version = connect(args.url)
        questions = scifact_questions()
    except Unavailable as reason:
        print(f"skipped: {reason}")
        return EXIT_SKIPPED

    print(
        f"Elasticsearch {version}, {len(hosts)} nodes on this machine ({', '.join(hosts)}); "
        f"{os.cpu_count()} CPUs shared by every node and by this client; load average "
        f"{os.getloadavg()[0]:.1f}"
    )
    print(
        f"{len(questions)} SciFact questions a pass, _msearch batches of {BATCH}, {K} hits; "
        f"best of {args.repeats}"
    )
    prefix = f"rk-bench-cluster-{uuid.uuid4().hex[:6]}"
    retrievers: dict[str, Any] = {}
    try:
        for key, (label, shards, replicas, search_type, spread) in LAYOUTS.items():
            index = f"{prefix}-{key}"
            began = time.perf_counter()
            build_index(
                client, args.url, index, shards, replicas, pin_to=None if spread else hosts[0]
            )
            retrievers[key] = retriever(hosts if spread else hosts[:1], index, search_type)
            print(f"indexed {label}: {index} in {time.perf_counter() - began:.1f} s")
        reference = retrievers["one"].retrieve_many(questions, K)
        for key, bm25 in retrievers.items():
            answers = bm25.retrieve_many(questions, K)
            errors = [a for a in answers if isinstance(a, BaseException)]
            if errors:
                print(f"{LAYOUTS[key][0]}: {len(errors)} searches failed, e.g. {errors[0]}")
                return 1
            same = sum(list(a) == list(b) for a, b in zip(answers, reference, strict=True))
            top = sum(set(a) == set(b) for a, b in zip(answers, reference, strict=True))
            print(
                f"{LAYOUTS[key][0]}: rankings equal to 1 node's for {same} of {len(questions)} "
                f"questions, the same top-{K} documents for {top}"
            )
            if top < len(questions) * 0.99:
                print("the layouts disagree beyond ties at the cut: times would mean nothing")
                return 1

        best: dict[tuple[str, int], float] = {}
        for _ in range(args.repeats):
            for level in levels:
                for key, bm25 in retrievers.items():
                    elapsed = timed(bm25, questions, level)
                    best[key, level] = min(best.get((key, level), float("inf")), elapsed)
    finally:
        for key in LAYOUTS:
            client.options(ignore_status=404).indices.delete(index=f"{prefix}-{key}")

    rows = []
    for level in levels:
        rates = {key: len(questions) / best[key, level] for key in LAYOUTS}
        rows.append(
            [
                f"concurrency {level}",
                *(f"{rates[key]:.0f}" for key in LAYOUTS),
                *(ratio(rates[key] / rates["one"]) for key in LAYOUTS if key != "one"),
            ]
        )
    header = [
        "questions/s",
        *(LAYOUTS[key][0] for key in LAYOUTS),
        *(f"{LAYOUTS[key][0]} / 1 node" for key in LAYOUTS if key != "one"),
    ]
    print()
    print(table(header, rows))
    print(
        f"\nnote: the {len(hosts)} nodes run on the same {os.cpu_count()} CPUs as this client "
        f"(load average now {os.getloadavg()[0]:.1f}): three nodes add no processor here. "
        "They gain because _msearch runs data nodes x min(processors, 10) sub-searches at "
        "once by default (3x with three nodes), and because three JVMs get a larger share of "
        "a busy machine's CPUs than one; on separate machines the figures would differ."
    )
    return 0


def connect(url: str) -> tuple[Any, list[str], str]:
    try:
        from elasticsearch import Elasticsearch
    except ImportError as error:
        raise Unavailable(f"the elasticsearch client is missing ({error})") from None
    client = Elasticsearch(url, request_timeout=300)
    try:
        health = client.cluster.health(wait_for_status="yellow", timeout="30s")
        nodes = client.nodes.info(metric="http")["nodes"]
    except Exception as error:
        raise Unavailable(f"no Elasticsearch cluster answers at {url} ({error})") from None
    if health["number_of_nodes"] < NODES:
        raise Unavailable(f"{url} has {health['number_of_nodes']} node(s), not {NODES}")
    entries = sorted(
        (f"http://{node['http']['publish_address']}", node["name"], node["version"])
        for node in nodes.values()
    )
    hosts = [address for address, _, _ in entries]
    return client, hosts, str(entries[0][2])


def scifact_questions() -> list[str]:
    for base in (REPO.parent / "shared" / "data", REPO / "shared" / "data"):
        path = base / "scifact" / "queries.jsonl"
        if path.is_file():
            lines = path.read_text(encoding="utf-8").splitlines()
            return [json.loads(line)["text"] for line in lines]
    raise Unavailable("../shared/data/scifact/queries.jsonl is missing")


def build_index(
    client: Any, url: str, index: str, shards: int, replicas: int, pin_to: str | None
) -> None:
    """``es index`` (the plugin's settings), kept on one node if asked, force-merged, green."""
    import subprocess

    done = subprocess.run(
        [
            sys.executable, "-m", "retrievalkit", "es", "index", "--quiet",
            "--corpus", str(scifact_corpus()), "--index", index, "--url", url,
            "--shards", str(shards), "--replicas", str(replicas),
        ],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"es index failed:\n{done.stdout}{done.stderr}")
    if pin_to is not None:
        name = node_name(client, pin_to)
        client.indices.put_settings(
            index=index, settings={"index.routing.allocation.require._name": name}
        )
    client.indices.forcemerge(index=index, max_num_segments=1)
    client.cluster.health(
        index=index, wait_for_status="green", wait_for_no_relocating_shards=True, timeout="120s"
    )
    if pin_to is not None:
        placed = {copy["node"] for copy in client.cat.shards(index=index, format="json").body}
        if placed != {node_name(client, pin_to)}:
            raise SystemExit(f"{index} is on {placed}, not only on {pin_to}")


def node_name(client: Any, address: str) -> str:
    for node in client.nodes.info(metric="http")["nodes"].values():
        if f"http://{node['http']['publish_address']}" == address:
            return str(node["name"])
    raise SystemExit(f"no node at {address}")


def scifact_corpus() -> Path:
    for base in (REPO.parent / "shared" / "data", REPO / "shared" / "data"):
        if (base / "scifact" / "corpus.jsonl").is_file():
            return base / "scifact" / "corpus.jsonl"
    raise Unavailable("../shared/data/scifact/corpus.jsonl is missing")


def retriever(hosts: Sequence[str], index: str, search_type: str | None) -> Any:
    from retrievalkit_elasticsearch.retriever import create_elasticsearch_bm25

    return create_elasticsearch_bm25(
        hosts=list(hosts), index=index, search_type=search_type, batch_size=BATCH
    )


def timed(bm25: Any, questions: Sequence[str], threads: int) -> float:
    """Seconds to answer every question, the _msearch batches shared among threads."""
    batches = [questions[start : start + BATCH] for start in range(0, len(questions), BATCH)]
    began = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        answers = list(pool.map(lambda batch: bm25.retrieve_many(batch, K), batches))
    elapsed = time.perf_counter() - began
    failed = sum(isinstance(a, BaseException) for batch in answers for a in batch)
    if failed:
        raise SystemExit(f"{failed} searches failed during the timing")
    return elapsed


if __name__ == "__main__":
    sys.exit(main())
