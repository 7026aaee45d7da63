"""Throughput of the ``http`` retriever with 1 and 8 requests in flight, against the test service.

The service (tests/search_service.py: BM25 over the demo corpus behind a threaded HTTP
server) runs in its own process on a loopback port, once answering as fast as it can
and once after a fixed service time per request (``--latency``, as a remote service
would add). The demo set's questions, repeated ``--rounds`` times, are asked through
:func:`~retrievalkit.pipeline.engine.evaluator.evaluate_questions` as ``eval`` asks them,
with the retriever's ``concurrency`` at 1 and at 8; each keeps its best of
``--repeats`` runs. The peer is the built-in ``bm25`` retriever in process, asked the
same questions. Every ranking through HTTP must equal the built-in one before any time
is reported.

    python benchmarks/bench_http.py [--rounds 4] [--repeats 3] [--latency 0.02]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from harness import EXIT_SKIPPED, goal, ratio, table, worker_env

#: With 8 in flight against a service that spends its time waiting, throughput should
#: grow at least this much (the client's pool and threads are what is measured).
GOAL_SPEEDUP = 4.0


def serve(latency: float) -> None:
    """The service process: print the address, serve until stdin closes."""
    from search_service import SearchService

    server = SearchService(latency=latency).start()
    print(server.url, flush=True)
    sys.stdin.read()
    server.stop()


def measure(url: str, texts: list[str], concurrency: int, repeats: int) -> tuple[float, Any]:
    from retrievalkit.model.values import GoldenQuestion
    from retrievalkit.pipeline.engine.evaluator import evaluate_questions
    from retrievalkit.retrievers.http_service import create_http

    questions = [GoldenQuestion(id=f"b{i}", question=text) for i, text in enumerate(texts)]
    retriever = create_http(
        url=f"{url}/search?q={{question}}&size={{limit}}",
        hits="data.hits",
        id_field="doc.id",
        doc_id_separator="#",
        concurrency=concurrency,
    )
    best = float("inf")
    rankings: Any = None
    for _ in range(repeats):
        began = time.perf_counter()
        retrievals = evaluate_questions(retriever, questions, depth=10)
        best = min(best, time.perf_counter() - began)
        errors = [r.error for r in retrievals if r.error]
        if errors:
            raise RuntimeError(f"{len(errors)} questions errored, e.g. {errors[0]}")
        rankings = [r.ranking for r in retrievals]
    retriever.close()
    return best, rankings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--serve", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve)
        return 0
    try:
        import httpx  # noqa: F401
    except ImportError:
        print("httpx is not installed (pip install 'retrievalkit-eval[http]')")
        return EXIT_SKIPPED

    from retrievalkit.demo import DEMO_CORPUS, DEMO_SET
    from retrievalkit.formats.golden_sets import load_jsonl
    from retrievalkit.pipeline.engine.evaluator import evaluate_questions
    from retrievalkit.retrievers.bm25 import BM25Retriever

    golden = load_jsonl(DEMO_SET, name="demo")
    texts = [question.question for question in golden.questions] * args.rounds
    builtin = BM25Retriever(DEMO_CORPUS, doc_id_separator="#")
    best_builtin = float("inf")
    for _ in range(args.repeats):
        began = time.perf_counter()
        reference = evaluate_questions(builtin, list(golden.questions) * args.rounds, depth=10)
        best_builtin = min(best_builtin, time.perf_counter() - began)
    expected = [retrieval.ranking for retrieval in reference]

    rows = []
    speedups = {}
    for latency in (0.0, args.latency):
        service = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(latency)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=worker_env(),
        )
        try:
            assert service.stdout is not None
            url = service.stdout.readline().strip()
            times = {}
            for concurrency in (1, 8):
                seconds, rankings = measure(url, texts, concurrency, args.repeats)
                if rankings != expected:
                    print(f"rankings through HTTP (concurrency {concurrency}) differ from bm25's")
                    return 1
                times[concurrency] = seconds
        finally:
            assert service.stdin is not None
            service.stdin.close()
            service.wait(timeout=30)
        speedups[latency] = times[1] / times[8]
        for concurrency in (1, 8):
            rows.append(
                [
                    f"http, service time {latency * 1000:.0f} ms, concurrency {concurrency}",
                    f"{len(texts) / times[concurrency]:.0f}",
                    f"{times[concurrency] * 1000 / len(texts):.2f}",
                    ratio(times[concurrency] / best_builtin),
                ]
            )
    rows.append(
        [
            "bm25 built in (peer, in process)",
            f"{len(texts) / best_builtin:.0f}",
            f"{best_builtin * 1000 / len(texts):.2f}",
            ratio(1.0),
        ]
    )
    print(f"## http retriever throughput ({len(texts)} questions, best of {args.repeats})")
    print(table(["path", "questions/s", "ms/question", "time vs built-in"], rows))
    for latency, speedup in speedups.items():
        print(f"concurrency 8 vs 1 at service time {latency * 1000:.0f} ms: {ratio(speedup)}")
    print(
        goal(
            speedups[args.latency] >= GOAL_SPEEDUP,
            f"http concurrency 8 is >= {GOAL_SPEEDUP:g}x concurrency 1 against a service "
            f"taking {args.latency * 1000:.0f} ms ({ratio(speedups[args.latency])})",
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
