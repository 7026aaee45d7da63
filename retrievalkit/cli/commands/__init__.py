"""The subcommands of ``retrievalkit``, one module each.

A command (built-in, or contributed by a plugin through the ``retrievalkit.commands``
entry-point group) is any object or module with:

* ``HELP``: one line for ``retrievalkit --help``;
* ``configure(parser)``: adds its arguments to an ``argparse.ArgumentParser``;
* ``run(args) -> int``: does the work and returns the exit code.
"""

from __future__ import annotations

import argparse
from typing import Protocol, runtime_checkable

#: Each built-in command's name and its line in ``retrievalkit --help``, by module name
#: under this package, in the order help lists them: help shows every command without
#: importing any, and a command line imports only the command it runs.
SUMMARIES: dict[str, tuple[str, str]] = {
    "evaluate": (
        "eval",
        "Evaluate a retriever on a golden set, save the run, check for regressions against a "
        "baseline.",
    ),
    "compare": (
        "compare",
        "Compare retrievers (run now) or stored runs question by question: differences with "
        "paired intervals, permutation p-values, Holm correction, win/tie/loss and the questions "
        "that moved.",
    ),
    "sweep": (
        "sweep",
        "Tune a retriever over a [sweeps.NAME] grid of options: every configuration on tuning "
        "questions, the quality-latency front, and the winner confirmed on held-out questions "
        "against the configured retriever.",
    ),
    "power": (
        "power",
        "What a golden set can detect: the smallest drop of each gated metric found at a power "
        "of 0.8, and the questions a given drop needs.",
    ),
    "interleave": (
        "interleave",
        "Online tests by team-draft interleaving: credit a clicks log's clicks to the two "
        "retrievers interleaved (wins, ties, losses, the preference with its interval, the "
        "sign test and the impressions a preference needs).",
    ),
    "baseline": (
        "baseline",
        "Pin a stored run as the baseline that eval compares its set and retriever with (pin "
        "RUN_ID), remove the pin (unpin), or show it (show).",
    ),
    "listing": (
        "list",
        "List the question sets, retrievers, stores, embedders, rerankers, corpora, generators, "
        "judges and commands found (from package metadata), and names claimed by two packages; "
        "--check also imports every plugin and exits with code 1 on a broken or colliding one.",
    ),
    "history": (
        "history",
        "List the stored runs of a set and retriever, newest first, with what changed between "
        "consecutive runs; --prune --keep N deletes old runs (never the pinned baseline).",
    ),
    "show": ("show", "Show a stored run."),
    "report": (
        "report",
        "Write a stored run as one self-contained HTML page: headline metrics with intervals, "
        "charts by form and hard class, first relevant ranks, the run history and a sortable "
        "question table; --compare adds the paired comparison with another run.",
    ),
    "validate": ("validate", "Check a golden set for errors and print what it holds."),
    "fidelity": (
        "fidelity",
        "Measure, without labels, how much of a reference retriever's top k a candidate returns "
        "(overlap@k and rank-biased overlap, with intervals).",
    ),
    "drift": (
        "drift",
        "Compare a candidate retriever with a baseline on a real query log, without labels: "
        "rank-biased overlap, overlap@k, zero-result rate, latency and score predictors with "
        "intervals; --fail-on-drift exits 1 when a limit is crossed.",
    ),
    "export": (
        "export",
        "Export a stored run's rankings as a TREC run file, its judgments as TREC qrels, or both "
        "as ranx JSON.",
    ),
    "generate": (
        "generate",
        "Write a golden set of synthetic questions from a corpus with a question generator "
        "(cached, so a second run replays without asking).",
    ),
    "judge": (
        "judge",
        "Grade a stored run's unlabelled top-k documents, or the pairs a pool file queues "
        "(--pool), with a judge (e.g. a language model) and write them to a labels file that "
        "eval --extra-labels merges.",
    ),
    "pool": (
        "pool",
        "Say which unjudged (question, document) pairs of stored runs' top documents to label "
        "next, best first: those that could flip or settle the runs' comparison (minimal test "
        "collections), or plain depth pooling; written as JSON Lines.",
    ),
    "judge_agreement": (
        "judge-agreement",
        "Measure a judge against human labels on a sample: Cohen's kappa and the confusion "
        "matrix, on grades and on relevant/not relevant.",
    ),
    "serve": (
        "serve",
        "Serve a store as a local web application: history charts, comparisons, questions with "
        "their rankings, and a judging queue that writes human grades for --extra-labels "
        "(needs the [serve] extra).",
    ),
}

#: The built-in commands' modules, in the order ``--help`` lists them.
BUILTIN = tuple(SUMMARIES)


@runtime_checkable
class Command(Protocol):
    HELP: str

    def configure(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...
