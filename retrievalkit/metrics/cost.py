"""A run's cost: each question's tokens (`Outcomes.tokens`) priced by the run's ``[costs]``.

A question's cost is, over the models it used that have a price,
``input tokens / 1000 x input price + output tokens / 1000 x output price``; the prices
are those the run's manifest keeps (`Manifest.costs`), so a stored run is priced as it
was when it ran. A model with tokens but no price is named (`unpriced_warning`) and
costs nothing; a run no question of which recorded tokens has no cost at all (None).
Every question counts, an errored one too: its calls were billed all the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import numpy.typing as npt

from retrievalkit.stats.latency import bootstrap_mean

if TYPE_CHECKING:
    from retrievalkit.model.outcomes import Outcomes
    from retrievalkit.model.records import ResultRecord

#: Prices are per this many tokens.
PER_TOKENS = 1000
#: What the run JSON's ``cost`` says about its unit.
CURRENCY_NOTE = (
    "prices per 1,000 tokens as [costs] gives them; the currency is whatever they are in"
)


@attrs.frozen
class QuestionCosts:
    """Each question's cost over the priced models, and what was left unpriced."""

    values: npt.NDArray[np.float64] | None
    """One cost a question; None when no model the run used has a price."""
    tokens: Mapping[str, tuple[int, int]]
    """Model -> the run's (input, output) tokens in all."""
    priced: tuple[str, ...]
    unpriced: tuple[str, ...]


def question_costs(outcomes: Outcomes, prices: Mapping[str, Any]) -> QuestionCosts | None:
    """The cost of each question of ``outcomes`` at ``prices`` (model -> ``{"input",
    "output"}`` per 1,000 tokens); None when no question recorded tokens."""
    tokens = outcomes.tokens
    if not tokens:
        return None
    values = np.zeros(len(outcomes), dtype=np.float64)
    priced, unpriced = [], []
    for model, counts in tokens.items():
        price = prices.get(model)
        if price is None:
            unpriced.append(model)
            continue
        priced.append(model)
        values += counts.input * (float(price.get("input", 0.0)) / PER_TOKENS)
        values += counts.output * (float(price.get("output", 0.0)) / PER_TOKENS)
    return QuestionCosts(
        values=values if priced else None,
        tokens={
            model: (int(counts.input.sum()), int(counts.output.sum()))
            for model, counts in tokens.items()
        },
        priced=tuple(priced),
        unpriced=tuple(unpriced),
    )


def record_costs(record: ResultRecord) -> QuestionCosts | None:
    """`question_costs` of a record at the prices its manifest keeps."""
    return question_costs(record.outcomes, record.manifest.costs)


def unpriced_warning(costs: QuestionCosts | None) -> str | None:
    """What a run whose tokens include a model without a price says about it."""
    if costs is None or not costs.unpriced:
        return None
    models = ", ".join(costs.unpriced)
    quoted = costs.unpriced[0]
    return (
        f"cost: no price for {models}: its tokens count for nothing in the run's cost; "
        f'add [costs."{quoted}"] input = PRICE (per 1,000 tokens) to retrievalkit.toml'
    )


def run_cost(record: ResultRecord) -> dict[str, Any] | None:
    """The run JSON's ``cost``: ``{"per_question": {"value", "ci", "method"}, "total",
    "questions", "level", "tokens": {model: {"input", "output"}}, "prices", "unpriced",
    "currency_note"}``; ``per_question`` and ``total`` are None when no model used has a
    price. None when no question recorded tokens."""
    costs = record_costs(record)
    if costs is None:
        return None
    manifest = record.manifest
    values = costs.values
    return {
        "per_question": None
        if values is None or not len(values)
        else bootstrap_mean(
            values, level=manifest.confidence, resamples=manifest.resamples, seed=manifest.seed
        ),
        "total": None if values is None else float(values.sum()),
        "questions": len(record.outcomes),
        "level": manifest.confidence,
        "tokens": {
            model: {"input": inputs, "output": outputs}
            for model, (inputs, outputs) in costs.tokens.items()
        },
        "prices": {model: dict(manifest.costs[model]) for model in costs.priced},
        "unpriced": list(costs.unpriced),
        "currency_note": CURRENCY_NOTE,
    }
