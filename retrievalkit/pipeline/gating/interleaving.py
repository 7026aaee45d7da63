"""Credit the clicks of an interleaving log to its two teams, and test the preference.

A click is credited to the team that contributed the clicked document (a `SHARED`
document credits neither). An impression with clicks is a win for the first team when
it got more credited clicks than the second, a loss when fewer, a tie otherwise
(Radlinski, Kurup & Joachims 2008). The unit is the impression: the preference is
(wins - losses) / impressions with clicks, tested with the exact sign test of wins
against losses, and its interval is `retrievalkit.stats.paired.paired_interval` of
the per-impression outcomes (+1, 0, -1), which agrees with that test. The impressions
a given preference needs come from the sign test's exact power
(`retrievalkit.stats.power`), with the share of untied impressions seen in the log.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from retrievalkit.model.interleaving import (
    Impression,
    ImpressionsNeeded,
    InterleaveCredit,
    QueryCredit,
    Rate,
)
from retrievalkit.stats.intervals import CLOPPER_PEARSON, DEFAULT_CONFIDENCE, clopper_pearson
from retrievalkit.stats.power import DEFAULT_POWER

#: The basis `retrievalkit.stats.power.Spread` names for an interleaving log.
BASIS = "interleaving log"


def outcome(impression: Impression) -> int | None:
    """+1 (the first team won), -1 (lost), 0 (tie) or None (no click)."""
    if not impression.clicked:
        return None
    team_of = {shown.id: shown.team for shown in impression.shown}
    first = sum(team_of[doc] == impression.teams[0] for doc in impression.clicked)
    second = sum(team_of[doc] == impression.teams[1] for doc in impression.clicked)
    return (first > second) - (first < second)


def credit(
    impressions: Iterable[Impression],
    *,
    log: str,
    confidence: float = DEFAULT_CONFIDENCE,
    effect: float | None = None,
    power: float = DEFAULT_POWER,
) -> InterleaveCredit:
    """Wins, ties and losses of the first team, the preference with its interval, the sign
    test, and the impressions ``effect`` needs (default: the preference seen)."""
    from retrievalkit.stats.paired import paired_interval
    from retrievalkit.stats.sign_test import sign_test_p_value

    teams: tuple[str, str] | None = None
    count = 0
    outcomes: list[int] = []
    by_query: dict[str, list[int]] = {}
    queries: set[str] = set()
    for impression in impressions:
        teams = teams or impression.teams
        count += 1
        queries.add(impression.query)
        result = outcome(impression)
        if result is None:
            continue
        outcomes.append(result)
        tally = by_query.setdefault(impression.query, [0, 0, 0])
        tally[1 - result] += 1
    wins, losses = outcomes.count(1), outcomes.count(-1)
    ties = len(outcomes) - wins - losses
    alpha = 1.0 - confidence
    p_value = sign_test_p_value(wins, losses)
    preference = Rate(None, None)
    if outcomes:
        values = np.asarray(outcomes, dtype=np.float64)
        low, high, method = paired_interval(
            values, 1.0 if p_value is None else p_value, wins + losses, confidence=confidence
        )
        ci = None if low is None or high is None else (low, high)
        preference = Rate(float(values.mean()), ci, method)
    win_share = Rate(None, None)
    if wins + losses:
        low_share, high_share = clopper_pearson(wins, wins + losses, confidence)
        win_share = Rate(
            wins / (wins + losses), (float(low_share), float(high_share)), CLOPPER_PEARSON
        )
    observed = abs(preference.value) if preference.value is not None else None
    target = effect if effect is not None else (observed or None)
    needed = None
    if target is not None:
        needed = impressions_needed(
            target,
            discordance=(wins + losses) / len(outcomes) if outcomes else 1.0,
            click_rate=len(outcomes) / count if count else None,
            impressions=count,
            alpha=alpha,
            power=power,
        )
    return InterleaveCredit(
        log=log,
        teams=teams or ("", ""),
        impressions=count,
        with_clicks=len(outcomes),
        queries=len(queries),
        wins=wins,
        ties=ties,
        losses=losses,
        preference=preference,
        win_share=win_share,
        p_value=p_value,
        significant=None if p_value is None else p_value < alpha,
        confidence=confidence,
        needed=needed,
        by_query=tuple(QueryCredit(query, *tally) for query, tally in sorted(by_query.items())),
    )


def impressions_needed(
    effect: float,
    *,
    discordance: float,
    click_rate: float | None,
    impressions: int,
    alpha: float,
    power: float = DEFAULT_POWER,
) -> ImpressionsNeeded:
    """The impressions with clicks at which the sign test finds a preference of ``effect``
    with ``power`` (untied share ``max(discordance, effect)``), and the impressions that
    takes at ``click_rate``."""
    from retrievalkit.stats.power import Spread, questions_needed

    spread = Spread(binary=True, discordance=max(discordance, effect), sd=1.0, basis=BASIS)
    with_clicks = questions_needed(effect, spread, alpha, power)
    total = more = None
    if with_clicks is not None and click_rate:
        total = math.ceil(with_clicks / click_rate - 1e-9)
        more = max(0, total - impressions)
    return ImpressionsNeeded(
        effect=effect,
        power=power,
        with_clicks=with_clicks,
        impressions=total,
        more=more,
        discordance=min(1.0, max(discordance, effect)),
    )
