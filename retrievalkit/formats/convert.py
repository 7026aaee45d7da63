"""The one cattrs converter that turns retrievalkit's values into plain data and back.

Every conversion to and from JSON, TOML and database rows goes through ``converter``;
``to_json`` gives the canonical text (sorted keys, no NaN) used by stores and reports.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, TypeVar

import attrs
import cattrs
from cattrs.fns import identity
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from retrievalkit.model.outcomes import Outcomes
from retrievalkit.model.records import ResultRecord
from retrievalkit.model.values import (
    GoldenQuestion,
    Manifest,
    MetricValue,
    QuestionForm,
    QuestionOutcome,
)

T = TypeVar("T")

converter = cattrs.Converter(forbid_extra_keys=True)

converter.register_unstructure_hook(QuestionForm, lambda form: form.value)
converter.register_structure_hook(QuestionForm, lambda value, _: QuestionForm(value))
converter.register_unstructure_hook(tuple, lambda value: [converter.unstructure(v) for v in value])
# A plain value or None is already plain data; cattrs' generic optional hook would
# dispatch on the value's type each time, millions of times for a large run's scores.
converter.register_unstructure_hook(float | None, identity)
converter.register_unstructure_hook(str | None, identity)
converter.register_unstructure_hook(int | None, identity)
converter.register_unstructure_hook(
    QuestionForm | None, lambda form: None if form is None else form.value
)
# Ids, labels and scores are plain already: copying them whole (in C) replaces cattrs'
# per-item handlers, which dominated saving a run of many questions.
_PLAIN_MAPPINGS = (Mapping[str, int], Mapping[str, str], Mapping[str, float | None])
converter.register_unstructure_hook_func(lambda kind: kind == tuple[str, ...], list)
converter.register_unstructure_hook_func(lambda kind: kind in _PLAIN_MAPPINGS, dict)


# Fields added for clustered question sets are left out when unset, so the plain data
# (and the content hash, the records and every output) of a set without clusters is
# what it always was.
converter.register_unstructure_hook(
    GoldenQuestion,
    make_dict_unstructure_fn(GoldenQuestion, converter, cluster=override(omit_if_default=True)),
)
converter.register_unstructure_hook(
    MetricValue,
    make_dict_unstructure_fn(
        MetricValue,
        converter,
        clusters=override(omit_if_default=True),
        effective_n=override(omit_if_default=True),
    ),
)

# A manifest without a machine record (runs stored before it existed, records built in
# code) is written as it always was, so its JSON and its store digest do not change.
converter.register_unstructure_hook(
    Manifest,
    make_dict_unstructure_fn(
        Manifest,
        converter,
        machine=override(omit_if_default=True),
        costs=override(omit_if_default=True),
    ),
)


def _finite_or_none(value: Any, _: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return None if math.isnan(number) else number


converter.register_structure_hook(float | None, _finite_or_none)

_structure_metric_fields = make_dict_structure_fn(
    MetricValue, converter, _cattrs_forbid_extra_keys=True
)
_METRIC_KEYS = frozenset(("mean", "ci", "n", "method", "clusters", "effective_n"))
_NUMBER = (int, float)


def _structure_metric(data: Any, cls: type[MetricValue]) -> MetricValue:
    """A metric value from the plain dict stores write, built directly: a history of a
    thousand runs holds tens of thousands of them, and cattrs' generated function spent
    most of the time of reading the runs' summaries. Anything else (a missing or extra
    key, a value of another type) goes through that function, its checks and its errors."""
    if type(data) is dict and data.keys() <= _METRIC_KEYS:
        mean, ci, n = data.get("mean", data), data.get("ci", data), data.get("n")
        effective = data.get("effective_n")
        method, clusters = data.get("method"), data.get("clusters")
        if (
            type(n) is int
            and (mean is None or type(mean) is float or type(mean) is int)
            and (
                ci is None
                or (
                    type(ci) is list
                    and len(ci) == 2
                    and type(ci[0]) in _NUMBER
                    and type(ci[1]) in _NUMBER
                )
            )
            and (method is None or type(method) is str)
            and (clusters is None or type(clusters) is int)
            and (effective is None or type(effective) in _NUMBER)
        ):
            return MetricValue(
                None if mean is None or mean != mean else float(mean),
                None if ci is None else (float(ci[0]), float(ci[1])),
                n,
                method,
                clusters,
                None if effective is None or effective != effective else float(effective),
            )
    return _structure_metric_fields(data, cls)


converter.register_structure_hook(MetricValue, _structure_metric)


def _unstructure_outcomes(outcomes: Outcomes) -> list[dict[str, Any]]:
    """Outcomes as the list of plain dicts the JSON export has always shown."""
    return [
        {
            "question_id": outcome.question_id,
            "ranking": list(outcome.ranking),
            "scores": dict(outcome.scores),
            "latency_ms": outcome.latency_ms,
            "error": outcome.error,
            "form": None if outcome.form is None else outcome.form.value,
            "hard_class": outcome.hard_class,
            "judgments": dict(outcome.judgments),
        }
        for outcome in outcomes
    ]


def _structure_outcomes(data: Any, _: Any) -> Outcomes:
    if isinstance(data, Outcomes):
        return data
    if not isinstance(data, list):
        raise TypeError(f"outcomes must be a list, not {type(data).__name__}")
    return Outcomes.from_outcomes(converter.structure(item, QuestionOutcome) for item in data)


converter.register_unstructure_hook(Outcomes, _unstructure_outcomes)
converter.register_structure_hook(Outcomes, _structure_outcomes)

# The record's outcomes field is annotated with a name model.py imports only for type
# checking (so that importing the model does not import numpy); resolve it here.
attrs.resolve_types(ResultRecord)
# A question without expected_chunks or a cluster is written (and hashed) as before either
# existed.
converter.register_unstructure_hook(
    GoldenQuestion,
    make_dict_unstructure_fn(
        GoldenQuestion,
        converter,
        expected_chunks=override(omit_if_default=True),
        cluster=override(omit_if_default=True),
    ),
)

# A record without stages or clusters is stored as it was before they existed.
_unstructure_record_fields = make_dict_unstructure_fn(
    ResultRecord,
    converter,
    stages=override(omit_if_default=True),
    cluster_by=override(omit_if_default=True),
    clusters=override(omit_if_default=True),
)
_structure_record_fields = make_dict_structure_fn(
    ResultRecord, converter, _cattrs_forbid_extra_keys=True
)

_unstructure_record_summary = make_dict_unstructure_fn(
    ResultRecord,
    converter,
    outcomes=override(omit=True),
    stages=override(omit_if_default=True),
    cluster_by=override(omit_if_default=True),
    clusters=override(omit_if_default=True),
)


def unstructure_summary(record: ResultRecord) -> dict[str, Any]:
    """The record's plain data without its outcomes and items (which stores keep by column)."""
    data: dict[str, Any] = _unstructure_record_summary(record)
    return data


def _unstructure_record(record: ResultRecord) -> dict[str, Any]:
    """The record's fields plus its derived ``items``, as every export has shown them."""
    data: dict[str, Any] = _unstructure_record_fields(record)
    data["items"] = [
        {"question_id": item.question_id, "passed": item.passed, "score": item.score}
        for item in record.items
    ]
    return data


def _structure_record(data: Any, cls: type[ResultRecord]) -> ResultRecord:
    """A record from plain data; ``items`` (derived from the outcomes) is read past."""
    if isinstance(data, Mapping) and "items" in data:
        data = {key: value for key, value in data.items() if key != "items"}
    return _structure_record_fields(data, cls)


converter.register_unstructure_hook(ResultRecord, _unstructure_record)
converter.register_structure_hook(ResultRecord, _structure_record)


def unstructure(value: Any) -> Any:
    """Plain dicts, lists, strings and numbers for any retrievalkit value."""
    return converter.unstructure(value)


def structure(data: Any, cls: type[T]) -> T:
    """Build a retrievalkit value from plain data; raises cattrs' errors on a mismatch."""
    return converter.structure(data, cls)


def to_json(value: Any, *, indent: int | None = None) -> str:
    """Canonical JSON: sorted keys, UTF-8 text, never NaN."""
    return json.dumps(
        unstructure(value),
        sort_keys=True,
        ensure_ascii=False,
        allow_nan=False,
        indent=indent,
        separators=(",", ":") if indent is None else None,
    )


def describe_structure_error(error: Exception) -> str:
    """One line a person can act on, from a cattrs error (which field, what was wrong)."""
    if isinstance(error, cattrs.BaseValidationError):
        messages = cattrs.transform_error(error)
        return "; ".join(messages)
    return str(error)
