"""Every public function of the Python API checks its arguments' kinds first.

For each public function and each of its arguments, values of kinds its signature does
not declare (None where None is not allowed, a number, a list, a bare object, and more
drawn from a seeded pool) give an `InputError` (a `TypeError` too, for the wrong kind)
naming that argument, or its command-line option for a value the command line checks,
never a bare `TypeError`/`AttributeError` from inside; values of declared kinds either
work or are refused naming the argument too. `compare` and `gate` refuse exactly the
``cluster_by`` values `evaluate` refuses, in the same words.
"""

from __future__ import annotations

import inspect
import random
from pathlib import Path
from typing import Any

import pytest

import retrievalkit as rk
from retrievalkit import api, api_arguments
from retrievalkit.errors import ArgumentError, InputError, RetrievalkitError
from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet

DEMO = Path(rk.__file__).parent / "demo"
QUESTIONS = [
    GoldenQuestion(id=f"q{i}", question=f"question {i}", expected=[f"d{i}"]) for i in range(12)
]
GOLDEN = GoldenQuestionSet(name="arguments", questions=QUESTIONS)
PUBLIC = [
    "load_config", "load_set", "open_store", "evaluate", "gate", "compare", "power",
    "fidelity", "pool", "sweep", "parse_metric",
]  # fmt: skip


class Finder:
    identifier = "finder"

    def retrieve(self, question: str, limit: int) -> list[str]:
        return [f"d{question.split()[-1]}"]


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """A call of each function that works; each test changes one argument of it."""
    path = tmp_path_factory.mktemp("arguments") / "retrievalkit.toml"
    path.write_text(
        f'[retrievers.lexical]\nplugin = "bm25"\ncorpus = "{DEMO / "corpus.jsonl"}"\n',
        encoding="utf-8",
    )
    run = rk.evaluate(GOLDEN, Finder(), git_commit=None, resamples=20)
    other = rk.evaluate(GOLDEN, Finder(), git_commit=None, resamples=20, name="other")
    demo = rk.load_set(DEMO / "golden.jsonl")
    return {
        "load_config": {},
        "load_set": {"set": str(DEMO / "golden.jsonl")},
        "open_store": {"url": "memory:"},
        "evaluate": {"set": GOLDEN, "retriever": Finder(), "git_commit": None, "resamples": 20},
        "gate": {"run": run, "store": rk.open_store("memory:")},
        "compare": {"runs": [run, other], "resamples": 20},
        "power": {"set": GOLDEN},
        "fidelity": {"set": GOLDEN, "candidate": Finder(), "reference": Finder()},
        "pool": {"set": GOLDEN, "runs": [run, other], "store": "memory:"},
        "sweep": {
            "set": demo,
            "sweep": rk.SweepConfig("s", "lexical", {"k1": (0.9, 1.5)}),
            "resamples": 20,
            "config": rk.load_config(path),
        },
        "parse_metric": {"name": "hit@3"},
    }


def _function(name: str) -> Any:
    return getattr(rk, name)


def test_every_argument_of_every_public_function_has_a_rule() -> None:
    assert {name for name in PUBLIC if name != "parse_metric"} <= set(api.__dict__)
    for name in PUBLIC:
        parameters = set(inspect.signature(_function(name)).parameters)
        assert parameters == set(api_arguments.RULES[name]), name


def _declares(annotation: str, value: Any) -> bool:
    """Whether a signature's annotation (a string under postponed evaluation) declares
    the kind of ``value``: the oracle, independent of the rules under test."""
    text = annotation.replace(" ", "")
    if "Any" in text.split("|") or text in ("Any", ""):
        return True
    kinds = set()
    for part in text.replace("[", "|[").split("|"):
        kinds.add(part.split("[")[0])
    if value is None:
        return "None" in kinds
    if isinstance(value, bool):
        return "bool" in kinds
    if isinstance(value, int):
        return bool({"int", "float"} & kinds)
    if isinstance(value, float):
        return "float" in kinds
    if isinstance(value, str):
        return bool({"str", "Literal"} & kinds)
    if isinstance(value, (list, tuple)):
        return bool({"Sequence", "list", "tuple"} & kinds)
    if isinstance(value, dict):
        return bool({"Mapping", "dict", "Thresholds"} & kinds)
    return False


#: Arguments whose command-line option is spelled otherwise than ``--ARGUMENT``.
FLAGS = {
    "slices": "--slice", "metrics": "--metric", "sweep": "NAME", "runs": "--retriever/--run",
    "candidate": "--retriever", "reference": "--retriever", "path": "--config", "url": "--store",
}  # fmt: skip


def _names_argument(error: RetrievalkitError, argument: str) -> bool:
    field = getattr(error, "field", None) or ""
    flag = FLAGS.get(argument, "--" + argument.replace("_", "-"))
    names = (argument, flag, *flag.split("/"))  # "--retriever/--run": either one
    return field in names or argument in str(error) or flag in str(error)


#: Arguments whose None takes the default although the signature gives a value: the
#: settings resolver (`retrievalkit.pipeline.engine.settings`) reads None as "left out".
NONE_IS_DEFAULT = {("evaluate", "seed")}


def _pool(seed: int) -> list[Any]:
    """The four kinds every argument is tried with, and a seeded draw of others."""
    draw = random.Random(seed)
    others: list[Any] = [
        draw.randint(-5, 10**6), draw.uniform(-5, 5), True, "", " ", "x" * draw.randint(1, 9),
        [draw.randint(0, 9)], ("a", "b"), {"a": draw.randint(0, 9)}, b"bytes", 1 + 2j,
        frozenset({1}), range(3),
    ]  # fmt: skip
    return [None, draw.randint(1, 99), [], object(), *draw.sample(others, 5)]


@pytest.mark.parametrize("function", PUBLIC)
@pytest.mark.parametrize("seed", range(3))
def test_a_wrong_kind_of_argument_is_refused_naming_it(
    bases: dict[str, dict[str, Any]], function: str, seed: int
) -> None:
    call = _function(function)
    parameters = inspect.signature(call).parameters
    refused = 0
    for argument, parameter in parameters.items():
        annotation = str(parameter.annotation)
        pool = _pool(seed * 1000 + len(argument))
        if function == "sweep":
            pool = pool[:4]  # a sweep that runs takes seconds: the four kinds only
        for value in pool:
            arguments = {**bases[function], argument: value}
            try:
                call(**arguments)
            except RetrievalkitError as error:
                assert _names_argument(error, argument), (function, argument, value, str(error))
                refused += 1
                if not _declares(annotation, value):
                    # Of a kind the signature does not declare: an InputError, a TypeError.
                    assert isinstance(error, InputError), (function, argument, value)
                continue
            except ValueError as error:
                # parse_metric's documented error for a string that names no metric.
                assert function == "parse_metric" and isinstance(value, str), error
                continue
            except TypeError as error:  # pragma: no cover - what this test is for
                raise AssertionError(f"{function}({argument}={value!r}): bare {error!r}") from error
            except AttributeError as error:  # pragma: no cover
                raise AssertionError(f"{function}({argument}={value!r}): bare {error!r}") from error
            if value is None and (function, argument) in NONE_IS_DEFAULT:
                continue
            assert _declares(annotation, value), (
                f"{function}({argument}={value!r}) was taken, but {annotation} does not "
                "declare that kind"
            )
    assert refused > 0


@pytest.mark.parametrize("function", ["evaluate", "load_set", "power", "fidelity"])
def test_a_set_of_none_names_the_argument_and_is_a_type_error(function: str) -> None:
    base: dict[str, Any] = {"set": None}
    if function == "evaluate":
        base["retriever"] = Finder()
    if function == "fidelity":
        base.update(candidate=Finder(), reference=Finder())
    with pytest.raises(TypeError) as caught:
        _function(function)(**base)
    assert isinstance(caught.value, ArgumentError) and caught.value.field == "set"
    assert str(caught.value).startswith("field 'set': ")
    assert "os.fspath" not in str(caught.value)


def _cluster_values(seed: int) -> list[Any]:
    draw = random.Random(seed)
    letters = "abcdefgh.xyz "
    words = ["".join(draw.choice(letters) for _ in range(draw.randint(0, 8))) for _ in range(6)]
    return [
        *words, "meta.", "meta. ", "Cluster", "cluster ", "hard-class", "expected", "meta.topic",
        "cluster", 7, [], object(),
    ]  # fmt: skip


@pytest.mark.parametrize("seed", range(5))
def test_compare_and_gate_refuse_the_cluster_by_evaluate_refuses_in_its_words(
    seed: int,
) -> None:
    clustered = GoldenQuestionSet(
        "clustered",
        [
            GoldenQuestion(
                id=f"q{i}", question=f"question {i}", expected=[f"d{i}"], cluster=f"c{i % 3}",
                meta={"topic": f"t{i % 2}"},
            )
            for i in range(12)
        ],
    )  # fmt: skip
    first = rk.evaluate(clustered, Finder(), git_commit=None, resamples=20)
    second = rk.evaluate(clustered, Finder(), git_commit=None, resamples=20, name="b")
    for value in _cluster_values(seed):
        said: list[str | None] = []
        for function in ("evaluate", "compare", "gate"):
            try:
                if function == "evaluate":
                    rk.evaluate(
                        clustered, Finder(), git_commit=None, resamples=20, cluster_by=value
                    )
                elif function == "compare":
                    rk.compare([first, second], resamples=20, cluster_by=value)
                else:
                    rk.gate(second, rk.open_store("memory:"), cluster_by=value)
                said.append(None)
            except InputError as error:
                said.append(str(error))
        assert said[0] == said[1] == said[2], (value, said)
        if said[0] is not None:
            assert "cluster" in said[0], said[0]
