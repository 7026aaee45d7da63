"""One resolver for every evaluation setting: the command line, the Python API and sweeps.

The same configuration and the same given values must give the same settings whichever
way a run is started. Generated configurations (every `[eval]` key and `[regression]`
threshold, present or not) meet generated options; each is resolved by the command
line's real parser and `evaluation_settings`, and by `EvalSettings.resolve` with the
same values as keywords, and both must agree. End to end, `retrievalkit eval` and
`rk.evaluate` store the same manifest for the same configuration, and both fall back to
`[regression] max_error_rate`.
"""

from __future__ import annotations

import json
import random
import shlex
from pathlib import Path
from typing import Any

import pytest

import retrievalkit as rk
from retrievalkit.cli.commands.options import evaluation_settings
from retrievalkit.cli.main import build_parser
from retrievalkit.errors import InputError, RunFailed
from retrievalkit.formats.config import Config, parse_config
from retrievalkit.pipeline.engine.settings import EvalSettings

CASES = 300


def _config_table(rng: random.Random) -> dict[str, Any]:
    """A configuration with a random subset of the [eval] and [regression] keys."""
    table: dict[str, Any] = {}
    evaluation: dict[str, Any] = {}
    if rng.random() < 0.5:
        evaluation["k"] = sorted(rng.sample(range(1, 60), rng.randint(1, 4)))
    if rng.random() < 0.5:
        evaluation["overfetch"] = rng.randint(1, 6)
    if rng.random() < 0.5:
        evaluation["resamples"] = rng.randint(1, 5000)
    if rng.random() < 0.5:
        evaluation["confidence"] = rng.choice((0.8, 0.9, 0.99))
    if rng.random() < 0.5:
        evaluation["concurrency"] = rng.randint(1, 8)
    if rng.random() < 0.5:
        evaluation["timeout"] = rng.choice((0.5, 2.0, 30.0))
    if rng.random() < 0.5:
        evaluation["slices"] = rng.sample(["topic", "lang", "team"], rng.randint(1, 2))
    if rng.random() < 0.5:
        evaluation["metrics"] = rng.sample(["ndcg_exp@10", "ndcg_exp@20", "ap@7"], 1)
    if rng.random() < 0.3:
        evaluation["cluster_by"] = rng.choice(("hard_class", "expected", "meta.topic"))
    if rng.random() < 0.3:
        evaluation["chunk_separator"] = "#"
    if rng.random() < 0.4:
        evaluation["repeat"] = rng.randint(1, 5)
    if rng.random() < 0.4:
        evaluation["warmup"] = rng.randint(0, 200)
    if evaluation:
        table["eval"] = evaluation
    regression: dict[str, Any] = {}
    if rng.random() < 0.5:
        regression["max_error_rate"] = rng.choice((0.0, 0.1, 0.5, 1.0))
    for metric in rng.sample(["ndcg@20", "ndcg_exp@5", "recall@50", "rr"], rng.randint(0, 2)):
        regression.setdefault("metrics", {})[metric] = 0.05
    if regression:
        table["regression"] = regression
    return table


def _options(rng: random.Random) -> tuple[list[str], dict[str, Any]]:
    """Random `eval` options, and the same values as the API's keywords."""
    words: list[str] = []
    given: dict[str, Any] = {}
    if rng.random() < 0.5:
        ks = sorted(rng.sample(range(1, 40), rng.randint(1, 3)))
        words += ["--k", ",".join(map(str, ks))]
        given["k"] = ks
    for option, key, values in (
        ("--overfetch", "overfetch", (1, 2, 5)),
        ("--resamples", "resamples", (10, 999)),
        ("--confidence", "confidence", (0.85, 0.975)),
        ("--concurrency", "concurrency", (1, 3)),
        ("--timeout", "timeout", (1.5, 60.0)),
        ("--max-error-rate", "max_error_rate", (0.0, 0.25, 1.0)),
        ("--cluster-by", "cluster_by", ("hard_class", "meta.lang")),
        ("--chunk-separator", "chunk_separator", ("::",)),
        ("--repeat", "repeat", (1, 3)),
        ("--warmup", "warmup", (0, 7)),
    ):
        if rng.random() < 0.4:
            value = rng.choice(values)
            words += [option, str(value)]
            given[key] = value
    for option, key, values in (
        ("--slice", "slices", ("lang", "owner")),
        ("--metric", "metrics", ("ndcg_exp@3", "ap@7")),
    ):
        chosen = [value for value in values if rng.random() < 0.4]
        for value in chosen:
            words += [option, value]
        if chosen:
            given[key] = chosen
    return words, given


def _parsed(words: list[str]) -> Any:
    command = ["eval", "--set", "demo", "--retriever", "bm25-demo", *words]
    parser, _ = build_parser(command)
    return parser.parse_args(command)


@pytest.mark.parametrize("seed", range(CASES))
def test_the_command_line_and_the_api_resolve_every_setting_alike(seed: int) -> None:
    rng = random.Random(seed)
    config = parse_config(_config_table(rng), Path("retrievalkit.toml"))
    words, given = _options(rng)
    on_the_command_line = evaluation_settings(_parsed(words), config)
    on_the_command_line.pop("config")
    # What evaluate() makes of what the command line hands it...
    handed = EvalSettings.resolve(config, **on_the_command_line)
    # ... equals what it makes of the same values given in Python.
    in_python = EvalSettings.resolve(config, **given)
    assert handed == in_python, shlex.join(words)


@pytest.mark.parametrize("seed", range(CASES))
def test_each_setting_is_the_argument_else_the_configuration_else_the_default(
    seed: int,
) -> None:
    rng = random.Random(seed)
    table = _config_table(rng)
    config = parse_config(table, Path("retrievalkit.toml"))
    _, given = _options(rng)
    resolved = EvalSettings.resolve(config, **given)
    evaluation = table.get("eval", {})
    defaults = {
        "overfetch": 3,
        "resamples": 2000,
        "confidence": 0.95,
        "concurrency": 1,
        "timeout": None,
        "cluster_by": None,
        "chunk_separator": None,
        "repeat": 1,
        "warmup": 0,
    }
    for key, default in defaults.items():
        expected = given.get(key, evaluation.get(key, default))
        assert getattr(resolved, key) == expected, key
    regression = table.get("regression", {})
    assert resolved.max_error_rate == given.get(
        "max_error_rate", regression.get("max_error_rate", 0.0)
    )
    # k: the given cut-offs, else the configuration's, else 1, 3, 5, 10; 1 and 3 always;
    # every asked or gated metric's cut-off added.
    base = given.get("k", evaluation.get("k", [1, 3, 5, 10]))
    asked = [*given.get("metrics", ()), *evaluation.get("metrics", ())]
    gated = [*regression.get("metrics", {})]
    cut_offs = {int(name.rpartition("@")[2]) for name in [*asked, *gated] if "@" in name}
    assert resolved.k == tuple(sorted({*base, 1, 3, *cut_offs}))
    # slices and metrics add up: the configuration's and the given ones, each once.
    assert resolved.slices == tuple(
        dict.fromkeys([*evaluation.get("slices", ()), *given.get("slices", ())])
    )
    on_request = [name for name in gated if name.startswith("ndcg_exp")]
    assert set(resolved.metrics) == {*asked, *on_request}
    assert len(resolved.metrics) == len(set(resolved.metrics))
    # Resolving the resolved settings again changes nothing.
    assert EvalSettings.resolve(config, **resolved.arguments()) == resolved


@pytest.mark.parametrize(
    ("keyword", "value", "field"),
    [
        ("k", [0], "--k"),
        ("k", "1,3", "--k"),
        ("overfetch", 0, "--overfetch"),
        ("resamples", -1, "--resamples"),
        ("confidence", 1.0, "--confidence"),
        ("concurrency", 2.5, "--concurrency"),
        ("timeout", float("nan"), "--timeout"),
        ("max_error_rate", 1.5, "--max-error-rate"),
        ("slices", "topic", "--slice"),
        ("metrics", "ndcg_exp@10", "--metric"),
        ("metrics", ["no_such_metric@3"], "--metric"),
        ("seed", -3, "--seed"),
        ("repeat", 0, "--repeat"),
        ("repeat", 1.5, "--repeat"),
        ("repeat", True, "--repeat"),
        ("warmup", -1, "--warmup"),
        ("warmup", "2", "--warmup"),
    ],
)
def test_a_bad_setting_is_refused_naming_its_option(keyword: str, value: Any, field: str) -> None:
    with pytest.raises(InputError) as raised:
        EvalSettings.resolve(Config(), **{keyword: value})
    assert raised.value.field == field


def _unreachable_config(folder: Path, regression: str) -> Path:
    """A retriever that errors on every question (nothing listens on port 9)."""
    path = folder / "retrievalkit.toml"
    path.write_text(
        '[retrievers.down]\nplugin = "http"\nurl = "http://127.0.0.1:9/search"\n'
        f"timeout = 1\nretries = 0\n[regression]\n{regression}\n",
        encoding="utf-8",
    )
    return path


def test_both_sides_fall_back_to_the_configured_max_error_rate(tmp_path: Path, cli: Any) -> None:
    """Before, `rk.evaluate` ignored `[regression] max_error_rate` (it defaulted to 0)."""
    tolerant = _unreachable_config(tmp_path, "max_error_rate = 1.0")
    run = rk.evaluate("demo", "down", config=tolerant, resamples=10, git_commit=None)
    assert run.errored == len(run.set.questions)
    result = cli(
        "eval", "--set", "demo", "--retriever", "down", "--config", str(tolerant),
        "--resamples", "10", "--store", "memory:", "--format", "json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["errored"] == run.errored
    strict = _unreachable_config(tmp_path, "max_error_rate = 0.5")
    with pytest.raises(RunFailed):
        rk.evaluate("demo", "down", config=strict, resamples=10, git_commit=None)
    result = cli(
        "eval", "--set", "demo", "--retriever", "down", "--config", str(strict),
        "--resamples", "10", "--store", "memory:",
    )  # fmt: skip
    assert result.returncode == 3, result.stderr
    # A value given wins over the configuration's, on both sides.
    assert rk.evaluate(
        "demo", "down", config=strict, resamples=10, git_commit=None, max_error_rate=None
    ).errored


@pytest.mark.parametrize("seed", range(6))
def test_eval_and_evaluate_store_the_same_settings_for_one_configuration(
    seed: int, tmp_path: Path, cli: Any
) -> None:
    rng = random.Random(seed)
    table = _config_table(rng)
    table.get("eval", {}).pop("cluster_by", None)  # the demo set has no meta.topic
    table.get("eval", {}).pop("chunk_separator", None)
    table.get("eval", {}).pop("slices", None)
    table.setdefault("eval", {})["resamples"] = rng.randint(10, 50)
    lines = []
    for section, values in table.items():
        lines.append(f"[{section}]")
        for key, value in values.items():
            if isinstance(value, dict):
                continue
            lines.append(f"{key} = {json.dumps(value)}")
        for key, value in values.items():
            if isinstance(value, dict):
                lines.append(f"[{section}.{key}]")
                lines += [f'"{name}" = {drop}' for name, drop in value.items()]
    path = tmp_path / "retrievalkit.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = rk.evaluate("demo", "bm25-demo", config=path, git_commit=None)
    result = cli(
        "eval", "--set", "demo", "--retriever", "bm25-demo", "--config", str(path),
        "--store", "memory:", "--format", "json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    manifest = document["manifest"]
    for key in ("ks", "overfetch", "resamples", "confidence", "seed"):
        assert manifest[key] == json.loads(json.dumps(getattr(run.record.manifest, key))), key
    # The timing settings too: [eval] repeat and warmup, else 1 and 0, on both sides.
    machine = run.record.manifest.machine
    assert machine is not None
    for key, default in (("repeat", 1), ("warmup", 0), ("concurrency", 1)):
        expected = table["eval"].get(key, default)
        assert manifest["machine"][key] == getattr(machine, key) == expected, key
    assert sorted(document["metrics"]) == sorted(run.metrics)
