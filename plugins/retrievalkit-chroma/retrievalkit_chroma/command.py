"""``retrievalkit chroma``: Chroma tools contributed to the retrievalkit command line.

``retrievalkit chroma index`` embeds a BEIR-style corpus with an embedder plugin into a
new collection of a Chroma database on disk (see `retrievalkit_chroma.collection`);
``retrievalkit chroma drop`` deletes one it built. retrievalkit imports this module only
when the command is run.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from retrievalkit.plugin_api import EXIT_OK, InputError

HELP = "Chroma tools (retrievalkit-chroma): embed a corpus into a Chroma collection, or drop one."


def configure(parser: argparse.ArgumentParser) -> None:
    from retrievalkit_chroma.collection import (
        DEFAULT_CACHE_DIR,
        DEFAULT_CONSTRUCTION_EF,
        DEFAULT_M,
        DEFAULT_SEARCH_EF,
        SPACE_NAMES,
    )

    commands = parser.add_subparsers(
        dest="chroma_command", metavar="COMMAND", parser_class=type(parser)
    )
    index = commands.add_parser(
        "index",
        help="embed a BEIR corpus.jsonl into a new Chroma collection",
        description="Embed every document of a BEIR corpus.jsonl (_id, title, text) with an "
        "embedder plugin (through the dense retriever's embedding cache) and add it to a new "
        "collection of the Chroma database at --path, one record per document, with Chroma's "
        "HNSW settings. The collection's metadata records the embedding model. Chroma's own "
        "embedding function is never used. Refuses an existing collection unless --recreate.",
    )
    index.add_argument("--corpus", required=True, metavar="PATH", help="corpus.jsonl or its folder")
    index.add_argument("--collection", required=True, metavar="NAME", help="the collection")
    index.add_argument("--path", required=True, metavar="FOLDER", help="the Chroma database")
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
        "--space",
        choices=SPACE_NAMES,
        help="hnsw:space (default: the embedder's similarity: cosine, ip or l2)",
    )
    index.add_argument("--m", type=int, default=DEFAULT_M, help=f"hnsw:M ({DEFAULT_M})")
    index.add_argument(
        "--construction-ef",
        type=int,
        default=DEFAULT_CONSTRUCTION_EF,
        help=f"hnsw:construction_ef ({DEFAULT_CONSTRUCTION_EF})",
    )
    index.add_argument(
        "--search-ef",
        type=int,
        default=DEFAULT_SEARCH_EF,
        help=f"hnsw:search_ef, the candidate list of every search ({DEFAULT_SEARCH_EF})",
    )
    index.add_argument(
        "--recreate", action="store_true", help="replace the collection if chroma index built it"
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
        help="delete a collection that 'chroma index' (or an ephemeral retriever) built",
        description="Delete a collection built by 'retrievalkit chroma index' or left by an "
        "ephemeral chroma retriever whose process was killed. A collection retrievalkit did "
        "not build (its metadata does not record an embedding model) is refused.",
    )
    drop.add_argument("--collection", required=True, metavar="NAME", help="the collection")
    drop.add_argument("--path", required=True, metavar="FOLDER", help="the Chroma database")


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
    if args.chroma_command == "index":
        return run_index(args)
    if args.chroma_command == "drop":
        return run_drop(args)
    raise InputError("missing COMMAND", hint="see 'retrievalkit chroma --help'")


def run_index(args: argparse.Namespace) -> int:
    from retrievalkit.plugin_api import create_embedder
    from retrievalkit_chroma.collection import (
        EF_RANGE,
        M_RANGE,
        build_collection,
        check_collection_name,
        check_range,
        open_client,
    )

    check_collection_name(args.collection, "--collection")
    check_range(args.m, M_RANGE, "--m")
    check_range(args.construction_ef, EF_RANGE, "--construction-ef")
    check_range(args.search_ef, EF_RANGE, "--search-ef")
    if args.batch_size < 1:
        raise InputError(f"must be >= 1, got {args.batch_size}", field="--batch-size")
    embedder = create_embedder(
        args.embedder, embedder_options(args.embedder_option), field="--embedder"
    )
    client = open_client(args.path, field="--path")
    where = str(Path(args.path).resolve())
    report = build_collection(
        client,
        args.collection,
        Path(args.corpus),
        embedder,
        where=where,
        space=args.space,
        m=args.m,
        construction_ef=args.construction_ef,
        search_ef=args.search_ef,
        recreate=args.recreate,
        batch_size=args.batch_size,
        cache_dir=args.cache_dir,
        progress=sys.stderr.isatty() and not args.quiet and not os.environ.get("CI"),
    )
    built = report.collection
    sys.stdout.write(
        f"indexed {built.documents} documents into {built.collection} in {where}: "
        f"{built.model_id} ({built.dimensions} dimensions), hnsw:space={built.space} "
        f"hnsw:M={built.m} hnsw:construction_ef={built.construction_ef} "
        f"hnsw:search_ef={built.search_ef}; embedding {report.embed_seconds:.1f} s, "
        f"loading {report.load_seconds:.1f} s\n"
    )
    return int(EXIT_OK)


def run_drop(args: argparse.Namespace) -> int:
    from retrievalkit_chroma.collection import check_collection_name, drop_collection, open_client

    check_collection_name(args.collection, "--collection")
    where = str(Path(args.path).resolve())
    if not Path(args.path).is_dir():
        raise InputError(f"{where} is not a folder", field="--path")
    client = open_client(args.path, field="--path")
    try:
        drop_collection(client, args.collection, where=where)
    except InputError as error:
        raise InputError(error.detail, field="--collection", hint=error.hint) from None
    sys.stdout.write(f"dropped {args.collection} in {where}\n")
    return int(EXIT_OK)
