"""Read the configuration: ``retrievalkit.toml``, ``[tool.retrievalkit]`` or ``--config FILE``.

Every key is checked; an unknown or mistyped one is an error that names the file and
the key, because a silently ignored threshold is a CI gate that never closes.
"""

from __future__ import annotations

import datetime as dt
import math
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from retrievalkit.errors import InputError
from retrievalkit.formats.limits import (
    COST_STATISTICS,
    LATENCY_STATISTICS,
    MAX_CONCURRENCY,
    MAX_K,
    MAX_OVERFETCH,
    MAX_REPEAT,
    MAX_RESAMPLES,
    MAX_TIMEOUT,
    MAX_WARMUP,
    check_path,
    check_relative_increases,
)
from retrievalkit.formats.sweep_table import SweepConfig, parse_sweeps
from retrievalkit.formats.text_files import key_line, read_text, toml_error_line

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
    """Largest allowed drops (absolute) per metric, e.g. ``{"hit@1": 0.05}``.

    ``slices`` holds the same per slice, keyed ``FIELD=LABEL``:
    ``{"hard_class=near-duplicate": {"hit@3": 0.1}}``.
    """

    thresholds: dict[str, float] = attrs.field(factory=dict)
    max_error_rate: float | None = None
    require_significant: bool = False
    slices: dict[str, dict[str, float]] = attrs.field(factory=dict)
    latency: dict[str, float] = attrs.field(factory=dict)
    """``[regression.latency]``: ``p50``/``p95``/``p99`` -> largest allowed relative increase."""
    cost: dict[str, float] = attrs.field(factory=dict)
    """``[regression.cost]``: ``per_question`` -> largest allowed relative increase."""


@attrs.frozen
class ModelPrice:
    """``[costs."MODEL"]``: what 1,000 tokens of a model cost, in the currency you price in."""

    input: float
    output: float = 0.0

    def document(self) -> dict[str, float]:
        return {"input": self.input, "output": self.output}


@attrs.frozen
class EvalConfig:
    k: tuple[int, ...] | None = None
    overfetch: int | None = None
    resamples: int | None = None
    confidence: float | None = None
    concurrency: int | None = None
    repeat: int | None = None
    """Times each question is asked, its median latency kept: see ``--repeat``."""
    warmup: int | None = None
    """Questions asked first and discarded: see ``--warmup``."""
    slices: tuple[str, ...] = ()
    timeout: float | None = None
    """Seconds one question may take before it is recorded as a timeout error."""
    chunk_separator: str | None = None
    """The retriever returns chunk ids: what splits a chunk id from its document's id."""
    cluster_by: str | None = None
    """``cluster``, ``hard_class``, ``expected`` or ``meta.NAME``: see ``--cluster-by``."""
    metrics: tuple[str, ...] = ()
    """Metrics computed besides the default table (``ndcg_exp@10``): see ``--metric``."""


@attrs.frozen
class DriftConfig:
    """``[drift]``: the limits of ``retrievalkit drift --fail-on-drift`` and its defaults."""

    min_rbo: float | None = None
    max_zero_result_increase: float | None = None
    rbo_p: float | None = None
    k: int | None = None


@attrs.frozen
class PluginInstance:
    """A named, configured instance of a question generator or judge (``[generators.NAME]``)."""

    name: str
    plugin: str
    options: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class Config:
    source: str | None = None
    sets: dict[str, Path] = attrs.field(factory=dict)
    retrievers: dict[str, RetrieverConfig] = attrs.field(factory=dict)
    store_url: str | None = None
    regression: RegressionConfig = attrs.field(factory=RegressionConfig)
    eval: EvalConfig = attrs.field(factory=EvalConfig)
    generators: dict[str, PluginInstance] = attrs.field(factory=dict)
    judges: dict[str, PluginInstance] = attrs.field(factory=dict)
    sweeps: dict[str, SweepConfig] = attrs.field(factory=dict)
    drift: DriftConfig = attrs.field(factory=DriftConfig)
    costs: dict[str, ModelPrice] = attrs.field(factory=dict)
    """``[costs."MODEL"]``: model name -> its price per 1,000 tokens."""


def find_config(explicit: str | None, directory: Path | None = None) -> Config:
    """The explicit file, else ``retrievalkit.toml``, else ``pyproject.toml``'s table, else none."""
    directory = directory or Path.cwd()
    if explicit is not None:
        check_path(explicit, field="--config")
        path = Path(explicit)
        if not path.exists():
            raise InputError("config file not found", source=explicit, field="--config")
        table = _read_toml(path)
        if path.name == "pyproject.toml":
            found = _tool_table(table, path)
            return parse_config(found or {}, path, prefix="tool.retrievalkit.")
        return parse_config(table, path)
    candidate = directory / CONFIG_FILE
    if _is_there(candidate):
        return parse_config(_read_toml(candidate), candidate)
    pyproject = directory / "pyproject.toml"
    if _is_there(pyproject):
        found = _tool_table(_read_toml(pyproject), pyproject)
        if found is not None:
            return parse_config(found, pyproject, prefix="tool.retrievalkit.")
    return Config()


def _is_there(path: Path) -> bool:
    """Whether anything is at ``path``: a file, but also a directory or a dangling link,
    which are errors (`_read_toml` names them), never a configuration silently skipped."""
    try:
        path.lstat()
    except FileNotFoundError:
        return False
    except OSError as error:
        raise InputError(
            f"cannot read the configuration: {error.strerror}", source=str(path)
        ) from None
    if path.is_symlink() and not path.exists():
        raise InputError(
            "is a symbolic link to nothing",
            source=str(path),
            hint="point it at the configuration file, or remove it",
        )
    return True


def _tool_table(document: Mapping[str, Any], path: Path) -> Mapping[str, Any] | None:
    """``[tool.retrievalkit]`` of a pyproject.toml, None when absent; any other shape
    (``tool = 5``, ``[tool] retrievalkit = 5``) is an error naming the key."""
    tool = document.get("tool")
    if tool is None:
        return None
    if not isinstance(tool, Mapping):
        raise InputError(
            f"must be a table, got {_toml_type(tool)}",
            source=str(path),
            line=key_line(path, "tool"),
            field="tool",
        )
    table = tool.get("retrievalkit")
    if table is None or isinstance(table, Mapping):
        return table
    raise InputError(
        f"must be a table ([tool.retrievalkit]), got {_toml_type(table)}",
        source=str(path),
        line=key_line(path, "tool.retrievalkit"),
        field="tool.retrievalkit",
    )


def _toml_type(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"


def _read_toml(path: Path) -> dict[str, Any]:

    text = read_text(path)
    try:
        document: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise InputError(
            f"malformed TOML: {error}", source=str(path), line=toml_error_line(error, text)
        ) from None
    except RecursionError:
        raise InputError(
            "TOML nested too deeply", source=str(path), hint="a configuration is a few tables"
        ) from None
    return document


def _refuse_nul(value: Any, path: Path, key: str) -> None:
    """No string of a configuration may hold a NUL byte (no URL, path or name can), no
    number may be nan or inf and no value a TOML date: plugin options are handed over as
    they are, and such a value would only fail at save, after the whole run."""
    if isinstance(value, Mapping):
        for name, item in value.items():
            _refuse_nul(name, path, key)
            _refuse_nul(item, path, f"{key}.{name}" if key else str(name))
    elif isinstance(value, list):
        for item in value:
            _refuse_nul(item, path, key)
    elif isinstance(value, float) and not math.isfinite(value):
        raise InputError(
            f"must be a finite number, got {value!r}",
            source=str(path),
            line=key_line(str(path), key) if key else None,
            field=key or None,
            hint="nan and inf are never a setting",
        )
    elif isinstance(value, (dt.date, dt.time)):
        raise InputError(
            f"is a TOML date or time ({value.isoformat()}), which no setting takes",
            source=str(path),
            line=key_line(str(path), key) if key else None,
            field=key or None,
            hint="write it as a quoted string if it is meant as text",
        )
    elif isinstance(value, str) and "\x00" in value:
        raise InputError(
            "holds a NUL byte (\\u0000)",
            source=str(path),
            line=key_line(str(path), key) if key else None,
            field=key or None,
        )


def parse_config(table: Mapping[str, Any], path: Path, *, prefix: str = "") -> Config:
    source = str(path)
    _refuse_nul(table, path, prefix.rstrip("."))

    def fail(key: str, message: str, hint: str | None = None) -> InputError:
        line = key_line(path, prefix + key)
        return InputError(message, source=source, line=line, field=prefix + key, hint=hint)

    known = {
        *("sets", "retrievers", "store", "regression", "eval", "generators", "judges"),
        *("sweeps", "drift", "costs"),
    }
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

    from retrievalkit.redaction import remember, secret_values

    remember(value for entry in retrievers.values() for value in secret_values(entry.options))
    regression = _parse_regression(_table(table, "regression", fail), fail)
    evaluation = _parse_eval(_table(table, "eval", fail), fail)
    return Config(
        source,
        sets,
        retrievers,
        store_url,
        regression,
        evaluation,
        generators=_plugin_instances(table, "generators", fail),
        judges=_plugin_instances(table, "judges", fail),
        sweeps=parse_sweeps(_table(table, "sweeps", fail), fail),
        drift=_parse_drift(_table(table, "drift", fail), fail),
        costs=_parse_costs(_table(table, "costs", fail), fail),
    )


def _parse_costs(section: Mapping[str, Any], fail: Any) -> dict[str, ModelPrice]:
    """``[costs."MODEL"]``: ``input`` (required) and ``output`` (default 0), each the
    price of 1,000 tokens, a finite number >= 0."""
    prices: dict[str, ModelPrice] = {}
    for model, entry in section.items():
        where = f'costs."{model}"'
        if not model.strip():
            raise fail(where, "a model name must not be empty")
        if not isinstance(entry, Mapping):
            raise fail(
                where,
                "must be a table of prices per 1,000 tokens",
                hint=f'[costs."{model}"] with input = 0.00002 (and output = ... for output tokens)',
            )
        unknown = set(entry) - {"input", "output"}
        if unknown:
            raise fail(f"{where}.{sorted(unknown)[0]}", "unknown key", hint="known: input, output")
        if "input" not in entry:
            raise fail(
                where,
                "needs input = the price of 1,000 input tokens",
                hint="input = 0 for a model that bills output tokens only",
            )
        found = {}
        for key in ("input", "output"):
            if key not in entry:
                continue
            value = entry[key]
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value < 0
            ):
                raise fail(
                    f"{where}.{key}",
                    f"must be a price per 1,000 tokens, a number >= 0, got {value!r}",
                )
            found[key] = float(value)
        prices[model] = ModelPrice(**found)
    return prices


def _parse_drift(section: Mapping[str, Any], fail: Any) -> DriftConfig:
    """``[drift]``: min_rbo and max_zero_result_increase (0 to 1), rbo_p (above 0, below
    1) and k (a whole number above 0)."""
    found: dict[str, Any] = {}
    for key, value in section.items():
        if key in ("min_rbo", "max_zero_result_increase"):
            found[key] = _fraction(value, f"drift.{key}", fail)
        elif key == "rbo_p":
            found[key] = _fraction(value, "drift.rbo_p", fail)
            if not 0 < found[key] < 1:
                raise fail("drift.rbo_p", f"must be above 0 and below 1, got {value!r}")
        elif key == "k":
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise fail("drift.k", f"must be a whole number above 0, got {value!r}")
            found[key] = value
        else:
            raise fail(
                f"drift.{key}",
                "unknown key",
                hint="known: min_rbo, max_zero_result_increase, rbo_p, k",
            )
    return DriftConfig(**found)


def _plugin_instances(
    table: Mapping[str, Any], section: str, fail: Any
) -> dict[str, PluginInstance]:
    """``[generators.NAME]`` / ``[judges.NAME]``: a ``plugin`` name and that plugin's options."""
    instances: dict[str, PluginInstance] = {}
    for name, entry in _table(table, section, fail).items():
        if not isinstance(entry, Mapping):
            raise fail(f"{section}.{name}", "must be a table")
        plugin = entry.get("plugin")
        if not isinstance(plugin, str) or not plugin:
            raise fail(
                f"{section}.{name}.plugin",
                "missing or not a string",
                hint='name the plugin this instance configures, e.g. plugin = "openai-compatible"',
            )
        options = {key: value for key, value in entry.items() if key != "plugin"}
        instances[name] = PluginInstance(name, plugin, options)
    return instances


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
    require_significant = False
    slices: dict[str, dict[str, float]] = {}
    latency: dict[str, float] = {}
    cost: dict[str, float] = {}
    for key, value in section.items():
        if key in ("max_top1_drop", "max_top3_drop"):
            name = _metric_name(
                "hit@1" if key == "max_top1_drop" else "hit@3",
                f"regression.{key}",
                fail,
                seen=thresholds,
            )
            thresholds[name] = _fraction(value, f"regression.{key}", fail)
        elif key == "max_error_rate":
            max_error_rate = _fraction(value, "regression.max_error_rate", fail)
        elif key == "metrics":
            if not isinstance(value, Mapping):
                raise fail(
                    "regression.metrics",
                    'must be a table of metric = largest drop, e.g. "ndcg@10" = 0.02',
                )
            for metric, drop in value.items():
                key = f"regression.metrics.{metric}"
                name = _metric_name(metric, key, fail, seen=thresholds)
                thresholds[name] = _fraction(drop, key, fail)
        elif key == "require_significant":
            if not isinstance(value, bool):
                raise fail(
                    "regression.require_significant", f"must be true or false, got {value!r}"
                )
            require_significant = value
        elif key == "slices":
            slices = _parse_slices(value, fail)
        elif key == "latency":
            latency = _parse_latency(value, fail)
        elif key == "cost":
            cost = _parse_cost_thresholds(value, fail)
        else:
            raise fail(
                f"regression.{key}",
                "unknown key",
                hint="known: max_top1_drop, max_top3_drop, max_error_rate, require_significant, "
                "[regression.metrics], [regression.slices], [regression.latency], "
                "[regression.cost]",
            )
    return RegressionConfig(thresholds, max_error_rate, require_significant, slices, latency, cost)


def _parse_cost_thresholds(value: Any, fail: Any) -> dict[str, float]:
    """``[regression.cost]``: ``per_question = 0.1`` (the candidate's cost per question at
    most 10 % above the baseline's)."""
    return check_relative_increases(
        value,
        kind="cost",
        statistics=COST_STATISTICS,
        example=0.1,
        field="regression.cost",
        shape="must be a table of statistic = largest relative increase, e.g. per_question = 0.1",
        error=lambda key, message, hint: fail(key, message, hint=hint),
    )


def _parse_latency(value: Any, fail: Any) -> dict[str, float]:
    """``[regression.latency]``: ``p95 = 0.2`` (the candidate's p95 at most 20 % above the
    baseline's)."""
    return check_relative_increases(
        value,
        kind="latency",
        statistics=LATENCY_STATISTICS,
        example=0.2,
        field="regression.latency",
        shape="must be a table of statistic = largest relative increase, e.g. p95 = 0.2",
        error=lambda key, message, hint: fail(key, message, hint=hint),
    )


def _parse_slices(value: Any, fail: Any) -> dict[str, dict[str, float]]:
    """``[regression.slices."FIELD=LABEL"]`` tables of metric = largest allowed drop."""
    example = '[regression.slices."hard_class=near-duplicate"] with "hit@3" = 0.1'
    if not isinstance(value, Mapping):
        raise fail("regression.slices", "must be a table of slices", hint=f"e.g. {example}")
    slices: dict[str, dict[str, float]] = {}
    for name, metrics in value.items():
        key = f'regression.slices."{name}"'
        field, equals, label = name.partition("=")
        if not equals or not field.strip() or not label.strip():
            raise fail(
                key,
                "a slice is named FIELD=VALUE, where FIELD is form, hard_class or a meta key",
                hint=f"e.g. {example}",
            )
        if not isinstance(metrics, Mapping) or not metrics:
            raise fail(key, "must be a table of metric = largest allowed drop", hint=example)
        canonical = f"{field.strip()}={label.strip()}"
        slices[canonical] = {}
        for metric, drop in metrics.items():
            name = _metric_name(metric, f"{key}.{metric}", fail, seen=slices[canonical])
            slices[canonical][name] = _fraction(drop, f"{key}.{metric}", fail)
    return slices


def _metric_name(name: str, key: str, fail: Any, *, seen: Mapping[str, float]) -> str:
    """The canonical name of a gated metric (``"NDCG@10 "`` -> ``"ndcg@10"``), so that a
    threshold is keyed by the name the computed metric has and is always checked; a
    metric given twice (in two spellings, or also as max_top1/3_drop) is refused."""
    from retrievalkit.metrics.definitions import canonical_metric_name

    try:
        canonical = canonical_metric_name(name)
    except ValueError as error:
        raise fail(
            key, str(error), hint="e.g. hit@3, ndcg@10, recall@5, rr, or stage.rerank:rr"
        ) from None
    if canonical in seen:
        raise fail(key, f"{canonical} is given a threshold twice", hint="keep one of them")
    return canonical


def _parse_eval(section: Mapping[str, Any], fail: Any) -> EvalConfig:
    values: dict[str, Any] = {}
    for key, value in section.items():
        if key in _EVAL_LIMITS:
            values[key] = _positive(value, f"eval.{key}", fail, _EVAL_LIMITS[key])
        elif key in _EVAL_READERS:
            values[key] = _EVAL_READERS[key](value, fail)
        else:
            raise fail(
                f"eval.{key}",
                "unknown key",
                hint="known: k, overfetch, resamples, confidence, concurrency, repeat, warmup, "
                "slices, timeout, chunk_separator, cluster_by, metrics",
            )
    return EvalConfig(**values)


def _eval_k(value: Any, fail: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise fail("eval.k", "must be a list of positive integers, e.g. [1, 3, 5, 10]")
    return tuple(_positive(item, "eval.k", fail, MAX_K) for item in value)


def _eval_warmup(value: Any, fail: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise fail("eval.warmup", f"must be a whole number >= 0, got {value!r}")
    if value > MAX_WARMUP:
        raise fail("eval.warmup", f"must be at most {MAX_WARMUP}, got {value!r}")
    return value


def _eval_confidence(value: Any, fail: Any) -> float:
    confidence = _fraction(value, "eval.confidence", fail)
    if not 0 < confidence < 1:
        raise fail("eval.confidence", "must be between 0 and 1, e.g. 0.95")
    return confidence


def _eval_timeout(value: Any, fail: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (0 < value <= MAX_TIMEOUT)
    ):
        raise fail(
            "eval.timeout",
            f"must be a number of seconds > 0 and at most {MAX_TIMEOUT:g} (a week), got {value!r}",
        )
    return float(value)


def _eval_slices(value: Any, fail: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise fail("eval.slices", "must be a list of field names")
    return tuple(value)


def _eval_chunk_separator(value: Any, fail: Any) -> str:
    if not isinstance(value, str) or not value or value.isspace():
        raise fail("eval.chunk_separator", 'must be a non-empty string, e.g. "#"')
    return value


def _eval_cluster_by(value: Any, fail: Any) -> str:
    from retrievalkit.stats.clusters import check_cluster_by

    if not isinstance(value, str):
        raise fail("eval.cluster_by", 'must be a field name, e.g. "expected"')
    try:
        return check_cluster_by(value)
    except ValueError as error:
        raise fail("eval.cluster_by", str(error)) from None


def _eval_metrics(value: Any, fail: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise fail("eval.metrics", 'must be a list of metric names, e.g. ["ndcg_exp@10"]')
    return tuple(_metric_name(item, f"eval.metrics.{item}", fail, seen={}) for item in value)


#: The reader of each ``[eval]`` key but the positive whole numbers of `_EVAL_LIMITS`.
_EVAL_READERS: dict[str, Callable[[Any, Any], Any]] = {
    "k": _eval_k,
    "warmup": _eval_warmup,
    "confidence": _eval_confidence,
    "timeout": _eval_timeout,
    "slices": _eval_slices,
    "chunk_separator": _eval_chunk_separator,
    "cluster_by": _eval_cluster_by,
    "metrics": _eval_metrics,
}


_EVAL_LIMITS = {
    "overfetch": MAX_OVERFETCH,
    "resamples": MAX_RESAMPLES,
    "concurrency": MAX_CONCURRENCY,
    "repeat": MAX_REPEAT,
}


def _positive(value: Any, key: str, fail: Any, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise fail(key, f"must be a whole number >= 1, got {value!r}")
    if value > maximum:
        raise fail(key, f"must be at most {maximum}, got {value!r}")
    return value
