"""The unjudged-aware verdict: beside each difference, the judged@k of both sides, and the
difference of the condensed rankings when the two shares differ.

A system that returns documents nobody labelled scores them as not relevant; when two
systems' top k are labelled to different degrees, part of their difference may be the
labelling, not the ranking. When the judged shares differ by more than `JUDGED_MARGIN`,
the same metric is compared on the condensed rankings (unjudged documents removed,
Sakai 2007), and a verdict of the two that disagree is said plainly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from retrievalkit.formats.numbers import number, signed
from retrievalkit.metrics.definitions import CONDENSED, parse_metric
from retrievalkit.metrics.scoring import condensed_column, metric_column
from retrievalkit.model.comparisons import JudgedContext
from retrievalkit.stats.clusters import paired_test_by
from retrievalkit.stats.paired import SIGNIFICANT, TIE, verdict

if TYPE_CHECKING:
    from retrievalkit.model.outcomes import Outcomes

#: Judged shares further apart than this (absolute) bring in the condensed comparison.
JUDGED_MARGIN = 0.1
#: The plain words of a disagreement.
LABELLING_NOTE = "the difference may come from which documents were labelled"


def judged_measure(metric: str, available: set[str]) -> str | None:
    """The judged@k that stands beside ``metric``: judged@k at its own cut-off, the
    deepest one for a metric without (``rr``, ``bpref``); None when there is none."""
    try:
        parsed = parse_metric(metric)
    except ValueError:  # a stage's metric: its ranking is not the run's
        return None
    if parsed.family.chunk or parsed.family.family == "judged" or parsed.condensed:
        return None
    if parsed.k is not None:
        name = f"judged@{parsed.k}"
        return name if name in available else None
    found = sorted((parse_metric(name).k or 0, name) for name in available)
    return found[-1][1] if found else None


def judged_context(
    before: tuple[Outcomes, npt.NDArray[np.intp]],
    after: tuple[Outcomes, npt.NDArray[np.intp]],
    metric: str,
    *,
    difference: float | None,
    significant: bool | None,
    resamples: int,
    confidence: float,
    seed: int,
    clusters: npt.NDArray[np.intp] | None = None,
) -> JudgedContext | None:
    """The unjudged-aware verdict of ``metric``'s difference (``difference``, whether it was
    ``significant``) over the questions at the given positions of each side's outcomes;
    None when either side has no judged@k for it."""
    (old, old_at), (new, new_at) = before, after
    available = set(old.metric_names) & set(new.metric_names)
    measure = judged_measure(metric, {n for n in available if n.startswith("judged@")})
    if measure is None:
        return None
    shares = [_mean(metric_column(side, measure)[at]) for side, at in (before, after)]
    context = JudgedContext(measure, shares[0], shares[1], JUDGED_MARGIN)
    if shares[0] is None or shares[1] is None or abs(shares[0] - shares[1]) <= JUDGED_MARGIN:
        return context
    if not parse_metric(metric).family.condensable:
        return context
    left, right = condensed_column(old, metric)[old_at], condensed_column(new, metric)[new_at]
    paired = paired_test_by(
        left, right, resamples=resamples, confidence=confidence, seed=seed, clusters=clusters
    )
    said = verdict(paired.p_value, paired.p_floor, 1.0 - confidence)
    interval = None if paired.low is None or paired.high is None else (paired.low, paired.high)
    disagree = _disagree(difference, significant, paired.difference, said == SIGNIFICANT)
    return JudgedContext(
        measure,
        shares[0],
        shares[1],
        JUDGED_MARGIN,
        condensed_metric=metric + CONDENSED,
        condensed_baseline=paired.baseline,
        condensed_candidate=paired.candidate,
        condensed_difference=paired.difference,
        condensed_ci=interval,
        condensed_p_value=paired.p_value,
        condensed_verdict=said,
        disagree=disagree,
    )


def _disagree(
    plain: float | None, plain_significant: bool | None, condensed: float | None, both: bool
) -> bool:
    """The condensed difference points the other way, or only one of the two is significant."""
    if plain is None or condensed is None:
        return False
    opposite = (plain > TIE and condensed < -TIE) or (plain < -TIE and condensed > TIE)
    return opposite or bool(plain_significant) != both


def disagreement_warning(label: str, metric: str, context: JudgedContext) -> str | None:
    """One plain line for a difference whose condensed result disagrees with it, or None."""
    if not context.disagree or context.condensed_difference is None:
        return None
    return (
        f"{label}: {metric} and {context.condensed_metric} disagree "
        f"({context.measure} {_share(context.baseline)} against {_share(context.candidate)}; "
        f"condensed difference {signed(context.condensed_difference)}, "
        f"{context.condensed_verdict or 'no test'}): {LABELLING_NOTE}"
    )


def _share(value: float | None) -> str:
    return number(value, digits=2)


def _mean(values: npt.NDArray[np.float64]) -> float | None:
    defined = values[~np.isnan(values)]
    return float(defined.mean()) if defined.size else None
