"""The ``interleave`` retriever: team-draft interleaving of two configured retrievers.

Team draft (Radlinski, Kurup & Joachims, CIKM 2008, "How does clickthrough data
reflect retrieval quality?"): the two rankings are teams picking players. In each round
the team with fewer picks so far picks next (a coin decides when both have as many),
and a team's pick is its best document not already shown, so a document both rank is
shown once, for whichever team picked it first. The list stops when either team has
nothing left to pick. Before the draft, the documents at the top that both rankings
put at the same ranks are shown as they are, for neither team (`SHARED`): a click there
says nothing about which ranking is better, so a retriever interleaved with itself gives
a tie on every impression (as the team-draft implementation of Lerot does).

The coins are drawn from the ``seed`` and the query alone, so a query is always
interleaved the same way for one seed. `InterleaveRetriever.retrieve_hits` returns each
document with its team in the hit's ``metadata`` and, with ``log`` set, appends the
impression to that JSON Lines file (`retrievalkit.formats.clicks`) for the serving
system to join its clicks with.
"""

from __future__ import annotations

import hashlib
import random
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrievalkit.errors import InputError
from retrievalkit.formats.ids import returned_id
from retrievalkit.model.interleaving import SHARED, Impression, ShownDocument

if TYPE_CHECKING:
    from retrievalkit.plugins.resolution import Resolver

DEFAULT_SEED = 0


def coin_flips(query: str, seed: int) -> random.Random:
    """The coins of one query: the same sequence for the same query and seed, anywhere."""
    digest = hashlib.sha256(f"{seed}\x00{query}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def team_draft(
    first: Sequence[str],
    second: Sequence[str],
    limit: int,
    *,
    teams: tuple[str, str],
    coins: random.Random,
) -> list[ShownDocument]:
    """At most ``limit`` documents of ``first`` and ``second`` interleaved by team draft,
    each with its team (``teams[0]``, ``teams[1]`` or `SHARED`).

    Ids are compared as the evaluator compares them (`formats.ids.returned_id`); the
    spelling of the ranking that contributes a document is kept.
    """
    rankings = (_distinct(first), _distinct(second))
    shown: list[ShownDocument] = []
    placed: set[str] = set()
    for (key_a, doc_a), (key_b, _) in zip(*rankings, strict=False):
        if key_a != key_b or len(shown) >= limit:
            break
        shown.append(ShownDocument(doc_a, SHARED))
        placed.add(key_a)
    picks = [0, 0]
    cursors = [len(shown), len(shown)]
    while len(shown) < limit:
        for side in (0, 1):
            ranking = rankings[side]
            while cursors[side] < len(ranking) and ranking[cursors[side]][0] in placed:
                cursors[side] += 1
        if any(cursors[side] >= len(rankings[side]) for side in (0, 1)):
            break
        behind = picks[0] < picks[1] or (picks[0] == picks[1] and coins.random() < 0.5)
        side = 0 if behind else 1
        key, doc = rankings[side][cursors[side]]
        shown.append(ShownDocument(doc, teams[side]))
        placed.add(key)
        picks[side] += 1
    return shown


def _distinct(ranking: Sequence[str]) -> list[tuple[str, str]]:
    """(identity, spelling) of each document's first occurrence, in order."""
    first: dict[str, str] = {}
    for doc in ranking:
        key = returned_id(doc) if isinstance(doc, str) and doc else doc
        first.setdefault(key, doc)
    return list(first.items())


class InterleaveRetriever:
    """Team draft of two resolved retrievers; their names are the teams."""

    def __init__(
        self,
        parts: Sequence[Any],
        *,
        seed: int = DEFAULT_SEED,
        log: str | None = None,
        identifier: str = "interleave",
    ) -> None:
        self.identifier = identifier
        self._parts = list(parts)
        self._seed = seed
        self._log = None if log is None else Path(log)
        self._lock = threading.Lock()
        self.teams: tuple[str, str] = (self._parts[0].name, self._parts[1].name)

    def describe(self) -> dict[str, str]:
        """What the manifest records: the two teams with their options hashes, and the seed."""
        from retrievalkit.pipeline.engine.record import options_hash

        teams = ", ".join(
            f"{part.name} (plugin {part.plugin}, options {options_hash(part.options)})"
            for part in self._parts
        )
        return {"interleave.teams": teams, "interleave.seed": str(self._seed)}

    def interleave(self, question: str, limit: int, impression: str | None = None) -> Impression:
        """The impression of ``question``: the interleaved list, each document's team."""
        rankings = [list(part.retriever.retrieve(question, limit)) for part in self._parts]
        shown = team_draft(
            rankings[0],
            rankings[1],
            limit,
            teams=self.teams,
            coins=coin_flips(question, self._seed),
        )
        return Impression(impression or uuid.uuid4().hex, question, self.teams, tuple(shown))

    def retrieve(self, question: str, limit: int) -> list[str]:
        return [shown.id for shown in self.interleave(question, limit).shown]

    def retrieve_hits(
        self, question: str, limit: int, *, impression: str | None = None
    ) -> list[dict[str, Any]]:
        """The interleaved list as hits ``{"id", "rank", "metadata": {"team",
        "impression"}}``; with ``log``, the impression is appended to it (clicks empty)."""
        shown = self.interleave(question, limit, impression)
        if self._log is not None:
            from retrievalkit.formats.clicks import impression_line

            line = impression_line(shown) + "\n"
            with self._lock, self._log.open("a", encoding="utf-8") as handle:
                handle.write(line)
        return [
            {
                "id": document.id,
                "rank": rank,
                "metadata": {"team": document.team, "impression": shown.impression},
            }
            for rank, document in enumerate(shown.shown, 1)
        ]


def create_interleave(
    retrievers: Sequence[str] | None = None,
    *,
    seed: int = DEFAULT_SEED,
    log: str | None = None,
    resolver: Resolver | None = None,
) -> InterleaveRetriever:
    """Factory of the ``interleave`` plugin: team-draft interleaving for online tests.

    Options: ``retrievers`` (the names of exactly two configured retrievers or
    option-less plugins, e.g. the production ranking first and the candidate second;
    their names are the teams), ``seed`` (the coins of a query are drawn from it and the
    query, 0) and ``log`` (a JSON Lines file each `retrieve_hits` call appends its
    impression to, for the clicks log that `retrievalkit interleave credit` reads).
    Each hit's ``metadata`` carries its ``team``: a retriever's name, or ``shared`` for
    the top documents both rank alike.
    """
    from retrievalkit.plugins.resolution import Resolver

    if (
        not retrievers
        or isinstance(retrievers, str)
        or len(retrievers) != 2
        or not all(isinstance(name, str) for name in retrievers)
    ):
        raise InputError(
            f"needs exactly two retriever names, got {retrievers!r}",
            field="retrievers",
            hint='e.g. retrievers = ["production", "candidate"]',
        )
    if retrievers[0] == retrievers[1]:
        raise InputError(
            f"names one retriever twice ({retrievers[0]!r}): the teams need two names",
            field="retrievers",
            hint="configure the second as its own [retrievers.NAME] to interleave it with itself",
        )
    if SHARED in retrievers:
        raise InputError(
            f"a team may not be named {SHARED!r}, which marks documents both rank alike",
            field="retrievers",
        )
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InputError(f"must be a whole number, got {seed!r}", field="seed")
    if log is not None and (not isinstance(log, str) or not log.strip()):
        raise InputError(f"must be the path of a file, got {log!r}", field="log")
    finder = resolver or Resolver()
    parts = [finder.retriever(name) for name in retrievers]
    return InterleaveRetriever(parts, seed=seed, log=log)
