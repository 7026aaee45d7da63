"""What an interleaved impression is, and what crediting a log of them found.

Plain frozen values: the ``interleave`` retriever makes impressions, the clicks log
holds them, `retrievalkit.pipeline.gating.interleaving` credits them and the renderers
show the result, none of them importing another.
"""

from __future__ import annotations

import attrs

#: The team of a document both rankings put at the same rank at the top (see
#: `retrievalkit.retrievers.interleave`): shown, never credited to either team.
SHARED = "shared"


@attrs.frozen
class ShownDocument:
    """One document of an interleaved list, with the team that contributed it."""

    id: str
    team: str
    """The name of the retriever that contributed it, or `SHARED`."""


@attrs.frozen
class Impression:
    """One interleaved list shown for one query, and what was clicked in it."""

    impression: str
    query: str
    teams: tuple[str, str]
    """The two retrievers interleaved, in the configured order."""
    shown: tuple[ShownDocument, ...]
    clicked: tuple[str, ...] = ()


@attrs.frozen
class Rate:
    """A share with its interval (None: nothing to estimate it from)."""

    value: float | None
    ci: tuple[float, float] | None
    method: str | None = None


@attrs.frozen
class QueryCredit:
    """One query's impressions with clicks, by outcome for the first team."""

    query: str
    wins: int
    ties: int
    losses: int


@attrs.frozen
class ImpressionsNeeded:
    """How many impressions the sign test needs to find a preference of ``effect``."""

    effect: float
    """The preference (wins - losses) / impressions with clicks to detect."""
    power: float
    with_clicks: int | None
    """Impressions with clicks needed (None: more than 10 million)."""
    impressions: int | None
    """Impressions needed at the log's click rate (None: no click rate yet, or too many)."""
    more: int | None
    """Impressions still to collect beyond the log's (0: enough already)."""
    discordance: float
    """The share of impressions with clicks assumed not to tie: the log's, at least
    ``effect``."""


@attrs.frozen
class InterleaveCredit:
    """The clicks of an interleaving log credited to its two teams.

    Each impression with clicks is a win for the first team when more of its clicks fell
    on documents the first team contributed, a loss when fewer, a tie otherwise;
    impressions without clicks carry no preference and are only counted.
    """

    log: str
    teams: tuple[str, str]
    impressions: int
    with_clicks: int
    queries: int
    wins: int
    ties: int
    losses: int
    preference: Rate
    """(wins - losses) / impressions with clicks, in [-1, 1]; above 0 favours the first
    team. Its interval agrees with the sign test (it excludes 0 exactly when p < alpha)."""
    win_share: Rate
    """wins / (wins + losses), with the exact (Clopper-Pearson) interval."""
    p_value: float | None
    """The exact two-sided sign test of wins against losses (None: no win or loss)."""
    significant: bool | None
    confidence: float
    needed: ImpressionsNeeded | None
    by_query: tuple[QueryCredit, ...] = ()
