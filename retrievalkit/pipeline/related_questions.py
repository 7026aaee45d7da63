"""Find questions that are probably not independent: shared expected documents, near-identical text.

A cheap check, linear in the set: questions are grouped when they share an expected
document (as ``--cluster-by expected`` groups them), or when their texts (lower-cased,
punctuation dropped) are equal or equal but for one word, found by keying each text
also with each word left out once.
The groups are what ``--cluster-by expected`` (or a ``cluster`` field) should make one
unit; `related_warning` says so.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs

from retrievalkit.model.values import GoldenQuestion
from retrievalkit.stats.clusters import relevant_documents

_WORD = re.compile(r"\w+")
#: Texts of more words than this are keyed whole only (each left-out word is a key).
_MAX_WORDS = 40


@attrs.frozen
class RelatedGroups:
    """Groups of two or more related questions, by how they were found."""

    groups: int
    """Groups of related questions (each of two or more)."""
    questions: int
    """Questions in those groups."""
    total: int
    """Questions in the set."""


def related_groups(questions: Sequence[GoldenQuestion], *, by: str) -> RelatedGroups:
    """Join questions that share an expected document (``by="expected"``) or have
    near-identical text (``by="text"``)."""
    parent = list(range(len(questions)))

    def root(item: int) -> int:
        while parent[item] != item:
            parent[item] = parent[parent[item]]
            item = parent[item]
        return item

    first: dict[object, int] = {}
    for index, question in enumerate(questions):
        keys: list[object] = []
        if by == "expected":
            keys.extend(("expected", document) for document in relevant_documents(question))
        words = tuple(_WORD.findall(question.question.lower())) if by == "text" else ()
        if words:
            keys.append(("text", words))
            if 3 <= len(words) <= _MAX_WORDS:
                keys.extend(
                    ("near", position, words[:position] + words[position + 1 :])
                    for position in range(len(words))
                )
                # One word more or fewer: the shorter text whole is the longer one less a word.
                keys.extend(
                    ("text", words[:position] + words[position + 1 :])
                    for position in range(len(words))
                )
        for key in keys:
            other = first.setdefault(key, index)
            if other != index:
                parent[root(index)] = root(other)
    sizes: dict[int, int] = {}
    for index in range(len(questions)):
        top = root(index)
        sizes[top] = sizes.get(top, 0) + 1
    grouped = [size for size in sizes.values() if size > 1]
    return RelatedGroups(len(grouped), sum(grouped), len(questions))


def _groups(count: int) -> str:
    return f"{count} group" if count == 1 else f"{count} groups"


def related_warning(questions: Sequence[GoldenQuestion]) -> str | None:
    """The warning for a set evaluated as independent questions when some are related."""
    shared = related_groups(questions, by="expected")
    alike = related_groups(questions, by="text")
    parts = []
    if shared.groups:
        parts.append(
            f"{shared.questions} of {shared.total} questions share expected documents with "
            f"another ({_groups(shared.groups)})"
        )
    if alike.groups:
        parts.append(f"{alike.questions} have near-identical text ({alike.groups} groups)")
    if not parts:
        return None
    return (
        "; ".join(parts)
        + ": related questions move together, so intervals and paired tests that count "
        "them as independent are too confident; pass --cluster-by expected (or give "
        "related questions a cluster field and pass --cluster-by cluster)"
    )
