"""Elasticsearch throughput: retrievalkit's BM25 retriever against Elasticsearch's ``_rank_eval``.

The same 1,109 SciFact claims (the 300 test and 809 train queries, judged by both qrels
files) against the same corpus, indexed the same way on two nodes (the plugin's own
settings and mappings, bulk-loaded in corpus order, force-merged to one segment):

* the development node (9.x, ``RETRIEVALKIT_ES_URL``, port 9200), the only one the
  plugin's 9.x client talks to: retrievalkit asking one question at a time, from 8
  threads (``--concurrency 8``) and in ``_msearch`` batches, timed as the retrieval
  phase alone (a fresh process; the clock runs around ``evaluate_questions``) and as a
  whole ``retrievalkit eval`` (a fresh process, wall time: start-up, checks, scoring
  with intervals and the report included);
* the reference node (7.17, ``RETRIEVALKIT_RANK_EVAL_URL``, port 9201), the only one
  with the rank-eval module: ``_rank_eval`` with every query in one request, the
  in-engine reference.

Both get the same search body: retrievalkit's ``multi_match`` over ``title`` and
``text``, 10 hits, no total-hit count and no ``_source`` (``_rank_eval`` sets the size
from its metric's k and drops ``_source`` itself). The nodes run different versions, so
the same raw ``_msearch`` (plain HTTP, the plugin's request bodies, 64 searches a
request, as its batches) is timed on both: its ratio is the version difference, printed
next to the goal's ratio, and the goal's ratio is also given on one engine, as the
product of two same-node ratios (retrievalkit's batches against that raw ``_msearch``
on 9.x, the raw ``_msearch`` against ``_rank_eval`` on 7.17).

Values before times: every path must return the same top-10 rankings, and
retrievalkit's hit@1/3/10, recall@1/3/10 and MRR@10 must equal what ``_rank_eval``
computes (recall@k, and mean_reciprocal_rank@k, whose being above 0 is hit@k) for every
query. Paths take turns within each round, and each keeps its best of ``--repeats``.

    python benchmarks/bench_es.py [--repeats 5]

Exits 77 (run_all.py: skipped) when a node is unreachable or lacks ``_rank_eval``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import EXIT_SKIPPED, REPO, emit, goal, ratio, run_worker, seconds, table, worker_env

DEFAULT_URL = "http://127.0.0.1:9200"
DEFAULT_RANK_EVAL_URL = "http://127.0.0.1:9201"
K = 10
KS = (1, 3, 10)
BATCH = 64
CONCURRENCY = 8
GOAL_RATIO = 0.8
TOLERANCE = 1e-12
FIELDS = ("title", "text")
MEASURED = ("hit@1", "hit@3", "hit@10", "recall@1", "recall@3", "recall@10", "rr")
REQUEST_TIMEOUT = 600.0

#: worker case -> (row label, which node)
WORKER_CASES = {
    "rank_eval": ("_rank_eval, every query in one request (in-engine)", "reference"),
    "msearch-reference": ("raw _msearch over HTTP, 64 a request", "reference"),
    "msearch-dev": ("raw _msearch over HTTP, 64 a request", "dev"),
    "rk-one": ("retrieval phase: one question at a time", "dev"),
    "rk-concurrent": (f"retrieval phase: --concurrency {CONCURRENCY}", "dev"),
    "rk-batched": (f"retrieval phase: _msearch batches of {BATCH}", "dev"),
}
#: eval case -> (row label, retriever options, extra eval options)
EVAL_CASES: dict[str, tuple[str, dict[str, Any], tuple[str, ...]]] = {
    "eval-one": ("retrievalkit eval: batch_size 1", {"batch_size": 1}, ()),
    "eval-concurrent": (
        f"retrievalkit eval: batch_size 1, --concurrency {CONCURRENCY}",
        {"batch_size": 1},
        ("--concurrency", str(CONCURRENCY)),
    ),
    "eval-batched": (f"retrievalkit eval: _msearch batches of {BATCH}", {"batch_size": BATCH}, ()),
}


class Unavailable(Exception):
    """A node or a package the benchmark needs is missing: the benchmark is skipped."""


# --- plain HTTP (the 9.x client refuses a 7.x server) ------------------------------------


def call(url: str, method: str, path: str, body: Any = None, *, ndjson: bool = False) -> Any:
    """One request; Elasticsearch's error document is returned, not raised."""
    data = None
    headers = {}
    if body is not None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        headers["Content-Type"] = "application/x-ndjson" if ndjson else "application/json"
    request = urllib.request.Request(url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT) as response:
            return json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return json.loads(error.read() or b"null")


def node_version(url: str) -> str:
    """The node's version, or Unavailable with the reason."""
    try:
        nodes = call(url, "GET", "/_nodes/_local?filter_path=nodes.*.version")
    except (OSError, ValueError) as error:
        raise Unavailable(f"no Elasticsearch node answers at {url} ({error})") from None
    versions = [node.get("version") for node in (nodes or {}).get("nodes", {}).values()]
    if not versions:
        raise Unavailable(f"{url} answered, but not as an Elasticsearch node: {nodes}")
    return str(versions[0])


def check_rank_eval(url: str) -> None:
    answer = call(url, "POST", "/_rank_eval", {"requests": [], "metric": {"precision": {}}})
    text = json.dumps(answer)
    if "no handler found" in text or "Incorrect HTTP method" in text:
        raise Unavailable(f"the node at {url} has no _rank_eval (the rank-eval module)")


# --- the query set, the index, the bodies -------------------------------------------------


def shared_data() -> Path:
    for candidate in (REPO.parent / "shared" / "data", REPO / "shared" / "data"):
        if (candidate / "scifact" / "corpus.jsonl").is_file():
            return candidate
    raise Unavailable("../shared/data/scifact (corpus, queries, qrels) is missing")


def write_query_set(folder: Path) -> Path:
    """A BEIR folder with every SciFact query and the test + train judgments as one qrels."""
    scifact = shared_data() / "scifact"
    folder.mkdir(parents=True)
    (folder / "qrels").mkdir()
    (folder / "queries.jsonl").write_bytes((scifact / "queries.jsonl").read_bytes())
    lines = (scifact / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()
    train = (scifact / "qrels" / "train.tsv").read_text(encoding="utf-8").splitlines()
    (folder / "qrels" / "test.tsv").write_text("\n".join(lines + train[1:]) + "\n")
    return folder


def load_set(folder: Path) -> tuple[list[str], list[str], list[dict[str, int]]]:
    """(ids, texts, judgments) in the set's order, as retrievalkit reads them."""
    from retrievalkit.formats.golden_sets import load_beir

    golden = load_beir(folder)
    questions = golden.questions
    return (
        [q.id for q in questions],
        [q.question for q in questions],
        [dict(q.judgments()) for q in questions],
    )


def index_everywhere(urls: Sequence[str], index: str) -> None:
    """The corpus into ``index`` on each node, with the plugin's own settings and mappings."""
    from retrievalkit_elasticsearch.indexing import DEFAULT_B, DEFAULT_K1, index_body

    from retrievalkit.formats.corpus import read_corpus

    corpus = shared_data() / "scifact" / "corpus.jsonl"
    body = index_body(k1=DEFAULT_K1, b=DEFAULT_B, analyzer="standard", corpus=str(corpus))
    lines: list[str] = []
    for document in read_corpus(corpus):
        lines.append(json.dumps({"create": {"_index": index, "_id": document.id}}))
        lines.append(json.dumps({"title": document.title, "text": document.text}))
    for url in urls:
        call(url, "DELETE", f"/{index}")
        created = call(url, "PUT", f"/{index}", body)
        if not (created or {}).get("acknowledged"):
            raise RuntimeError(f"could not create {index} on {url}: {created}")
        for start in range(0, len(lines), 2000):
            chunk = "\n".join(lines[start : start + 2000]) + "\n"
            loaded = call(url, "POST", "/_bulk", chunk, ndjson=True)
            if loaded.get("errors"):
                raise RuntimeError(f"bulk load into {url}/{index} failed: {str(loaded)[:500]}")
        call(url, "PUT", f"/{index}/_settings", {"index": {"refresh_interval": None}})
        call(url, "POST", f"/{index}/_refresh")
        call(url, "POST", f"/{index}/_forcemerge?max_num_segments=1")
        count = call(url, "GET", f"/{index}/_count").get("count")
        if count != len(lines) // 2:
            raise RuntimeError(f"{url}/{index} holds {count} of {len(lines) // 2} documents")


def search_body(text: str) -> dict[str, Any]:
    """Exactly the body the retriever sends for a question (its SearchPlan)."""
    from retrievalkit_elasticsearch.query import MultiMatch, SearchPlan

    body: dict[str, Any] = SearchPlan(MultiMatch(FIELDS)).body(text, K)
    return body


def digest(rankings: Sequence[Sequence[str]]) -> str:
    """One short fingerprint of every ranking, in order."""
    text = "\n".join(" ".join(ranking) for ranking in rankings)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def rank_eval_requests(
    index: str, ids: Sequence[str], texts: Sequence[str], judgments: Sequence[Mapping[str, int]]
) -> list[dict[str, Any]]:
    requests = []
    for qid, text, grades in zip(ids, texts, judgments, strict=True):
        body = search_body(text)
        requests.append(
            {
                "id": qid,
                # _rank_eval sets size from the metric's k and drops _source itself.
                "request": {"query": body["query"], "track_total_hits": False},
                "ratings": [
                    {"_index": index, "_id": doc, "rating": grade} for doc, grade in grades.items()
                ],
            }
        )
    return requests


def rank_eval(
    url: str, index: str, requests: Sequence[Mapping[str, Any]], metric: Mapping[str, Any]
) -> dict[str, Any]:
    answer = call(url, "POST", f"/{index}/_rank_eval", {"requests": requests, "metric": metric})
    if "details" not in answer or answer.get("failures"):
        raise RuntimeError(f"_rank_eval failed: {json.dumps(answer)[:1000]}")
    return dict(answer)


# --- workers: one measurement in a fresh process ------------------------------------------


def worker(case: str, url: str, index: str, folder: Path) -> None:
    ids, texts, judgments = load_set(folder)
    errors = 0
    if case == "rank_eval":
        requests = rank_eval_requests(index, ids, texts, judgments)
        metric = {"mean_reciprocal_rank": {"k": K, "relevant_rating_threshold": 1}}
        began = time.perf_counter()
        answer = rank_eval(url, index, requests, metric)
        elapsed = time.perf_counter() - began
        details = answer["details"]
        rankings = [[hit["hit"]["_id"] for hit in details[qid]["hits"]] for qid in ids]
    elif case.startswith("msearch"):
        bodies = [search_body(text) for text in texts]
        began = time.perf_counter()
        rankings = []
        for start in range(0, len(bodies), BATCH):
            payload = "".join(
                "{}\n" + json.dumps(body) + "\n" for body in bodies[start : start + BATCH]
            )
            answer = call(url, "POST", f"/{index}/_msearch", payload, ndjson=True)
            for item in answer["responses"]:
                errors += "error" in item
                rankings.append([hit["_id"] for hit in item.get("hits", {}).get("hits", [])])
        elapsed = time.perf_counter() - began
    else:
        from retrievalkit_elasticsearch.retriever import create_elasticsearch_bm25

        from retrievalkit.formats.golden_sets import load_beir
        from retrievalkit.pipeline.engine.evaluator import evaluate_questions

        questions = load_beir(folder).questions
        retriever: Any = create_elasticsearch_bm25(
            url=url, index=index, fields=list(FIELDS), batch_size=BATCH
        )
        concurrency = CONCURRENCY if case == "rk-concurrent" else 1
        if case != "rk-batched":
            retriever = OneAtATime(retriever)
        began = time.perf_counter()
        retrievals = evaluate_questions(
            retriever, questions, depth=K, overfetch=1, concurrency=concurrency
        )
        elapsed = time.perf_counter() - began
        rankings = [list(retrieval.ranking) for retrieval in retrievals]
        errors = sum(1 for retrieval in retrievals if retrieval.error)
    emit({"seconds": elapsed, "digest": digest(rankings), "errors": errors, "n": len(rankings)})


class OneAtATime:
    """The retriever without ``retrieve_many``: one ``_search`` request per question."""

    def __init__(self, retriever: Any) -> None:
        self._retriever = retriever
        self.identifier = retriever.identifier

    def retrieve(self, question: str, limit: int) -> list[str]:
        return list(self._retriever.retrieve(question, limit))


# --- retrievalkit eval, end to end ----------------------------------------------------------


def write_config(folder: Path, url: str, index: str) -> None:
    lines = []
    for case, (_, options, _) in EVAL_CASES.items():
        settings = {"url": url, "index": index, "fields": list(FIELDS), **options}
        lines.append(f'[retrievers.{case}]\nplugin = "elasticsearch-bm25"')
        lines += [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
        lines.append("")
    (folder / "retrievalkit.toml").write_text("\n".join(lines), encoding="utf-8")


def run_eval(case: str, folder: Path, query_set: Path) -> tuple[float, list[dict[str, Any]]]:
    """Wall time of ``retrievalkit eval`` in a fresh process, and its per-question lines."""
    out = folder / f"out-{case}"
    command = [
        sys.executable,
        "-m",
        "retrievalkit",
        "eval",
        "--set",
        str(query_set),
        "--retriever",
        case,
        "--k",
        ",".join(str(k) for k in KS),
        "--overfetch",
        "1",
        "--no-save",
        "--quiet",
        "--format",
        "json",
        "--output-dir",
        str(out),
        *EVAL_CASES[case][2],
    ]
    began = time.perf_counter()
    done = subprocess.run(
        command, cwd=folder, env=worker_env(), capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    lines = (out / "per_question.jsonl").read_text(encoding="utf-8").splitlines()
    return elapsed, [json.loads(line) for line in lines]


# --- values before times -------------------------------------------------------------------


def check_parity(
    url: str,
    index: str,
    folder: Path,
    per_question: Sequence[Mapping[str, Any]],
) -> tuple[list[tuple[str, str, str, str]], list[str], str]:
    """retrievalkit's values against ``_rank_eval``'s, query by query.

    Returns the table rows (metric, retrievalkit mean, _rank_eval mean, queries equal),
    the mismatches, and the digest of ``_rank_eval``'s rankings.
    """
    ids, texts, judgments = load_set(folder)
    requests = rank_eval_requests(index, ids, texts, judgments)
    ours = {line["question_id"]: line for line in per_question}
    reference: dict[str, dict[str, float]] = {qid: {} for qid in ids}
    rankings: list[list[str]] = []
    for k in KS:
        threshold = {"k": k, "relevant_rating_threshold": 1}
        recall = rank_eval(url, index, requests, {"recall": threshold})["details"]
        mrr = rank_eval(url, index, requests, {"mean_reciprocal_rank": threshold})["details"]
        for qid in ids:
            reference[qid][f"recall@{k}"] = float(recall[qid]["metric_score"])
            reference[qid][f"hit@{k}"] = 1.0 if mrr[qid]["metric_score"] > 0 else 0.0
            if k == K:
                reference[qid]["rr"] = float(mrr[qid]["metric_score"])
        if k == K:
            rankings = [[hit["hit"]["_id"] for hit in mrr[qid]["hits"]] for qid in ids]
    mismatches = []
    for qid, ranking in zip(ids, rankings, strict=True):
        if ours[qid]["ranking"] != ranking:
            mismatches.append(f"query {qid}: ranking differs from _rank_eval's")
    rows = []
    for metric in MEASURED:
        equal = 0
        for qid in ids:
            mine, theirs = ours[qid]["scores"][metric], reference[qid][metric]
            if mine is not None and abs(mine - theirs) <= TOLERANCE:
                equal += 1
            else:
                mismatches.append(f"query {qid}: {metric} retrievalkit {mine}, _rank_eval {theirs}")
        mean_ours = sum(ours[qid]["scores"][metric] or 0.0 for qid in ids) / len(ids)
        mean_ref = sum(reference[qid][metric] for qid in ids) / len(ids)
        label = "MRR@10 (rr)" if metric == "rr" else metric
        rows.append((label, f"{mean_ours:.6f}", f"{mean_ref:.6f}", f"{equal}/{len(ids)}"))
    return rows, mismatches, digest(rankings)


# --- the parent ------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--url", default=(os.environ.get("RETRIEVALKIT_ES_URL") or DEFAULT_URL).rstrip("/")
    )
    parser.add_argument(
        "--rank-eval-url",
        default=(os.environ.get("RETRIEVALKIT_RANK_EVAL_URL") or DEFAULT_RANK_EVAL_URL).rstrip("/"),
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--case", choices=WORKER_CASES)
    parser.add_argument("--index")
    parser.add_argument("--set", type=Path)
    parser.add_argument("--node-url")
    args = parser.parse_args()
    if args.worker:
        worker(args.case, args.node_url, args.index, args.set)
        return 0

    print("## Elasticsearch throughput: retrievalkit's BM25 retriever against _rank_eval")
    try:
        import elasticsearch  # noqa: F401
        import retrievalkit_elasticsearch  # noqa: F401

        dev_version = node_version(args.url)
        ref_version = node_version(args.rank_eval_url)
        check_rank_eval(args.rank_eval_url)
        shared_data()
    except (Unavailable, ImportError) as problem:
        # One line: run_all.py reports the last line as the reason.
        print(
            f"SKIPPED: {problem}; start the nodes with `nox -s es-up` (9.x on port 9200, 7.17 "
            "with _rank_eval on 9201) or set RETRIEVALKIT_ES_URL and RETRIEVALKIT_RANK_EVAL_URL, "
            "and install the plugin (`nox -s bench` does both)"
        )
        return EXIT_SKIPPED
    if dev_version.split(".")[0] != "9" or not ref_version.startswith("7."):
        print(f"note: expected 9.x at {args.url} and 7.x at {args.rank_eval_url}")
    nodes = {
        "dev": (args.url, dev_version),
        "reference": (args.rank_eval_url, ref_version),
    }
    index = f"rk-bench-scifact-{os.getpid()}"
    # A SIGTERM (a cancelled job) unwinds like Ctrl-C, so the finally below drops the indices.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        query_set = write_query_set(folder / "scifact-all")
        ids, _, _ = load_set(query_set)
        write_config(folder, args.url, index)
        try:
            index_everywhere([args.url, args.rank_eval_url], index)
            return measure(args, nodes, index, folder, query_set, len(ids))
        finally:
            for url in (args.url, args.rank_eval_url):
                call(url, "DELETE", f"/{index}")


def measure(
    args: argparse.Namespace,
    nodes: Mapping[str, tuple[str, str]],
    index: str,
    folder: Path,
    query_set: Path,
    count: int,
) -> int:
    print(
        f"{count:,} SciFact queries (300 test + 809 train), top {K}, index {index} built the "
        "same way on both nodes; best of",
        args.repeats,
        "rounds, fresh processes",
    )
    for name, (url, version) in nodes.items():
        role = "retrievalkit and raw _msearch" if name == "dev" else "_rank_eval and raw _msearch"
        print(f"  {version} at {url}: {role}")
    print()

    def work(case: str) -> dict[str, Any]:
        url = nodes[WORKER_CASES[case][1]][0]
        arguments = ["--case", case, "--node-url", url, "--index", index, "--set", str(query_set)]
        answer: dict[str, Any] = run_worker(__file__, arguments)
        return answer

    # Warm both JVMs the same way (one pass of every query), then check values.
    work("msearch-dev")
    work("msearch-reference")
    _, per_question = run_eval("eval-batched", folder, query_set)
    rows, mismatches, reference_digest = check_parity(
        nodes["reference"][0], index, query_set, per_question
    )
    print("values: retrievalkit (eval on", nodes["dev"][1], ") against _rank_eval (on", end=" ")
    print(nodes["reference"][1], ") for the same queries and ratings")
    print(table(("metric", "retrievalkit", "_rank_eval", "queries equal"), rows))
    print()

    best: dict[str, float] = {}
    for _ in range(args.repeats):
        for case in WORKER_CASES:
            answer = work(case)
            if answer["digest"] != reference_digest or answer["errors"]:
                mismatches.append(
                    f"{case}: {answer['errors']} errors, rankings {answer['digest']} "
                    f"(reference {reference_digest})"
                )
            best[case] = min(best.get(case, float("inf")), answer["seconds"])
        for case in EVAL_CASES:
            elapsed, lines = run_eval(case, folder, query_set)
            if digest([line["ranking"] for line in lines]) != reference_digest:
                mismatches.append(f"{case}: rankings differ from _rank_eval's")
            best[case] = min(best.get(case, float("inf")), elapsed)
    if mismatches:
        print("values DISAGREE, times not comparable:")
        print("\n".join(f"  {line}" for line in mismatches[:20]))
        return 1

    reference = best["rank_eval"]
    labels = {case: (label, nodes[node][1]) for case, (label, node) in WORKER_CASES.items()}
    labels.update({case: (label, nodes["dev"][1]) for case, (label, _, _) in EVAL_CASES.items()})
    out = []
    for case, (label, version) in labels.items():
        elapsed = best[case]
        out.append(
            (
                label,
                version,
                seconds(elapsed),
                f"{count / elapsed:,.0f}",
                ratio(reference / elapsed),
            )
        )
    header = (
        "path (same queries, same top-10 rankings)",
        "node",
        "time",
        "queries/s",
        "vs _rank_eval",
    )
    print(table(header, out))
    print()
    dev, ref = nodes["dev"][1], nodes["reference"][1]
    version_factor = best["msearch-reference"] / best["msearch-dev"]
    batched = reference / best["rk-batched"]
    # The same ratio on one engine, in two steps that each compare on one node:
    # retrievalkit's batches against the raw _msearch they send (dev node), and that raw
    # _msearch against _rank_eval (reference node).
    client = best["msearch-dev"] / best["rk-batched"]
    engine = reference / best["msearch-reference"]
    adjusted = client * engine
    end_to_end = reference / best["eval-batched"]
    print(
        f"version difference: the same raw _msearch runs at {ratio(version_factor)} the "
        f"throughput on {dev} as on {ref}"
    )
    print(f"batched retrieval phase ({dev}) / _rank_eval ({ref}): {ratio(batched)}")
    print(
        f"  on one engine: {ratio(client)} (retrievalkit's batches / raw _msearch, on {dev}) x "
        f"{ratio(engine)} (raw _msearch / _rank_eval, on {ref}) = {ratio(adjusted)}"
    )
    print(f"  whole eval (start-up, checks, scoring, report included): {ratio(end_to_end)}")
    print(f"values: the rankings of every path and {len(MEASURED)} metrics per query agree")
    print(
        goal(
            True,
            f"hit@1/3/10, recall@1/3/10 and MRR@10 equal _rank_eval's for all {count:,} queries",
        )
    )
    print(
        goal(
            min(batched, adjusted) >= GOAL_RATIO,
            f"_msearch batches at or above {GOAL_RATIO}x _rank_eval's throughput: "
            f"{ratio(batched)} across versions, {ratio(adjusted)} on one engine",
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
