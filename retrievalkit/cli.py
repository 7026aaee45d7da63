"""The ``retrievalkit`` command line: parse, dispatch, map errors onto exit codes.

Heavy imports (numpy, scipy, rich, plugins) happen inside the commands, so
``--version`` and ``--help`` start fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrievalkit import __version__
from retrievalkit.errors import (
    EXIT_EVALUATION_FAILED,
    EXIT_OK,
    EXIT_REGRESSION,
    EXIT_USAGE,
    EvaluationError,
    InputError,
    RetrievalkitError,
)

if TYPE_CHECKING:
    from rich.console import Console

    from retrievalkit.config import Config
    from retrievalkit.render.summary import EvalReport

EXIT_INTERRUPTED = 130
FORMATS = ("table", "json", "markdown")

_EXIT_CODES = """\
exit codes:
  0  done (a regression without --fail-on-regression still exits 0 and says so)
  1  regression found with --fail-on-regression
  2  bad usage, configuration or input (the message names the file, line and field)
  3  the evaluation could not be carried out (retriever unreachable, error rate over the limit)
"""


class _Parser(argparse.ArgumentParser):
    """argparse that exits with code 2 and one line naming the option, as every error does."""

    def error(self, message: str) -> Any:
        raise InputError(message, hint=f"see '{self.prog} --help'")


def _k_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated whole numbers such as 1,3,5,10, got {text!r}"
        ) from None
    if not values or any(value < 1 for value in values):
        raise argparse.ArgumentTypeError(f"every k must be a whole number >= 1, got {text!r}")
    return values


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {text!r}")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="retrievalkit",
        description="Measure the retrieval step of search and RAG systems against a golden "
        "question set, and gate CI on regressions.",
        epilog=_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"retrievalkit {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def add(name: str, summary: str) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = commands.add_parser(
            name,
            help=summary,
            description=summary,
            epilog=_EXIT_CODES,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        return sub

    def common(sub: argparse.ArgumentParser, *, store: bool = True, fmt: bool = True) -> None:
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

    evaluate = add("eval", "Evaluate a retriever on a golden set, save the run, check for "
                   "regressions against a baseline.")
    evaluate.add_argument(
        "--set",
        required=True,
        metavar="NAME_OR_FILE",
        help="a golden set file (.jsonl, .toml, a BEIR directory), a [sets.NAME] of the config, "
        "or a set offered by a plugin (retrievalkit list shows them)",
    )
    evaluate.add_argument(
        "--retriever",
        required=True,
        metavar="NAME",
        help="a [retrievers.NAME] of the config, or a retriever plugin that needs no options",
    )
    evaluate.add_argument(
        "--k",
        type=_k_list,
        metavar="K,K,...",
        help="cut-offs for the per-k metrics (default 1,3,5,10; 1 and 3 are always added)",
    )
    evaluate.add_argument(
        "--overfetch",
        type=_positive,
        metavar="N",
        help="ask for max(k) * N ids, so that max(k) distinct documents remain after chunk ids "
        "collapse (default 3)",
    )
    evaluate.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit with code 1 when a metric dropped past its threshold",
    )
    evaluate.add_argument(
        "--max-top1-drop",
        type=_fraction,
        metavar="X",
        help="largest allowed absolute drop of hit@1 (default 0, or [regression] in the config)",
    )
    evaluate.add_argument(
        "--max-top3-drop",
        type=_fraction,
        metavar="X",
        help="largest allowed absolute drop of hit@3 (default 0, or [regression] in the config)",
    )
    evaluate.add_argument(
        "--baseline",
        metavar="RUN_ID",
        help="compare with this stored run instead of the newest earlier run of the same "
        "set and retriever",
    )
    evaluate.add_argument(
        "--max-error-rate",
        type=_fraction,
        metavar="X",
        help="largest share of questions whose retrieval may fail; above it the run stops with "
        "code 3 and is not saved (default 0: any error)",
    )
    evaluate.add_argument("--no-save", action="store_true", help="do not save the run")
    evaluate.add_argument(
        "--concurrency",
        type=_positive,
        metavar="N",
        help="ask N questions at once from threads (only for thread-safe retrievers; default 1)",
    )
    evaluate.add_argument(
        "--slice",
        action="append",
        default=[],
        metavar="FIELD",
        help="also break results down by this meta field (repeatable); form and hard_class "
        "are always reported",
    )
    evaluate.add_argument(
        "--resamples",
        type=_positive,
        metavar="N",
        help="bootstrap resamples for the confidence intervals (default 2000)",
    )
    evaluate.add_argument(
        "--confidence",
        type=_fraction,
        metavar="X",
        help="confidence level of the intervals (default 0.95)",
    )
    evaluate.add_argument(
        "--output-dir",
        metavar="DIR",
        help="also write summary.json, per_question.jsonl and report.md into DIR",
    )
    evaluate.add_argument(
        "--quiet", "-q", action="store_true", help="no per-question table and no progress bar"
    )
    common(evaluate)

    listing = add("list", "List the question sets, retrievers and stores found; broken plugins "
                  "are flagged with their error.")
    common(listing, store=False)

    history = add("history", "List the stored runs of a set and retriever, newest first.")
    history.add_argument("--set", required=True, metavar="NAME", help="the set name")
    history.add_argument("--retriever", required=True, metavar="NAME", help="the retriever name")
    history.add_argument("--limit", type=_positive, default=20, metavar="N",
                         help="show at most N runs (default 20)")
    common(history)

    show = add("show", "Show a stored run.")
    show.add_argument("run_id", metavar="RUN_ID", help="the run id printed by eval or history")
    common(show)

    validate = add("validate", "Check a golden set for errors and print what it holds.")
    validate.add_argument("--set", required=True, metavar="NAME_OR_FILE",
                          help="a golden set file, a [sets.NAME] of the config, or a plugin's set")
    common(validate, store=False)
    return parser


def _console(args: argparse.Namespace, *, stderr: bool = False) -> Console:
    from rich.console import Console

    no_color = bool(getattr(args, "no_color", False)) or "NO_COLOR" in os.environ
    return Console(stderr=stderr, no_color=no_color, highlight=False, soft_wrap=False)


def _config(args: argparse.Namespace) -> Config:
    from retrievalkit.config import find_config

    return find_config(getattr(args, "config", None))


def _store_url(args: argparse.Namespace, config: Config) -> str:
    from retrievalkit.stores import DEFAULT_STORE_URL

    return getattr(args, "store", None) or config.store_url or DEFAULT_STORE_URL


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return EXIT_USAGE
        handler = {
            "eval": command_eval,
            "list": command_list,
            "history": command_history,
            "show": command_show,
            "validate": command_validate,
        }[args.command]
        return handler(args)
    except RetrievalkitError as error:
        print(f"retrievalkit: error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("retrievalkit: interrupted; nothing was saved", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK


def command_eval(args: argparse.Namespace) -> int:
    from retrievalkit.evaluator import DEFAULT_OVERFETCH, evaluate_questions
    from retrievalkit.intervals import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, DEFAULT_SEED
    from retrievalkit.metrics import DEFAULT_KS, normalise_ks
    from retrievalkit.record import build_record
    from retrievalkit.regression import DEFAULT_THRESHOLDS, compare_runs
    from retrievalkit.render.summary import EvalReport
    from retrievalkit.resolve import resolve_retriever, resolve_set
    from retrievalkit.scoring import ScoringOptions, score_run
    from retrievalkit.stores import open_store

    config = _config(args)
    settings = config.eval
    ks = normalise_ks(args.k or settings.k or DEFAULT_KS)
    overfetch = args.overfetch or settings.overfetch or DEFAULT_OVERFETCH
    scoring = ScoringOptions(
        ks=ks,
        resamples=args.resamples or settings.resamples or DEFAULT_RESAMPLES,
        confidence=args.confidence or settings.confidence or DEFAULT_CONFIDENCE,
        seed=DEFAULT_SEED,
        slices=tuple(dict.fromkeys((*settings.slices, *args.slice))),
    )
    if not 0.0 < scoring.confidence < 1.0:
        raise InputError("must be between 0 and 1, e.g. 0.95", field="--confidence")
    thresholds = dict(DEFAULT_THRESHOLDS)
    thresholds.update(config.regression.thresholds)
    if args.max_top1_drop is not None:
        thresholds["hit@1"] = args.max_top1_drop
    if args.max_top3_drop is not None:
        thresholds["hit@3"] = args.max_top3_drop
    for metric in thresholds:
        family, _, k = metric.partition("@")
        if k and int(k) not in ks:
            ks = normalise_ks((*ks, int(k)))
            scoring = ScoringOptions(ks, scoring.resamples, scoring.confidence, scoring.seed,
                                     scoring.slices)
    max_error_rate = args.max_error_rate
    if max_error_rate is None:
        max_error_rate = config.regression.max_error_rate or 0.0

    store = open_store(_store_url(args, config))
    golden = resolve_set(args.set, config)
    resolved = resolve_retriever(args.retriever, config)
    status = _console(args, stderr=True)
    show_progress = status.is_terminal and not args.quiet and args.format == "table"
    questions = golden.questions
    if show_progress:
        from rich.progress import Progress

        with Progress(console=status, transient=True) as bar:
            task = bar.add_task(f"{resolved.name} on {golden.name}", total=len(questions))
            retrievals = evaluate_questions(
                resolved.retriever,
                questions,
                depth=max(ks),
                overfetch=overfetch,
                concurrency=args.concurrency or settings.concurrency or 1,
                progress=lambda done: bar.advance(task, done),
            )
    else:
        retrievals = evaluate_questions(
            resolved.retriever,
            questions,
            depth=max(ks),
            overfetch=overfetch,
            concurrency=args.concurrency or settings.concurrency or 1,
        )
    scores = score_run(questions, retrievals, scoring)
    record = build_record(
        golden, resolved.name, resolved.plugin, resolved.options, scores, scoring,
        overfetch=overfetch,
    )

    errored = record.errored
    if errored and errored / len(questions) > max_error_rate:
        reasons = sorted({outcome.error or "" for outcome in record.outcomes if outcome.error})
        report = EvalReport(
            record, questions, None, None,
            baseline_note="not compared: the run failed",
            not_saved_reason=f"{errored} of {len(questions)} questions errored, over the "
            f"allowed error rate {max_error_rate:g}",
        )
        _emit(report, args)
        everything = " on every question" if errored == len(questions) else ""
        raise EvaluationError(
            f"retriever '{resolved.name}' failed{everything} ({errored} of {len(questions)} "
            f"questions errored, e.g. {reasons[0]}); the run was not saved and does not become "
            "a baseline (raise --max-error-rate to accept some errors)"
        )

    baseline = None
    note = None
    if args.baseline:
        baseline = store.get(args.baseline)
        if baseline is None:
            raise InputError(
                f"no run {args.baseline} in {store.url}",
                field="--baseline",
                hint="retrievalkit history lists the stored runs",
            )
    else:
        earlier = store.runs(record.set, record.model, record.grader)
        baseline = earlier[0] if earlier else None
        if baseline is None:
            note = f"no baseline: this is the first run of {record.set} × {record.model} in {store.url}"
    verdict = (
        compare_runs(
            record.outcomes,
            golden.content_hash,
            baseline,
            thresholds,
            resamples=scoring.resamples,
            confidence=scoring.confidence,
            seed=scoring.seed,
        )
        if baseline is not None
        else None
    )
    saved_to = None
    if not args.no_save:
        store.save(record)
        saved_to = store.url
    report = EvalReport(
        record, questions, verdict, saved_to, baseline_note=note,
        not_saved_reason=None if saved_to else "--no-save",
    )
    _emit(report, args)
    if verdict is not None and verdict.regressed:
        if args.fail_on_regression:
            return EXIT_REGRESSION
        print(
            "retrievalkit: regression found (exit code 0 without --fail-on-regression)",
            file=sys.stderr,
        )
    return EXIT_OK


def _emit(report: EvalReport, args: argparse.Namespace) -> None:
    from retrievalkit.render.markdown import render_markdown
    from retrievalkit.render.summary import per_question_lines, summary, to_json_text

    if args.output_dir:
        directory = Path(args.output_dir)
        try:
            directory.mkdir(parents=True, exist_ok=True)
            (directory / "summary.json").write_text(to_json_text(summary(report)) + "\n",
                                                    encoding="utf-8")
            (directory / "per_question.jsonl").write_text(
                "".join(line + "\n" for line in per_question_lines(report)), encoding="utf-8"
            )
            (directory / "report.md").write_text(render_markdown(report), encoding="utf-8")
        except OSError as error:
            raise InputError(
                f"cannot write the report: {error.strerror}", source=str(directory),
                field="--output-dir",
            ) from None
    if args.format == "json":
        sys.stdout.write(to_json_text(summary(report)) + "\n")
    elif args.format == "markdown":
        sys.stdout.write(render_markdown(report))
    else:
        from retrievalkit.render.table import render_table

        render_table(report, _console(args), per_question=not args.quiet)


def command_list(args: argparse.Namespace) -> int:
    from retrievalkit import plugins
    from retrievalkit.render.summary import to_json_text

    config = _config(args)
    catalogue = plugins.set_catalogue()
    retrievers, broken_retrievers = plugins.load_group(plugins.RETRIEVERS)
    stores, broken_stores = plugins.load_group(plugins.STORES)
    broken = [*catalogue.broken, *broken_retrievers, *broken_stores]
    document = {
        "sets": [
            {"name": name, "provider": plugin.label}
            for name, (plugin, _) in sorted(catalogue.offers.items())
        ]
        + [{"name": name, "provider": f"config: {path}"} for name, path in config.sets.items()],
        "retrievers": [
            {"name": name, "provider": plugin.label} for name, (plugin, _) in sorted(retrievers.items())
        ]
        + [
            {"name": name, "provider": f"config: plugin {entry.plugin}"}
            for name, entry in config.retrievers.items()
        ],
        "stores": [
            {"name": f"{name}:", "provider": plugin.label} for name, (plugin, _) in sorted(stores.items())
        ],
        "broken": [
            {"group": item.plugin.group, "plugin": item.plugin.label, "error": item.error}
            for item in broken
        ],
    }
    if args.format == "json":
        sys.stdout.write(to_json_text(document) + "\n")
        return EXIT_OK
    lines = []
    for section in ("sets", "retrievers", "stores"):
        lines.append(f"{section}:")
        lines.extend(f"  {entry['name']:<24} {entry['provider']}" for entry in document[section])
    if broken:
        lines.append("broken plugins:")
        lines.extend(f"  {entry['plugin']} ({entry['group']}): {entry['error']}"
                     for entry in document["broken"])
    text = "\n".join(lines) + "\n"
    if args.format == "markdown":
        text = "```\n" + text + "```\n"
    sys.stdout.write(text)
    return EXIT_OK


def command_history(args: argparse.Namespace) -> int:
    from retrievalkit.model import GRADER
    from retrievalkit.render.summary import to_json_text
    from retrievalkit.render.text import number
    from retrievalkit.stores import open_store

    config = _config(args)
    store = open_store(_store_url(args, config))
    runs = store.runs(args.set, args.retriever, GRADER)[: args.limit]
    rows = [
        {
            "run_id": run.run_id,
            "created_at": run.manifest.created_at,
            "hit@1": run.pass_rate,
            "hit@3": run.mean_score,
            "rr": run.metrics["rr"].mean if "rr" in run.metrics else None,
            "questions": len(run.outcomes),
            "errored": run.errored,
            "set_hash": run.manifest.set_hash[:12],
            "git_commit": (run.manifest.git_commit or "")[:12] or None,
        }
        for run in runs
    ]
    if args.format == "json":
        sys.stdout.write(to_json_text(rows) + "\n")
        return EXIT_OK
    if not rows:
        print(f"no runs of {args.set} × {args.retriever} in {store.url}", file=sys.stderr)
        return EXIT_OK
    header = ("run id", "created", "hit@1", "hit@3", "rr", "questions", "errored", "commit")
    table = [
        (row["run_id"], row["created_at"], number(row["hit@1"]), number(row["hit@3"]),
         number(row["rr"]), str(row["questions"]), str(row["errored"]), row["git_commit"] or "")
        for row in rows
    ]
    if args.format == "markdown":
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(str(cell) for cell in line) + " |" for line in table]
        sys.stdout.write("\n".join(lines) + "\n")
        return EXIT_OK
    from rich.table import Table

    view = Table(title=f"{args.set} × {args.retriever} in {store.url}", title_justify="left")
    for column in header:
        view.add_column(column)
    for line in table:
        view.add_row(*[str(cell) for cell in line])
    _console(args).print(view)
    return EXIT_OK


def command_show(args: argparse.Namespace) -> int:
    from retrievalkit.render.summary import EvalReport
    from retrievalkit.stores import open_store

    config = _config(args)
    store = open_store(_store_url(args, config))
    record = store.get(args.run_id)
    if record is None:
        raise InputError(
            f"no run {args.run_id} in {store.url}",
            field="RUN_ID",
            hint="retrievalkit history --set S --retriever R lists the stored runs",
        )
    report = EvalReport(record, (), None, store.url, baseline_note="(stored run)")
    args.output_dir = None
    args.quiet = False
    _emit(report, args)
    return EXIT_OK


def command_validate(args: argparse.Namespace) -> int:
    from retrievalkit.render.summary import to_json_text
    from retrievalkit.resolve import resolve_set
    from retrievalkit.validation import lint_set

    config = _config(args)
    golden = resolve_set(args.set, config)
    findings = lint_set(golden)
    if args.format == "json":
        sys.stdout.write(to_json_text(findings) + "\n")
    else:
        for line in findings["summary"]:
            print(line)
        for warning in findings["warnings"]:
            print(f"warning: {warning}")
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

__all__ = ["EXIT_EVALUATION_FAILED", "build_parser", "main"]
