"""How retrievalkit writes a number: one module for every table, report, page and log line.

Three decimals for metric values, a sign on differences, intervals in brackets, p-values
floored at ``<0.001``, and one glyph, :data:`NONE` (an en dash), wherever a value is
undefined (an empty slice, a first stage, a metric a run did not compute).
"""

from __future__ import annotations

from collections.abc import Sequence

#: What an undefined value is written as, everywhere.
NONE = "–"

#: Below this, a p-value is written as ``<0.001``.
P_FLOOR = 0.001


def number(value: float | None, digits: int = 3) -> str:
    """``0.512``; :data:`NONE` for an undefined value."""
    return NONE if value is None else f"{value:.{digits}f}"


def signed(value: float | None, digits: int = 3) -> str:
    """A difference with its sign: ``+0.012``, ``-0.034``; :data:`NONE` when undefined."""
    return NONE if value is None else f"{value:+.{digits}f}"


def bounds(ci: Sequence[float] | None, *, sign: bool = False, digits: int = 3) -> str:
    """An interval as ``[0.401, 0.620]`` (``[-0.010, +0.034]`` with ``sign``); :data:`NONE`
    when there is none."""
    if ci is None:
        return NONE
    write = signed if sign else number
    return f"[{write(ci[0], digits)}, {write(ci[1], digits)}]"


def signed_bounds(low: float | None, high: float | None) -> str:
    """``[-0.010, +0.034]`` from its two ends; :data:`NONE` when either is undefined."""
    return NONE if low is None or high is None else bounds((low, high), sign=True)


def mean_and_interval(mean: float | None, ci: Sequence[float] | None) -> str:
    """``0.512 [0.431, 0.590]``, the mean alone without an interval; :data:`NONE` for an
    undefined mean."""
    if mean is None:
        return NONE
    return number(mean) + ("" if ci is None else " " + bounds(ci))


def difference_and_interval(difference: float | None, ci: Sequence[float] | None) -> str:
    """``+0.012 [-0.010, +0.034]``, the difference alone without an interval; :data:`NONE`
    for an undefined difference."""
    if difference is None:
        return NONE
    return signed(difference) + ("" if ci is None else " " + bounds(ci, sign=True))


def p_text(value: float | None) -> str:
    """A p-value: ``0.043``, ``<0.001``; :data:`NONE` when no test was run."""
    if value is None:
        return NONE
    return f"<{P_FLOOR:g}" if value < P_FLOOR else f"{value:.3f}"


def percent(confidence: float) -> str:
    """A confidence level as a label: 0.95 -> '95%', 0.8 -> '80%', 0.975 -> '97.5%'."""
    return f"{confidence * 100:.6g}%"


def _ms_digits(value: float) -> int:
    """Sub-10 ms latencies (an in-process index) keep three decimals, the rest one."""
    return 3 if abs(value) < 10 else 1


def milliseconds(value: float | None, digits: int | None = None) -> str:
    """A latency: ``45.2 ms``, ``0.052 ms`` (three decimals below 10 ms unless ``digits``
    says otherwise); :data:`NONE` when undefined."""
    if value is None:
        return NONE
    places = _ms_digits(value) if digits is None else digits
    return f"{value:.{places}f} ms"


def milliseconds_interval(ci: Sequence[float] | None, digits: int | None = None) -> str:
    """``[40.1, 49.9] ms`` (both ends with the decimals of the larger one); :data:`NONE`
    without an interval."""
    if ci is None:
        return NONE
    places = _ms_digits(max(abs(ci[0]), abs(ci[1]))) if digits is None else digits
    return f"[{ci[0]:.{places}f}, {ci[1]:.{places}f}] ms"


def ratio(value: float | None) -> str:
    """A ratio candidate / baseline: ``1.234x``; :data:`NONE` when undefined."""
    return NONE if value is None else f"{value:.3f}x"


def ratio_interval(ci: Sequence[float] | None) -> str:
    """``[1.102, 1.377]``; :data:`NONE` without an interval."""
    return bounds(ci)


def increase(value: float | None) -> str:
    """A relative increase as a percentage: 0.2 -> ``+20%``, 0.125 -> ``+12.5%``."""
    return NONE if value is None else f"{value * 100:+.6g}%"
