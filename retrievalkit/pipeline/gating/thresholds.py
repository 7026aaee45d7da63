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


def _flag(value: Any) -> bool:
    from retrievalkit.pipeline.engine.arguments import check_flag

    return check_flag(value, field="require_significant")


@attrs.frozen
class Thresholds:
    """What a gate checks: the largest allowed absolute drop of each metric, overall and
    per slice (`{"hard_class=near-duplicate": {"hit@3": 0.1}}`).

    With `require_significant`, a drop past its threshold is a regression only when
    the paired test finds the difference significant.
    """

    metrics: Mapping[str, float] = attrs.field(
        factory=_default_thresholds, converter=_metric_thresholds
    )
    slices: Mapping[str, Mapping[str, float]] = attrs.field(
        factory=dict, converter=_slice_thresholds
    )
    require_significant: bool = attrs.field(default=False, converter=_flag)

    def __attrs_post_init__(self) -> None:
        if not self.metrics and not self.slices:
            raise InputError(
                "no metric to gate: a gate with nothing to check would always pass",
                field="thresholds",
                hint='give at least one metric, e.g. {"hit@1": 0.0}',
            )

    @classmethod
    def from_config(cls, config: Config, **overrides: float) -> Thresholds:
        """The configuration's `[regression]` thresholds over the defaults; `overrides`
        (metric name to drop) win over both."""
        from retrievalkit.pipeline.gating.gate import DEFAULT_THRESHOLDS

        metrics = {**DEFAULT_THRESHOLDS, **config.regression.thresholds, **overrides}
        return cls(metrics, config.regression.slices, config.regression.require_significant)

    def metric_names(self) -> list[str]:
        """Every gated metric name, overall or in a slice, sorted."""
        return sorted({*self.metrics, *(m for ms in self.slices.values() for m in ms)})
