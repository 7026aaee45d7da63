"""Option types and helpers shared by the built-in commands."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from retrievalkit.formats.config import Config
    from retrievalkit.model.records import ResultRecord
    from retrievalkit.pipeline.gating.thresholds import Thresholds
    from retrievalkit.stores import ResultStore

FORMATS = ("table", "json", "markdown")


def _checked(check: Callable[[], Any]) -> Any:
    """The value of one of `retrievalkit.pipeline.engine.arguments`' checks, its refusal as
    argparse's: the command line and the Python API refuse with the same words."""
    from retrievalkit.errors import InputError

    try:
        return check()
    except InputError as error:
        raise argparse.ArgumentTypeError(error.detail) from None


def _whole_numbers(text: str) -> list[int] | None:
    parts = [part.strip() for part in text.split(",") if part.strip()]
    # ASCII digits only: int() would read '٣' as 3.
    if not all(part.lstrip("-").isascii() and part.lstrip("-").isdigit() for part in parts):
        return None
    try:
        return [int(part) for part in parts]
    except ValueError:
        return None


def k_list(text: str) -> tuple[int, ...]:
    from retrievalkit.pipeline.engine.arguments import check_ks

    values = _whole_numbers(text)
    if values is None:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated whole numbers such as 1,3,5,10, got {text!r}"
        )
    return _checked(lambda: check_ks(values))  # type: ignore[no-any-return]


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def fraction(text: str) -> float:
    from retrievalkit.pipeline.engine.arguments import check_fraction

    value = _number(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {text!r}")
    return _checked(lambda: check_fraction(value, field=""))  # type: ignore[no-any-return]


def latency_increase(text: str) -> tuple[str, float]:
    """``p95=0.2``: a latency statistic and its largest allowed relative increase."""
    from retrievalkit.pipeline.engine.arguments import check_latency_thresholds

    name, equals, given = text.partition("=")
    value = _number(given.strip()) if equals else None
    if value is None:
        raise argparse.ArgumentTypeError(
            f"expected STATISTIC=INCREASE such as p95=0.2 (p50, p95 or p99), got {text!r}"
        )
    checked = _checked(lambda: check_latency_thresholds({name.strip(): value}, field=""))
    return next(iter(checked.items()))  # type: ignore[no-any-return]


def cost_increase(text: str) -> float:
    """``0.1``: the largest allowed relative increase of the cost per question."""
    from retrievalkit.pipeline.engine.arguments import check_cost_thresholds

    value = _number(text)
    if value is None:
        raise argparse.ArgumentTypeError(
            f"expected a relative increase such as 0.1 (10 %), got {text!r}"
        )
    checked = _checked(lambda: check_cost_thresholds({"per_question": value}, field=""))
    return checked["per_question"]  # type: ignore[no-any-return]


def confidence_level(text: str) -> float:
    """A confidence level strictly between 0 and 1, such as 0.95."""
    from retrievalkit.pipeline.engine.arguments import check_confidence

    value = _number(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, e.g. 0.95, got {text!r}")
    return _checked(lambda: check_confidence(value))  # type: ignore[no-any-return]


def positive(text: str) -> int:
    return at_most(sys.maxsize)(text)


def at_most(limit: int) -> Callable[[str], int]:
    """A whole number from 1 to ``limit``, for an option whose huge values are mistakes."""
    from retrievalkit.pipeline.engine.arguments import check_count

    def whole_number(text: str) -> int:
        values = _whole_numbers(text) if "," not in text else None
        if values is None or len(values) != 1:
            raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
        return _checked(lambda: check_count(values[0], field="", maximum=limit))  # type: ignore[no-any-return]

    return whole_number


def warmup_count(text: str) -> int:
    """A whole number from 0 to `MAX_WARMUP` (``--warmup``)."""
    from retrievalkit.pipeline.engine.arguments import check_warmup

    values = _whole_numbers(text) if "," not in text else None
    if values is None or len(values) != 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return _checked(lambda: check_warmup(values[0], field=""))  # type: ignore[no-any-return]


def seconds(text: str) -> float:
    """A positive, finite number of seconds, such as 2 or 0.5."""
    from retrievalkit.pipeline.engine.arguments import check_timeout

    value = _number(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}")
    return _checked(lambda: check_timeout(value))  # type: ignore[no-any-return]


def add_common(sub: argparse.ArgumentParser, *, store: bool = True, fmt: bool = True) -> None:
    """--config, --store, --format, --no-color and -v, shared by the commands that read them."""
    sub.add_argument(
        "--config",
        metavar="FILE",
        help="configuration file (default: ./retrievalkit.toml, else [tool.retrievalkit] "
        "in ./pyproject.toml)",
    )
    if store:
        sub.add_argument(
            "--store",
            metavar="URL",
            help="result store: sqlite:///PATH (default sqlite:///.retrievalkit/"
            "results.sqlite3), jsonl:///PATH, memory: or a plugin's scheme; three slashes "
            "start a relative path, four an absolute one",
        )
    if fmt:
        sub.add_argument(
            "--format",
            choices=FORMATS,
            default="table",
            help="output: a terminal table, JSON (sorted keys, nothing else on stdout) "
            "or Markdown (default: table)",
        )
    sub.add_argument("--no-color", action="store_true", help="no colours (also: NO_COLOR=1)")
    sub.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="log what happens (plugins loaded, stores opened) to stderr",
    )


def console(args: argparse.Namespace, *, stderr: bool = False) -> Console:
    from rich.console import Console

    # no-color.org: NO_COLOR set to any non-empty value turns colour off. Rich itself
    # turns colour (and the progress bar's redrawing) off when the output is not a terminal.
    from retrievalkit.render.fitting import LogConsole, log_console
    from retrievalkit.render.terminal import width_from_environment

    no_color = bool(getattr(args, "no_color", False)) or bool(os.environ.get("NO_COLOR"))
    # A pipe without COLUMNS (a CI log) has no width to fit: its tables are drawn whole.
    kind = LogConsole if log_console(sys.stderr if stderr else sys.stdout) else Console
    return kind(
        stderr=stderr,
        no_color=no_color,
        highlight=False,
        soft_wrap=False,
        width=width_from_environment(os.environ),
    )


def load_config(args: argparse.Namespace) -> Config:
    from retrievalkit.formats.config import find_config

    return find_config(getattr(args, "config", None))


def store_url(args: argparse.Namespace, config: Config) -> str:
    from retrievalkit.stores import DEFAULT_STORE_URL

    return getattr(args, "store", None) or config.store_url or DEFAULT_STORE_URL


def store_place(args: argparse.Namespace, config: Config) -> dict[str, Any]:
    """Where the store URL was given, for messages: the flag, or the config file's key."""
    if getattr(args, "store", None) or not config.store_url or config.source is None:
        return {"field": "--store"}
    from retrievalkit.formats.text_files import key_line

    dotted = "store.url"
    if str(config.source).endswith("pyproject.toml"):
        dotted = "tool.retrievalkit.store.url"
    return {
        "source": str(config.source),
        "line": key_line(config.source, dotted),
        "field": dotted,
    }


def open_configured_store(args: argparse.Namespace, config: Config) -> ResultStore:
    """The store of --store, the config file or the default; a bad URL names where it was set."""
    from retrievalkit.errors import InputError
    from retrievalkit.stores import open_store

    try:
        return open_store(store_url(args, config))
    except InputError as error:
        place = store_place(args, config)
        if error.field != "--store" or place["field"] == "--store":
            raise
        raise InputError(error.detail, hint=error.hint, **place) from None


def stored_run(args: argparse.Namespace, config: Config) -> tuple[ResultStore, ResultRecord]:
    """The store the options name, and the run ``args.run_id`` in it (exit 2 if absent)."""
    from retrievalkit.errors import InputError

    store = open_configured_store(args, config)
    record = store.get(args.run_id)
    if record is None:
        raise InputError(
            f"no run {args.run_id} in {store.url}",
            field="RUN_ID",
            hint="retrievalkit history --set S --retriever R lists the stored runs",
        )
    return store, record


def thresholds(args: argparse.Namespace, config: Config) -> Thresholds:
    """The gate's thresholds: the configuration's, with --max-top1/3-drop,
    --max-latency-increase and --max-cost-increase over them."""
    from retrievalkit.pipeline.gating.thresholds import Thresholds

    overrides = {
        metric: value
        for metric, value in (
            ("hit@1", getattr(args, "max_top1_drop", None)),
            ("hit@3", getattr(args, "max_top3_drop", None)),
        )
        if value is not None
    }
    latency = dict(getattr(args, "max_latency_increase", None) or ())
    increase = getattr(args, "max_cost_increase", None)
    cost = None if increase is None else {"per_question": increase}
    gate = Thresholds.from_config(config, latency, cost, **overrides)
    if getattr(args, "require_significant", False):
        gate = Thresholds(
            gate.metrics,
            gate.slices,
            require_significant=True,
            latency=gate.latency,
            cost=gate.cost,
        )
    return gate


def metric_name(text: str) -> str:
    """A metric name, canonical (``NDCG_BURGES@10`` -> ``ndcg_exp@10``)."""
    from retrievalkit.pipeline.engine.arguments import check_metric_name

    return _checked(lambda: check_metric_name(text, field=""))  # type: ignore[no-any-return]


def add_metric(parser: argparse.ArgumentParser) -> None:
    """``--metric NAME`` (repeatable), shared by eval and compare."""
    parser.add_argument(
        "--metric",
        type=metric_name,
        action="append",
        default=[],
        metavar="NAME",
        help="also compute this metric, e.g. ndcg_exp@10 (nDCG with gain 2^grade - 1, alias "
        "ndcg_burges@10), which the default table leaves out; its cut-off is added to --k "
        "(repeatable; also [eval] metrics)",
    )


def add_cluster_by(parser: argparse.ArgumentParser) -> None:
    """``--cluster-by FIELD``, shared by eval, compare and power."""
    parser.add_argument(
        "--cluster-by",
        metavar="FIELD",
        help="treat related questions as one unit: cluster, hard_class, expected (questions "
        "sharing an expected document) or meta.NAME; every interval is then a cluster "
        "bootstrap and the paired test flips whole clusters (also [eval] cluster_by)",
    )


def add_asking_options(parser: argparse.ArgumentParser, *, k_help: str) -> None:
    """How the questions are asked, worded and checked the same on every command that asks
    them: ``--k`` (its help says what this command adds), ``--overfetch``,
    ``--concurrency``, ``--executor``/``--ray-address``, ``--timeout`` and
    ``--max-error-rate``."""
    from retrievalkit.formats.limits import (
        MAX_CONCURRENCY,
        MAX_OVERFETCH,
        MAX_REPEAT,
    )

    parser.add_argument("--k", type=k_list, metavar="K,K,...", help=k_help)
    parser.add_argument(
        "--overfetch",
        type=at_most(MAX_OVERFETCH),
        metavar="N",
        help="ask for max(k) * N ids, so that max(k) distinct documents remain after chunk ids "
        "collapse (default 3, or [eval] overfetch)",
    )
    parser.add_argument(
        "--concurrency",
        type=at_most(MAX_CONCURRENCY),
        metavar="N",
        help="ask N questions at once from threads, or N batches for a retriever that batches "
        "(only for thread-safe retrievers; default 1, or [eval] concurrency)",
    )
    parser.add_argument(
        "--repeat",
        type=at_most(MAX_REPEAT),
        metavar="N",
        help="ask each question N times and keep its median latency; the ranking scored is "
        "the first answer's (default 1, or [eval] repeat)",
    )
    parser.add_argument(
        "--warmup",
        type=warmup_count,
        metavar="N",
        help="ask the set's first N questions (cycling) before the run and discard their "
        "answers and latencies (default 0, or [eval] warmup)",
    )
    add_executor_options(parser)
    parser.add_argument(
        "--timeout",
        type=seconds,
        metavar="SECONDS",
        help="record a question as a timeout error when the retriever has not answered within "
        "SECONDS (default: wait, or [eval] timeout)",
    )
    parser.add_argument(
        "--max-error-rate",
        type=fraction,
        metavar="X",
        help="largest share of questions whose retrieval may fail; above it the command stops "
        "with code 3 and saves nothing (default 0: any error)",
    )


def add_interval_options(parser: argparse.ArgumentParser) -> None:
    """``--resamples`` and ``--confidence``, the same on every command that gives intervals."""
    from retrievalkit.formats.limits import MAX_RESAMPLES

    parser.add_argument(
        "--resamples",
        type=at_most(MAX_RESAMPLES),
        metavar="N",
        help="bootstrap resamples for the confidence intervals (default 2000, or [eval] resamples)",
    )
    parser.add_argument(
        "--confidence",
        type=confidence_level,
        metavar="X",
        help="confidence level of the intervals; 1 - X is the significance level of the "
        "paired tests (default 0.95, or [eval] confidence)",
    )


def add_executor_options(parser: argparse.ArgumentParser) -> None:
    """``--executor`` and ``--ray-address``, the same on every command that asks questions."""
    parser.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="where the questions are asked: in this process (local, the default) or in "
        "batches by workers of a Ray cluster (ray; needs the [ray] extra)",
    )
    parser.add_argument(
        "--ray-address",
        metavar="HOST:PORT",
        help="the Ray cluster for --executor ray (default: RAY_ADDRESS, else a cluster "
        "Ray starts on this machine for the run)",
    )


def executor_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The ``executor`` and ``ray_address`` keywords of the Python API."""
    executor = getattr(args, "executor", None) or "local"
    address = getattr(args, "ray_address", None)
    from retrievalkit.pipeline.engine.arguments import check_executor

    check_executor(executor, address)
    if executor == "local":
        return {}
    return {"executor": executor, "ray_address": address}


def evaluation_settings(args: argparse.Namespace, config: Config) -> dict[str, Any]:
    """The keyword arguments of `retrievalkit.evaluate` from the options and the
    configuration, the same for every command that evaluates, so that ``eval`` and
    ``compare`` store the same record for the same retriever. The settings are resolved
    as the Python API resolves them (`retrievalkit.pipeline.engine.settings`); every metric
    the gate checks, the command line's thresholds included, is computed."""
    from retrievalkit.pipeline.engine.settings import UNSET, EvalSettings

    max_error_rate = getattr(args, "max_error_rate", None)
    resolved = EvalSettings.resolve(
        config,
        k=getattr(args, "k", None) or None,
        overfetch=getattr(args, "overfetch", None),
        resamples=getattr(args, "resamples", None),
        confidence=getattr(args, "confidence", None),
        concurrency=getattr(args, "concurrency", None),
        timeout=getattr(args, "timeout", None),
        max_error_rate=UNSET if max_error_rate is None else max_error_rate,
        slices=getattr(args, "slice", None) or None,
        metrics=getattr(args, "metric", None) or None,
        cluster_by=getattr(args, "cluster_by", None) or None,
        chunk_separator=getattr(args, "chunk_separator", None) or None,
        gated=thresholds(args, config).metric_names(),
        repeat=getattr(args, "repeat", None),
        warmup=getattr(args, "warmup", None),
    )
    chosen = resolved.arguments()
    # The seed has no option here: the API's default is the run's seed.
    del chosen["seed"]
    return {**chosen, "config": config, **executor_settings(args)}
