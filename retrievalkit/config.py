"""Read the configuration: ``retrievalkit.toml``, ``[tool.retrievalkit]`` or ``--config FILE``.

Every key is checked; an unknown or mistyped one is an error that names the file and
the key, because a silently ignored threshold is a CI gate that never closes.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from retrievalkit.errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

CONFIG_FILE = "retrievalkit.toml"


@attrs.frozen
class RetrieverConfig:
    """A named, configured instance of a retriever plugin."""

    name: str
    plugin: str
    options: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class RegressionConfig:
    """Largest allowed drops (absolute) per metric, e.g. ``{"hit@1": 0.05}``."""

    thresholds: dict[str, float] = attrs.field(factory=dict)
    max_error_rate: float | None = None


@attrs.frozen
class EvalConfig:
    k: tuple[int, ...] | None = None
    overfetch: int | None = None
    resamples: int | None = None
    confidence: float | None = None
    concurrency: int | None = None
    slices: tuple[str, ...] = ()


@attrs.frozen
class Config:
    source: str | None = None
    sets: dict[str, Path] = attrs.field(factory=dict)
    retrievers: dict[str, RetrieverConfig] = attrs.field(factory=dict)
    store_url: str | None = None
    regression: RegressionConfig = attrs.field(factory=RegressionConfig)
    eval: EvalConfig = attrs.field(factory=EvalConfig)


def find_config(explicit: str | None, directory: Path | None = None) -> Config:
    """The explicit file, else ``retrievalkit.toml``, else ``pyproject.toml``'s table, else none."""
    directory = directory or Path.cwd()
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file():
            raise InputError("config file not found", source=explicit, field="--config")
        table = _read_toml(path)
        if path.name == "pyproject.toml":
            table = table.get("tool", {}).get("retrievalkit", {})
        return parse_config(table, path)
    candidate = directory / CONFIG_FILE
    if candidate.is_file():
        return parse_config(_read_toml(candidate), candidate)
    pyproject = directory / "pyproject.toml"
    if pyproject.is_file():
        table = _read_toml(pyproject).get("tool", {}).get("retrievalkit")
        if isinstance(table, dict):
            return parse_config(table, pyproject, prefix="tool.retrievalkit.")
    return Config()


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        document: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8-sig"))
        return document
    except tomllib.TOMLDecodeError as error:
        raise InputError(f"malformed TOML: {error}", source=str(path)) from None
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"cannot read the config: {error}", source=str(path)) from None


def parse_config(table: Mapping[str, Any], path: Path, *, prefix: str = "") -> Config:
    source = str(path)

    def fail(key: str, message: str, hint: str | None = None) -> InputError:
        return InputError(message, source=source, field=prefix + key, hint=hint)

    known = {"sets", "retrievers", "store", "regression", "eval"}
    for key in table:
        if key not in known:
            raise fail(key, "unknown section", hint="known: " + ", ".join(sorted(known)))

    sets: dict[str, Path] = {}
    for name, entry in _table(table, "sets", fail).items():
        if not isinstance(entry, Mapping) or not isinstance(entry.get("path"), str):
            raise fail(f"sets.{name}", 'needs path = "FILE"')
        extra = set(entry) - {"path"}
        if extra:
            raise fail(f"sets.{name}.{sorted(extra)[0]}", "unknown key (a set has only path)")
        set_path = Path(entry["path"])
        sets[name] = set_path if set_path.is_absolute() else path.parent / set_path

    retrievers: dict[str, RetrieverConfig] = {}
    for name, entry in _table(table, "retrievers", fail).items():
        if not isinstance(entry, Mapping):
            raise fail(f"retrievers.{name}", "must be a table")
        plugin = entry.get("plugin")
        if not isinstance(plugin, str) or not plugin:
            raise fail(
                f"retrievers.{name}.plugin",
                "missing or not a string",
                hint='name the retriever plugin this instance configures, e.g. plugin = "bm25"',
            )
        options = {key: value for key, value in entry.items() if key != "plugin"}
        retrievers[name] = RetrieverConfig(name, plugin, options)

    store = _table(table, "store", fail)
    store_url = store.get("url")
    if store_url is not None and not isinstance(store_url, str):
        raise fail("store.url", "must be a string such as sqlite:///.retrievalkit/results.sqlite3")
    if set(store) - {"url"}:
        raise fail(f"store.{sorted(set(store) - {'url'})[0]}", "unknown key (the store has url)")

    regression = _parse_regression(_table(table, "regression", fail), fail)
    evaluation = _parse_eval(_table(table, "eval", fail), fail)
    return Config(source, sets, retrievers, store_url, regression, evaluation)


def _table(table: Mapping[str, Any], key: str, fail: Any) -> Mapping[str, Any]:
    value = table.get(key, {})
    if not isinstance(value, Mapping):
        raise fail(key, "must be a table")
    return value


def _fraction(value: Any, key: str, fail: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise fail(key, f"must be a number from 0 to 1, got {value!r}")
    return float(value)


def _parse_regression(section: Mapping[str, Any], fail: Any) -> RegressionConfig:
    thresholds: dict[str, float] = {}
    max_error_rate = None
    for key, value in section.items():
        if key == "max_top1_drop":
            thresholds["hit@1"] = _fraction(value, "regression.max_top1_drop", fail)
        elif key == "max_top3_drop":
            thresholds["hit@3"] = _fraction(value, "regression.max_top3_drop", fail)
        elif key == "max_error_rate":
            max_error_rate = _fraction(value, "regression.max_error_rate", fail)
        elif key == "metrics" and isinstance(value, Mapping):
            for metric, drop in value.items():
                _check_metric_name(metric, f"regression.metrics.{metric}", fail)
                thresholds[metric] = _fraction(drop, f"regression.metrics.{metric}", fail)
        else:
            raise fail(
                f"regression.{key}",
                "unknown key",
                hint="known: max_top1_drop, max_top3_drop, max_error_rate, [regression.metrics]",
            )
    return RegressionConfig(thresholds, max_error_rate)


def _check_metric_name(name: str, key: str, fail: Any) -> None:
    from retrievalkit.metrics import METRICS

    family, _, k = name.partition("@")
    definition = METRICS.get(family)
    valid = definition is not None and (
        (definition.per_k and k.isdigit() and int(k) > 0) or (not definition.per_k and not k)
    )
    if not valid:
        raise fail(key, f"unknown metric '{name}'", hint="e.g. hit@3, ndcg@10, recall@5, rr")


def _parse_eval(section: Mapping[str, Any], fail: Any) -> EvalConfig:
    values: dict[str, Any] = {}
    for key, value in section.items():
        if key == "k":
            if not isinstance(value, list) or not value:
                raise fail("eval.k", "must be a list of positive integers, e.g. [1, 3, 5, 10]")
            values["k"] = tuple(_positive(item, "eval.k", fail) for item in value)
        elif key in ("overfetch", "resamples", "concurrency"):
            values[key] = _positive(value, f"eval.{key}", fail)
        elif key == "confidence":
            confidence = _fraction(value, "eval.confidence", fail)
            if not 0 < confidence < 1:
                raise fail("eval.confidence", "must be between 0 and 1, e.g. 0.95")
            values[key] = confidence
        elif key == "slices":
            if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
                raise fail("eval.slices", "must be a list of field names")
            values[key] = tuple(value)
        else:
            raise fail(
                f"eval.{key}",
                "unknown key",
                hint="known: k, overfetch, resamples, confidence, concurrency, slices",
            )
    return EvalConfig(**values)


def _positive(value: Any, key: str, fail: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise fail(key, f"must be a whole number >= 1, got {value!r}")
    return value
