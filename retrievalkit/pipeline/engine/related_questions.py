"""Find questions that are probably not independent: shared expected documents, near-identical text.

A cheap check, linear in the set: questions are grouped when they share an expected
document (as ``--cluster-by expected`` groups them), or when their texts (lower-cased,
punctuation dropped) are equal or equal but for one word, found by keying each text
also with each word left out once.
The groups are what ``--cluster-by expected`` (or a ``cluster`` field) should make one
unit; `related_warning` says so.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Hashable, Iterable, Sequence
from itertools import chain, compress, repeat
from typing import Any

import attrs

from retrievalkit.model.values import GoldenQuestion
from retrievalkit.stats.clusters import relevant_documents

_WORD = re.compile(r"\w+")
#: Texts of more words than this are keyed whole only (each left-out word is a key).
_MAX_WORDS = 40
_QUESTION_TEXT = operator.attrgetter("question")
_EXPECTED = operator.attrgetter("expected")
_GRADES = operator.attrgetter("grades")


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
    count = len(questions)
    firsts: list[Any] = []  # lists of ints or arrays, one per kind of key
    owners: list[Any] = []
    if by == "expected":
        documents, holders = _relevant_pairs(questions)
        firsts.append(_first_holders(documents, holders))
        owners.append(holders)
    elif by == "text":
        fingerprints, text_holders = _text_fingerprints(questions)
        firsts.append(_first_fingerprint_holders(fingerprints, text_holders))
        owners.append(text_holders)
    sizes = _component_sizes(count, owners, firsts)
    grouped = sizes[sizes > 1]
    return RelatedGroups(int(grouped.size), int(grouped.sum()), count)


def _first_holders(keys: Iterable[Hashable], holders: list[int]) -> list[int]:
    """For each key, the first holder of that key: each holder is joined to it."""
    first: dict[Hashable, int] = {}
    return list(map(first.setdefault, keys, holders))


def _relevant_pairs(questions: Sequence[GoldenQuestion]) -> tuple[list[str], list[int]]:
    """(document, question index) for every document of grade 1 or more of each question
    (`relevant_documents`: expected ids, unless graded 0, and graded ids), a document
    possibly twice for one question (which joins it to nothing)."""
    import numpy as np

    expected = list(map(_EXPECTED, questions))
    grades = list(map(_GRADES, questions))
    documents = list(chain(chain.from_iterable(expected), chain.from_iterable(grades)))
    counts = list(chain(map(len, expected), map(len, grades)))
    holders = np.tile(np.arange(len(questions)), 2).repeat(counts).tolist()
    values = np.fromiter(chain.from_iterable(map(dict.values, grades)), dtype=np.int64)
    if values.size and values.min() < 1:
        # Grade 0 takes a document out (an expected one too): those questions one by one.
        keep = np.ones(len(documents), dtype=bool)
        keep[len(documents) - values.size :] = values >= 1
        zeroed = {index for index, labels in enumerate(grades) if 0 in labels.values()}
        start = 0
        for index, count in enumerate(map(len, expected)):
            if index in zeroed:
                keep[start : start + count] = False
            start += count
        documents = list(compress(documents, keep.tolist()))
        holders = list(compress(holders, keep.tolist()))
        for index in sorted(zeroed):
            relevant = relevant_documents(questions[index])
            documents.extend(relevant)
            holders.extend(repeat(index, len(relevant)))
    return documents, holders


def _text_fingerprints(questions: Sequence[GoldenQuestion]) -> tuple[Any, Any]:
    """(fingerprints, holders) of the keys of each text (its words whole; of 3 to
    `_MAX_WORDS` words, also less each word in turn): questions that share a key are
    near-identical (equal, equal but one word, or one word more).

    A key is its words joined by spaces (a word holds none), kept as two 64-bit hashes,
    of that string and of the tuple of its words, not as a string: the keys of a million
    texts would take gigabytes. Two keys are taken for one only when both hashes agree,
    which two different keys do with a chance of about 2^-128.
    Texts of one length are keyed a column of words at a time, and each column's keys
    live only while they are hashed.
    """
    import numpy as np

    lowered = map(str.lower, map(_QUESTION_TEXT, questions))
    wholes = list(map(" ".join, map(_WORD.findall, lowered)))
    by_length: dict[int, list[int]] = {}
    for index, spaces in enumerate(map(str.count, wholes, repeat(" "))):
        if wholes[index]:
            by_length.setdefault(spaces + 1, []).append(index)
    parts: list[Any] = []
    holders: list[Any] = []

    def keep(columns: list[list[str]], indices: Any) -> None:
        """The keys made of these columns of words, a key a row."""
        pair = np.empty((len(indices), 2), dtype=np.int64)
        rows = len(indices)
        pair[:, 0] = np.fromiter(
            map(hash, map(" ".join, zip(*columns, strict=True))), np.int64, rows
        )
        pair[:, 1] = np.fromiter(map(hash, zip(*columns, strict=True)), np.int64, rows)
        parts.append(pair)
        holders.append(indices)

    for length, indices in by_length.items():
        texts = list(map(wholes.__getitem__, indices))
        # A column of words at a time: the split lists live no longer than their word.
        columns = [
            list(map(operator.itemgetter(place), map(str.split, texts))) for place in range(length)
        ]
        del texts
        numbers = np.array(indices, dtype=np.int64)
        keep(columns, numbers)
        if 3 <= length <= _MAX_WORDS:
            # One word more or fewer: the shorter text whole is the longer one less a word.
            # Two texts that differ in one word at the same place share this key too, so
            # it joins them as well: no key of its own is needed for that.
            for position in range(length):
                keep(columns[:position] + columns[position + 1 :], numbers)
    del wholes
    if not parts:
        return np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(parts), np.concatenate(holders)


def _first_fingerprint_holders(fingerprints: Any, holders: Any) -> Any:
    """For each key (a row of ``fingerprints``), the first holder of that key.

    The keys are sorted (stably) by their first hash alone; the second must then agree
    within each run of equal first hashes, or the rows are sorted whole.
    """
    import numpy as np

    count = len(holders)
    if not count:
        return holders
    first_hashes, second_hashes = fingerprints[:, 0], fingerprints[:, 1]
    order = np.argsort(first_hashes, kind="stable")
    ordered = first_hashes[order]
    starts = np.ones(count, dtype=bool)
    np.not_equal(ordered[1:], ordered[:-1], out=starts[1:])
    seconds = second_hashes[order]
    if np.any(~starts[1:] & (seconds[1:] != seconds[:-1])):
        # Two keys with one first hash: sort by both (return_index sorts stably).
        keys = np.ascontiguousarray(fingerprints).view(np.dtype((np.void, 16))).ravel()
        _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        return holders[first][inverse.ravel()]
    # Stable: each run of one key starts at its first place.
    found = np.empty(count, dtype=holders.dtype)
    found[order] = holders[order[starts]][np.cumsum(starts) - 1]
    return found


def _component_sizes(count: int, owners: list[Any], firsts: list[Any]) -> Any:
    """The size of each group of questions joined by the edges (owner, first), as an array
    with one entry per group (connected components, by hooking and pointer jumping)."""
    import numpy as np

    if not count:
        return np.zeros(0, dtype=np.int64)
    left = np.concatenate([np.asarray(part, dtype=np.int64) for part in owners])
    right = np.concatenate([np.asarray(part, dtype=np.int64) for part in firsts])
    joined = left != right
    left, right = left[joined], right[joined]
    labels = np.arange(count, dtype=np.int64)
    while left.size:
        ends = labels[left], labels[right]
        low, high = np.minimum(*ends), np.maximum(*ends)
        moving = low != high
        if not moving.any():
            break
        left, right = left[moving], right[moving]
        # Hook each larger root onto the smaller one, then point every label at its root.
        np.minimum.at(labels, high[moving], low[moving])
        while True:
            jumped = labels[labels]
            if np.array_equal(jumped, labels):
                break
            labels = jumped
    return np.bincount(np.unique(labels, return_inverse=True)[1])


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
