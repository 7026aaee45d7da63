"""The one resolver of an evaluation's settings: argument, else configuration, else default.

`retrievalkit eval`, `retrievalkit compare`, `retrievalkit sweep`, `retrievalkit.evaluate`
and `retrievalkit.sweep` all resolve their settings here, so that the same configuration
gives the same run whichever way it is started:

- a setting given (an option, a keyword argument) wins;
- else the configuration's `[eval]` key (`[regression] max_error_rate` for the error rate);
- else the default of the table below.

Two settings add up rather than replace: `slices` and `metrics` hold the configuration's
entries and the given ones (the configuration's `[eval] slices` are always broken
down, an option asks for more). Every metric the configuration's `[regression]` gates is
computed, and its cut-off added to `k`, so that a gate never meets a metric its run lacks.

| setting | default |
|---|---|
| `k` | 1, 3, 5, 10 (1 and 3 always added) |
| `overfetch` | 3 |
| `resamples` | 2,000 |
| `confidence` | 0.95 |
| `seed` | 20240611 |
| `concurrency` | 1 |
| `repeat` | 1 (each question asked once) |
| `warmup` | 0 (no question asked first) |
| `timeout` | none (wait) |
| `max_error_rate` | 0 (any error fails the run); `None` accepts any |
| `slices`, `metrics` | none besides the default table |
| `cluster_by`, `chunk_separator` | none |
| `costs` | none: `[costs."MODEL"]`, model by model, the given prices winning |

Each value is checked by `retrievalkit.pipeline.engine.arguments`, the checks of the
command line's options, with the same words.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs

from retrievalkit.pipeline.engine import arguments

if TYPE_CHECKING:
    from retrievalkit.formats.config import Config


class Unset(enum.Enum):
    UNSET = "unset"

    def __repr__(self) -> str:
        return "UNSET"


#: A keyword left out, where None means something of its own (`max_error_rate=None`
#: accepts any share of errors).
UNSET: Final = Unset.UNSET


@attrs.frozen
class EvalSettings:
    """Every setting of one evaluation, resolved and checked (see the module's table)."""

    k: tuple[int, ...]
    """The cut-offs, sorted, with 1 and 3 and every asked or gated metric's cut-off."""
    overfetch: int
    resamples: int
    confidence: float
    seed: int
    concurrency: int
    timeout: float | None
    max_error_rate: float | None
    slices: tuple[str, ...]
    metrics: tuple[str, ...]
    """Metrics computed besides the default table: `[eval] metrics`, the given ones, and
    those the configuration gates that only a request computes (`ndcg_exp@10`)."""
    cluster_by: str | None
    chunk_separator: str | None
    repeat: int = 1
    """Times each question is asked; its latency is the median, its ranking the first."""
    warmup: int = 0
    """Questions asked first (the set's first, cycling) whose answers are discarded."""
    costs: Mapping[str, Mapping[str, float]] = attrs.field(factory=dict)
    """Model -> ``{"input", "output"}``, the price of 1,000 tokens (`[costs]`)."""

    @classmethod
    def resolve(
        cls,
        config: Config,
        *,
        k: Sequence[int] | None = None,
        overfetch: int | None = None,
        resamples: int | None = None,
        confidence: float | None = None,
        seed: int | None = None,
        concurrency: int | None = None,
        timeout: float | None = None,
        max_error_rate: float | Unset | None = UNSET,
        slices: Sequence[str] | None = None,
        metrics: Sequence[str] | None = None,
        cluster_by: str | None = None,
        chunk_separator: str | None = None,
        gated: Iterable[str] | None = None,
        repeat: int | None = None,
        warmup: int | None = None,
        costs: Mapping[str, Any] | None = None,
    ) -> EvalSettings:
        """The settings of a run: each given value (not None), else `config`'s, else the
        default. `gated` names the metrics a gate will check (default: the configuration's
        `[regression]`); each is computed, at its cut-off."""
        from retrievalkit.metrics.definitions import DEFAULT_KS, normalise_ks, requested_metrics
        from retrievalkit.pipeline.engine.evaluator import DEFAULT_OVERFETCH
        from retrievalkit.stats.intervals import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, DEFAULT_SEED

        table = config.eval
        if gated is None:
            from retrievalkit.pipeline.gating.thresholds import Thresholds

            gated = Thresholds.from_config(config).metric_names()
        gated = tuple(gated)
        given_metrics = () if metrics is None else arguments.check_names(metrics, field="--metric")
        given_slices = () if slices is None else arguments.check_names(slices, field="--slice")
        named = arguments.check_metric_names(
            (*given_metrics, *table.metrics, *requested_metrics(gated))
        )
        ks = arguments.check_ks(_first(k, table.k, DEFAULT_KS))
        if max_error_rate is UNSET:
            max_error_rate = _first(config.regression.max_error_rate, 0.0)
        return cls(
            k=normalise_ks((*ks, *cut_offs(named), *cut_offs(gated))),
            overfetch=arguments.check_overfetch(
                _first(overfetch, table.overfetch, DEFAULT_OVERFETCH)
            ),
            resamples=arguments.check_resamples(
                _first(resamples, table.resamples, DEFAULT_RESAMPLES)
            ),
            confidence=arguments.check_confidence(
                _first(confidence, table.confidence, DEFAULT_CONFIDENCE)
            ),
            seed=arguments.check_seed(_first(seed, DEFAULT_SEED)),
            concurrency=arguments.check_concurrency(_first(concurrency, table.concurrency, 1)),
            timeout=arguments.check_timeout(_first(timeout, table.timeout)),
            max_error_rate=arguments.check_max_error_rate(max_error_rate),
            slices=tuple(dict.fromkeys((*table.slices, *given_slices))),
            metrics=named,
            cluster_by=_first(cluster_by, table.cluster_by),
            chunk_separator=_first(chunk_separator, table.chunk_separator),
            repeat=arguments.check_repeat(_first(repeat, table.repeat, 1)),
            warmup=arguments.check_warmup(_first(warmup, table.warmup, 0)),
            costs={
                **{model: price.document() for model, price in config.costs.items()},
                **({} if costs is None else arguments.check_costs(costs)),
            },
        )

    def arguments(self) -> dict[str, Any]:
        """The keyword arguments of `retrievalkit.evaluate` that give these settings.

        Resolving them again gives the same settings: `resolve(config, **s.arguments())`
        equals `s`."""
        return {
            "k": self.k,
            "overfetch": self.overfetch,
            "resamples": self.resamples,
            "confidence": self.confidence,
            "seed": self.seed,
            "concurrency": self.concurrency,
            "timeout": self.timeout,
            "max_error_rate": self.max_error_rate,
            "slices": self.slices,
            "metrics": self.metrics,
            "cluster_by": self.cluster_by,
            "chunk_separator": self.chunk_separator,
            "repeat": self.repeat,
            "warmup": self.warmup,
            "costs": self.costs,
        }


def cut_offs(names: Iterable[str]) -> tuple[int, ...]:
    """The cut-offs of metric names (a stage's metric, ``stage.S:ndcg@20``, counts too)."""
    from retrievalkit.metrics.definitions import parse_metric
    from retrievalkit.metrics.names import bare_metric_name

    metrics = (parse_metric(bare_metric_name(name)) for name in names)
    return tuple(metric.k for metric in metrics if metric.k is not None)


def _first(*values: Any) -> Any:
    """The first value that is not None (the last one, the default, when all are)."""
    for value in values[:-1]:
        if value is not None:
            return value
    return values[-1]


@attrs.frozen
class DriftSettings:
    """The settings of `retrievalkit drift` and `retrievalkit.drift`: each given value,
    else the configuration's `[drift]` (or `[eval]` for resamples, confidence,
    concurrency, timeout), else the default (k 10, depth 50, rbo_p 0.9, resamples 1,000)."""

    k: int
    depth: int
    rbo_p: float
    resamples: int
    confidence: float
    seed: int
    concurrency: int
    timeout: float | None
    min_rbo: float | None
    max_zero_result_increase: float | None

    @classmethod
    def resolve(
        cls,
        config: Config,
        *,
        k: int | None = None,
        depth: int | None = None,
        rbo_p: float | None = None,
        resamples: int | None = None,
        confidence: float | None = None,
        seed: int | None = None,
        concurrency: int | None = None,
        timeout: float | None = None,
        min_rbo: float | None = None,
        max_zero_result_increase: float | None = None,
    ) -> DriftSettings:
        from retrievalkit.errors import InputError
        from retrievalkit.stats.intervals import DEFAULT_CONFIDENCE

        table, limits = config.eval, config.drift
        cut = arguments.check_ks([_first(k, limits.k, 10)])[0]
        deep = _first(depth, max(50, cut))
        if isinstance(deep, bool) or not isinstance(deep, int) or deep < cut:
            raise InputError(
                f"--depth must be a whole number of at least k ({cut}), not {deep!r}",
                field="--depth",
            )
        persistence = _first(rbo_p, limits.rbo_p, 0.9)
        if (
            isinstance(persistence, bool)
            or not isinstance(persistence, (int, float))
            or not 0 < persistence < 1
        ):
            raise InputError(f"must be above 0 and below 1, not {persistence!r}", field="--rbo-p")
        for name, value in (
            ("--min-rbo", min_rbo),
            ("--max-zero-result-increase", max_zero_result_increase),
        ):
            if value is not None and (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not 0 <= value <= 1
            ):
                raise InputError(f"must be a number from 0 to 1, not {value!r}", field=name)
        return cls(
            k=cut,
            depth=deep,
            rbo_p=float(persistence),
            resamples=arguments.check_resamples(_first(resamples, table.resamples, 1000)),
            confidence=arguments.check_confidence(
                _first(confidence, table.confidence, DEFAULT_CONFIDENCE)
            ),
            seed=arguments.check_seed(_first(seed, 0)),
            concurrency=arguments.check_concurrency(_first(concurrency, table.concurrency, 1)),
            timeout=arguments.check_timeout(_first(timeout, table.timeout)),
            min_rbo=_first(min_rbo, limits.min_rbo, None),
            max_zero_result_increase=_first(
                max_zero_result_increase, limits.max_zero_result_increase, None
            ),
        )
