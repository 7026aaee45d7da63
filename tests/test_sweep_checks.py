"""What a sweep refuses before it asks a question: generated bad grids, shares and configurations.

Each class is drawn many times with a seed: grids that are no grid (empty, not a list,
a value tried twice, values of two kinds, nan, infinite or huge numbers, one
configuration), ``confirm``/``folds``/``seed`` out of range, options the retriever does
not take or values of the wrong kind, values the retriever refuses when it starts
(negative, zero), shares of a split too small to confirm anything, and a retriever
that raises while starting for one configuration. Every refusal is an `InputError`
(exit code 2) naming the ``sweeps.NAME`` key (and, from a file, its line), raised
before any question is asked; on the command line it is one line.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from child_env import child_environment

import retrievalkit as rk
from retrievalkit.errors import InputError
from retrievalkit.formats.config import Config
from retrievalkit.formats.sweep_table import SweepConfig
from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet
from retrievalkit.pipeline.sweeps import sweep_split
from retrievalkit.pipeline.sweeps.sweep_checks import minimum_share

DEMO = Path(rk.__file__).parent / "demo"
FAST = {"resamples": 50}
SEEDS = range(30)


@pytest.fixture(scope="module")
def demo() -> GoldenQuestionSet:
    return rk.load_set(DEMO / "golden.jsonl")


def _toml(value: Any) -> str:
    """``value`` written as TOML (numbers, strings, booleans, arrays, inline tables)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, (int, str)):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f'"{k}" = {_toml(v)}' for k, v in value.items()) + " }"
    raise TypeError(value)


def _config(folder: Path, sweep: str) -> Config:
    corpus = DEMO / "corpus.jsonl"
    text = textwrap.dedent(
        f"""
        [retrievers.stemmed]
        plugin = "bm25"
        corpus = "{corpus}"

        [retrievers.plain]
        plugin = "bm25"
        corpus = "{corpus}"
        stemmer = ""

        [retrievers.both]
        plugin = "fusion"
        retrievers = ["stemmed", "plain"]
        """
    )
    path = folder / "retrievalkit.toml"
    path.write_text(text + sweep, encoding="utf-8")
    return rk.load_config(path)


def _refused(folder: Path, sweep: str) -> InputError:
    with pytest.raises(InputError) as caught:
        _config(folder, sweep)
    return caught.value


# --- grids and tables that are no sweep ---------------------------------------------------


def _bad_grid(draw: random.Random) -> tuple[str, dict[str, Any], str, str]:
    """(class, grid, the key the error names, a word of the message)."""
    option = draw.choice(["k1", "b", "k", "depth", "stemmer", "weights", "x_y"])
    good = [draw.uniform(0, 5) for _ in range(draw.randint(1, 3))]
    cls = draw.choice(["empty", "not a list", "twice", "kinds", "nan", "inf", "huge", "single"])
    other = {"z": [1, 2]} if draw.random() < 0.5 else {}
    if cls == "empty":
        return cls, {option: [], **other}, option, "non-empty list"
    if cls == "not a list":
        value = draw.choice([3, "x", 0.5, True, {"a": 1}])
        return cls, {option: value, **other}, option, "non-empty list"
    if cls == "twice":
        kind = draw.choice(["int", "float", "str", "list", "table"])
        make = {
            "int": lambda i: i,
            "float": lambda i: i + 0.25,
            "str": lambda i: f"v{i}",
            "list": lambda i: [i, i + 1],
            "table": lambda i: {"a": i, "b": [i]},
        }[kind]
        values = [make(i) for i in draw.sample(range(100), draw.randint(1, 4))]
        twin = values[draw.randrange(len(values))]
        if kind == "int" and draw.random() < 0.5:
            twin = float(twin)  # 1 and 1.0 are one value
        values.insert(draw.randint(0, len(values)), twin)
        return cls, {option: values, **other}, option, "twice"
    if cls == "kinds":
        odd = draw.choice(["text", True, [1], {"a": 1}])
        values = [*good]
        values.insert(draw.randint(0, len(values)), odd)
        return cls, {option: values, **other}, option, "different kinds"
    if cls in ("nan", "inf", "huge"):
        odd = {
            "nan": math.nan,
            "inf": draw.choice([math.inf, -math.inf]),
            "huge": draw.choice([1e300, -1e16, 10**17, 2.0**80]),
        }[cls]
        nested = draw.random() < 0.3 and cls == "huge"
        values = [*good]
        values.insert(draw.randint(0, len(values)), [odd, 1.0] if nested else odd)
        if nested:
            values = [[v, 1.0] if not isinstance(v, list) else v for v in values]
        return cls, {option: values, **other}, option, "finite" if cls != "huge" else "beyond"
    return cls, {option: [good[0]], "z": [draw.randint(0, 9)]}, "", "one configuration"


@pytest.mark.parametrize("seed", SEEDS)
def test_a_grid_that_is_no_grid_is_refused_naming_its_option(tmp_path: Path, seed: int) -> None:
    draw = random.Random(seed)
    for _ in range(6):
        cls, grid, option, word = _bad_grid(draw)
        table = f'[sweeps.s]\nretriever = "both"\ngrid = {_toml(grid)}\n'
        error = _refused(tmp_path, table)
        field = "sweeps.s.grid" + (f".{option}" if option else "")
        assert error.field == field, (cls, grid, str(error))
        assert word in str(error), (cls, grid, str(error))
        assert error.line is not None and error.source is not None
        if cls in ("nan", "inf"):
            continue  # TOML's nan and inf: refused on reading, before the grid is read
        # The same grid built in code is refused by rk.sweep with the same words.
        if cls in ("not a list",) or not grid.get(option, True):
            continue
        spec = SweepConfig("s", "both", {k: tuple(v) for k, v in grid.items()})
        with pytest.raises(InputError) as caught:
            rk.sweep(GoldenQuestionSet("t", []), spec, config=_config(tmp_path, ""), **FAST)
        assert caught.value.field == field and word in str(caught.value), (cls, grid)


BAD_SHARES = [0, 1, -0.2, 1.5, 1e9, math.nan, math.inf, True, "0.3"]


@pytest.mark.parametrize("seed", range(10))
def test_confirm_folds_and_seed_out_of_range_are_refused(tmp_path: Path, seed: int) -> None:
    draw = random.Random(seed)
    base = 'retriever = "both"\ngrid = { k = [1, 60] }\n'
    key, value, word = draw.choice(
        [
            ("confirm", draw.choice(BAD_SHARES), "share between 0 and 1"),
            ("folds", draw.choice([0, 1, -3, 2.5, True, "3"]), ">= 2"),
            ("seed", draw.choice([-1, 1.5, "7", False]), ">= 0"),
        ]
    )
    literal = _toml(value)
    error = _refused(tmp_path, f"[sweeps.s]\n{base}{key} = {literal}\n")
    if isinstance(value, float) and not math.isfinite(value):
        assert "finite" in str(error)  # nan and inf are refused on reading
    else:
        assert word in str(error), (key, value, str(error))
    assert error.field == f"sweeps.s.{key}" and error.line is not None
    if (isinstance(value, float) and math.isnan(value)) or key == "folds":
        return
    spec = SweepConfig("s", "both", {"k": (1, 60)}, **{key: value})
    with pytest.raises(InputError) as caught:
        rk.sweep(GoldenQuestionSet("t", []), spec, config=_config(tmp_path, ""), **FAST)
    assert caught.value.field == f"sweeps.s.{key}", str(caught.value)


# --- options the retriever does not take, values it refuses -------------------------------

UNKNOWN = ["k2", "kl", "stemer", "topk", "depht", "B", "K1", "colour", "k1_", "fields2"]
WRONG_KIND = [
    ("stemmed", "k1", ["high", "low"]),
    ("stemmed", "b", [True, False]),
    ("stemmed", "stemmer", [1, 2]),
    ("stemmed", "max_doc_words", [1.5, 2.5]),
    ("both", "k", [10.5, 60.5]),
    ("both", "k", ["10", "60"]),
    ("both", "method", [1, 2]),
    ("both", "stemmed.k1", ["a", "b"]),
    ("both", "plain.b", [[0.1], [0.2]]),
]


@pytest.mark.parametrize("seed", range(10))
def test_an_option_the_retriever_does_not_take_or_a_value_of_the_wrong_kind_is_refused(
    tmp_path: Path, seed: int, demo: GoldenQuestionSet
) -> None:
    draw = random.Random(seed)
    retriever = draw.choice(["stemmed", "both"])
    name = draw.choice(UNKNOWN)
    config = _config(
        tmp_path, f'[sweeps.s]\nretriever = "{retriever}"\ngrid = {{ {name} = [1, 2] }}\n'
    )
    with pytest.raises(InputError) as caught:
        rk.sweep(demo, "s", config=config, **FAST)
    assert caught.value.field == f"sweeps.s.grid.{name}" and caught.value.line is not None
    assert f"'{name}' is no option of retriever '{retriever}'" in str(caught.value)
    swept, option, values = draw.choice(WRONG_KIND)
    config = _config(
        tmp_path,
        f'[sweeps.s]\nretriever = "{swept}"\ngrid = {{ "{option}" = {_toml(values)} }}\n',
    )
    with pytest.raises(InputError) as caught:
        rk.sweep(demo, "s", config=config, **FAST)
    assert caught.value.field == f"sweeps.s.grid.{option}", str(caught.value)
    assert repr(values[0]) in str(caught.value) or repr(values[1]) in str(caught.value)


#: (swept retriever, option, values the retriever refuses when it starts)
REFUSED_WHEN_STARTING = [
    ("stemmed", "k1", lambda d: -d.uniform(0.01, 100)),
    ("stemmed", "b", lambda d: -d.uniform(0.01, 100)),
    ("both", "k", lambda d: -d.randint(0, 1000)),
    ("both", "depth", lambda d: -d.randint(0, 1000)),
    ("both", "stemmed.k1", lambda d: -d.uniform(0.01, 100)),
    ("both", "plain.b", lambda d: -d.uniform(0.01, 100)),
    ("stemmed", "b", lambda d: d.uniform(1.01, 100)),
    ("stemmed", "max_doc_words", lambda d: -d.randint(0, 1000)),
    ("both", "weights", lambda d: [-d.uniform(0.01, 9), 1.0]),
    ("stemmed", "stemmer", lambda d: d.choice(["klingon", "elvish", "x"])),
    ("both", "method", lambda d: d.choice(["max", "borda-x", ""])),
]


@pytest.mark.parametrize("seed", range(22))
def test_a_configuration_its_retriever_refuses_is_named_before_any_question(
    tmp_path: Path, seed: int, demo: GoldenQuestionSet
) -> None:
    draw = random.Random(seed)
    swept, option, bad = REFUSED_WHEN_STARTING[seed % len(REFUSED_WHEN_STARTING)]
    value = bad(draw)
    good = {
        "k1": 1.2, "b": 0.5, "k": 60, "depth": 50, "stemmer": "english", "method": "rrf",
        "max_doc_words": 300, "weights": [1.0, 2.0],
    }  # fmt: skip
    values = [good[option.rpartition(".")[2]], value]
    draw.shuffle(values)
    config = _config(
        tmp_path,
        f'[sweeps.s]\nretriever = "{swept}"\ngrid = {{ "{option}" = {_toml(values)} }}\n',
    )
    progress = tmp_path / "progress.jsonl"
    with pytest.raises(InputError) as caught:
        rk.sweep(demo, "s", config=config, progress_file=progress, **FAST)
    text = str(caught.value)
    assert f"configuration {option}={value!r}" in text, text
    assert caught.value.field == f"sweeps.s.grid.{option}", text
    # Nothing was asked: the progress file holds its header only.
    assert len(progress.read_text().splitlines()) == 1


# --- a retriever that raises while starting ------------------------------------------------

STARTER = """
import os

class Answering:
    identifier = "starter"

    def __init__(self, log):
        self.log = log

    def retrieve(self, question, limit):
        with open(self.log, "a") as handle:
            handle.write(question + "\\n")
        return ["doc-1"]


def make(*, mode="ok", level=1, log="asked.log"):
    if mode in ("boom", "kaboom"):
        raise RuntimeError(f"cannot open the index in mode {mode}")
    if level > 5:
        raise ConnectionError(f"level {level} needs a server that is not there")
    return Answering(log)
"""


@pytest.fixture(scope="module")
def starter_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("starter-site")
    (site / "rk_starter.py").write_text(STARTER, encoding="utf-8")
    info = site / "rk_starter-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rk-starter\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[retrievalkit.retrievers]\nstarter = rk_starter:make\n")
    return site


def test_a_configuration_whose_retriever_raises_while_starting_is_exit_2_naming_it(
    tmp_path: Path, starter_site: Path
) -> None:
    draw = random.Random(42)
    cases = []
    for index in range(12):
        modes = ["ok", "fine", draw.choice(["boom", "kaboom"])]
        levels = [1, draw.choice([2, 3, 9, 12])]
        draw.shuffle(modes)
        draw.shuffle(levels)
        folder = tmp_path / f"case{index}"
        folder.mkdir()
        (folder / "retrievalkit.toml").write_text(
            '[retrievers.s]\nplugin = "starter"\n\n[sweeps.t]\nretriever = "s"\n'
            f"grid = {{ mode = {_toml(modes)}, level = {_toml(levels)} }}\n",
            encoding="utf-8",
        )
        cases.append((folder, modes, levels))
    # Through the command line, each in its own process: one line, exit code 2.
    for folder, modes, levels in cases[:4]:
        result = subprocess.run(
            [sys.executable, "-m", "retrievalkit", "sweep", "t", "--set",
             str(DEMO / "golden.jsonl"), "--resamples", "50"],
            cwd=folder, env=child_environment(starter_site), capture_output=True, text=True,
            check=False, timeout=120,
        )  # fmt: skip
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2, result.stderr
        assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
        first_bad = next(
            (m, lv) for m in modes for lv in levels if m in ("boom", "kaboom") or lv > 5
        )
        assert f"configuration mode={first_bad[0]!r}, level={first_bad[1]!r}" in lines[0]
        assert "sweeps.t.grid" in lines[0] and "line 6" in lines[0], lines[0]
        assert not (folder / "asked.log").exists(), "a question was asked first"
    # The rest through the Python API, in one child: the same error, field and words.
    script = textwrap.dedent(
        """
        import json, os, sys
        import retrievalkit as rk
        from retrievalkit.errors import InputError
        out = []
        for folder in json.loads(sys.argv[1]):
            os.chdir(folder)
            try:
                rk.sweep(sys.argv[2], "t", config="retrievalkit.toml", resamples=50)
                out.append(["ran", "", ""])
            except InputError as error:
                out.append(["refused", error.field, str(error)])
        print(json.dumps(out))
        """
    )
    folders = [str(folder) for folder, _, _ in cases[4:]]
    result = subprocess.run(
        [sys.executable, "-c", script, json.dumps(folders), str(DEMO / "golden.jsonl")],
        env=child_environment(starter_site), capture_output=True, text=True, check=False,
        timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    for (folder, _modes, _levels), (kind, field, text) in zip(
        cases[4:], json.loads(result.stdout), strict=True
    ):
        assert kind == "refused" and field.startswith("sweeps.t.grid"), text
        assert "cannot start" in text and ("RuntimeError" in text or "ConnectionError" in text)
        assert not (Path(folder) / "asked.log").exists()


def test_a_configured_retriever_that_cannot_start_is_still_exit_3(
    tmp_path: Path, starter_site: Path
) -> None:
    """The configured options themselves failing is the backend, not the grid."""
    (tmp_path / "retrievalkit.toml").write_text(
        '[retrievers.s]\nplugin = "starter"\nmode = "boom"\n\n[sweeps.t]\nretriever = "s"\n'
        "grid = { level = [1, 2] }\n",
        encoding="utf-8",
    )
    result = subprocess.run(
        [sys.executable, "-m", "retrievalkit", "sweep", "t", "--set",
         str(DEMO / "golden.jsonl"), "--resamples", "50"],
        cwd=tmp_path, env=child_environment(starter_site), capture_output=True, text=True,
        check=False, timeout=120,
    )  # fmt: skip
    assert result.returncode == 3, result.stderr
    assert "could not start" in result.stderr and "boom" in result.stderr


# --- shares too small to confirm anything -------------------------------------------------


def _set(count: int, clusters: int | None, draw: random.Random) -> GoldenQuestionSet:
    questions: list[GoldenQuestion] = [
        GoldenQuestion(
            id=f"q{i}",
            question=f"question {i}",
            expected=("doc-1",),
            cluster=None if clusters is None else f"c{draw.randrange(clusters)}",
        )
        for i in range(count)
    ]
    return GoldenQuestionSet("small", questions)


@pytest.mark.parametrize("seed", range(40))
def test_a_share_too_small_to_confirm_anything_is_refused_with_the_numbers(
    tmp_path: Path, seed: int
) -> None:
    draw = random.Random(seed)
    count = draw.randint(2, 40)
    clusters = draw.choice([None, None, draw.randint(2, 20)])
    golden = _set(count, clusters, draw)
    confidence = draw.choice([0.9, 0.95, 0.99])
    least = minimum_share(confidence)
    assert 2 / 2**least <= 1 - confidence + 1e-12 < 2 / 2 ** (least - 1)
    folds = draw.choice([None, None, draw.randint(2, 6)])
    share = draw.choice([0.05, 0.1, 0.3, 0.5, 0.8])
    config = _config(tmp_path, "")
    spec = SweepConfig(
        "s", "stemmed", {"k1": (0.9, 1.2)}, confirm=None if folds else share, folds=folds
    )
    units = sweep_split.units(golden.questions)
    if folds is not None:
        if folds > len(units):
            return
        fold_of = sweep_split.folds(golden.questions, folds, spec.seed)
        sizes = [sum(fold_of[u[0]] == f for u in units) for f in range(folds)]
        smallest = min([len(units)] + [len(units) - size for size in sizes])
    else:
        _, held = sweep_split.split(golden.questions, share, spec.seed)
        out = sum(u[0] in set(held) for u in units)
        smallest = min(out, len(units) - out)
    if smallest >= least:
        return  # a sweep that may run: the other tests run them
    with pytest.raises(InputError) as caught:
        rk.sweep(golden, spec, config=config, confidence=confidence, **FAST)
    text = str(caught.value)
    assert caught.value.field == ("sweeps.s.folds" if folds else "sweeps.s.confirm"), text
    assert f"at least {least}" in text and f"{smallest} " in text, text
    assert ("clusters" if clusters else "questions") in text, text


def test_a_share_just_large_enough_runs(tmp_path: Path, demo: GoldenQuestionSet) -> None:
    """The demo's 75 questions, 8 % held out: 6 held out, the least that can confirm."""
    config = _config(tmp_path, "")
    spec = SweepConfig("s", "stemmed", {"k1": (0.9, 1.2)}, confirm=0.08)
    _, held = sweep_split.split(demo.questions, 0.08, spec.seed)
    assert len(held) == minimum_share(0.95) == 6
    result = rk.sweep(demo, spec, config=config, **FAST)
    assert result.held_out_questions == 6
    spec = SweepConfig("s", "stemmed", {"k1": (0.9, 1.2)}, confirm=0.06)
    with pytest.raises(InputError, match="4 questions held out; each share needs at least 6"):
        rk.sweep(demo, spec, config=config, **FAST)
