"""The one paired test: exact p-values, symmetry, error rate under no difference, floors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from retrievalkit.stats import paired
from retrievalkit.stats.paired import (
    EXACT,
    MONTE_CARLO,
    NOT_SIGNIFICANT,
    SIGNIFICANT,
    UNRESOLVABLE,
    holm,
    p_floor,
    paired_test,
    sign_flip_p_value,
    verdict,
)

#: Per-question values as metrics give them: 0/1, reciprocal ranks, graded fractions.
VALUES = np.array([0.0, 1.0, 0.5, 1 / 3, 0.25, 0.2, 0.1, 0.6309, 0.7654, 0.4307])


def enumerated_p_value(differences: np.ndarray) -> float:
    """The definition, by brute force: every sign pattern of every question."""
    signs = np.array(list(itertools.product([-1.0, 1.0], repeat=len(differences))))
    flipped = np.abs(signs @ differences)
    return float(np.mean(flipped >= abs(differences.sum()) - 1e-9))


@pytest.mark.parametrize("seed", range(6))
def test_the_p_value_is_the_full_enumeration_for_small_sets(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(40):
        n = int(rng.integers(1, 14))
        baseline = rng.choice(VALUES, n)
        candidate = np.where(rng.random(n) < 0.4, baseline, rng.choice(VALUES, n))
        differences = candidate - baseline
        p_value, method, error = sign_flip_p_value(differences)
        assert method == EXACT and error == 0.0
        assert p_value == pytest.approx(enumerated_p_value(differences), abs=1e-12)


def test_a_0_1_metric_is_exact_at_any_size_and_equals_the_two_sided_sign_test() -> None:
    from scipy.stats import binomtest

    rng = np.random.default_rng(7)
    differences = rng.choice([-1.0, 0.0, 0.0, 1.0], 400)
    p_value, method, _ = sign_flip_p_value(differences)
    losses = int((differences < 0).sum())
    discordant = int((differences != 0).sum())
    assert method == EXACT
    assert p_value == pytest.approx(binomtest(losses, discordant).pvalue, rel=1e-9)


def test_beyond_enumeration_the_monte_carlo_p_value_reports_its_error() -> None:
    rng = np.random.default_rng(8)
    differences = rng.choice(VALUES, 16) - rng.choice(VALUES, 16)
    exact, method, _ = sign_flip_p_value(differences)
    assert method == EXACT
    estimate, method, error = sign_flip_p_value(differences, permutations=20_000, exact_limit=4)
    assert method == MONTE_CARLO
    assert error == pytest.approx(np.sqrt(estimate * (1 - estimate) / 20_000))
    assert abs(estimate - exact) < 4 * error + 1 / 20_001


@pytest.mark.parametrize("seed", range(4))
def test_swapping_the_runs_mirrors_the_difference_and_keeps_the_p_value(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for n, exact_limit in ((12, paired.EXACT_LIMIT), (60, paired.EXACT_LIMIT), (60, 4)):
        baseline = rng.choice(VALUES, n)
        # A candidate that is clearly worse: a one-sided test would give p near 1 one way.
        candidate = np.where(rng.random(n) < 0.5, baseline, baseline * rng.random(n))
        forward = sign_flip_p_value(candidate - baseline, exact_limit=exact_limit)
        backward = sign_flip_p_value(baseline - candidate, exact_limit=exact_limit)
        assert forward[0] == pytest.approx(backward[0], abs=1e-12)
        assert forward[0] < 0.5
        there = paired_test(baseline, candidate, resamples=500)
        back = paired_test(candidate, baseline, resamples=500)
        assert there.difference == pytest.approx(-(back.difference or 0.0))
        assert (there.discordant, there.p_floor) == (back.discordant, back.p_floor)


@pytest.mark.parametrize("kind", ["continuous", "binary"])
def test_under_no_difference_the_test_rejects_at_most_alpha_of_the_time(kind: str) -> None:
    # A/A: both runs draw each question's value from the same distribution, so every
    # question's difference is symmetric about 0.
    rng = np.random.default_rng(20240611 if kind == "continuous" else 11)
    replicates, n = 2000, 30
    if kind == "continuous":
        base = rng.beta(0.6, 0.4, (replicates, n))
        cand = rng.beta(0.6, 0.4, (replicates, n))
    else:
        base = (rng.random((replicates, n)) < 0.7).astype(float)
        cand = (rng.random((replicates, n)) < 0.7).astype(float)
    rejected = 0
    for row in range(replicates):
        p_value, _, _ = sign_flip_p_value(cand[row] - base[row], permutations=2000, seed=row)
        rejected += p_value < 0.05
    rate = rejected / replicates
    standard_error = np.sqrt(0.05 * 0.95 / replicates)
    assert rate <= 0.05 + 3 * standard_error
    if kind == "continuous":
        # Nearly exact for continuous values: a test that never rejects fails here.
        assert rate >= 0.05 - 3 * standard_error


def test_the_floor_is_two_over_two_to_the_discordant_and_decides_unresolvable() -> None:
    assert [p_floor(m) for m in range(7)] == [1.0, 1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125]
    assert verdict(0.0625, p_floor(5), 0.05) == UNRESOLVABLE
    assert verdict(0.03125, p_floor(6), 0.05) == SIGNIFICANT
    assert verdict(0.2, p_floor(6), 0.05) == NOT_SIGNIFICANT
    assert verdict(None, None, 0.05) is None
    # Five questions lost, none won: the most extreme outcome, and still not significant.
    baseline = np.array([1.0] * 5 + [0.0] * 25)
    candidate = np.zeros(30)
    test = paired_test(baseline, candidate, resamples=500)
    assert test.discordant == 5 and test.p_value == test.p_floor == 0.0625
    assert verdict(test.p_value, test.p_floor, 0.05) == UNRESOLVABLE
    six = paired_test(np.array([1.0] * 6 + [0.0] * 24), np.zeros(30), resamples=500)
    assert six.p_value == six.p_floor == 0.03125
    assert verdict(six.p_value, six.p_floor, 0.05) == SIGNIFICANT


def test_the_paired_interval_is_never_zero_width_without_proof() -> None:
    same = np.array([1.0, 0.0, 0.5] * 10)
    test = paired_test(same, same.copy(), resamples=500)
    assert test.difference == 0.0 and test.discordant == 0 and test.p_value == 1.0
    assert test.low is not None and test.high is not None
    assert test.low < 0.0 < test.high and test.interval_method == "constant"


def test_holm_floors_are_the_smallest_adjusted_p_values_reachable() -> None:
    floors = [p_floor(6), p_floor(7), p_floor(20)]
    adjusted = holm(floors)
    rng = np.random.default_rng(3)
    for _ in range(200):
        raw = [floor + (1 - floor) * rng.random() ** 3 for floor in floors]
        assert all(a >= f for a, f in zip(holm(raw), adjusted, strict=True))  # type: ignore[operator]


def _few_discordant_pairs(
    values: np.ndarray, share: float, drop: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """A population of pairs where few questions differ: the candidate re-draws a share of
    the questions' values from other questions, and loses a share of them outright."""
    redraw = rng.random(values.size) < share
    candidate = np.where(redraw, values[rng.permutation(values.size)], values)
    candidate = np.where(rng.random(values.size) < drop, 0.0, candidate)
    return values.copy(), candidate


def _paired_coverage(
    baseline: np.ndarray,
    candidate: np.ndarray,
    n: int,
    samples: int,
    rng: np.random.Generator,
    confidence: float = 0.95,
) -> float:
    truth = float((candidate - baseline).mean())
    covered = 0
    for sample in range(samples):
        chosen = rng.integers(0, baseline.size, n)
        result = paired_test(
            baseline[chosen],
            candidate[chosen],
            resamples=400,
            permutations=1000,
            confidence=confidence,
            seed=sample,
        )
        assert result.low is not None and result.high is not None
        covered += result.low <= truth <= result.high
    return covered / samples


@pytest.mark.parametrize(
    ("metric", "n", "share", "drop"),
    [
        ("hit@1", 30, 0.1, 0.0),
        ("hit@1", 100, 0.05, 0.0),
        ("hit@1", 100, 0.1, 0.05),
        ("ndcg@10", 30, 0.1, 0.0),
        ("ndcg@10", 100, 0.1, 0.05),
    ],
)
def test_paired_intervals_cover_whatever_the_number_of_discordant_questions(
    bm25_populations: dict[str, np.ndarray], metric: str, n: int, share: float, drop: float
) -> None:
    # Real SciFact BM25 values, 0 to 10 discordant questions a sample. The BCa interval
    # covered 83.5-93.5 % here (75 % for hit@1 at n = 100 with 5 % re-drawn).
    values = bm25_populations["rr"]
    values = (values == 1.0).astype(float) if metric == "hit@1" else bm25_populations[metric]
    rng = np.random.default_rng(7)
    baseline, candidate = _few_discordant_pairs(values, share, drop, rng)
    assert _paired_coverage(baseline, candidate, n, 300, rng) >= 0.935


def test_a_90_percent_paired_interval_labelled_95_would_fail_the_coverage_check(
    bm25_populations: dict[str, np.ndarray],
) -> None:
    # The check above has teeth: where discordant questions are many enough for the
    # interval to be tight (BCa), a 90 % interval falls below 93.5 %.
    rng = np.random.default_rng(11)
    baseline, candidate = _few_discordant_pairs(bm25_populations["ndcg@10"], 0.5, 0.05, rng)
    assert _paired_coverage(baseline, candidate, 100, 300, rng, confidence=0.90) < 0.935


@pytest.mark.parametrize("kind", ["binary", "graded"])
def test_the_interval_excludes_zero_exactly_when_the_test_is_significant(kind: str) -> None:
    # Generated pairs of every size and number of discordant questions: an interval that
    # excludes 0 comes with p < alpha, and p < alpha with an interval that excludes 0.
    rng = np.random.default_rng(30 if kind == "binary" else 31)
    for case in range(120):
        n = int(rng.integers(5, 120))
        differ = rng.random(n) < rng.choice([0.02, 0.1, 0.3, 0.6])
        baseline = (rng.random(n) < 0.6).astype(float)
        if kind == "binary":
            other = (rng.random(n) < rng.uniform(0.3, 0.9)).astype(float)
        else:
            baseline = rng.choice(VALUES, n)
            other = rng.choice(VALUES, n)
        candidate = np.where(differ, other, baseline)
        result = paired_test(baseline, candidate, resamples=300, permutations=2000, seed=case)
        assert result.low is not None and result.high is not None and result.p_value is not None
        excludes = not result.low <= 0.0 <= result.high
        assert excludes == (result.p_value < 0.05), (case, result)
        # No float32 dust beside an exact 0: a bound is 0 or clearly away from it.
        for bound in (result.low, result.high):
            assert bound == 0.0 or abs(bound) > 1e-6, (case, result)


def test_one_loss_in_a_hundred_gives_bounds_in_float64_around_zero() -> None:
    result = paired_test(np.ones(100), np.r_[0.0, np.ones(99)])
    assert result.p_value == 1.0 and result.interval_method == paired.ADJUSTED_T
    assert result.low is not None and result.high is not None
    # One differing question cannot show the candidate is not better: 0 lies inside,
    # and the upper bound is a float64 number clearly above it, not -4.2e-9.
    assert -0.1 < result.low < -0.01 < 0.0 < result.high < 0.1
    # The case: four losses in 30 (p = 0.125) no longer give an interval below 0.
    four = paired_test(np.ones(30), np.r_[np.zeros(4), np.ones(26)])
    assert four.p_value == pytest.approx(0.125) and four.low < 0.0 < four.high
