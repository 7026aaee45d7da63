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
