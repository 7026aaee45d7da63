"""Token usage per question: what the APIs a retriever calls say they billed.

A retriever, embedder or reranker that calls a paid API reports each answer's usage with
`record_usage`::

    import retrievalkit as rk

    answer = client.embed(texts)
    rk.record_usage("text-embedding-3-small", answer["usage"]["prompt_tokens"])

The run gives each question a `Meter` of its own (a context variable, set for the call
of that question only, whatever thread asks it), so that the tokens land on the question
that spent them; `record_usage` outside a run, or in a thread the retriever started
itself without copying its context (`contextvars.copy_context().run`), records nothing.
A ``retrieve_many`` call's tokens are shared evenly among the questions of its batch, as
its latency is. `usage_of` reads the usage out of the JSON answers of the common APIs.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")

#: A question's tokens: model -> (input tokens, output tokens).
Tokens = Mapping[str, tuple[int, int]]


class Meter:
    """The tokens one question spent, model by model; safe to record into from threads."""

    __slots__ = ("_lock", "_tokens")

    def __init__(self) -> None:
        self._tokens: dict[str, tuple[int, int]] = {}
        self._lock = threading.Lock()

    def record(self, model: str, input_tokens: int, output_tokens: int = 0) -> None:
        with self._lock:
            before = self._tokens.get(model, (0, 0))
            self._tokens[model] = (before[0] + input_tokens, before[1] + output_tokens)

    def tokens(self) -> dict[str, tuple[int, int]] | None:
        """Model -> (input, output) of what was recorded, or None when nothing was."""
        with self._lock:
            return dict(self._tokens) if self._tokens else None


class QuestionMeters:
    """The meters of questions asked one after another in one thread, as one object:
    `at` is the position of the question being asked (setting it costs less than a new
    `Meter` and context variable a question, in the loop that asks fastest)."""

    __slots__ = ("_spent", "at")

    def __init__(self) -> None:
        self.at = 0
        self._spent: dict[int, dict[str, tuple[int, int]]] = {}

    def record(self, model: str, input_tokens: int, output_tokens: int = 0) -> None:
        spent = self._spent.setdefault(self.at, {})
        before = spent.get(model, (0, 0))
        spent[model] = (before[0] + input_tokens, before[1] + output_tokens)

    def usage(self, count: int) -> list[Mapping[str, tuple[int, int]] | None] | None:
        """Each of ``count`` questions' tokens (None where none), or None for no tokens."""
        if not self._spent:
            return None
        return [self._spent.get(position) for position in range(count)]


AnyMeter = Meter | QuestionMeters

_METER: contextvars.ContextVar[AnyMeter | None] = contextvars.ContextVar(
    "retrievalkit_usage_meter", default=None
)


def _count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(
            f"record_usage: {name} must be a whole number of tokens >= 0, not {value!r}"
        )
    return value


def record_usage(model: str, input_tokens: int, output_tokens: int = 0) -> None:
    """Add ``input_tokens`` and ``output_tokens`` of ``model`` to the question being asked.

    Outside a run's question (no meter is set) nothing is recorded. Raises ``ValueError``
    for an empty model name or a count that is not a whole number >= 0."""
    if not isinstance(model, str) or not model.strip():
        raise ValueError(f"record_usage: model must be a non-empty name, not {model!r}")
    inputs, outputs = _count(input_tokens, "input_tokens"), _count(output_tokens, "output_tokens")
    meter = _METER.get()
    if meter is not None:
        meter.record(model, inputs, outputs)


def current_meter() -> AnyMeter | None:
    """The meter of the question being asked, or None outside a run's question."""
    return _METER.get()


def metered(meter: Meter, function: Callable[[], T]) -> Callable[[], T]:
    """``function`` made to run with ``meter`` as the current meter, in a copy of the
    context of whichever thread calls it (a worker's, a timeout's): every `record_usage`
    within it goes to ``meter``, and no other call sees it."""

    def run() -> T:
        return contextvars.copy_context().run(_with_meter, meter, function)

    return run


def _with_meter(meter: Meter, function: Callable[[], T]) -> T:
    _METER.set(meter)
    return function()


def set_meter(meter: AnyMeter | None) -> contextvars.Token[AnyMeter | None]:
    """Make ``meter`` the current one in this context; `reset_meter` with the token undoes it
    (for a loop that asks question after question in one thread)."""
    return _METER.set(meter)


def reset_meter(token: contextvars.Token[AnyMeter | None]) -> None:
    _METER.reset(token)


def _whole(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, float) and value >= 0 and value.is_integer():
        return int(value)
    return None


def usage_of(answer: Any) -> tuple[int, int] | None:
    """(input, output) tokens an API's JSON answer reports, or None when it reports none.

    Read: OpenAI-compatible ``{"usage": {"prompt_tokens", "completion_tokens",
    "total_tokens"}}`` (embeddings report prompt tokens only; without them the total is
    the input), ``{"usage": {"input_tokens", "output_tokens"}}``, and Cohere's
    ``{"meta": {"billed_units": {"input_tokens", "output_tokens", "search_units"}}}``
    (a search unit, what a rerank bills, counts as one input token: price it per unit)."""
    if not isinstance(answer, Mapping):
        return None
    usage = answer.get("usage")
    if isinstance(usage, Mapping):
        inputs = _whole(usage.get("prompt_tokens", usage.get("input_tokens")))
        outputs = _whole(usage.get("completion_tokens", usage.get("output_tokens")))
        if inputs is None:
            inputs = _whole(usage.get("total_tokens"))
            if inputs is not None and outputs is not None:
                inputs = max(0, inputs - outputs)
        if inputs is not None or outputs is not None:
            return inputs or 0, outputs or 0
    meta = answer.get("meta")
    billed = meta.get("billed_units") if isinstance(meta, Mapping) else None
    if isinstance(billed, Mapping):
        inputs = _whole(billed.get("input_tokens"))
        units = _whole(billed.get("search_units"))
        outputs = _whole(billed.get("output_tokens"))
        if inputs is not None or units is not None or outputs is not None:
            return (inputs or 0) + (units or 0), outputs or 0
    return None
