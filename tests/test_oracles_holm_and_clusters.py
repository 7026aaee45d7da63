"""Holm's adjusted p-values and the cluster-robust variance of a mean, against statsmodels.

statsmodels is the oracle: ``multipletests(method="holm")`` for Holm (1979), and the
cluster-robust covariance of an intercept-only OLS (``cov_type="cluster"``) for the
variance of a mean over clustered questions. statsmodels' default for clusters is
``use_correction=True``: the CR1 factor G / (G - 1) * (N - 1) / (N - K), which for a mean
(K = 1) is G / (G - 1), the factor docs/metrics.md documents (``df_correction`` only
changes the degrees of freedom of its t tests, not the variance).
"""

from __future__ import annotations

import gc

import numpy as np
import pytest
from statsmodels.regression.linear_model import OLS
from statsmodels.stats.multitest import multipletests

from retrievalkit.stats.clusters import (
    cluster_bootstrap_means,
    cluster_codes,
    effective_sizes,
)
from retrievalkit.stats.paired import holm

#: Seeded families per class of p-value vectors.
FAMILIES = 150


@pytest.fixture(autouse=True)
def _no_full_collection(monkeypatch: pytest.MonkeyPatch) -> None:
    """statsmodels runs gc.collect() in multipletests and in every fit (70 ms each in a
    pytest process); its numbers do not depend on it."""
    monkeypatch.setattr(gc, "collect", lambda *args: 0)


def _p_vectors(kind: str, seed: int) -> list[float | None]:
    rng = np.random.default_rng((seed, len(kind)))
    m = int(rng.integers(1, 51))
    if kind == "uniform":
        values = rng.uniform(0.0, 1.0, m)
    elif kind == "ties":
        # Few distinct values (exact sign tests give many equal p-values) and the extremes.
        values = rng.choice([0.0, 1e-6, 0.001, 0.01, 0.03125, 0.05, 0.2, 0.5, 1.0], m)
    else:  # "small": many p-values near 0, where the multipliers decide
        values = rng.uniform(0.0, 0.06, m) ** 2
    return [float(value) for value in values]


@pytest.mark.parametrize("kind", ["uniform", "ties", "small"])
def test_holm_is_statsmodels_holm(kind: str) -> None:
    for seed in range(FAMILIES):
        p_values = _p_vectors(kind, seed)
        _, expected, _, _ = multipletests(p_values, method="holm")
        assert holm(p_values) == pytest.approx(expected.tolist(), rel=1e-12, abs=0), p_values


def test_holm_leaves_none_out_of_the_family() -> None:
    """None (a metric undefined for a candidate) is not a member: the others are adjusted
    as a family of the present ones, in place."""
    rng = np.random.default_rng(7)
    for _ in range(FAMILIES):
        p_values: list[float | None] = list(_p_vectors("uniform", int(rng.integers(1 << 30))))
        for position in rng.choice(len(p_values), int(rng.integers(0, len(p_values))), False):
            p_values[int(position)] = None
        present = [value for value in p_values if value is not None]
        adjusted = holm(p_values)
        assert [value is None for value in adjusted] == [value is None for value in p_values]
        if present:
            _, expected, _, _ = multipletests(present, method="holm")
            got = [value for value in adjusted if value is not None]
            assert got == pytest.approx(expected.tolist(), rel=1e-12, abs=0)


def test_holm_worked_example() -> None:
    """Three p-values 0.01, 0.04, 0.03: sorted 0.01, 0.03, 0.04 times 3, 2, 1 give 0.03,
    0.06, 0.04; the running maximum makes the last 0.06. In input order: 0.03, 0.06, 0.06."""
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06], rel=1e-12)
    assert holm([0.5, 0.6]) == [1.0, 1.0]
    assert holm([None, 0.02]) == [None, 0.02]


def _layout(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Values and cluster codes: 2-40 clusters of 1-8 questions, cluster effects of any
    strength, continuous or 0/1 values, some undefined."""
    rng = np.random.default_rng(seed)
    clusters = int(rng.integers(2, 41))
    sizes = rng.integers(1, 9, clusters)
    codes = np.repeat(np.arange(clusters), sizes)
    effect = rng.uniform(0.0, 1.0, clusters)[codes]
    share = rng.uniform(0.0, 1.0)
    noise = rng.uniform(0.0, 1.0, codes.size)
    values = np.where(rng.uniform(size=codes.size) < share, effect, noise)
    if seed % 3 == 0:
        values = (values > 0.5).astype(np.float64)
    if seed % 4 == 1:
        values[rng.uniform(size=codes.size) < 0.2] = np.nan
    order = rng.permutation(codes.size)  # members of a cluster need not be adjacent
    return values[order], codes[order]


def _statsmodels(values: np.ndarray, codes: np.ndarray) -> tuple[float, float, int]:
    """(CR1 variance of the mean, plain variance of the mean, observations)."""
    defined = ~np.isnan(values)
    y, groups = values[defined], codes[defined]
    ones = np.ones((y.size, 1))
    robust = OLS(y, ones).fit(cov_type="cluster", cov_kwds={"groups": groups})
    plain = OLS(y, ones).fit()
    return float(robust.bse[0] ** 2), float(plain.bse[0] ** 2), int(y.size)


def _cells(values: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, ...]:
    defined = ~np.isnan(values)
    filled = np.where(defined, values, 0.0)
    count = int(codes.max()) + 1
    sums = np.bincount(codes, weights=filled, minlength=count)[:, None]
    sizes = np.bincount(codes, weights=defined.astype(float), minlength=count)[:, None]
    squares = np.array([float((filled**2).sum())])
    return sums, sizes, squares


def test_cluster_robust_variance_and_effective_n_are_statsmodels_cr1() -> None:
    checked = 0
    for seed in range(400):
        values, codes = _layout(seed)
        defined = ~np.isnan(values)
        groups = np.unique(codes[defined]).size
        if defined.sum() < 3 or groups < 2 or np.ptp(values[defined]) == 0:
            continue
        robust, plain, n = _statsmodels(values, codes)
        effective, variance = effective_sizes(*_cells(values, codes))
        assert variance[0] == pytest.approx(robust, rel=1e-9), seed
        if robust > 1e-300:
            # n x (variance of a mean of n independent values) / (cluster-robust variance)
            expected = min(max(n * plain / robust, 1.0), n)
            assert effective[0] == pytest.approx(expected, rel=1e-9), seed
        checked += 1
    assert checked > 250


def test_the_cluster_bootstrap_reports_the_statsmodels_effective_n() -> None:
    """Through `cluster_bootstrap_means`, as a run reports it (rounded to 0.1), with the
    cluster count statsmodels groups by."""
    for seed in range(80):
        values, codes = _layout(seed)
        defined = ~np.isnan(values)
        if defined.sum() < 3 or np.unique(codes[defined]).size < 2:
            continue
        if np.ptp(values[defined]) == 0:
            continue
        robust, plain, n = _statsmodels(values, codes)
        labels = [str(code) for code in codes]
        estimate = cluster_bootstrap_means(
            values[:, None], np.ones((1, values.size), bool), cluster_codes(labels), resamples=50
        )[0][0]
        assert estimate.clusters == np.unique(codes[defined]).size
        assert estimate.effective_n == pytest.approx(
            round(min(max(n * plain / robust, 1.0), n), 1), abs=1e-9
        ), seed


def test_clusters_of_one_question_give_n() -> None:
    """Worked example: every question its own cluster. CR1 is then n/(n-1) sum(d^2)/n^2 =
    s^2/n, the plain variance of the mean, so the effective n is n itself."""
    rng = np.random.default_rng(3)
    for _ in range(50):
        n = int(rng.integers(3, 60))
        values = rng.uniform(size=n)
        effective, variance = effective_sizes(*_cells(values, np.arange(n)))
        assert variance[0] == pytest.approx(values.var(ddof=1) / n, rel=1e-9)
        assert effective[0] == pytest.approx(n, rel=1e-9)


def test_compare_adjusts_p_values_and_floors_as_statsmodels_holm() -> None:
    """Through `compare_records`: 2-5 candidates against one baseline, per metric, the
    p-values and the floors (the smallest p each could reach) adjusted as statsmodels
    adjusts them; the verdict reads the adjusted ones."""
    from test_compare_records import BASE, STATS, deltas, run

    from retrievalkit.pipeline.gating.comparison import Side, compare_records

    rng = np.random.default_rng(31)
    for trial in range(15):
        candidates = [
            Side(f"c{index}", run(rng.choice(30, int(rng.integers(0, 14)), False).tolist(), "c"))
            for index in range(int(rng.integers(2, 6)))
        ]
        comparison = compare_records([Side("base", BASE), *candidates], **STATS)
        assert comparison.correction == "holm"
        for metric in ("hit@1", "hit@3", "rr"):
            found = [deltas(pair)[metric] for pair in comparison.pairs]
            raw = [delta.p_value for delta in found]
            _, adjusted, _, _ = multipletests(raw, method="holm")
            assert [delta.p_holm for delta in found] == pytest.approx(adjusted.tolist()), trial
            floors = [p_floor_of(delta.discordant) for delta in found]
            _, adjusted_floors, _, _ = multipletests(floors, method="holm")
            assert [delta.p_floor for delta in found] == pytest.approx(adjusted_floors.tolist())
            for delta, p, floor in zip(found, adjusted, adjusted_floors, strict=True):
                want = (
                    "unresolvable"
                    if floor >= 0.05
                    else ("significant" if p < 0.05 else "not significant")
                )
                assert delta.verdict == want


def p_floor_of(discordant: int) -> float:
    """2 / 2^m, the smallest two-sided sign-flip p-value of m discordant questions."""
    return 1.0 if discordant <= 1 else 2.0 / 2.0**discordant


def test_the_cluster_bootstrap_spreads_as_the_statsmodels_cluster_robust_variance(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The resampled means (read through a pass-through wrapper of the BCa step) of a
    bootstrap that draws whole clusters have the variance of CR0, (C - 1)/C times
    statsmodels' CR1; drawing questions instead would give about s^2 / n, which with
    clusters that move together is far less."""
    from retrievalkit.stats import clusters as clustered

    seen: list[np.ndarray] = []
    real = clustered.bca_bounds

    def reading(samples: np.ndarray, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        seen.append(np.array(samples[:, 0]))
        return real(samples, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(clustered, "bca_bounds", reading)
    rng = np.random.default_rng(32)
    for _ in range(8):
        count = int(rng.integers(40, 80))
        sizes = rng.integers(1, 9, count)
        codes = np.repeat(np.arange(count), sizes)
        values = np.clip(rng.uniform(0, 1, count)[codes] + rng.normal(0, 0.1, codes.size), 0, 1)
        clustered.cluster_bootstrap_means(
            values[:, None], np.ones((1, codes.size), bool), codes, resamples=4000, binary=False
        )
        robust, plain, _ = _statsmodels(values, codes)
        ratio = float(np.var(seen.pop()) / (robust * (count - 1) / count))
        assert 0.85 < ratio < 1.15, ratio
        assert robust > 2 * plain  # the clusters matter here
