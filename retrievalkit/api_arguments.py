"""The kinds of the Python API's arguments, checked before anything else runs.

Every public function of `retrievalkit.api` (and `parse_metric`) calls `check` on its
arguments first: an argument of the wrong kind (``evaluate(set=None)``, ``compare(runs=7)``,
``sweep(share_stages=[])``) is an `ArgumentError` naming the argument and what it takes,
an `InputError` (exit code 2 on the command line) that is also a `TypeError`, instead
of an error from deep inside (``os.fspath``, ``'int' object has no attribute ...``) or a
value silently taken.

Only kinds are checked here. Values (``k`` from 1 to 10,000, ``confidence`` between 0
and 1, ...) are checked by `retrievalkit.pipeline.engine.arguments`, the one check the
command line's options use too, so both refuse them in the same words; an argument that
check (or the function itself, as ``gate`` and ``power`` check a store with the
words of ``--store``) already refuses whatever its kind is `PASSED` here.

`RULES` holds one rule for every parameter of every public function (a test holds
them to the signatures), so a new argument cannot be added without one.
"""

from __future__ import annotations

import datetime as dt
import numbers
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from retrievalkit.errors import ArgumentError

#: (accepts the value, what the argument takes, in words)
Rule = tuple[Callable[[Any], bool], str]


def _whole(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _path(value: Any) -> bool:
    return (isinstance(value, str) and bool(value.strip())) or isinstance(value, os.PathLike)


def _sequence(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def _texts(value: Any) -> bool:
    return _sequence(value) and all(isinstance(item, str) for item in value)


def _optional(rule: Rule) -> Rule:
    accepts, words = rule
    return (lambda value: value is None or accepts(value)), f"{words}, or None"


def _golden_set(value: Any) -> bool:
    from retrievalkit.model.values import GoldenQuestionSet

    return isinstance(value, GoldenQuestionSet) or _path(value)


def _config(value: Any) -> bool:
    from retrievalkit.formats.config import Config

    return value is None or isinstance(value, Config) or _path(value)


def _retriever(value: Any) -> bool:
    return _text(value) or (
        not isinstance(value, (str, bytes)) and callable(getattr(value, "retrieve", None))
    )


def _runs(value: Any) -> bool:
    from retrievalkit.model.records import ResultRecord
    from retrievalkit.pipeline.engine.run import Run

    return _sequence(value) and all(isinstance(item, (Run, ResultRecord)) for item in value)


def _run(value: Any) -> bool:
    from retrievalkit.model.records import ResultRecord
    from retrievalkit.pipeline.engine.run import Run

    return isinstance(value, (Run, ResultRecord))


def _questions(value: Any) -> bool:
    from retrievalkit.model.values import GoldenQuestion

    return _sequence(value) and all(isinstance(item, GoldenQuestion) for item in value)


def _sweep(value: Any) -> bool:
    from retrievalkit.formats.sweep_table import SweepConfig

    return _text(value) or isinstance(value, SweepConfig)


def _places(value: Any) -> bool:
    return _sequence(value) and all(item is None or isinstance(item, str) for item in value)


def _texts_by_id(value: Any) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(key, str) and isinstance(text, str) for key, text in value.items()
    )


def _commit(value: Any) -> bool:
    return value is None or isinstance(value, str)


#: Checked by `retrievalkit.pipeline.engine.arguments` (or by the function itself) with the
#: command line's words, whatever its kind: nothing to add here.
PASSED: Rule = (lambda value: True, "")

SET: Rule = (_golden_set, "a GoldenQuestionSet, a set file or folder path, or a set name")
CONFIG: Rule = (_config, "a Config, or the path of a configuration file, or None")
RETRIEVER: Rule = (
    _retriever,
    "a [retrievers.NAME] or retriever plugin name, or an object with retrieve(question, limit)",
)
WHOLE: Rule = (_whole, "a whole number")
NUMBER: Rule = (_number, "a number")
TEXT: Rule = (_text, "a non-empty string")
EXECUTOR: Rule = (_text, '"local" or "ray"')
FLAG: Rule = (lambda value: isinstance(value, bool), "True or False")
NAMES: Rule = (_texts, "a list of strings")

RULES: Mapping[str, Mapping[str, Rule]] = {
    "load_config": {"path": _optional((_path, "the path of a configuration file"))},
    "load_set": {"set": (_path, "a set file or folder path, or a set name"), "config": CONFIG},
    "open_store": {
        "url": _optional((_text, "a store URL such as sqlite:///runs.sqlite3")),
        "config": CONFIG,
    },
    "evaluate": {
        "set": SET,
        "retriever": RETRIEVER,
        "k": PASSED,
        "overfetch": PASSED,
        "slices": PASSED,
        "cluster_by": _optional(TEXT),
        "confidence": PASSED,
        "resamples": PASSED,
        "seed": PASSED,
        "concurrency": PASSED,
        "timeout": PASSED,
        "max_error_rate": PASSED,
        "options": _optional((lambda value: isinstance(value, Mapping), "a mapping of options")),
        "name": _optional(TEXT),
        "config": CONFIG,
        "git_commit": (_commit, 'a commit hash, "detect", or None'),
        "progress": _optional((callable, "a function called with a count of questions")),
        "now": _optional((lambda value: isinstance(value, dt.datetime), "a datetime")),
        "chunk_separator": _optional(TEXT),
        "executor": EXECUTOR,
        "ray_address": PASSED,
        "metrics": PASSED,
        "repeat": PASSED,
        "warmup": PASSED,
        "costs": PASSED,
    },
    "gate": {
        "run": (_run, "a Run or a ResultRecord"),
        "store": PASSED,
        "thresholds": PASSED,
        "baseline": _optional(TEXT),
        "cluster_by": _optional(TEXT),
    },
    "compare": {
        "runs": (_runs, "a list of Run or ResultRecord"),
        "labels": _optional(NAMES),
        "allow_different_sets": FLAG,
        "confidence": PASSED,
        "resamples": PASSED,
        "seed": PASSED,
        "changed_by": TEXT,
        "changed": PASSED,
        "question_texts": _optional((_texts_by_id, "a mapping of question id to text")),
        "saved_to": _optional((_places, "a list of store URLs (or None), one a run")),
        "cluster_by": _optional(TEXT),
        "questions": _optional((_questions, "a list of GoldenQuestion")),
        "all_pairs": FLAG,
        "control": _optional(TEXT),
        "correction": PASSED,
    },
    "power": {
        "set": SET,
        "run": _optional((_text, "a stored run's id")),
        "retriever": _optional(RETRIEVER),
        "store": PASSED,
        "drop": PASSED,
        "confidence": PASSED,
        "config": CONFIG,
        "cluster_by": _optional(TEXT),
    },
    "interleave_credit": {
        "log": (_path, "the path of a clicks log"),
        "effect": PASSED,
        "confidence": PASSED,
        "config": CONFIG,
    },
    "pool": {
        "set": SET,
        "runs": (
            lambda value: _sequence(value) and all(_text(item) or _run(item) for item in value),
            "a list of stored run ids, Run or ResultRecord",
        ),
        "depth": PASSED,
        "budget": PASSED,
        "priority": TEXT,
        "extra_labels": (
            lambda value: _sequence(value) and all(_path(item) for item in value),
            "a list of labels file paths",
        ),
        "store": PASSED,
        "config": CONFIG,
    },
    "fidelity": {
        "set": SET,
        "candidate": RETRIEVER,
        "reference": RETRIEVER,
        "k": PASSED,
        "persistence": PASSED,
        "config": CONFIG,
    },
    "drift": {
        "log": (
            lambda value: _path(value) or _golden_set(value) or type(value).__name__ == "QueryLog",
            "the path of a query log (JSON Lines, CSV or TSV), a QueryLog or a GoldenQuestionSet",
        ),
        "retriever": RETRIEVER,
        "against": _optional(RETRIEVER),
        "against_run": _optional(TEXT),
        "sample": _optional(WHOLE),
        "seed": _optional(WHOLE),
        "save": FLAG,
        "store": _optional(TEXT),
        "config": CONFIG,
    },
    "sweep": {
        "set": SET,
        "sweep": (_sweep, "a [sweeps.NAME] name or a SweepConfig"),
        "k": PASSED,
        "overfetch": PASSED,
        "resamples": PASSED,
        "confidence": PASSED,
        "concurrency": PASSED,
        "timeout": PASSED,
        "max_error_rate": PASSED,
        "config": CONFIG,
        "progress_file": _optional((_path, "the path of a progress file")),
        "share_stages": FLAG,
        "executor": EXECUTOR,
        "ray_address": PASSED,
        "repeat": PASSED,
        "warmup": PASSED,
    },
    # parse_metric checks its own (metrics.definitions may import nothing of the API).
    "parse_metric": {"name": PASSED},
}


def describe(value: Any) -> str:
    """``value`` as a message shows it: short, and its kind when that says more."""
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    if isinstance(value, str):
        shown = repr(value)
        return shown if len(shown) <= 40 else shown[:37] + "...'"
    return f"a {type(value).__name__}"


def check(function: str, arguments: Mapping[str, Any]) -> None:
    """Each of ``arguments`` (a public function's ``locals()`` on entry) of the kind its
    rule takes; else an `ArgumentError` naming the first argument that is not."""
    rules = RULES[function]
    for name, value in arguments.items():
        rule = rules.get(name)
        if rule is None or rule is PASSED:
            continue
        accepts, words = rule
        if not accepts(value):
            raise ArgumentError(
                f"must be {words}, got {describe(value)}",
                field=name,
            )
