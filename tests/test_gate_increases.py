"""The relative-increase check that the latency and cost gates share."""

from __future__ import annotations

import pytest

from retrievalkit.pipeline.gating.increases import TOLERANCE, increase_verdict


@pytest.mark.parametrize(
    ("ratio", "ci", "require_significant", "expected"),
    [
        # 0.3 / 0.25 is 1.2000000000000002: at the limit, not past it.
        (0.3 / 0.25, None, False, (False, None)),
        (1.2001, None, False, (True, None)),
        (1.19, (1.0, 1.4), False, (False, False)),
        # Above the limit, but the interval reaches below it: a failure only without
        # require_significant.
        (1.3, (1.1, 1.5), False, (True, False)),
        (1.3, (1.1, 1.5), True, (False, False)),
        (1.3, (1.2001, 1.5), True, (True, True)),
        # The interval's low end at the limit itself is not above it.
        (1.3, (1.2, 1.5), True, (False, False)),
        # Without an interval, require_significant cannot be met.
        (1.3, None, True, (False, None)),
    ],
)
def test_a_ratio_regresses_past_one_plus_its_threshold(
    ratio: float,
    ci: tuple[float, float] | None,
    require_significant: bool,
    expected: tuple[bool, bool | None],
) -> None:
    verdict = increase_verdict(ratio, ci, 0.2, require_significant=require_significant)
    assert verdict == expected


def test_the_threshold_sets_the_limit() -> None:
    assert increase_verdict(1.05, None, 0.0, require_significant=False) == (True, None)
    assert increase_verdict(1.05, None, 0.1, require_significant=False) == (False, None)
    assert increase_verdict(0.5, (0.4, 0.6), 0.0, require_significant=False) == (False, False)


def test_a_ratio_exactly_at_the_limit_has_not_gone_past_it() -> None:
    """The limit is 1 + threshold + the rounding slack: a ratio, or an interval's low end,
    equal to it is at the limit, not above it."""
    limit = 1.0 + 0.2 + TOLERANCE
    assert increase_verdict(limit, (limit, 1.5), 0.2, require_significant=False) == (False, False)
    assert increase_verdict(limit, (limit, 1.5), 0.2, require_significant=True) == (False, False)
    above = limit + 1e-12
    assert increase_verdict(above, (above, 1.5), 0.2, require_significant=True) == (True, True)
