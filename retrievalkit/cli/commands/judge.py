"""``retrievalkit judge``: grade a stored run's unlabelled top-k documents with a judge plugin."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrievalkit.cli.commands import SUMMARIES
from retrievalkit.cli.commands.generate import progress_bar
from retrievalkit.cli.commands.options import add_common, at_most, load_config, stored_run
from retrievalkit.errors import EXIT_OK, EvaluationError, InputError, PluginError
from retrievalkit.formats.limits import MAX_K
from retrievalkit.formats.numbers import number

if TYPE_CHECKING:
    from retrievalkit.formats.config import Config, PluginInstance
    from retrievalkit.formats.corpus import CorpusDocument
    from retrievalkit.formats.labels import Label
    from retrievalkit.model.records import ResultRecord
    from retrievalkit.model.values import GoldenQuestionSet
    from retrievalkit.pipeline.authoring.judging import JudgeTask

NAME, HELP = SUMMARIES["judge"]

SHOWN_FAILURES = 20


def add_judge_options(parser: argparse.ArgumentParser) -> None:
    """--judge, --option, --corpus and --corpus-type: shared with judge-agreement."""
    parser.add_argument(
        "--judge",
        required=True,
        metavar="NAME",
        help="a [judges.NAME] of the config, or a judge plugin (openai-compatible)",
    )
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a judge option, added to or replacing the config's (repeatable)",
    )
    parser.add_argument(
        "--corpus",
        required=True,
        metavar="PATH",
        help="where the documents' text is: a BEIR corpus.jsonl (or its folder), or a folder "
        "of .txt/.md files",
    )
    parser.add_argument(
        "--corpus-type", metavar="TYPE", help="corpus plugin (default: detected, as in generate)"
    )


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run_id", nargs="?", metavar="RUN_ID", help="the run whose results to judge (or --pool)"
    )
    parser.add_argument(
        "--pool",
        metavar="FILE",
        help="judge the pairs queued in a pool file (retrievalkit pool --output) instead of "
        "a run's top k, in its order; --k and --set are not used",
    )
    add_judge_options(parser)
    parser.add_argument(
        "--k",
        type=at_most(MAX_K),
        default=10,
        help="judge the top k documents of each question (10)",
    )
    parser.add_argument(
        "--set",
        metavar="NAME_OR_FILE",
        help="where the question texts are (default: the run's set name, from the config or a "
        "plugin)",
    )
    parser.add_argument(
        "--output",
        required=True,
        metavar="FILE",
        help="labels file (.tsv) to write; labels already in it are kept and not asked again",
    )
    add_common(parser, fmt=False)


def open_judge(name: str, options: list[str], config: Config) -> tuple[PluginInstance, Any]:
    from retrievalkit.pipeline.authoring.judging import RelevanceJudge
    from retrievalkit.plugins import registry as plugins
    from retrievalkit.plugins.factories import create_instance, parse_options

    instance, judge = create_instance(
        plugins.JUDGES, name, config.judges, parse_options(options), section="judges"
    )
    if not isinstance(judge, RelevanceJudge):
        raise PluginError(
            f"judge plugin '{instance.plugin}' returned {type(judge).__name__}, which lacks "
            "identifier, model, prompt_version or grade(question, document)"
        )
    return instance, judge


def corpus_documents(args: argparse.Namespace) -> dict[str, CorpusDocument]:
    from retrievalkit.corpora.providers import documents_by_id, open_corpus

    return documents_by_id(open_corpus(Path(args.corpus), args.corpus_type, {}))


def report_failures(command: str, failures: list[tuple[str, str, str]]) -> None:
    for question_id, document_id, error in failures[:SHOWN_FAILURES]:
        print(f"{command}: failed: {question_id} / {document_id}: {error}", file=sys.stderr)
    if len(failures) > SHOWN_FAILURES:
        print(f"{command}: ... and {len(failures) - SHOWN_FAILURES} more failures", file=sys.stderr)


def _question_texts(
    args: argparse.Namespace, record: ResultRecord, config: Config
) -> dict[str, str]:
    from retrievalkit.plugins.resolution import resolve_set

    name = args.set or record.manifest.set_name
    stored = record.outcomes.known_texts()
    try:
        golden: GoldenQuestionSet = resolve_set(name, config)
    except InputError as error:
        if not args.set and len(stored) == len(record.outcomes):
            return stored  # the run's own texts, kept with it
        raise InputError(
            f"cannot find the run's questions: {error}",
            field="--set",
            hint="give the set file the run was evaluated on with --set",
        ) from None
    if golden.content_hash != record.manifest.set_hash:
        print(
            f"judge: warning: set {golden.name} changed since run {record.run_id}; judging with "
            "its current question texts",
            file=sys.stderr,
        )
    return {question.id: question.question for question in golden.questions}


def _pool_tasks(pool: Path, known: set[tuple[str, str]]) -> tuple[list[JudgeTask], int]:
    """The pairs of a pool file that ``known`` does not hold, and how many it holds."""
    from retrievalkit.formats.pool_file import read_pool
    from retrievalkit.pipeline.authoring.judging import JudgeTask

    tasks: list[JudgeTask] = []
    labelled = 0
    for pair in read_pool(pool):
        if (pair.question_id, pair.document) in known:
            labelled += 1
            continue
        tasks.append(JudgeTask(pair.question_id, pair.question, pair.document))
    return tasks, labelled


def run(args: argparse.Namespace) -> int:
    from retrievalkit.formats.labels import label_effect, read_labels
    from retrievalkit.pipeline.authoring.judging import JudgeTask

    if (args.run_id is None) == (args.pool is None):
        raise InputError(
            "give a stored run (RUN_ID) or a pool file (--pool), one of the two",
            field="RUN_ID/--pool",
            hint="e.g. retrievalkit judge RUN_ID ... or retrievalkit judge --pool pool.jsonl ...",
        )
    config = load_config(args)
    output = Path(args.output)
    if args.pool is not None:
        from retrievalkit.cli.commands.collisions import check_run_outputs

        check_run_outputs([("--output", output)], None, [("--pool", args.pool)])
    existing = read_labels(output) if output.exists() else []
    known = {(label.question_id, label.document_id) for label in existing}
    if args.pool is not None:
        tasks, labelled = _pool_tasks(Path(args.pool), known)
        documents = corpus_documents(args)
        instance, judge = open_judge(args.judge, args.option, config)
        print(
            f"judge: pool {args.pool}: {len(tasks)} unlabelled pairs to grade with "
            f"{instance.name} ({judge.model}, prompt {judge.prompt_version}); {labelled} "
            "already labelled"
        )
        _judge_and_write(args, tasks, documents, instance, judge, existing, output)
        return EXIT_OK
    _, record = stored_run(args, config)
    texts = _question_texts(args, record, config)
    documents = corpus_documents(args)
    instance, judge = open_judge(args.judge, args.option, config)

    tasks = []
    labelled = 0
    for outcome in record.outcomes:
        if outcome.error is not None or not outcome.expected:
            continue  # nothing retrieved, or a no-answer question: nothing to judge
        if outcome.question_id not in texts:
            raise InputError(
                f"question {outcome.question_id} of run {record.run_id} is not in the set",
                field="--set",
                hint="give the set file the run was evaluated on",
            )
        for document_id in outcome.ranking[: args.k]:
            if document_id in outcome.judgments or (outcome.question_id, document_id) in known:
                labelled += 1
                continue
            tasks.append(JudgeTask(outcome.question_id, texts[outcome.question_id], document_id))
    print(
        f"judge: run {record.run_id} ({record.set} × {record.model}): {len(tasks)} unlabelled "
        f"documents in the top {args.k} to grade with {instance.name} ({judge.model}, prompt "
        f"{judge.prompt_version}); {labelled} already labelled"
    )
    labels = _judge_and_write(args, tasks, documents, instance, judge, existing, output)
    effect = label_effect(record.outcomes, record.manifest.ks, labels, sources=[str(output)])
    depth = max([k for k in record.manifest.ks if k <= args.k] or [min(record.manifest.ks)])
    for name in (f"judged@{depth}", f"hit@{depth}", f"ndcg@{depth}", "rr"):
        if name not in effect.before:
            continue
        print(
            f"judge: {name}: {_number(effect.before[name])} with the set's labels, "
            f"{_number(effect.after[name])} with these labels"
        )
    return EXIT_OK


def _judge_and_write(
    args: argparse.Namespace,
    tasks: list[JudgeTask],
    documents: dict[str, CorpusDocument],
    instance: PluginInstance,
    judge: Any,
    existing: list[Label],
    output: Path,
) -> list[Label]:
    """Grade ``tasks``, report the failures, and write the labels file with the new labels
    after the ``existing`` ones (unchanged when none could be judged: exit code 3)."""
    from retrievalkit.formats.labels import write_labels
    from retrievalkit.pipeline.authoring.judging import judge_pairs

    with progress_bar(args, len(tasks), f"judging with {instance.name}") as advance:
        result = judge_pairs(tasks, documents, judge, judge_name=instance.name, progress=advance)
    report_failures(
        "judge", [(item.question_id, item.document_id, item.error) for item in result.failures]
    )
    counts = f"{len(result.labels)} judged, {len(result.failures)} failed"
    if tasks and not result.labels:
        raise EvaluationError(
            f"no document could be judged ({counts}, e.g. {result.failures[0].error}); "
            f"{output} was not changed"
        )
    labels = [*existing, *result.labels]
    write_labels(labels, output)
    relevant = sum(1 for label in result.labels if label.grade >= 1)
    print(f"judge: {counts}; {relevant} graded relevant; {len(labels)} labels in {output}")
    return labels


def _number(value: float | None) -> str:
    return number(value)
