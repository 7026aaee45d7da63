"""What a gate checks: the largest allowed drop of each metric, overall and per slice.

`Thresholds` lives beside the gate that reads it (`retrievalkit.pipeline.gating.gate`);
`retrievalkit.Thresholds` is this class. Every value goes through the same checks as the
command line's options and the configuration's `[regression]` keys
(`retrievalkit.pipeline.engine.arguments`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from retrievalkit.errors import InputError

if TYPE_CHECKING:
    from retrievalkit.formats.config import Config


def _default_thresholds() -> dict[str, float]:
    from retrievalkit.pipeline.gating.gate import DEFAULT_THRESHOLDS

    return dict(DEFAULT_THRESHOLDS)


def _metric_thresholds(value: Any) -> Mapping[str, float]:
    from retrievalkit.pipeline.engine.arguments import check_metric_thresholds

    return check_metric_thresholds(value)


def _slice_thresholds(value: Any) -> Mapping[str, Mapping[str, float]]:
    from retrievalkit.pipeline.engine.arguments import check_slice_thresholds

    return check_slice_thresholds(value)


def _latency_thresholds(value: Any) -> Mapping[str, float]:
    from retrievalkit.pipeline.engine.arguments import check_latency_thresholds

    return check_latency_thresholds(value)


def _cost_thresholds(value: Any) -> Mapping[str, float]:
    from retrievalkit.pipeline.engine.arguments import check_cost_thresholds

    return check_cost_thresholds(value)


def _flag(value: Any) -> bool:
    from retrievalkit.pipeline.engine.arguments import check_flag

    return check_flag(value, field="require_significant")


@attrs.frozen
class Thresholds:
    """What a gate checks: the largest allowed absolute drop of each metric, overall and
    per slice (`{"hard_class=near-duplicate": {"hit@3": 0.1}}`).

    `latency` maps ``p50``, ``p95``, ``p99`` to the largest allowed relative increase
    of that latency quantile (`{"p95": 0.2}`: the candidate's p95 at most 20 % above the
    baseline's, by the paired ratio of the two runs); empty: latency is not gated.
    `cost` maps ``per_question`` the same way to the largest allowed relative increase
    of the mean cost per question (`{"per_question": 0.1}`); a baseline without a cost
    skips it with a warning, never a failure.

    With `require_significant`, a drop past its threshold is a regression only when
    the paired test finds the difference significant, and a latency increase past its
    threshold only when the ratio's whole interval lies above it (a cost increase too).
    """

    metrics: Mapping[str, float] = attrs.field(
        factory=_default_thresholds, converter=_metric_thresholds
    )
    slices: Mapping[str, Mapping[str, float]] = attrs.field(
        factory=dict, converter=_slice_thresholds
    )
    require_significant: bool = attrs.field(default=False, converter=_flag)
    latency: Mapping[str, float] = attrs.field(
        factory=dict, converter=_latency_thresholds, kw_only=True
    )
    cost: Mapping[str, float] = attrs.field(factory=dict, converter=_cost_thresholds, kw_only=True)

    def __attrs_post_init__(self) -> None:
        if not self.metrics and not self.slices and not self.latency and not self.cost:
            raise InputError(
                "no metric to gate: a gate with nothing to check would always pass",
                field="thresholds",
                hint='give at least one metric, e.g. {"hit@1": 0.0}',
            )

    @classmethod
    def from_config(
        cls,
        config: Config,
        latency: Mapping[str, float] | None = None,
        cost: Mapping[str, float] | None = None,
        **overrides: float,
    ) -> Thresholds:
        """The configuration's `[regression]` thresholds over the defaults; `overrides`
        (metric name to drop) win over both, `latency` (statistic to increase) over
        `[regression.latency]`, and `cost` over `[regression.cost]`."""
        from retrievalkit.pipeline.gating.gate import DEFAULT_THRESHOLDS

        metrics = {**DEFAULT_THRESHOLDS, **config.regression.thresholds, **overrides}
        return cls(
            metrics,
            config.regression.slices,
            config.regression.require_significant,
            latency={**config.regression.latency, **(latency or {})},
            cost={**config.regression.cost, **(cost or {})},
        )

    def metric_names(self) -> list[str]:
        """Every gated metric name, overall or in a slice, sorted."""
        return sorted({*self.metrics, *(m for ms in self.slices.values() for m in ms)})
