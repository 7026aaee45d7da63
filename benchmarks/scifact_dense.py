"""SciFact, dense and hybrid: the numbers of docs/dense.md, measured on a real node.

BM25 (embedded), exact dense search (embedded, WordLlama), Elasticsearch kNN over a
flat (exact) index and over two HNSW graphs at several ``num_candidates``, and the RRF
hybrid of BM25 and exact dense: nDCG@10 and recall@100 against SciFact's test qrels,
ANN recall@10 (the share of exact search's top 10 that the index returns, as
``retrievalkit fidelity`` reports it), and latency per question (one question at a
time, median). Then the paired comparison of hybrid against BM25, as
``retrievalkit compare`` prints it. Not part of ``nox -s bench``: it embeds a
5,183-document corpus and builds three vector indices, once, for the docs.

    python benchmarks/scifact_dense.py [--url http://127.0.0.1:9200] [--data ../shared/data/scifact]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
#: (label, --hnsw-m, --hnsw-ef-construction)
GRAPHS = (("hnsw m=16 ef=100", 16, 100), ("hnsw m=4 ef=8", 4, 8))
SWEEP = (10, 20, 50, 100, 200)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--url", default=os.environ.get("RETRIEVALKIT_ES_URL", "http://127.0.0.1:9200")
    )
    parser.add_argument("--data", type=Path, default=_scifact(), help="a BEIR SciFact folder")
    parser.add_argument("--keep", action="store_true", help="keep the indices afterwards")
    args = parser.parse_args()

    from elasticsearch import Elasticsearch
    from retrievalkit_elasticsearch.vectors import create_elasticsearch_knn

    from retrievalkit.embedders import create_embedder
    from retrievalkit.formats.golden_sets import load_set_file
    from retrievalkit.pipeline.engine.evaluator import evaluate_questions
    from retrievalkit.plugins.resolution import ResolvedRetriever
    from retrievalkit.retrievers.bm25 import BM25Retriever
    from retrievalkit.retrievers.dense import DenseRetriever
    from retrievalkit.retrievers.hybrid import build_hybrid

    corpus = args.data / "corpus.jsonl"
    golden = load_set_file(args.data)
    questions = golden.questions
    work = Path(tempfile.mkdtemp(prefix="rk-scifact-"))
    cache = work / "embeddings"
    print(f"SciFact: {len(questions)} test questions, corpus {corpus}")

    embedder = create_embedder("wordllama")
    _embedding_speed(corpus, embedder, cache)

    es = Elasticsearch(args.url, request_timeout=300)
    prefix = f"rk-scifact-{uuid.uuid4().hex[:6]}"
    indices = {"flat": f"{prefix}-flat"}
    for number, _ in enumerate(GRAPHS):
        indices[f"hnsw{number}"] = f"{prefix}-hnsw{number}"
    try:
        _build_indices(es, args.url, corpus, cache, indices)

        bm25 = BM25Retriever(corpus)
        exact = DenseRetriever(corpus, embedder, cache_dir=cache)
        hybrid = build_hybrid(
            ResolvedRetriever("bm25", "bm25", {}, bm25),
            ResolvedRetriever("dense", "dense", {}, exact),
            depth=100,
        )
        systems: dict[str, Any] = {
            "BM25 (embedded, bm25s)": bm25,
            "dense, exact (embedded)": exact,
            "dense, exact (Elasticsearch flat)": create_elasticsearch_knn(
                url=args.url, index=indices["flat"]
            ),
        }
        for number, (label, _, _) in enumerate(GRAPHS):
            systems[f"dense, {label}, num_candidates=100"] = create_elasticsearch_knn(
                url=args.url, index=indices[f"hnsw{number}"], num_candidates=100
            )
        systems["hybrid, RRF of BM25 and exact dense"] = hybrid

        exact_top10 = evaluate_questions(exact, questions, depth=10, overfetch=1)
        _system_table(systems, questions, exact_top10)
        _ann_sweep(args.url, indices, questions, exact_top10)

        _compare_and_fidelity(work, args.data, args.url, corpus, cache, indices)
    finally:
        if not args.keep:
            for name in indices.values():
                es.options(ignore_status=404).indices.delete(index=name)
    return 0


def _embedding_speed(corpus: Path, embedder: Any, cache: Path) -> None:
    """Embed the corpus into the cache, timed, then again without it: bit-identical?"""
    from retrievalkit.retrievers.dense import embed_corpus

    began = time.perf_counter()
    embedded = embed_corpus(corpus, embedder, cache_dir=cache, progress=False)
    seconds = time.perf_counter() - began
    first = hashlib.sha256(embedded.matrix.tobytes()).hexdigest()
    again = embed_corpus(corpus, embedder, cache_dir=None, progress=False)
    same = hashlib.sha256(again.matrix.tobytes()).hexdigest() == first
    print(
        f"embedding {len(embedded.documents)} documents ({embedder.model_id}): {seconds:.1f} s "
        f"({len(embedded.documents) / seconds:.0f} documents/s); rerun bit-identical: {same}"
    )


def _build_indices(es: Any, url: str, corpus: Path, cache: Path, indices: dict[str, str]) -> None:
    """The flat index and each HNSW graph of GRAPHS, built with `retrievalkit es index`."""
    for key, name in indices.items():
        extra = ["--vector-index", "flat"]
        if key.startswith("hnsw"):
            _, m, ef = GRAPHS[int(key[4:])]
            extra = ["--hnsw-m", str(m), "--hnsw-ef-construction", str(ef)]
        began = time.perf_counter()
        _cli(
            "es", "index", "--corpus", str(corpus), "--index", name, "--url", url,
            "--embedder", "wordllama", "--embedding-cache", str(cache), "--quiet", *extra,
        )  # fmt: skip
        es.indices.forcemerge(index=name, max_num_segments=1)
        print(f"indexed {name} ({' '.join(extra)}) in {time.perf_counter() - began:.1f} s")


def _system_table(systems: dict[str, Any], questions: Any, exact_top10: Any) -> None:
    """nDCG@10, recall@100, ANN recall@10 and latency of each system, as a Markdown table."""
    from retrievalkit.metrics.scoring import ScoringOptions, score_run
    from retrievalkit.pipeline.engine.evaluator import evaluate_questions
    from retrievalkit.pipeline.gating.fidelity import measure_fidelity

    scoring = ScoringOptions(ks=(10, 100), resamples=1000)
    rows = []
    for name, retriever in systems.items():
        run = evaluate_questions(retriever, questions, depth=100, overfetch=1)
        scores = score_run(questions, run, scoring)
        top10 = evaluate_questions(retriever, questions, depth=10, overfetch=1)
        ann = measure_fidelity(questions, top10, exact_top10, names=(name, "exact"), k=10)
        latency = _latency(retriever, [q.question for q in questions])
        ndcg, recall = scores.metrics["ndcg@10"], scores.metrics["recall@100"]
        rows.append(
            f"| {name} | {_with_interval(ndcg)} | {_with_interval(recall)} "
            f"| {ann.overall['overlap@10'].mean:.3f} | {latency:.1f} |"
        )
        print(rows[-1], flush=True)
    print()
    print("| system | nDCG@10 [95% CI] | recall@100 [95% CI] | ANN recall@10 | ms/question |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))


def _ann_sweep(url: str, indices: dict[str, str], questions: Any, exact_top10: Any) -> None:
    """ANN recall@10 of each HNSW graph at each num_candidates of SWEEP."""
    from retrievalkit_elasticsearch.vectors import create_elasticsearch_knn

    from retrievalkit.pipeline.engine.evaluator import evaluate_questions
    from retrievalkit.pipeline.gating.fidelity import measure_fidelity

    print("\nANN recall@10 against exact search, by num_candidates (k = 10):\n")
    print("| graph | " + " | ".join(f"{n}" for n in SWEEP) + " |")
    print("|---|" + "---|" * len(SWEEP))
    for number, (label, _, _) in enumerate(GRAPHS):
        cells = []
        for candidates in SWEEP:
            knn = create_elasticsearch_knn(
                url=url, index=indices[f"hnsw{number}"], num_candidates=candidates
            )
            top10 = evaluate_questions(knn, questions, depth=10, overfetch=1)
            ann = measure_fidelity(questions, top10, exact_top10, names=("hnsw", "exact"), k=10)
            cells.append(f"{ann.overall['overlap@10'].mean:.3f}")
        print(f"| {label} | " + " | ".join(cells) + " |", flush=True)


def _compare_and_fidelity(
    work: Path, data: Path, url: str, corpus: Path, cache: Path, indices: dict[str, str]
) -> None:
    """`retrievalkit compare` of hybrid against BM25 and `fidelity` of HNSW against exact."""
    config = work / "retrievalkit.toml"
    config.write_text(
        f'[retrievers.bm25]\nplugin = "bm25"\ncorpus = "{corpus}"\n\n'
        f'[retrievers.hybrid]\nplugin = "hybrid"\ncorpus = "{corpus}"\n'
        f'cache_dir = "{cache}"\n\n'
        f'[retrievers.hnsw]\nplugin = "elasticsearch-knn"\nurl = "{url}"\n'
        f'index = "{indices["hnsw0"]}"\nnum_candidates = 100\n\n'
        f'[retrievers.exact]\nplugin = "dense"\ncorpus = "{corpus}"\ncache_dir = "{cache}"\n',
        encoding="utf-8",
    )
    print("\nretrievalkit compare, hybrid against BM25:\n")
    print(
        _cli(
            "compare", "--set", str(data), "--retriever", "bm25", "--retriever",
            "hybrid", "--k", "1,10,100", "--format", "markdown", "--no-save", cwd=work,
        )
    )  # fmt: skip
    print("retrievalkit fidelity, HNSW (m=16, ef=100, num_candidates=100) against exact:\n")
    print(
        _cli(
            "fidelity", "--set", str(data), "--retriever", "hnsw", "--reference",
            "exact", "--k", "10", cwd=work,
        )
    )  # fmt: skip


def _with_interval(value: Any) -> str:
    low, high = value.ci
    return f"{value.mean:.3f} [{low:.3f}, {high:.3f}]"


def _scifact() -> Path:
    """../shared/data/scifact beside the repository (or beside its worktree folder)."""
    for root in (REPO.parent, REPO.parent.parent):
        if (root / "shared" / "data" / "scifact").is_dir():
            return root / "shared" / "data" / "scifact"
    return REPO.parent / "shared" / "data" / "scifact"


def _latency(retriever: Any, texts: list[str]) -> float:
    """Median milliseconds of one retrieve(question, 100), questions asked one at a time."""
    times = []
    for text in texts:
        began = time.perf_counter()
        retriever.retrieve(text, 100)
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def _cli(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "retrievalkit", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "160"},
    )
    if done.returncode != 0:
        raise RuntimeError(f"retrievalkit {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout


if __name__ == "__main__":
    sys.exit(main())
