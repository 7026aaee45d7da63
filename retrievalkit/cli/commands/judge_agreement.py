"""``retrievalkit judge-agreement``: Cohen's kappa of a judge against human labels on a sample."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from retrievalkit.cli.commands import SUMMARIES
from retrievalkit.cli.commands.generate import progress_bar
from retrievalkit.cli.commands.judge import (
    add_judge_options,
    corpus_documents,
    open_judge,
    report_failures,
)
from retrievalkit.cli.commands.options import add_common, fraction, load_config, positive
from retrievalkit.errors import EXIT_OK, EvaluationError, InputError

NAME, HELP = SUMMARIES["judge_agreement"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--labels",
        required=True,
        metavar="FILE",
        help="human labels: a labels file or BEIR qrels (query-id, corpus-id, score)",
    )
    add_judge_options(parser)
    parser.add_argument(
        "--set", required=True, metavar="NAME_OR_FILE", help="the set the labels' questions are in"
    )
    parser.add_argument(
        "--sample",
        type=positive,
        default=100,
        metavar="N",
        help="judge a seeded random sample of N labels (default 100; all when fewer)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample (default 0)")
    parser.add_argument(
        "--ppi-width",
        type=fraction,
        default=0.05,
        metavar="X",
        help="report how many human labels a judge-corrected (PPI) interval of the relevance "
        "rate of +/- X needs with this judge, and without it (default 0.05)",
    )
    add_common(parser, store=False)


def run(args: argparse.Namespace) -> int:
    from retrievalkit.formats.labels import read_labels
    from retrievalkit.pipeline.authoring.judging import (
        JudgeTask,
        agreement,
        judge_pairs,
        relevance_agreement,
    )
    from retrievalkit.plugins.resolution import resolve_set
    from retrievalkit.render.summary import to_json_text

    config = load_config(args)
    human = read_labels(Path(args.labels))
    golden = resolve_set(args.set, config)
    texts = {question.id: question.question for question in golden.questions}
    usable = [label for label in human if label.question_id in texts]
    if not usable:
        raise InputError(
            f"none of its {len(human)} labels is for a question of set {golden.name}",
            source=args.labels,
            hint="give the set these labels were made for with --set",
        )
    sample = usable
    if args.sample < len(usable):
        import random

        picked = sorted(random.Random(args.seed).sample(range(len(usable)), args.sample))
        sample = [usable[index] for index in picked]
    documents = corpus_documents(args)
    instance, judge = open_judge(args.judge, args.option, config)
    tasks = [
        JudgeTask(label.question_id, texts[label.question_id], label.document_id)
        for label in sample
    ]
    with progress_bar(args, len(tasks), f"judging with {instance.name}") as advance:
        result = judge_pairs(tasks, documents, judge, judge_name=instance.name, progress=advance)
    report_failures(
        NAME, [(item.question_id, item.document_id, item.error) for item in result.failures]
    )
    if not result.labels:
        raise EvaluationError(
            f"the judge graded none of the {len(tasks)} sampled labels, e.g. "
            f"{result.failures[0].error}"
        )
    judged = {(label.question_id, label.document_id): label.grade for label in result.labels}
    pairs = [
        (label.grade, judged[(label.question_id, label.document_id)])
        for label in sample
        if (label.question_id, label.document_id) in judged
    ]
    if args.ppi_width <= 0:
        raise InputError("must be above 0, e.g. 0.05", field="--ppi-width")
    graded = agreement(pairs)
    binary = relevance_agreement(pairs)
    from retrievalkit.stats.ppi import labels_needed

    needed, alone, weight = labels_needed(
        [(int(human >= 1), int(judged >= 1)) for human, judged in pairs], half_width=args.ppi_width
    )
    document: dict[str, Any] = {
        "judge": instance.name,
        "model": judge.model,
        "prompt_version": judge.prompt_version,
        "labels": args.labels,
        "set": golden.name,
        "sampled": len(sample),
        "judged": len(pairs),
        "failed": len(result.failures),
        "grades": _agreement_map(graded),
        "relevance": _agreement_map(binary),
        "ppi": {
            "half_width": args.ppi_width,
            "human_labels_needed": needed,
            "human_labels_without_judge": alone,
            "weight": weight,
        },
    }
    if args.format == "json":
        sys.stdout.write(to_json_text(document) + "\n")
        return EXIT_OK
    lines = [
        f"{instance.name} ({judge.model}, prompt {judge.prompt_version}) against {args.labels} "
        f"on set {golden.name}: {len(sample)} sampled of {len(usable)} labels, "
        f"{len(pairs)} judged, {len(result.failures)} failed",
        f"Cohen's kappa on grades: {_kappa(graded.kappa)}; on relevant/not relevant: "
        f"{_kappa(binary.kappa)}",
        "",
        "confusion matrix (rows: human grade, columns: judge grade)",
        *_matrix_lines(graded.categories, graded.matrix),
        "",
        _ppi_line(needed, alone, args.ppi_width),
    ]
    if graded.kappa is None or binary.kappa is None:
        lines += [
            "",
            "kappa is undefined where every label falls in one category: sample labels of both "
            "kinds (e.g. judged non-relevant documents too)",
        ]
    text = "\n".join(lines) + "\n"
    sys.stdout.write("```\n" + text + "```\n" if args.format == "markdown" else text)
    return EXIT_OK


def _ppi_line(needed: int | None, alone: int | None, width: float) -> str:
    if needed is None or alone is None:
        return "judge-corrected intervals: too few judged labels to tell how many are needed"
    return (
        f"judge-corrected (PPI) interval of the relevance rate of +/- {width:g}: about "
        f"{needed} human labels with this judge grading the rest, {alone} without it "
        "(eval --extra-labels with judge = human rows)"
    )


def _agreement_map(item: Any) -> dict[str, Any]:
    return {
        "categories": list(item.categories),
        "matrix": [list(row) for row in item.matrix],
        "kappa": item.kappa,
        "observed_agreement": item.observed,
    }


def _kappa(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"


def _matrix_lines(categories: tuple[int, ...], matrix: tuple[tuple[int, ...], ...]) -> list[str]:
    width = max(6, *(len(str(cell)) + 1 for row in matrix for cell in row))
    lines = ["human".ljust(7) + "".join(str(grade).rjust(width) for grade in categories)]
    for grade, row in zip(categories, matrix, strict=True):
        lines.append(str(grade).ljust(7) + "".join(str(cell).rjust(width) for cell in row))
    return lines
