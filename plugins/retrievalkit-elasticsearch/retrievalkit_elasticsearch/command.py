"""``retrievalkit es``: Elasticsearch tools contributed to the retrievalkit command line.

``retrievalkit es index`` bulk-loads a BEIR-style corpus into an index set up for BM25
evaluation (see `retrievalkit_elasticsearch.indexing`). retrievalkit imports this
module only when the command is run.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from retrievalkit.plugin_api import EXIT_OK, EvaluationError, InputError

HELP = (
    "Elasticsearch tools (retrievalkit-elasticsearch): index a corpus for BM25 (and, with "
    "--embedder, kNN) evaluation, or drop an index it built."
)
DEFAULT_URL = "http://127.0.0.1:9200"


def configure(parser: argparse.ArgumentParser) -> None:
    from retrievalkit_elasticsearch.indexing import (
        ANALYZERS,
        DEFAULT_B,
        DEFAULT_BATCH_SIZE,
        DEFAULT_K1,
    )

    commands = parser.add_subparsers(
        dest="es_command", metavar="COMMAND", parser_class=type(parser)
    )
    index = commands.add_parser(
        "index",
        help="bulk-load a BEIR corpus.jsonl into a new index with an explicit BM25 similarity",
        description="Bulk-load a BEIR corpus.jsonl (_id, title, text) into a new index: title "
        "and text fields with the chosen analyzer and an explicit BM25 similarity, one shard "
        "and no replicas unless --shards / --replicas say otherwise. Refuses an existing index "
        "unless --recreate is given.",
    )
    index.add_argument("--corpus", required=True, metavar="PATH", help="corpus.jsonl or its folder")
    index.add_argument("--index", required=True, metavar="NAME", help="the index to create")
    index.add_argument(
        "--url",
        default=os.environ.get("RETRIEVALKIT_ES_URL") or DEFAULT_URL,
        help=f"the cluster (default: $RETRIEVALKIT_ES_URL, else {DEFAULT_URL})",
    )
    index.add_argument(
        "--k1", type=_non_negative, default=DEFAULT_K1, help=f"BM25 k1 (default {DEFAULT_K1})"
    )
    index.add_argument(
        "--b", type=_fraction, default=DEFAULT_B, help=f"BM25 b, 0 to 1 (default {DEFAULT_B})"
    )
    index.add_argument(
        "--analyzer",
        choices=ANALYZERS,
        default="standard",
        help="analyzer of title and text: standard (lowercased words) or english (adds "
        "stopwords and Porter stemming; needs the analysis-common module) (default standard)",
    )
    index.add_argument(
        "--recreate", action="store_true", help="delete the index first if it exists"
    )
    index.add_argument(
        "--batch-size",
        type=_positive,
        default=DEFAULT_BATCH_SIZE,
        metavar="N",
        help=f"documents per bulk request (default {DEFAULT_BATCH_SIZE})",
    )
    index.add_argument(
        "--shards",
        type=_positive,
        default=1,
        metavar="N",
        help="primary shards (default 1: BM25 statistics over the whole corpus, as in BEIR; "
        'with more, search with search_type = "dfs_query_then_fetch" for the same scores)',
    )
    index.add_argument(
        "--replicas",
        type=_non_negative_whole,
        default=0,
        metavar="N",
        help="replicas of each shard, kept on other nodes (default 0); with replicas the "
        "command waits until the index is green",
    )
    index.add_argument(
        "--embedder",
        metavar="NAME",
        help="also embed every document (title and text) with this retrievalkit.embedders "
        "plugin (e.g. wordllama) into a dense_vector field, for elasticsearch-knn",
    )
    index.add_argument(
        "--embedder-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option of the embedder (VALUE is read as JSON when it parses, else as text); "
        "repeatable",
    )
    index.add_argument(
        "--vector-index",
        choices=("hnsw", "flat"),
        default="hnsw",
        help="how the vectors are indexed: hnsw (approximate graph) or flat (exact, every "
        "vector compared) (default hnsw)",
    )
    index.add_argument(
        "--hnsw-m",
        type=_positive,
        default=16,
        metavar="N",
        help="HNSW: neighbours per node in the graph (default 16)",
    )
    index.add_argument(
        "--hnsw-ef-construction",
        type=_positive,
        default=100,
        metavar="N",
        help="HNSW: candidates considered while building the graph (default 100)",
    )
    index.add_argument(
        "--embedding-cache",
        default=".retrievalkit/embeddings",
        metavar="DIR",
        help="where document embeddings are cached, shared with the dense retriever "
        "(default .retrievalkit/embeddings; '' for none)",
    )
    index.add_argument("--timeout", type=float, default=60.0, help="seconds per request (60)")
    index.add_argument("--api-key-env", metavar="VAR", help="environment variable with an API key")
    index.add_argument("--username", help="user for basic authentication")
    index.add_argument(
        "--password-env", metavar="VAR", help="environment variable with the user's password"
    )
    index.add_argument("--ca-certs", metavar="FILE", help="CA certificate file for https")
    index.add_argument(
        "--no-verify-certs", action="store_true", help="do not verify TLS certificates (tests only)"
    )
    index.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    index.add_argument("--verbose", "-v", action="store_true", help="log progress to stderr")
    drop = commands.add_parser(
        "drop",
        help="delete an index that 'es index' (or an ephemeral retriever) built",
        description="Delete one index built by 'retrievalkit es index' or left by an ephemeral "
        "Elasticsearch retriever whose process was killed. Patterns, lists and aliases are "
        "refused, and so is an index whose _meta does not say retrievalkit built it.",
    )
    drop.add_argument("--index", required=True, metavar="NAME", help="the index to delete")
    drop.add_argument(
        "--url",
        default=os.environ.get("RETRIEVALKIT_ES_URL") or DEFAULT_URL,
        help=f"the cluster (default: $RETRIEVALKIT_ES_URL, else {DEFAULT_URL})",
    )
    drop.add_argument("--timeout", type=float, default=60.0, help="seconds per request (60)")
    drop.add_argument("--api-key-env", metavar="VAR", help="environment variable with an API key")
    drop.add_argument("--username", help="user for basic authentication")
    drop.add_argument(
        "--password-env", metavar="VAR", help="environment variable with the user's password"
    )
    drop.add_argument("--ca-certs", metavar="FILE", help="CA certificate file for https")
    drop.add_argument(
        "--no-verify-certs", action="store_true", help="do not verify TLS certificates (tests only)"
    )


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def _non_negative(text: str) -> float:
    value = _number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _fraction(text: str) -> float:
    value = _number(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def _non_negative_whole(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _embedder_options(pairs: list[str]) -> dict[str, Any]:
    """``--embedder-option KEY=VALUE`` pairs as keyword options (JSON values where they parse)."""
    import json

    options: dict[str, Any] = {}
    for pair in pairs:
        key, found, text = pair.partition("=")
        if not found or not key.strip():
            raise InputError(
                f"expected KEY=VALUE, got {pair!r}",
                field="--embedder-option",
                hint="e.g. --embedder-option dimensions=128",
            )
        try:
            options[key.strip()] = json.loads(text)
        except json.JSONDecodeError:
            options[key.strip()] = text
    return options


def _embed(args: argparse.Namespace, corpus: Path) -> tuple[Any, Any]:
    """The vector setup and the corpus's vectors (from the shared cache when there)."""
    from retrievalkit.plugin_api import create_embedder, embed_corpus
    from retrievalkit_elasticsearch.vectors import vector_index_for

    options = _embedder_options(args.embedder_option)
    embedder = create_embedder(args.embedder, options, field="--embedder")
    vectors = vector_index_for(
        embedder,
        name=args.embedder,
        options=options,
        index_type=args.vector_index,
        m=args.hnsw_m,
        ef_construction=args.hnsw_ef_construction,
    )
    embedded = embed_corpus(
        corpus,
        embedder,
        cache_dir=args.embedding_cache or None,
        progress=None if not args.quiet else False,
        label=f"es index {args.index}",
    )
    return vectors, embedded.matrix


def _wait_for_copies(client: Any, target: Any, index: str, replicas: int, timeout: float) -> str:
    """The index's health once every copy is placed (green), or why that cannot happen."""
    from retrievalkit_elasticsearch.connection import client_errors, explain

    try:
        nodes = int(client.cluster.health()["number_of_data_nodes"])
        if replicas >= nodes:
            # A replica never shares a node with its primary: some copies stay unassigned.
            return f"yellow ({replicas} replica(s) need {replicas + 1} data nodes; {nodes} here)"
        health = client.options(ignore_status=408).cluster.health(
            index=index, wait_for_status="green", timeout=f"{max(int(timeout), 1)}s"
        )
    except client_errors() as error:
        raise explain(error, target, action=f"read the health of '{index}'", index=index) from None
    status = str(health.get("status"))
    if status != "green":
        return f"{status} after {timeout:g} s ({health.get('unassigned_shards')} copies unassigned)"
    return status


def run(args: argparse.Namespace) -> int:
    if args.es_command == "index":
        return run_index(args)
    if args.es_command == "drop":
        return run_drop(args)
    raise InputError("missing COMMAND", hint="see 'retrievalkit es --help'")


def _target(args: argparse.Namespace) -> Any:
    from retrievalkit_elasticsearch.connection import target_from_options

    try:
        return target_from_options(
            url=args.url,
            timeout=args.timeout,
            verify_certs=not args.no_verify_certs,
            ca_certs=args.ca_certs,
            api_key_env=args.api_key_env,
            username=args.username,
            password_env=args.password_env,
        )
    except InputError as error:  # name the flag, not the config option
        flag = f"--{(error.field or 'url').replace('_', '-')}"
        raise InputError(error.detail, field=flag, hint=error.hint) from None


def run_drop(args: argparse.Namespace) -> int:
    from retrievalkit_elasticsearch.ephemeral import check_index_name, drop_index

    check_index_name(args.index, "--index")
    target = _target(args)
    client = target.connect()
    try:
        drop_index(client, target, args.index)
    except InputError as error:
        raise InputError(error.detail, field="--index", hint=error.hint) from None
    finally:
        client.close()
    sys.stdout.write(f"dropped '{args.index}' on {target.where}\n")
    return EXIT_OK


def run_index(args: argparse.Namespace) -> int:
    from rich.console import Console

    from retrievalkit_elasticsearch.connection import cluster_name, target_from_options
    from retrievalkit_elasticsearch.indexing import (
        count_documents,
        create_index,
        index_body,
        load_documents,
    )

    try:
        target = target_from_options(
            url=args.url,
            timeout=args.timeout,
            verify_certs=not args.no_verify_certs,
            ca_certs=args.ca_certs,
            api_key_env=args.api_key_env,
            username=args.username,
            password_env=args.password_env,
        )
    except InputError as error:  # name the flag, not the config option
        flag = f"--{(error.field or 'url').replace('_', '-')}"
        raise InputError(error.detail, field=flag, hint=error.hint) from None
    corpus = Path(args.corpus)
    documents = count_documents(corpus)
    if documents == 0:
        raise InputError("the corpus holds no documents", source=str(corpus))
    client = target.connect()
    cluster_name(client, target, action="check cluster health")
    vectors, matrix = _embed(args, corpus) if args.embedder else (None, None)
    body = index_body(
        k1=args.k1,
        b=args.b,
        analyzer=args.analyzer,
        shards=args.shards,
        replicas=args.replicas,
        corpus=str(corpus),
        vectors=vectors,
    )
    create_index(client, target, args.index, body, recreate=args.recreate)

    status = Console(stderr=True, no_color=bool(os.environ.get("NO_COLOR")), highlight=False)
    # The stream decides, not FORCE_COLOR (which makes rich call any stream a terminal):
    # colours may reach a CI log, a redrawn bar never does.
    if _stderr_is_a_terminal() and not args.quiet:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        columns: Any = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("documents"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
        )
        with Progress(*columns, console=status, transient=True) as bar:
            task = bar.add_task(f"indexing into {args.index}", total=documents)
            report = load_documents(
                client,
                target,
                corpus,
                args.index,
                documents=documents,
                batch_size=args.batch_size,
                advance=lambda done: bar.advance(task, done),
                vectors=None if vectors is None else (vectors.field, matrix),
            )
    else:
        report = load_documents(
            client,
            target,
            corpus,
            args.index,
            documents=documents,
            batch_size=args.batch_size,
            vectors=None if vectors is None else (vectors.field, matrix),
        )

    out = sys.stdout
    out.write(
        f"indexed {report.indexed} of {report.documents} documents into '{report.index}' on "
        f"{target.where} in {report.seconds:.1f} s ({args.analyzer} analyzer, BM25 "
        f"k1={args.k1:g} b={args.b:g}); {report.failed} failed; "
        f"{report.searchable} searchable\n"
    )
    if vectors is not None:
        setup = "flat (exact)"
        if vectors.index_type == "hnsw":
            setup = f"hnsw m={vectors.m} ef_construction={vectors.ef_construction}"
        out.write(
            f"vectors: {vectors.model_id} ({vectors.dimensions} dimensions, "
            f"{vectors.similarity}) in '{vectors.field}', {setup}\n"
        )
    if args.shards > 1 or args.replicas:
        out.write(
            f"{args.shards} primary shard(s), {args.replicas} replica(s) each; health "
            f"{_wait_for_copies(client, target, args.index, args.replicas, args.timeout)}\n"
        )
    for doc_id, reason in report.failures:
        out.write(f"  failed: {doc_id}: {reason}\n")
    out.flush()
    if report.failed:
        raise EvaluationError(
            f"{report.failed} of {report.documents} documents could not be indexed into "
            f"'{report.index}' (first: {report.failures[0][0]}: {report.failures[0][1]}); fix "
            "the corpus and re-run with --recreate"
        )
    return EXIT_OK


def _stderr_is_a_terminal() -> bool:
    """Whether standard error is a terminal someone watches (a progress bar may be drawn)."""
    try:
        return os.isatty(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):
        return False
