"""``retrievalkit qdrant``: Qdrant tools contributed to the retrievalkit command line.

``retrievalkit qdrant index`` embeds a BEIR-style corpus with an embedder plugin into a
new collection (see `retrievalkit_qdrant.collection`); ``retrievalkit qdrant drop``
deletes one it built. retrievalkit imports this module only when the command is run.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from retrievalkit.plugin_api import EXIT_OK, InputError

HELP = "Qdrant tools (retrievalkit-qdrant): embed a corpus into a Qdrant collection, or drop one."


def _location_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--path", metavar="FOLDER", help="Qdrant's local mode: the folder that holds collections"
    )
    where.add_argument("--url", help="a Qdrant server, e.g. http://127.0.0.1:6333")
    parser.add_argument(
        "--api-key-env",
        metavar="VARIABLE",
        help="with --url: the environment variable that holds the server's API key",
    )
    parser.add_argument(
        "--timeout", type=int, default=10, metavar="SECONDS", help="per request, with --url (10)"
    )


def configure(parser: argparse.ArgumentParser) -> None:
    from retrievalkit_qdrant.collection import DEFAULT_CACHE_DIR, DEFAULT_EF_CONSTRUCT, DEFAULT_M

    commands = parser.add_subparsers(
        dest="qdrant_command", metavar="COMMAND", parser_class=type(parser)
    )
    index = commands.add_parser(
        "index",
        help="embed a BEIR corpus.jsonl into a new Qdrant collection",
        description="Embed every document of a BEIR corpus.jsonl (_id, title, text) with an "
        "embedder plugin (through the dense retriever's embedding cache) and write it as a new "
        "collection, one point per document, with HNSW parameters m and ef_construct. The "
        "collection's metadata records the embedding model and the index parameters. Refuses "
        "an existing collection unless --recreate is given.",
    )
    index.add_argument("--corpus", required=True, metavar="PATH", help="corpus.jsonl or its folder")
    index.add_argument("--collection", required=True, metavar="NAME", help="the collection")
    _location_arguments(index)
    index.add_argument(
        "--embedder", required=True, help="an embedder plugin (retrievalkit list), e.g. wordllama"
    )
    index.add_argument(
        "--embedder-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option of the embedder (repeatable; numbers and true/false are converted)",
    )
    index.add_argument(
        "--m", type=int, default=DEFAULT_M, help=f"HNSW links per node (default {DEFAULT_M})"
    )
    index.add_argument(
        "--ef-construct",
        type=int,
        default=DEFAULT_EF_CONSTRUCT,
        help=f"HNSW candidate list while building (default {DEFAULT_EF_CONSTRUCT})",
    )
    index.add_argument(
        "--recreate", action="store_true", help="replace the collection if qdrant index built it"
    )
    index.add_argument(
        "--batch-size", type=int, default=256, metavar="N", help="texts per embedder call (256)"
    )
    index.add_argument(
        "--cache-dir",
        default=DEFAULT_CACHE_DIR,
        metavar="FOLDER",
        help=f"the embedding cache, shared with the dense retriever ({DEFAULT_CACHE_DIR}; '' for "
        "none)",
    )
    index.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    drop = commands.add_parser(
        "drop",
        help="delete a collection that 'qdrant index' (or an ephemeral retriever) built",
        description="Delete a collection built by 'retrievalkit qdrant index' or left by an "
        "ephemeral qdrant retriever whose process was killed. A collection retrievalkit did "
        "not build (its metadata does not record an embedding model) is refused.",
    )
    drop.add_argument("--collection", required=True, metavar="NAME", help="the collection")
    _location_arguments(drop)


def _option_value(text: str) -> Any:
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def embedder_options(pairs: list[str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key:
            raise InputError(f"expected KEY=VALUE, got {pair!r}", field="--embedder-option")
        options[key] = _option_value(value)
    return options


def run(args: argparse.Namespace) -> int:
    if args.qdrant_command == "index":
        return run_index(args)
    if args.qdrant_command == "drop":
        return run_drop(args)
    raise InputError("missing COMMAND", hint="see 'retrievalkit qdrant --help'")


def _location(args: argparse.Namespace) -> Any:
    from retrievalkit_qdrant.connection import MEMORY, location_from_options

    if args.path == MEMORY:
        raise InputError(
            "an in-memory Qdrant is gone when the command ends",
            field="--path",
            hint="give a folder, or use an ephemeral retriever (ephemeral = true)",
        )
    return location_from_options(args.path, args.url, args.api_key_env, args.timeout, prefix="--")


def run_index(args: argparse.Namespace) -> int:
    from retrievalkit.plugin_api import RetrievalkitError, create_embedder
    from retrievalkit_qdrant.collection import (
        EF_CONSTRUCT_RANGE,
        M_RANGE,
        build_collection,
        check_collection_name,
        check_range,
    )
    from retrievalkit_qdrant.connection import acquire, server_error

    check_collection_name(args.collection, "--collection")
    check_range(args.m, M_RANGE, "--m")
    check_range(args.ef_construct, EF_CONSTRUCT_RANGE, "--ef-construct")
    if args.batch_size < 1:
        raise InputError(f"must be >= 1, got {args.batch_size}", field="--batch-size")
    location = _location(args)
    embedder = create_embedder(
        args.embedder, embedder_options(args.embedder_option), field="--embedder"
    )
    handle = acquire(location, prefix="--")
    try:
        report = build_collection(
            handle,
            args.collection,
            Path(args.corpus),
            embedder,
            m=args.m,
            ef_construct=args.ef_construct,
            recreate=args.recreate,
            batch_size=args.batch_size,
            cache_dir=args.cache_dir,
            progress=sys.stderr.isatty() and not args.quiet and not os.environ.get("CI"),
        )
    except RetrievalkitError:
        raise
    except Exception as error:
        raise server_error(location, error, f"building {args.collection}") from None
    finally:
        handle.release()
    built = report.collection
    sys.stdout.write(
        f"indexed {built.documents} documents into {built.collection} in {location.where}: "
        f"{built.model_id} ({built.dimensions} dimensions, {built.distance}), HNSW "
        f"m={built.m} ef_construct={built.ef_construct}; embedding "
        f"{report.embed_seconds:.1f} s, loading {report.load_seconds:.1f} s\n"
    )
    return int(EXIT_OK)


def run_drop(args: argparse.Namespace) -> int:
    from retrievalkit.plugin_api import RetrievalkitError
    from retrievalkit_qdrant.collection import check_collection_name, drop_collection
    from retrievalkit_qdrant.connection import acquire, server_error

    check_collection_name(args.collection, "--collection")
    location = _location(args)
    handle = acquire(location, prefix="--")
    try:
        drop_collection(handle.client, args.collection, where=location.where)
    except InputError as error:
        raise InputError(error.detail, field="--collection", hint=error.hint) from None
    except RetrievalkitError:
        raise
    except Exception as error:
        raise server_error(location, error, f"dropping {args.collection}") from None
    finally:
        handle.release()
    sys.stdout.write(f"dropped {args.collection} in {location.where}\n")
    return int(EXIT_OK)
