"""Split a set's questions for a sweep: a seeded tuning / held-out split or folds, by form.

The unit is a question, or a whole cluster when questions carry ``cluster``: a cluster's
questions are never split between tuning and confirming, since they would let the
tuning share peek at the held-out one. Units are drawn within each form (their first
question's), so that each share holds the forms in the set's proportions.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from retrievalkit.model.values import GoldenQuestion


def units(questions: Sequence[GoldenQuestion]) -> list[list[int]]:
    """The positions of the questions of each unit (a cluster, else a question), in the
    order units first appear."""
    grouped: dict[tuple[str, str], list[int]] = {}
    for index, question in enumerate(questions):
        cluster = getattr(question, "cluster", None)
        key = ("cluster", str(cluster)) if cluster else ("question", question.id)
        grouped.setdefault(key, []).append(index)
    return list(grouped.values())


def clustered(questions: Sequence[GoldenQuestion]) -> bool:
    """Whether any question carries a cluster (the split then keeps clusters whole)."""
    return any(getattr(question, "cluster", None) for question in questions)


def _strata(questions: Sequence[GoldenQuestion], seed: int) -> list[tuple[str, list[list[int]]]]:
    """The units of each form, shuffled with a seed of their own, forms in sorted order."""
    by_form: dict[str, list[list[int]]] = {}
    for unit in units(questions):
        first = questions[unit[0]].form
        by_form.setdefault("" if first is None else first.value, []).append(unit)
    strata = []
    for name in sorted(by_form):
        drawn = list(by_form[name])
        random.Random(f"{seed}:{name}").shuffle(drawn)
        strata.append((name, drawn))
    return strata


def split(
    questions: Sequence[GoldenQuestion], share: float, seed: int
) -> tuple[list[int], list[int]]:
    """(tuning, held out): positions in the set's order, about ``share`` of each form's
    questions held out, whole units each."""
    held: list[int] = []
    for _form, drawn in _strata(questions, seed):
        target = share * sum(len(unit) for unit in drawn)
        taken = 0
        for unit in drawn:
            # A unit goes to the held-out share while it brings the count closer to the target.
            if abs(taken + len(unit) - target) < abs(taken - target):
                held += unit
                taken += len(unit)
    chosen = set(held)
    return [i for i in range(len(questions)) if i not in chosen], sorted(held)


def folds(questions: Sequence[GoldenQuestion], count: int, seed: int) -> list[int]:
    """The fold (0 to count - 1) of each question: within each form, each unit goes to
    the fold with the fewest questions so far."""
    fold_of = [0] * len(questions)
    sizes = [0] * count
    for _form, drawn in _strata(questions, seed):
        for unit in drawn:
            fold = min(range(count), key=lambda f: (sizes[f], f))
            sizes[fold] += len(unit)
            for index in unit:
                fold_of[index] = fold
    return fold_of


def tuning_order(
    questions: Sequence[GoldenQuestion], positions: Sequence[int], seed: int
) -> list[list[int]]:
    """The units among ``positions`` in a seeded order: successive halving's rounds take
    growing prefixes of it, so each round's questions hold the previous round's."""
    wanted = set(positions)
    kept = [unit for unit in units(questions) if unit[0] in wanted]
    random.Random(f"{seed}:halving").shuffle(kept)
    return kept
