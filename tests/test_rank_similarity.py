"""RBO, overlap@k and Jaccard@k against brute-force implementations of their definitions.

The brute force sums RBO's definition, (1 - p) * sum of p^(d-1) * X_d / d, depth by depth
to a depth where p^d is below 1e-15, with X_d counted from explicit prefixes: for the
extrapolated value under Webber et al.'s assumption, for the bounds on explicit
continuations of the rankings, and for ties over every order the ties allow.
"""

from __future__ import annotations

import itertools
import math
import random

import pytest

from retrievalkit.metrics.rank_similarity import jaccard_at, overlap_at, rbo

DEPTH = 400  # 0.9 ** 400 < 1e-18


def _depth(p: float) -> int:
    """A depth where p^d is below 1e-15."""
    return max(DEPTH, int(-15 / math.log10(p)) + 1)


def _overlap(first: list[str], second: list[str], depth: int) -> int:
    return len(set(first[:depth]) & set(second[:depth]))


def brute_extrapolated(first: list[str], second: list[str], p: float) -> float:
    """Webber et al.'s extrapolation, written out depth by depth: within the longer list,
    the shorter one's unseen documents agree at its rate X_s / s; beyond it, the
    agreement stays that of depth l."""
    short, long_ = sorted((first, second), key=len)
    s, l = len(short), len(long_)  # noqa: E741
    x_s = _overlap(short, long_, s)

    def agreement(d: int) -> float:
        if d <= s:
            return _overlap(short, long_, d) / d
        depth = min(d, l)
        extra = (depth - s) * x_s / s
        return (_overlap(short, long_, depth) + extra) / depth

    return sum((1 - p) * p ** (d - 1) * agreement(d) for d in range(1, _depth(p)))


def brute_rbo(first: list[str], second: list[str], p: float) -> float:
    """The definition on two (long) explicit rankings."""
    return sum((1 - p) * p ** (d - 1) * _overlap(first, second, d) / d for d in range(1, DEPTH))


def fresh(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{index}" for index in range(count)]


def random_pair(rng: random.Random) -> tuple[list[str], list[str]]:
    pool = [f"d{index}" for index in range(rng.randint(2, 14))]
    first = rng.sample(pool, rng.randint(1, len(pool)))
    second = rng.sample(pool, rng.randint(1, len(pool)))
    return first, second


@pytest.mark.parametrize("seed", range(60))
@pytest.mark.parametrize("p", [0.5, 0.9, 0.98])
def test_the_extrapolated_rbo_is_its_definition(seed: int, p: float) -> None:
    first, second = random_pair(random.Random(seed))
    found = rbo(first, second, p)
    assert found is not None
    assert found.value == pytest.approx(brute_extrapolated(first, second, p), abs=1e-9)
    assert found.value == pytest.approx(rbo(second, first, p).value, abs=1e-12)  # type: ignore[union-attr]


@pytest.mark.parametrize("seed", range(60))
def test_the_lower_bound_is_the_rbo_of_continuations_that_match_nothing(seed: int) -> None:
    p = 0.9
    first, second = random_pair(random.Random(seed))
    found = rbo(first, second, p)
    assert found is not None
    continued = brute_rbo(first + fresh("a", DEPTH), second + fresh("b", DEPTH), p)
    assert found.lower == pytest.approx(continued, abs=1e-9)


@pytest.mark.parametrize("seed", range(60))
def test_the_upper_bound_is_reached_and_never_passed(seed: int) -> None:
    """The best continuation: each list goes on with the other's seen documents it lacks
    (in the other's order), then both with the same new documents. Random continuations
    from the shared pool never score above the bound."""
    p = 0.9
    rng = random.Random(seed)
    first, second = random_pair(rng)
    found = rbo(first, second, p)
    assert found is not None
    common = fresh("n", DEPTH)
    best_first = first + [doc for doc in second if doc not in first] + common
    best_second = second + [doc for doc in first if doc not in second] + common
    assert found.upper == pytest.approx(brute_rbo(best_first, best_second, p), abs=1e-9)
    assert found.lower <= found.value <= found.upper
    for _ in range(20):
        pool = [doc for doc in {*first, *second, *fresh("r", 30)}]
        rest_first = rng.sample([doc for doc in pool if doc not in first], 20)
        rest_second = rng.sample([doc for doc in pool if doc not in second], 20)
        tried = brute_rbo(first + rest_first + fresh("x", DEPTH), second + rest_second, p)
        assert tried <= found.upper + 1e-12


def _orders(ranking: list[str], scores: list[float]) -> list[list[str]]:
    """Every order of ``ranking`` that permutes only documents of equal score."""
    groups = [
        list(group)
        for _, group in itertools.groupby(
            zip(ranking, scores, strict=True), key=lambda pair: pair[1]
        )
    ]
    options = [list(itertools.permutations([doc for doc, _ in group])) for group in groups]
    return [[doc for part in choice for doc in part] for choice in itertools.product(*options)]


@pytest.mark.parametrize("seed", range(40))
def test_every_order_the_ties_allow_gives_one_value(seed: int) -> None:
    """The brute force: each order of the tied documents, on either side, scores what
    the rankings with ties put in document-id order score."""
    rng = random.Random(seed)
    first, second = random_pair(rng)
    first, second = first[:7], second[:6]
    first_scores = sorted((float(rng.randint(1, 3)) for _ in first), reverse=True)
    second_scores = sorted((float(rng.randint(1, 3)) for _ in second), reverse=True)
    p = 0.8
    found = rbo(first, second, p, first_scores=first_scores, second_scores=second_scores)
    assert found is not None
    for left, right in itertools.product(
        _orders(first, first_scores), _orders(second, second_scores)
    ):
        again = rbo(left, right, p, first_scores=first_scores, second_scores=second_scores)
        assert again == found
    canonical = rbo(_canonical(first, first_scores), _canonical(second, second_scores), p)
    assert canonical is not None
    assert found.value == pytest.approx(canonical.value, abs=1e-12)


def _canonical(ranking: list[str], scores: list[float]) -> list[str]:
    return [
        doc
        for doc, _ in sorted(
            zip(ranking, scores, strict=True), key=lambda pair: (-pair[1], pair[0])
        )
    ]


def test_a_ranking_with_ties_against_itself_scores_one() -> None:
    scores = [2.0, 2.0, 2.0, 1.0, 1.0]
    same = rbo(list("abcde"), list("abcde"), 0.9, first_scores=scores, second_scores=scores)
    assert same is not None and same.value == pytest.approx(1.0)


def test_a_tie_makes_a_swap_inside_it_no_change() -> None:
    scores = [3.0, 2.0, 2.0, 1.0]
    swapped = rbo(
        ["a", "b", "c", "d"], ["a", "c", "b", "d"], 0.9, first_scores=scores, second_scores=scores
    )
    untied = rbo(["a", "b", "c", "d"], ["a", "c", "b", "d"], 0.9)
    assert swapped is not None and untied is not None
    assert swapped.value == pytest.approx(
        rbo(
            ["a", "b", "c", "d"],
            ["a", "b", "c", "d"],
            0.9,
            first_scores=scores,
            second_scores=scores,
        ).value  # type: ignore[union-attr]
    )
    assert untied.value < 1.0


def test_identical_rankings_and_empty_ones() -> None:
    same = rbo(["a", "b", "c"], ["a", "b", "c"], 0.9)
    assert same is not None and same.value == pytest.approx(1.0) and same.upper == 1.0
    assert rbo([], [], 0.9) is None
    assert rbo(["a"], [], 0.9) == rbo([], ["a"], 0.9)
    assert rbo(["a"], [], 0.9).value == 0.0  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="between 0 and 1"):
        rbo(["a"], ["a"], 1.0)


def test_where_the_pypi_rbo_package_agrees_and_differs() -> None:
    """A cross-check against PyPI's ``rbo`` (installed by ``nox -s tests`` without its
    stale numpy<2 pin, so not a dependency of the test extra): its ``rbo_ext`` is
    equation 32 as here; its ``rbo(ext=True)`` cuts both lists to the shorter one's length."""
    package = pytest.importorskip("rbo", reason="pip install --no-deps rbo==0.1.3")
    rng = random.Random(7)
    for _ in range(30):
        pool = fresh("d", 12)
        first, second = rng.sample(pool, rng.randint(1, 12)), rng.sample(pool, rng.randint(1, 12))
        theirs = package.RankingSimilarity(first, second).rbo_ext(p=0.9)
        assert rbo(first, second, 0.9).value == pytest.approx(theirs, abs=1e-9)  # type: ignore[union-attr]
    cut = package.RankingSimilarity(["a", "b"], ["c", "d", "a", "b"]).rbo(p=0.9, ext=True)
    assert cut == 0.0
    assert rbo(["a", "b"], ["c", "d", "a", "b"], 0.9).value == pytest.approx(0.3915)  # type: ignore[union-attr]


def test_overlap_and_jaccard_at_k() -> None:
    """Worked example: baseline top 3 {a, b, c}, candidate top 3 {b, c, x}: the candidate
    keeps 2 of 3 (overlap 2/3), and 2 are shared of 4 distinct (Jaccard 1/2)."""
    assert overlap_at(["a", "b", "c", "d"], ["b", "x", "c", "a"], 3) == pytest.approx(2 / 3)
    assert jaccard_at(["a", "b", "c", "d"], ["b", "x", "c", "a"], 3) == pytest.approx(0.5)
    assert overlap_at([], ["a"], 3) is None
    assert jaccard_at([], [], 3) is None
    assert jaccard_at(["a"], [], 3) == 0.0
