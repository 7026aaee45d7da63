"""The answers of consecutive questions, held by column: what asking yields to scoring."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import overload

from retrievalkit.model.values import Retrieval

#: A question's tokens: model -> (input tokens, output tokens) (`retrievalkit.usage`).
Tokens = Mapping[str, tuple[int, int]]


class Retrievals(Sequence[Retrieval]):
    """The retrievals of consecutive questions, held by column.

    What `ask_in_batches` yields: a sequence of `Retrieval` (indexing builds one), whose
    columns a scorer reads without any per-question object. ``errors`` maps the position
    of each question that errored, in order, to its message. ``usage`` holds each
    question's tokens (model -> (input, output), None where none were recorded), or is
    None when no question recorded any.
    """

    __slots__ = ("errors", "latency_ms", "rankings", "returned", "usage")

    def __init__(
        self,
        rankings: list[tuple[str, ...]],
        latency_ms: list[float],
        returned: list[int],
        errors: dict[int, str],
        usage: list[Tokens | None] | None = None,
    ) -> None:
        if not len(rankings) == len(latency_ms) == len(returned):
            raise ValueError("rankings, latency_ms and returned must have one entry a question")
        if usage is not None and len(usage) != len(rankings):
            raise ValueError("usage must have one entry a question")
        self.rankings = rankings
        self.latency_ms = latency_ms
        self.returned = returned
        self.errors = errors
        self.usage = usage if usage is not None and any(usage) else None

    def usage_at(self, position: int) -> Tokens | None:
        return None if self.usage is None else self.usage[position]

    @classmethod
    def of(cls, retrievals: Iterable[Retrieval]) -> Retrievals:
        """``retrievals`` by column (a `Retrievals` as it is)."""
        if isinstance(retrievals, Retrievals):
            return retrievals
        held = list(retrievals)
        return cls(
            [retrieval.ranking for retrieval in held],
            [retrieval.latency_ms for retrieval in held],
            [retrieval.returned for retrieval in held],
            {
                index: retrieval.error
                for index, retrieval in enumerate(held)
                if retrieval.error is not None
            },
            [retrieval.usage for retrieval in held],
        )

    @classmethod
    def joined(cls, parts: Sequence[Retrievals]) -> Retrievals:
        """The retrievals of ``parts`` one after another."""
        if len(parts) == 1:
            return parts[0]
        rankings: list[tuple[str, ...]] = []
        latency: list[float] = []
        returned: list[int] = []
        errors: dict[int, str] = {}
        usage: list[Tokens | None] = []
        for part in parts:
            low = len(rankings)
            errors.update((low + position, message) for position, message in part.errors.items())
            rankings += part.rankings
            latency += part.latency_ms
            returned += part.returned
            usage += part.usage if part.usage is not None else [None] * len(part.rankings)
        return cls(rankings, latency, returned, errors, usage)

    def __len__(self) -> int:
        return len(self.rankings)

    @overload
    def __getitem__(self, index: int) -> Retrieval: ...

    @overload
    def __getitem__(self, index: slice) -> Retrievals: ...

    def __getitem__(self, index: int | slice) -> Retrieval | Retrievals:
        if isinstance(index, slice):
            positions = range(len(self.rankings))[index]
            errors = self.errors
            return Retrievals(
                self.rankings[index],
                self.latency_ms[index],
                self.returned[index],
                {
                    offset: errors[position]
                    for offset, position in enumerate(positions)
                    if position in errors
                },
                None if self.usage is None else self.usage[index],
            )
        position = range(len(self.rankings))[index]
        return Retrieval(
            self.rankings[position],
            self.latency_ms[position],
            self.errors.get(position),
            self.returned[position],
            self.usage_at(position),
        )

    def __iter__(self) -> Iterator[Retrieval]:
        errors = self.errors
        for position, (ranking, latency, returned) in enumerate(
            zip(self.rankings, self.latency_ms, self.returned, strict=True)
        ):
            yield Retrieval(
                ranking, latency, errors.get(position), returned, self.usage_at(position)
            )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Retrievals({list(self)!r})"
