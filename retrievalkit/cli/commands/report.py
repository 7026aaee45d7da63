"""``retrievalkit report``: write a stored run (optionally against another) as one HTML file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from retrievalkit.cli.commands import SUMMARIES
from retrievalkit.cli.commands.options import add_common, load_config, open_configured_store
from retrievalkit.errors import EXIT_OK, InputError, RetrievalkitError

if TYPE_CHECKING:
    from retrievalkit.formats.config import Config
    from retrievalkit.model.records import ResultRecord
    from retrievalkit.model.values import GoldenQuestionSet
    from retrievalkit.pipeline.gating.gate import Verdict
    from retrievalkit.stores import ResultStore

NAME, HELP = SUMMARIES["report"]
INSTALL_HINT = "pip install 'retrievalkit-eval[report]'"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID", help="the run to report on (from eval/history)")
    parser.add_argument(
        "--compare",
        metavar="RUN_ID",
        help="a baseline run to compare with, question by question: differences are RUN_ID "
        "minus this run",
    )
    parser.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="FILE",
        help="the HTML file to write (e.g. report.html)",
    )
    parser.add_argument(
        "--set",
        metavar="NAME_OR_FILE",
        help="the golden set to take question texts from (stored runs keep only question ids; "
        "default: the run's set, when it can be found and has not changed since)",
    )
    parser.add_argument(
        "--allow-different-sets",
        action="store_true",
        help="with --compare: compare runs made on different versions of a set, on the "
        "question ids they share",
    )
    add_common(parser, fmt=False)


def _get(store: ResultStore, run_id: str, option: str) -> ResultRecord:
    record = store.get(run_id)
    if record is None:
        raise InputError(
            f"no run {run_id} in {store.url}",
            field=option,
            hint="retrievalkit history --set S --retriever R lists the stored runs",
        )
    return record


def _question_texts(
    record: ResultRecord, name: str | None, config: Config
) -> tuple[dict[str, str], str | None]:
    """Texts by question id, and a note on where they came from (or why there are none).

    An explicit ``--set`` must load; without it the run's own set is tried quietly, and
    used only when its content hash is still the run's, so no text is shown beside the
    wrong labels.
    """
    from retrievalkit.api import load_set

    if name is not None:
        golden = load_set(name, config=config)
        texts = {question.id: question.question for question in golden.questions}
        if golden.content_hash != record.manifest.set_hash:
            return texts, (
                f"Question texts come from {name}, which differs from the version of the set "
                "this run was made on: texts of changed questions may not match their labels."
            )
        return texts, None
    found: GoldenQuestionSet | None
    try:
        found = load_set(record.set, config=config)
    except RetrievalkitError:
        found = None
    if found is None or found.content_hash != record.manifest.set_hash:
        stored = record.outcomes.known_texts()
        if stored:  # the texts the run was asked, kept with it
            return stored, None
        why = "was not found" if found is None else "has changed since the run"
        return {}, (
            f"No question texts: the run keeps only question ids, and its set '{record.set}' "
            f"{why} (give it with --set to show the texts)."
        )
    return {question.id: question.question for question in found.questions}, None


def _gate(
    store: ResultStore, record: ResultRecord, compare_with: ResultRecord | None, config: Config
) -> tuple[Verdict | None, str | None]:
    """The regression gate on a stored run, with the thresholds of the configuration.

    The baseline is ``--compare`` when given, else the key's pinned run, else the newest
    run of the key older than this one: what ``eval`` compared it with when it was made
    (``retrievalkit.gate`` would take the newest other run, which may be younger).
    """
    import attrs

    from retrievalkit.pipeline.gating.baselines import EXPLICIT, NEWEST, PINNED
    from retrievalkit.pipeline.gating.gate import compare_runs, retriever_changes
    from retrievalkit.pipeline.gating.thresholds import Thresholds
    from retrievalkit.stores import pinned_run_id

    key = (record.set, record.model, record.grader)
    baseline, kind = compare_with, EXPLICIT
    if baseline is None:
        pinned = pinned_run_id(store, *key)
        if pinned is not None and pinned != record.run_id:
            baseline, kind = store.get(pinned), PINNED
    if baseline is None:
        runs = store.runs(*key)  # newest first
        ids = [run.run_id for run in runs]
        older = runs[ids.index(record.run_id) + 1 :] if record.run_id in ids else []
        if not older:
            return None, (
                f"no baseline: no run of {record.set} × {record.model} in {store.url} is "
                "older than this one (name one with --compare)"
            )
        baseline, kind = older[0], NEWEST
    gated = Thresholds.from_config(config)
    verdict = compare_runs(
        record.outcomes,
        record.manifest.set_hash,
        baseline,
        gated.metrics,
        resamples=record.manifest.resamples,
        confidence=record.manifest.confidence,
        seed=record.manifest.seed,
        require_significant=gated.require_significant,
        slice_thresholds=gated.slices,
        baseline_kind=kind,
        latency_thresholds=gated.latency,
        candidate_machine=record.manifest.machine,
        cost_thresholds=gated.cost,
        candidate_costs=record.manifest.costs,
    )
    verdict = attrs.evolve(verdict, retriever_changes=retriever_changes(baseline, record))
    return verdict, None


def run(args: argparse.Namespace) -> int:
    from retrievalkit.render import charts

    if not charts.available():
        raise InputError(
            "the HTML report draws its charts with matplotlib, which is not installed",
            hint=INSTALL_HINT,
        )
    from retrievalkit.formats.files import output_error, write_file
    from retrievalkit.render.html_report import render_html_report
    from retrievalkit.render.run_report import build_run_report

    output = Path(args.output)
    if output.is_dir():
        raise InputError(f"{output} is a folder", field="--output", hint="name a file to write")
    if not output.parent.is_dir():
        raise InputError(
            f"the folder {output.parent} does not exist",
            field="--output",
            hint="create it, or write the report elsewhere",
        )
    from retrievalkit.cli.commands.collisions import check_run_outputs, read_files, store_at
    from retrievalkit.cli.commands.options import store_url

    config = load_config(args)
    given = args.set if args.set and Path(args.set).exists() else None
    read, outputs = read_files(config, ("--set", given)), [("--output", output)]
    # Before the store is opened (which may write beside it), and after, from its path.
    check_run_outputs(outputs, store_at(store_url(args, config)), read)
    store = open_configured_store(args, config)
    check_run_outputs(outputs, store, read)
    record = _get(store, args.run_id, "RUN_ID")
    baseline = None if args.compare is None else _get(store, args.compare, "--compare")
    texts, note = _question_texts(record, args.set, config)
    verdict, verdict_note = _gate(store, record, baseline, config)
    report = build_run_report(
        record,
        store=store.url,
        history=store.runs(record.set, record.model, record.grader),
        baseline=baseline,
        allow_different_sets=args.allow_different_sets,
        question_texts=texts,
        texts_note=note,
        verdict=verdict,
        verdict_note=verdict_note,
    )
    page = render_html_report(report).encode("utf-8")
    try:
        write_file(output, page)
    except OSError as error:
        raise output_error(error, output, "--output", "the report") from None
    print(f"wrote {output} ({len(page) // 1024} KB)")
    return EXIT_OK
