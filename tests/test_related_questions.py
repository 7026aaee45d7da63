"""Related questions (shared expected documents, near-identical text): the groups found
agree with a plain union-find over every key, on seeded sets of every shape."""

from __future__ import annotations

import random
import re

import pytest

from retrievalkit.model.values import GoldenQuestion
from retrievalkit.pipeline.engine.related_questions import related_groups, related_warning
from retrievalkit.stats.clusters import relevant_documents

_WORD = re.compile(r"\w+")


def reference_groups(questions: list[GoldenQuestion], by: str) -> tuple[int, int]:
    """(groups, questions in them): one union-find step per key, as the check is defined."""
    parent = list(range(len(questions)))

    def root(item: int) -> int:
        while parent[item] != item:
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
            if 3 <= len(words) <= 40:
                for position in range(len(words)):
                    shorter = words[:position] + words[position + 1 :]
                    keys.extend([("near", position, shorter), ("text", shorter)])
        for key in keys:
            other = first.setdefault(key, index)
            if other != index:
                parent[root(index)] = root(other)
    sizes: dict[int, int] = {}
    for index in range(len(questions)):
        sizes[root(index)] = sizes.get(root(index), 0) + 1
    grouped = [size for size in sizes.values() if size > 1]
    return len(grouped), sum(grouped)


def random_set(seed: int) -> list[GoldenQuestion]:
    rng = random.Random(seed)
    vocabulary = [f"w{n}" for n in range(rng.choice([3, 6, 20]))]
    documents = [f"d{n}" for n in range(rng.choice([5, 40, 400]))]
    questions = []
    for index in range(rng.randrange(0, 120)):
        words = [rng.choice(vocabulary) for _ in range(rng.choice([0, 1, 2, 3, 4, 5, 8, 41]))]
        text = " ".join(words).upper() if rng.random() < 0.3 else ", ".join(words)
        expected = tuple(rng.sample(documents, rng.randrange(0, 4)))
        graded = rng.sample(documents, rng.randrange(0, 3)) if rng.random() < 0.4 else []
        grades = {doc: rng.randrange(0, 4) for doc in graded if doc not in expected}
        questions.append(GoldenQuestion(f"q{index}", text or "?", expected=expected, grades=grades))
    return questions


@pytest.mark.parametrize("seed", range(60))
def test_groups_agree_with_a_union_find_over_every_key(seed: int) -> None:
    questions = random_set(seed)
    for by in ("expected", "text"):
        found = related_groups(questions, by=by)
        assert (found.groups, found.questions) == reference_groups(questions, by), by
        assert found.total == len(questions)


def test_a_long_chain_of_shared_documents_is_one_group() -> None:
    # Each question shares one document with the next, the other end of the chain first.
    count = 2000
    questions = [
        GoldenQuestion(f"q{n}", f"text {n}", expected=(f"d{count - n}", f"d{count - n - 1}"))
        for n in range(count)
    ]
    found = related_groups(questions, by="expected")
    assert (found.groups, found.questions) == (1, count)
    assert related_groups(questions, by="text").groups == 0


def test_the_warning_names_both_kinds_and_none_for_independent_questions() -> None:
    alike = [GoldenQuestion(f"q{n}", f"what is thing {n}", expected=("d",)) for n in range(3)]
    warning = related_warning(alike)
    assert warning is not None
    assert "3 of 3 questions share expected documents with another (1 group)" in warning
    assert "3 have near-identical text (1 groups)" in warning
    apart = [GoldenQuestion(f"q{n}", f"alpha{n} beta{n} gamma{n}", expected=(f"d{n}",))
             for n in range(3)]  # fmt: skip
    assert related_warning(apart) is None
    assert related_groups([], by="text").groups == 0
