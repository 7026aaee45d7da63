"""``retrievalkit serve``: the store as a local web application (history, compare, judging)."""

from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from retrievalkit.cli.commands import SUMMARIES
from retrievalkit.cli.commands.options import add_common, load_config, open_configured_store
from retrievalkit.errors import EXIT_OK, EvaluationError, InputError

if TYPE_CHECKING:
    from retrievalkit.serve.judging_queue import PoolQueue
    from retrievalkit.serve.views import Site

NAME, HELP = SUMMARIES["serve"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
DEFAULT_LABELS = ".retrievalkit/human-labels.tsv"


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number from 0 to 65535, got {text!r}")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help="address to listen on (default 127.0.0.1: this machine only); any other needs a "
        "token in RETRIEVALKIT_SERVE_TOKEN",
    )
    parser.add_argument(
        "--port",
        type=_port,
        default=DEFAULT_PORT,
        help=f"port (default {DEFAULT_PORT}; 0: a free one, printed at start)",
    )
    parser.add_argument(
        "--labels",
        default=DEFAULT_LABELS,
        metavar="FILE",
        help="the labels file the judging queue appends human grades to, in the format "
        f"eval --extra-labels reads (default {DEFAULT_LABELS})",
    )
    parser.add_argument(
        "--judge-labels",
        action="append",
        default=[],
        metavar="FILE",
        help="a model judge's labels (from retrievalkit judge), to show agreement with "
        "(repeatable)",
    )
    parser.add_argument(
        "--queue",
        metavar="POOL_FILE",
        help="a pool file (from retrievalkit pool --output) for people to grade at /judge, in "
        "its order, into --labels",
    )
    parser.add_argument(
        "--set",
        metavar="NAME_OR_FILE",
        help="the set the --queue pool's questions must be in (default: the questions of the "
        "runs each pool line names, in the store)",
    )
    parser.add_argument(
        "--corpus",
        metavar="PATH",
        help="where the documents' text is (BEIR corpus.jsonl or a folder); default: the "
        "corpus the retriever's configuration names",
    )
    add_common(parser, fmt=False)


def run(args: argparse.Namespace) -> int:
    from retrievalkit.serve.app import TOKEN_VARIABLE, is_loopback

    token = os.environ.get(TOKEN_VARIABLE, "") or None
    if not is_loopback(args.host) and token is None:
        raise InputError(
            f"refusing to listen on {args.host} without a token: anyone who can reach it could "
            "read the store and write grades",
            field="--host",
            hint=f"set {TOKEN_VARIABLE} to a long random secret, or keep the default 127.0.0.1",
        )
    if token is not None and len(token) < 16:
        raise InputError(
            f"{TOKEN_VARIABLE} is too short to guess-proof the server (under 16 characters)",
            hint="e.g. export RETRIEVALKIT_SERVE_TOKEN=$(python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))')",
        )
    try:
        import uvicorn
    except ImportError:
        raise InputError(
            "serve needs its web stack, which is not installed",
            hint="pip install 'retrievalkit-eval[serve]'",
        ) from None
    from retrievalkit.serve.app import create_app
    from retrievalkit.serve.judging_queue import LabelsFile
    from retrievalkit.serve.views import Site
    from retrievalkit.stores import store_read_only

    config = load_config(args)
    store = open_configured_store(args, config)
    for path in args.judge_labels:
        if not Path(path).is_file():
            raise InputError("no such labels file", source=path, field="--judge-labels")
    from retrievalkit.cli.commands.collisions import check_store_is_no_input
    from retrievalkit.formats.labels import read_labels

    # The labels file is appended to: never the store, nor a file beside it.
    named = [("--labels", args.labels), *(("--judge-labels", path) for path in args.judge_labels)]
    check_store_is_no_input(store, named)
    if args.queue:
        from retrievalkit.cli.commands.collisions import check_run_outputs

        queue = [("--queue", args.queue)]
        check_run_outputs([("--labels", Path(args.labels))], None, queue)
        check_store_is_no_input(store, queue)
    for _, path in named:
        if Path(path).exists():
            read_labels(Path(path))  # refused now (file, line), not on the first page
    labels = LabelsFile(Path(args.labels), [Path(path) for path in args.judge_labels])
    corpus = Path(args.corpus) if args.corpus else None
    if corpus is not None and not corpus.exists():
        raise InputError("no such corpus", source=args.corpus, field="--corpus")
    if args.set and not args.queue:
        raise InputError(
            "--set names the set of a pool, and no pool is served",
            field="--set",
            hint="give the pool file with --queue, or leave --set out",
        )
    site = Site(
        store=store,
        config=config,
        labels=labels,
        corpus=corpus,
        read_only=store_read_only(store),
    )
    if args.queue:
        site.pool = _pool(args, site)
    listening = _listen(args.host, args.port)
    port = listening.getsockname()[1]
    app = create_app(site, host=args.host, port=port, token=token)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=args.host,
            port=args.port,
            access_log=False,
            log_level="warning",
            server_header=False,
            lifespan="off",
        )
    )
    shown = f"[{args.host}]" if ":" in args.host else args.host
    _access_log()
    print(
        f"retrievalkit serve: {store.url} on http://{shown}:{port}/"
        + (f" (read-only store: {site.read_only})" if site.read_only else "")
        + (f"; grading the pool {args.queue} ({len(site.pool)} pairs)" if site.pool else "")
        + f"; human grades go to {labels.path}",
        flush=True,
    )
    import threading

    threading.Thread(target=app.state.warm_up, name="warm-up", daemon=True).start()
    server.run(sockets=[listening])
    return EXIT_OK


def _pool(args: argparse.Namespace, site: Site) -> PoolQueue:
    """The pool file of ``--queue``, each question checked against ``--set`` or else the
    store's runs the pool names (an `InputError` naming the file, line and field)."""
    from retrievalkit.serve.judging_queue import open_pool
    from retrievalkit.serve.views import NotFound

    set_questions = None
    set_name = ""
    if args.set:
        from retrievalkit.plugins.resolution import resolve_set

        golden = resolve_set(args.set, site.config)
        set_questions = {question.id for question in golden.questions}
        set_name = golden.name

    asked: dict[str, set[str] | None] = {}  # by run id: a pool names few runs, many times

    def run_questions(run_id: str) -> set[str] | None:
        if run_id not in asked:
            try:
                asked[run_id] = set(site.record(run_id).outcomes.question_ids)
            except NotFound:
                asked[run_id] = None
        return asked[run_id]

    return open_pool(
        Path(args.queue),
        set_questions=set_questions,
        set_name=set_name,
        run_questions=run_questions,
        store_url=site.store.url,
    )


def _listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so that a port in use is one line and exit code 3."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listening = socket.socket(family, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Each connection sends a page at once (Linux passes this on to accepted sockets):
    # with Nagle's delay, a response written in two parts waited 40 ms for the browser's
    # delayed acknowledgement.
    listening.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        listening.bind((host, port))
        listening.listen(128)
    except OSError as error:
        listening.close()
        raise EvaluationError(
            f"cannot listen on {host}:{port}: {error.strerror} (is another server on that port? "
            "choose another with --port)"
        ) from None
    listening.set_inheritable(True)
    return listening


def _access_log() -> None:
    """One line on stderr per request: method, path (never the query), status and time."""
    import logging

    logger = logging.getLogger("retrievalkit.serve")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("retrievalkit serve: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
