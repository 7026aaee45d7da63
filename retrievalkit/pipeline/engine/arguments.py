"""The one check of every evaluation and gate setting, shared by the command line and the API.

`retrievalkit eval --k 0` and `retrievalkit.evaluate(k=(0,))` must be refused the same way,
with the same words: each setting has one function here that returns the value to use
or raises `InputError` naming the option. The command line's option types call these
functions (`retrievalkit.cli.commands.options`), the configuration reader calls them for
its keys, and `retrievalkit.api` calls them for its keyword arguments, so no path into
an evaluation or a gate can skip a check the others make.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from retrievalkit.errors import InputError
from retrievalkit.formats.limits import (
    MAX_CONCURRENCY,
    MAX_K,
    MAX_OVERFETCH,
    MAX_REPEAT,
    MAX_RESAMPLES,
    MAX_TIMEOUT,
    MAX_WARMUP,
)


def _is_whole(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_ks(value: Any, *, field: str = "--k") -> tuple[int, ...]:
    """Cut-offs: a non-empty sequence of whole numbers from 1 to `MAX_K`."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not value:
        raise InputError(
            f"must be a non-empty list of whole numbers such as 1,3,5,10, got {value!r}",
            field=field,
        )
    for k in value:
        if not _is_whole(k) or k < 1:
            raise InputError(f"every k must be a whole number >= 1, got {k!r}", field=field)
        if k > MAX_K:
            raise InputError(f"every k must be at most {MAX_K}, got {k!r}", field=field)
    return tuple(int(k) for k in value)


def check_count(value: Any, *, field: str, maximum: int) -> int:
    """A whole number from 1 to ``maximum`` (overfetch, resamples, concurrency, ...)."""
    if not _is_whole(value) or value < 1:
        raise InputError(f"expected a whole number >= 1, got {value!r}", field=field)
    if value > maximum:
        raise InputError(f"expected at most {maximum}, got {value!r}", field=field)
    return int(value)


def check_overfetch(value: Any) -> int:
    return check_count(value, field="--overfetch", maximum=MAX_OVERFETCH)


def check_resamples(value: Any) -> int:
    return check_count(value, field="--resamples", maximum=MAX_RESAMPLES)


def check_concurrency(value: Any) -> int:
    return check_count(value, field="--concurrency", maximum=MAX_CONCURRENCY)


def check_repeat(value: Any, *, field: str = "--repeat") -> int:
    """Times each question is asked (its median latency kept): 1 to `MAX_REPEAT`."""
    return check_count(value, field=field, maximum=MAX_REPEAT)


def check_warmup(value: Any, *, field: str = "--warmup") -> int:
    """Questions asked first and discarded: 0 to `MAX_WARMUP`."""
    if not _is_whole(value) or value < 0:
        raise InputError(f"expected a whole number >= 0, got {value!r}", field=field)
    if value > MAX_WARMUP:
        raise InputError(f"expected at most {MAX_WARMUP}, got {value!r}", field=field)
    return int(value)


#: Where questions are asked: in this process, or on a Ray cluster.
EXECUTORS = ("local", "ray")


def check_executor(value: Any, address: Any = None) -> str:
    """``local`` or ``ray``; a Ray address only with ``ray``."""
    if value is None:
        value = "local"
    if not isinstance(value, str) or value not in EXECUTORS:
        raise InputError(
            f"expected one of {', '.join(EXECUTORS)}, got {value!r}",
            field="--executor",
            hint="ray asks the questions on a Ray cluster (the [ray] extra)",
        )
    if address is not None:
        if not isinstance(address, str) or not address.strip():
            raise InputError(f"expected HOST:PORT, got {address!r}", field="--ray-address")
        if value != "ray":
            raise InputError(
                "a Ray address without --executor ray would not be used",
                field="--ray-address",
                hint="add --executor ray, or leave --ray-address out",
            )
    return value


def check_timeout(value: Any, *, field: str = "--timeout") -> float | None:
    """Seconds a question may take: None (wait), or a finite number above 0, at most a week."""
    if value is None:
        return None
    if not _is_number(value) or not 0.0 < float(value) < math.inf:
        raise InputError(f"expected a number of seconds > 0, got {value!r}", field=field)
    if float(value) > MAX_TIMEOUT:
        raise InputError(
            f"expected at most {MAX_TIMEOUT:g} seconds (a week), got {value!r}", field=field
        )
    return float(value)


def check_fraction(value: Any, *, field: str) -> float:
    """A finite number from 0 to 1 (an error rate, an allowed drop)."""
    if not _is_number(value) or not 0.0 <= float(value) <= 1.0:
        raise InputError(f"expected a number from 0 to 1, got {value!r}", field=field)
    return float(value)


def check_max_error_rate(value: Any) -> float | None:
    """The largest share of questions allowed to error: None accepts any."""
    return None if value is None else check_fraction(value, field="--max-error-rate")


def check_confidence(value: Any, *, field: str = "--confidence") -> float:
    """A confidence level strictly between 0 and 1."""
    if not _is_number(value) or not 0.0 < float(value) < 1.0:
        raise InputError(f"must be between 0 and 1, e.g. 0.95, got {value!r}", field=field)
    return float(value)


#: How ``compare`` adjusts the p-values of many comparisons: Holm's step-down (the
#: default) or the randomised Tukey HSD over the systems (`retrievalkit.stats.tukey`).
CORRECTIONS = ("holm", "tukey")


def check_correction(
    value: Any, *, cluster_by: str | None = None, field: str = "--correction"
) -> str | None:
    """A correction of `CORRECTIONS`, or None for the default; ``tukey`` shuffles scores
    question by question, so it does not go with a ``cluster_by``."""
    if value is None:
        return None
    if not isinstance(value, str) or value not in CORRECTIONS:
        raise InputError(
            f"unknown correction {value!r}", field=field, hint=f"one of {', '.join(CORRECTIONS)}"
        )
    if value == "tukey" and cluster_by is not None:
        raise InputError(
            "tukey shuffles the systems' scores question by question, so it cannot treat "
            f"clusters of questions (--cluster-by {cluster_by}) as the unit",
            field=field,
            hint="use --correction holm with --cluster-by, or leave --cluster-by out",
        )
    return value


def check_seed(value: Any, *, field: str = "--seed") -> int:
    if not _is_whole(value) or value < 0:
        raise InputError(f"expected a whole number >= 0, got {value!r}", field=field)
    return int(value)


def check_names(value: Any, *, field: str) -> tuple[str, ...]:
    """A list of names (slice fields): never one string, which would be read letter by letter."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise InputError(f"must be a list of names, got {value!r}", field=field)
    for item in value:
        if not isinstance(item, str) or not item.strip():
            raise InputError(f"must be a list of names, got {item!r} in it", field=field)
    return tuple(value)


def check_metric_name(name: Any, *, field: str) -> str:
    """The canonical name of a gated metric (``"HIT@1 "`` -> ``"hit@1"``, a stage's
    ``stage.rerank:rr`` too); unknown names are refused, since a threshold on a name no
    computed metric has is never checked."""
    from retrievalkit.metrics.definitions import canonical_metric_name

    if not isinstance(name, str):
        raise InputError(f"a metric name must be a string, got {name!r}", field=field)
    try:
        return canonical_metric_name(name)
    except ValueError as error:
        raise InputError(str(error), field=field) from None


def check_metric_names(value: Any, *, field: str = "--metric") -> tuple[str, ...]:
    """Metrics to compute besides the default table, by canonical name, each once."""
    names = check_names(value, field=field)
    return tuple(dict.fromkeys(check_metric_name(name, field=field) for name in names))


def check_metric_thresholds(value: Any, *, field: str = "thresholds") -> dict[str, float]:
    """Metric name -> largest allowed drop: canonical names, each once, drops 0 to 1."""
    if not isinstance(value, Mapping):
        raise InputError(
            f'must map metric names to the largest allowed drop, e.g. {{"hit@1": 0.02}}, '
            f"got {value!r}",
            field=field,
        )
    metrics: dict[str, float] = {}
    for name, drop in value.items():
        canonical = check_metric_name(name, field=f"{field}.{name}")
        if canonical in metrics:
            raise InputError(
                f"{canonical} is given a threshold twice", field=f"{field}.{name}", hint="keep one"
            )
        metrics[canonical] = check_fraction(drop, field=f"{field}.{name}")
    return metrics


def _input_error(key: str, message: str, hint: str | None) -> InputError:
    return InputError(message, field=key, hint=hint)


def check_latency_thresholds(value: Any, *, field: str = "latency") -> dict[str, float]:
    """``p50``/``p95``/``p99`` -> largest allowed relative increase (0.2: 20 % above the
    baseline), a number from 0 to 100."""
    from retrievalkit.formats.limits import LATENCY_STATISTICS, check_relative_increases

    return check_relative_increases(
        value,
        kind="latency",
        statistics=LATENCY_STATISTICS,
        example=0.2,
        field=field,
        shape="must map p50, p95 or p99 to the largest allowed relative increase, e.g. "
        f'{{"p95": 0.2}}, got {value!r}',
        error=_input_error,
    )


def check_cost_thresholds(value: Any, *, field: str = "cost") -> dict[str, float]:
    """``per_question`` -> largest allowed relative increase of the cost per question
    (0.1: 10 % above the baseline), a number from 0 to 100."""
    from retrievalkit.formats.limits import COST_STATISTICS, check_relative_increases

    return check_relative_increases(
        value,
        kind="cost",
        statistics=COST_STATISTICS,
        example=0.1,
        field=field,
        shape="must map per_question to the largest allowed relative increase, e.g. "
        f'{{"per_question": 0.1}}, got {value!r}',
        error=_input_error,
    )


def check_costs(value: Any, *, field: str = "costs") -> dict[str, dict[str, float]]:
    """Model -> ``{"input": PRICE, "output": PRICE}`` (``output`` 0 when left out), each
    the price of 1,000 tokens, a finite number >= 0; a bare number is the input price."""
    if not isinstance(value, Mapping):
        raise InputError(
            'must map model names to prices per 1,000 tokens, e.g. {"text-embedding-3-small": '
            f'{{"input": 0.00002}}}}, got {value!r}',
            field=field,
        )
    found: dict[str, dict[str, float]] = {}
    for model, price in value.items():
        key = f"{field}.{model}"
        if not isinstance(model, str) or not model.strip():
            raise InputError(f"a model name must be a non-empty string, got {model!r}", field=field)
        if isinstance(price, (int, float)) and not isinstance(price, bool):
            price = {"input": price}
        if (
            not isinstance(price, Mapping)
            or "input" not in price
            or set(price)
            - {
                "input",
                "output",
            }
        ):
            raise InputError(
                f'must be {{"input": PRICE, "output": PRICE}} (output optional), got {price!r}',
                field=key,
            )
        checked = {}
        for part in ("input", "output"):
            amount = price.get(part, 0.0)
            if (
                isinstance(amount, bool)
                or not isinstance(amount, (int, float))
                or not math.isfinite(amount)
                or amount < 0
            ):
                raise InputError(
                    f"must be a price per 1,000 tokens, a number >= 0, got {amount!r}",
                    field=f"{key}.{part}",
                )
            checked[part] = float(amount)
        found[model] = checked
    return found


def check_slice_thresholds(value: Any, *, field: str = "slices") -> dict[str, dict[str, float]]:
    """``FIELD=LABEL`` -> metric thresholds, as `check_metric_thresholds` checks them."""
    if not isinstance(value, Mapping):
        raise InputError(
            'must map FIELD=VALUE to thresholds, e.g. {"hard_class=near-duplicate": '
            f'{{"hit@3": 0.1}}}}, got {value!r}',
            field=field,
        )
    slices: dict[str, dict[str, float]] = {}
    for name, metrics in value.items():
        key = f'{field}."{name}"'
        label_field, equals, label = name.partition("=") if isinstance(name, str) else ("", "", "")
        if not equals or not label_field.strip() or not label.strip():
            raise InputError(
                "a slice is named FIELD=VALUE, where FIELD is form, hard_class or a meta key",
                field=key,
                hint='e.g. "hard_class=near-duplicate"',
            )
        if not isinstance(metrics, Mapping) or not metrics:
            raise InputError("must be a table of metric = largest allowed drop", field=key)
        canonical = f"{label_field.strip()}={label.strip()}"
        if canonical in slices:
            raise InputError(f"slice {canonical} is given twice", field=key, hint="keep one")
        slices[canonical] = check_metric_thresholds(metrics, field=key)
    return slices


def check_flag(value: Any, *, field: str) -> bool:
    if not isinstance(value, bool):
        raise InputError(f"must be True or False, got {value!r}", field=field)
    return value


def check_plugin_options(value: Any, *, field: str = "options") -> dict[str, Any]:
    """A plugin's options as a configuration file may hold them: string keys, no nan or
    inf, no date (TOML's), so a value that could only fail at save fails before the run."""
    import datetime as dt

    if not isinstance(value, Mapping):
        raise InputError(f"must be a mapping of option names to values, got {value!r}", field=field)

    def walk(item: Any, where: str) -> None:
        if isinstance(item, Mapping):
            for key, inner in item.items():
                if not isinstance(key, str):
                    raise InputError(f"option names are strings, got {key!r}", field=where)
                walk(inner, f"{where}.{key}")
        elif isinstance(item, (list, tuple)):
            for inner in item:
                walk(inner, where)
        elif isinstance(item, float) and not math.isfinite(item):
            raise InputError(f"must be a finite number, got {item!r}", field=where)
        elif isinstance(item, (dt.date, dt.time)):
            raise InputError(
                f"is a date or time ({item.isoformat()}), which no option takes",
                field=where,
                hint="give it as a string if it is meant as text",
            )

    walk(value, field)
    return dict(value)
