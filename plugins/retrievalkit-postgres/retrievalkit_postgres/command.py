"""``retrievalkit pg``: PostgreSQL tools contributed to the retrievalkit command line.

``retrievalkit pg index`` embeds a BEIR-style corpus with an embedder plugin and loads
it into a pgvector table with an HNSW index (see `retrievalkit_postgres.vectors`).
retrievalkit imports this module only when the command is run.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from retrievalkit.plugin_api import EXIT_OK, InputError

HELP = (
    "PostgreSQL tools (retrievalkit-postgres): embed a corpus into a pgvector table, or drop one."
)
DEFAULT_URL = "postgresql://retrievalkit@127.0.0.1:5433/retrievalkit"


def configure(parser: argparse.ArgumentParser) -> None:
    from retrievalkit_postgres.vectors import DEFAULT_EF_CONSTRUCTION, DEFAULT_M

    commands = parser.add_subparsers(
        dest="pg_command", metavar="COMMAND", parser_class=type(parser)
    )
    index = commands.add_parser(
        "index",
        help="embed a BEIR corpus.jsonl into a new pgvector table with an HNSW index",
        description="Embed every document of a BEIR corpus.jsonl (_id, title, text) with an "
        "embedder plugin and load it, in one transaction, into a new table (id, title, body, "
        "embedding vector(D)) with an HNSW index. The table's comment records the embedding "
        "model and the index parameters. Refuses an existing table unless --recreate is given.",
    )
    index.add_argument("--corpus", required=True, metavar="PATH", help="corpus.jsonl or its folder")
    index.add_argument("--table", required=True, metavar="NAME", help="the table to create")
    index.add_argument(
        "--url",
        default=os.environ.get("RETRIEVALKIT_PG_URL") or DEFAULT_URL,
        help=f"the database (default: $RETRIEVALKIT_PG_URL, else {DEFAULT_URL}); the password "
        "comes from PGPASSWORD, ~/.pgpass or PGSERVICE",
    )
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
        "--ef-construction",
        type=int,
        default=DEFAULT_EF_CONSTRUCTION,
        help=f"HNSW candidate list while building (default {DEFAULT_EF_CONSTRUCTION})",
    )
    index.add_argument("--recreate", action="store_true", help="replace the table if it exists")
    index.add_argument(
        "--batch-size", type=int, default=256, metavar="N", help="texts per embedder call (256)"
    )
    index.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    drop = commands.add_parser(
        "drop",
        help="drop a pgvector table that 'pg index' (or an ephemeral retriever) built",
        description="Drop a table built by 'retrievalkit pg index' or left by an ephemeral "
        "pgvector retriever whose process was killed. A table retrievalkit did not build (its "
        "comment does not record an embedding model) is refused.",
    )
    drop.add_argument("--table", required=True, metavar="NAME", help="the table to drop")
    drop.add_argument(
        "--url",
        default=os.environ.get("RETRIEVALKIT_PG_URL") or DEFAULT_URL,
        help=f"the database (default: $RETRIEVALKIT_PG_URL, else {DEFAULT_URL})",
    )


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
    if args.pg_command == "index":
        return run_index(args)
    if args.pg_command == "drop":
        return run_drop(args)
    raise InputError("missing COMMAND", hint="see 'retrievalkit pg --help'")


def run_index(args: argparse.Namespace) -> int:
    from rich.console import Console

    from retrievalkit.plugin_api import create_embedder
    from retrievalkit_postgres.connection import target_from_url
    from retrievalkit_postgres.vectors import (
        EF_CONSTRUCTION_RANGE,
        M_RANGE,
        build_table,
        check_range,
        check_table_name,
    )

    check_table_name(args.table, "--table")
    check_range(args.m, M_RANGE, "--m")
    check_range(args.ef_construction, EF_CONSTRUCTION_RANGE, "--ef-construction")
    if args.batch_size < 1:
        raise InputError(f"must be >= 1, got {args.batch_size}", field="--batch-size")
    if args.ef_construction < 2 * args.m:
        raise InputError(
            f"pgvector needs ef_construction >= 2 * m ({2 * args.m}), got {args.ef_construction}",
            field="--ef-construction",
        )
    corpus = Path(args.corpus)
    target, _ = target_from_url(args.url, field="--url")
    embedder = create_embedder(
        args.embedder, embedder_options(args.embedder_option), field="--embedder"
    )
    connection = target.connect(autocommit=True)
    status = Console(stderr=True, no_color=bool(os.environ.get("NO_COLOR")), highlight=False)
    try:
        # The stream decides, not FORCE_COLOR (which makes rich call any stream a terminal):
        # colours may reach a CI log, a redrawn bar never does.
        if _stderr_is_a_terminal() and not args.quiet:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            with Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                console=status,
                transient=True,
            ) as bar:
                task = bar.add_task(f"embedding with {embedder.model_id}", total=None)
                report = build_table(
                    connection,
                    args.table,
                    corpus,
                    embedder,
                    m=args.m,
                    ef_construction=args.ef_construction,
                    recreate=args.recreate,
                    batch_size=args.batch_size,
                    advance=lambda done: bar.advance(task, done),
                )
        else:
            report = build_table(
                connection,
                args.table,
                corpus,
                embedder,
                m=args.m,
                ef_construction=args.ef_construction,
                recreate=args.recreate,
                batch_size=args.batch_size,
            )
    except InputError:
        raise
    except Exception as error:
        import psycopg

        from retrievalkit.plugin_api import EvaluationError
        from retrievalkit_postgres.connection import server_reason

        if isinstance(error, psycopg.Error):
            raise EvaluationError(
                f"PostgreSQL at {target.where} could not build {args.table}: "
                f"{server_reason(error)}; nothing was created"
            ) from None
        raise
    finally:
        connection.close()
    table = report.table
    sys.stdout.write(
        f"indexed {table.documents} documents into {table.table} on {target.where}: "
        f"{table.model_id} ({table.dimensions} dimensions, {table.similarity}), HNSW "
        f"m={table.m} ef_construction={table.ef_construction}; embedding "
        f"{report.embed_seconds:.1f} s, loading {report.load_seconds:.1f} s, "
        f"index {report.index_seconds:.1f} s\n"
    )
    return EXIT_OK


def run_drop(args: argparse.Namespace) -> int:
    import psycopg

    from retrievalkit.plugin_api import EvaluationError
    from retrievalkit_postgres.connection import server_reason, target_from_url
    from retrievalkit_postgres.ephemeral import drop_table
    from retrievalkit_postgres.vectors import check_table_name

    check_table_name(args.table, "--table")
    target, _ = target_from_url(args.url, field="--url")
    connection = target.connect()
    try:
        drop_table(connection, args.table, where=target.where)
    except InputError as error:
        raise InputError(error.detail, field="--table", hint=error.hint) from None
    except psycopg.Error as error:
        raise EvaluationError(
            f"PostgreSQL at {target.where} could not drop {args.table}: {server_reason(error)}"
        ) from None
    finally:
        connection.close()
    sys.stdout.write(f"dropped {args.table} on {target.where}\n")
    return EXIT_OK


def _stderr_is_a_terminal() -> bool:
    """Whether standard error is a terminal someone watches (a progress bar may be drawn)."""
    try:
        return os.isatty(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):
        return False
