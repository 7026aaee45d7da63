"""The judged share of a system's top k (``judged@k``) and the pooling-bias warning below 80 %.

A set whose labels come from pooling the results of some systems judges only what those
systems returned. A new system that returns documents nobody judged scores them as not
relevant, so its scores are biased low; ``judged@k`` (the share of the top k carrying
any label) measures how far. It is only reported for sets with graded or explicit
zero-grade labels, because without them "judged" and "relevant" are the same thing.
"""

from __future__ import annotations

from collections.abc import Mapping

from retrievalkit.metrics.definitions import metric_order
from retrievalkit.model.values import MetricValue

#: Below this share of judged documents in the top k, a system's scores are called biased.
JUDGED_FLOOR = 0.8


def judged_shares(metrics: Mapping[str, MetricValue]) -> dict[str, float | None]:
    """``judged@k`` -> mean for every k a run reports, in k order; empty without judged@k."""
    found = {name: value.mean for name, value in metrics.items() if name.startswith("judged@")}
    return dict(sorted(found.items(), key=lambda item: metric_order(item[0])))


def judged_warning(system: str, shares: Mapping[str, float | None]) -> str | None:
    """One line naming every ``judged@k`` of ``system`` below the floor, or None."""
    low = [(name, share) for name, share in shares.items() if share is not None]
    low = [(name, share) for name, share in low if share < JUDGED_FLOOR]
    if not low:
        return None
    listing = ", ".join(f"{name} = {share:.2f}" for name, share in low)
    return (
        f"{system}: {listing} (below {JUDGED_FLOOR:.2f}): unjudged documents count as not "
        "relevant, so its scores are biased low (pooling bias); judge what it returns"
    )
