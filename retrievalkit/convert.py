"""The one cattrs converter that turns retrievalkit's values into plain data and back.

Every conversion to and from JSON, TOML and database rows goes through ``converter``;
``to_json`` gives the canonical text (sorted keys, no NaN) used by stores and reports.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, TypeVar

import cattrs
from cattrs.fns import identity

from retrievalkit.model import QuestionForm

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


def _finite_or_none(value: Any, _: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return None if math.isnan(number) else number


converter.register_structure_hook(float | None, _finite_or_none)


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
