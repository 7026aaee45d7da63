"""retrievalkit power: detectable drops that hold up in simulation, and the command around them."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
from conftest import RunCli

from retrievalkit.stats.paired import sign_flip_p_value
from retrievalkit.stats.power import (
    NORMAL,
    ONE_RUN,
    SIMULATED,
    SIMULATION_SEED,
    SIMULATIONS,
    PowerRow,
    Spread,
    _independent_differences,
    _pilot_sums,
    detectable_drop,
    gated_metrics,
    min_discordant,
    power_at,
    power_row,
    questions_needed,
    simulation_error,
    spread_of_clusters,
    spread_of_pair,
    spread_of_run,
    undetectable_warning,
    worst_case,
    worst_case_of_clusters,
)


def simulated_power(drop: float, n: int, discordance: float, replicates: int, seed: int) -> float:
    """Share of simulated A/B pairs of 0/1 values whose drop the paired test finds."""
    rng = np.random.default_rng(seed)
    found = 0
    for _ in range(replicates):
        draw = rng.random(n)
        lose, win = (discordance + drop) / 2, (discordance - drop) / 2
        differences = np.where(draw < lose, -1.0, np.where(draw < lose + win, 1.0, 0.0))
        p_value, _, _ = sign_flip_p_value(differences)
        found += p_value < 0.05 and differences.sum() < 0
    return found / replicates


@pytest.mark.parametrize(("n", "discordance"), [(75, 1.0), (75, 0.2), (300, 0.1)])
def test_the_detectable_drop_is_found_80_percent_of_the_time(n: int, discordance: float) -> None:
    spread = worst_case() if discordance == 1.0 else Spread(True, discordance, 0.0, "test")
    drop = detectable_drop(n, spread, 0.05)
    assert drop is not None and 0 < drop <= 1
    replicates = 1500
    found = simulated_power(drop, n, max(discordance, drop), replicates, seed=n)
    error = np.sqrt(0.8 * 0.2 / replicates)
    assert abs(found - 0.8) <= 3.5 * error + 0.01, (found, drop)
    # Half that drop is found far less often: the number is not an upper bound by accident.
    assert simulated_power(drop / 2, n, max(discordance, drop / 2), 500, seed=n + 1) < 0.5


def test_continuous_power_follows_the_sign_flip_test() -> None:
    rng = np.random.default_rng(5)
    n, sd = 60, 0.3
    drop = detectable_drop(n, Spread(False, 0.0, sd, "test"), 0.05)
    assert drop is not None
    found = 0
    for row in range(600):
        differences = np.clip(rng.normal(-drop, sd, n), -1, 1)
        p_value, _, _ = sign_flip_p_value(differences, permutations=2000, seed=row)
        found += p_value < 0.05 and differences.sum() < 0
    assert abs(found / 600 - 0.8) <= 0.06


def test_too_few_questions_detect_nothing_and_more_questions_detect_less() -> None:
    assert min_discordant(0.05) == 6 and min_discordant(0.1) == 5
    assert detectable_drop(5, worst_case(), 0.05) is None
    assert power_at(1.0, 5, worst_case(), 0.05) == 0.0
    drops = [detectable_drop(n, worst_case(), 0.05) for n in (30, 75, 300, 1000)]
    assert all(a is not None and b is not None and a > b for a, b in itertools.pairwise(drops))
    needed = questions_needed(0.05, worst_case(), 0.05)
    assert needed is not None and power_at(0.05, needed, worst_case(), 0.05) >= 0.8
    assert power_at(0.05, needed // 2, worst_case(), 0.05) < 0.8


def test_spreads_from_a_run_and_from_a_pair() -> None:
    hits = np.array([1.0] * 90 + [0.0] * 10)
    assert spread_of_run(hits).discordance == pytest.approx(2 * 0.9 * 0.1)
    candidate = hits.copy()
    candidate[:5] = 0.0
    pair = spread_of_pair(hits, candidate)
    assert pair.binary and pair.discordance == pytest.approx(0.05)
    ranks = np.array([1.0, 0.5, 1 / 3, 0.0, np.nan] * 20)
    continuous = spread_of_pair(ranks, ranks * 0.9)
    assert continuous.binary is False and continuous.sd > 0  # a bool, as the field says
    assert spread_of_run(ranks).binary is False


def test_an_independent_candidate_differs_by_every_pair_of_the_runs_values() -> None:
    """Three values 0, 0.5, 1: the six ordered pairs of two of them differ by +-0.5 (four
    times) and +-1 (twice), mean 0. Up to 20,000 pairs are all taken (141 values: 19,740),
    past that 20,000 seeded ones (142 values: 20,022 pairs)."""
    three = _independent_differences(np.array([0.0, 0.5, 1.0]))
    assert sorted(three) == [-1.0, -0.5, -0.5, 0.5, 0.5, 1.0]
    # In order: the candidate's value b less the run's a, pairs (a, b) as permutations
    # lists them (the simulation draws the pilot by position).
    assert list(three) == [0.5, 1.0, -0.5, 0.5, -1.0, -0.5]
    values = np.linspace(0.0, 1.0, 141) ** 2
    every = _independent_differences(values)
    assert every.size == 141 * 140 and abs(every.mean()) < 1e-12
    expected = [b - a for a, b in itertools.permutations(values, 2)]
    assert sorted(every) == pytest.approx(sorted(np.array(expected) - np.mean(expected)))
    more = np.linspace(0.0, 1.0, 142) ** 2
    sampled = _independent_differences(more)
    assert sampled.size == 20_000 and abs(sampled.mean()) < 1e-12
    assert np.array_equal(_independent_differences(more), sampled)  # seeded
    assert sampled.max() - sampled.min() <= 2.0  # differences of values in [0, 1]
    spread = spread_of_run(values)
    assert spread.pilot is not None and np.array_equal(spread.pilot, every)


def test_the_simulation_error_is_the_binomial_standard_error() -> None:
    assert simulation_error(0.8) == pytest.approx(np.sqrt(0.8 * 0.2 / SIMULATIONS))
    assert simulation_error(0.5) == pytest.approx(0.5 / np.sqrt(SIMULATIONS))
    assert simulation_error(0.0) == 0.0 and simulation_error(1.0) == 0.0
    assert simulation_error(1.0 + 1e-12) == 0.0  # a power rounded past 1 is not an error


def test_a_simulated_spread_gives_way_to_the_normal_formula_past_2000_questions() -> None:
    spread = spread_of_run(np.linspace(0.0, 1.0, 40))
    assert spread.method == SIMULATED
    assert power_row("ndcg@10", None, 2000, spread, alpha=0.05).method == SIMULATED
    row = power_row("ndcg@10", None, 2001, spread, alpha=0.05)
    assert row.method == NORMAL and row.mc_error is None


def test_gated_metrics_list_the_overall_thresholds_then_each_slices_sorted() -> None:
    overall = {"ndcg@10": 0.02, "hit@1": 0.05}
    slices = {"topic:b": {"hit@1": 0.1}, "topic:a": {"mrr@10": 0.03, "hit@3": 0.01}}
    assert gated_metrics(overall, slices) == [
        (None, "hit@1", 0.05),
        (None, "ndcg@10", 0.02),
        ("topic:a", "hit@3", 0.01),
        ("topic:a", "mrr@10", 0.03),
        ("topic:b", "hit@1", 0.1),
    ]
    assert gated_metrics({}, {}) == []


def test_the_undetectable_warning_says_where_how_many_and_what_can_be_found() -> None:
    row = PowerRow("hit@1", "topic:a", 40, "worst case", 1.0, None, 0.25, threshold=0.05)
    assert undetectable_warning(row) == (
        "hit@1 [topic:a]: the allowed drop 0.050 is below what this set can detect at 80% "
        "power (0.250 with 40 questions, worst case); a drop between the two passes or "
        "fails by chance"
    )
    nothing = PowerRow("ndcg@10", None, 4, "one run", None, 0.3, None, threshold=0.1, clusters=3)
    assert undetectable_warning(nothing) == (
        "ndcg@10: the allowed drop 0.100 is below what this set can detect at 80% power "
        "(no drop at all with 4 questions in 3 clusters, one run); a drop between the two "
        "passes or fails by chance"
    )


def power_json(cli: RunCli, *args: str) -> dict[str, Any]:
    done = cli("power", *args, "--format", "json")
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def test_power_of_the_demo_set_alone_and_with_a_drop(cli: RunCli) -> None:
    report = power_json(cli, "--set", "demo", "--drop", "0.03")
    assert report["questions"] == 75 and report["min_discordant"] == 6
    rows = {row["metric"]: row for row in report["rows"]}
    assert set(rows) == {"hit@1", "hit@3"}
    for row in rows.values():
        assert row["basis"] == "worst case" and row["n"] == 75
        assert row["detectable"] == pytest.approx(detectable_drop(75, worst_case(), 0.05))
        assert row["needed"] == questions_needed(0.03, worst_case(), 0.05)
    table = cli("power", "--set", "demo")
    assert table.returncode == 0 and "detectable drop" in table.stdout


def test_power_with_evidence_from_a_retriever_and_a_stored_run(cli: RunCli, tmp_path: Path) -> None:
    (tmp_path / "retrievalkit.toml").write_text(
        '[regression]\nmax_top1_drop = 0.1\n\n[regression.slices."form=GAP"]\n"rr" = 0.2\n',
        encoding="utf-8",
    )
    fresh = power_json(cli, "--set", "demo", "--retriever", "bm25-demo")
    rows = {(row["metric"], row["slice"]): row for row in fresh["rows"]}
    assert set(rows) == {("hit@1", None), ("hit@3", None), ("rr", "form=GAP")}
    assert rows[("hit@1", None)]["basis"] == "one run"
    assert rows[("rr", "form=GAP")]["sd"] is not None
    assert "no baseline stored" in fresh["evidence"]
    for _ in range(2):
        assert cli("eval", "--set", "demo", "--retriever", "bm25-demo", "-q").returncode == 0
    history = cli("history", "--set", "demo", "--retriever", "bm25-demo", "--format", "json")
    newest, older = (row["run_id"] for row in json.loads(history.stdout))
    stored = power_json(cli, "--set", "demo", "--run", newest)
    assert older in stored["evidence"]
    hit1 = next(row for row in stored["rows"] if row["metric"] == "hit@1")
    # The same retriever twice: nothing differs, so only a drop that itself moves enough
    # questions can be found.
    assert hit1["basis"] == "against baseline" and hit1["discordance"] == 0.0
    assert hit1["detectable"] == pytest.approx(
        detectable_drop(75, Spread(True, 0.0, 0.0, "x"), 0.05)
    )
    missing = cli("power", "--set", "demo", "--run", "no-such-run")
    assert missing.returncode == 2 and "no run no-such-run" in missing.stderr
    # The command is a shell over rk.power: the same report from Python, row for row.
    import retrievalkit as rk
    from retrievalkit.formats.convert import to_json

    config = tmp_path / "retrievalkit.toml"
    store = f"sqlite:///{tmp_path}/.retrievalkit/results.sqlite3"
    from_python = rk.power("demo", run=newest, store=store, config=config)
    assert json.loads(to_json(from_python)) == stored
    evaluated = rk.power("demo", retriever="bm25-demo", store="memory:", config=config)
    assert json.loads(to_json(evaluated))["rows"] == fresh["rows"]
    from retrievalkit.errors import InputError

    with pytest.raises(InputError, match="not both"):
        rk.power("demo", run=newest, retriever="bm25-demo", config=config)


def test_eval_warns_when_a_threshold_is_below_what_the_set_can_detect(cli: RunCli) -> None:
    for _ in range(2):
        done = cli(
            "eval", "--set", "demo", "--retriever", "bm25-demo", "--max-top1-drop", "0.05",
            "--format", "json",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    verdict = json.loads(done.stdout)["regression"]
    assert any(
        warning.startswith("hit@1: the allowed drop 0.050 is below what this set can detect")
        for warning in verdict["warnings"]
    ), verdict["warnings"]
    loose = cli(
        "eval", "--set", "demo", "--retriever", "bm25-demo", "--max-top1-drop", "0.5",
        "--max-top3-drop", "0.5", "--format", "json",
    )  # fmt: skip
    assert json.loads(loose.stdout)["regression"]["warnings"] == []


def _sign_test_power_over_every_count(
    drop: float, n: int, discordance: float, alpha: float
) -> float:
    """The exact power written out over every count 0..n, with no window and no cache."""
    from scipy.stats import binom

    lose = min(1.0, (discordance + drop) / (2.0 * discordance))
    counts = np.arange(n + 1)
    critical = binom.isf(alpha / 2.0, counts, 0.5) + 1.0
    too_likely = binom.sf(critical - 1.0, counts, 0.5) * 2.0 >= alpha
    critical = np.where(too_likely, critical + 1, critical)
    detect = np.where(critical <= counts, binom.sf(critical - 1.0, counts, lose), 0.0)
    return float(np.sum(binom.pmf(counts, n, discordance) * detect))


@pytest.mark.parametrize(
    ("n", "discordance", "alpha"),
    [
        (30, 1.0, 0.05),
        (400, 0.3, 0.05),
        (5_000, 0.02, 0.01),
        (20_000, 0.4, 0.05),
        (20_000, 1.0, 0.1),
    ],
)
def test_sign_test_power_is_the_sum_over_every_count_to_the_last_bit(
    n: int, discordance: float, alpha: float
) -> None:
    """The power evaluates only the counts whose chance is representable, and keeps the
    critical counts between calls: the very same floats as the sum over all counts."""
    rng = np.random.default_rng(n)
    drops = [1e-4, 0.5 * discordance, discordance, *rng.uniform(0.0, 1.0, 4).tolist()]
    for drop in drops:
        spread = Spread(True, discordance, 0.0, "test")
        expected = _sign_test_power_over_every_count(drop, n, max(discordance, drop), alpha)
        assert power_at(drop, n, spread, alpha) == expected
    assert power_at(drops[2], n, Spread(True, discordance, 0.0, "test"), alpha) > 0.0


def _binomial_grid() -> list[tuple[np.ndarray, np.ndarray, float]]:
    """Counts (whole, fractional, negative, past n, NaN, infinite) against sizes and chances."""
    cases = []
    for n in (0, 1, 7, 100, 12_345):
        counts = np.concatenate(
            [np.arange(-2, n + 3), [0.5, n - 0.5, np.nan, np.inf, -np.inf]]
        ).astype(np.float64)
        for p in (0.0, 1e-3, 0.3, 0.5, 0.999, 1.0):
            cases.append((counts, np.full(counts.shape, n, dtype=np.int64), p))
    return cases


def test_the_binomial_without_scipy_stats_is_scipy_stats_to_the_last_bit() -> None:
    """Power calls scipy.special's binomial ufuncs directly (scipy.stats takes a second to
    import); every value must be the bits scipy.stats.binom gives."""
    from retrievalkit.stats.power import _binomial, _stats_binomial

    direct, stats = _binomial(), _stats_binomial()
    assert direct is not stats
    for counts, sizes, p in _binomial_grid():
        for name in ("pmf", "sf"):
            got = getattr(direct, name)(counts, sizes, p)
            want = getattr(stats, name)(counts, sizes, p)
            assert got.tobytes() == want.tobytes(), (name, sizes[0], p)
        for q in (1e-4, 0.025, 0.5, 0.975):
            got = direct.isf(q, np.arange(0, sizes[0] + 1), p)
            want = stats.isf(q, np.arange(0, sizes[0] + 1), p)
            assert np.asarray(got).tobytes() == np.asarray(want).tobytes(), (q, sizes[0], p)
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        direct.isf(1.0, np.arange(5), 0.5)


def _detectable_over_exact_power(n: int, spread: Spread, alpha: float) -> float | None:
    """detectable_drop's bisection, every probe decided by the exact power."""
    if n < min_discordant(alpha) or power_at(1.0, n, spread, alpha) < 0.8:
        return None
    low, high = 0.0, 1.0
    while high - low > 1e-4:
        middle = (low + high) / 2.0
        if power_at(middle, n, spread, alpha) >= 0.8:
            high = middle
        else:
            low = middle
    return high


def _needed_over_exact_power(drop: float, spread: Spread) -> int:
    """questions_needed's search, every probe decided by the exact power."""
    high = min_discordant(0.05)
    while power_at(drop, high, spread, 0.05) < 0.8:
        high *= 2
    low = high // 2
    while high - low > 1:
        middle = (low + high) // 2
        if power_at(drop, middle, spread, 0.05) >= 0.8:
            high = middle
        else:
            low = middle
    return high


@pytest.mark.parametrize("n", [7, 75, 2_000, 40_000])
def test_detection_searches_find_what_the_exact_power_finds(n: int) -> None:
    """The searches settle most probes from a window of the sign test's terms; the
    drops and sizes they find are the ones the exact power finds, bit for bit."""
    for discordance, alpha in itertools.product((0.0, 0.03, 0.5, 1.0), (0.05, 0.01)):
        spread = Spread(True, discordance, 0.0, "test")
        expected = _detectable_over_exact_power(n, spread, alpha)
        assert detectable_drop(n, spread, alpha) == expected, (discordance, alpha)
    for drop, discordance in ((0.02, 0.1), (0.2, 1.0), (0.01, 0.0)):
        spread = Spread(True, discordance, 0.0, "test")
        assert questions_needed(drop, spread, 0.05) == _needed_over_exact_power(drop, spread)


@pytest.mark.parametrize(
    ("n", "discordance"), [(60, 0.3), (5_000, 0.1), (200_000, 0.02), (200_000, 0.0)]
)
def test_a_power_asked_at_the_exact_power_is_reached_and_one_float_more_is_not(
    n: int, discordance: float
) -> None:
    """Probes far from the power asked are settled from a narrow window, those within
    1e-5 from a wider one, and a tie to the last bit by the exact power itself."""
    from retrievalkit.stats.power import _reaches

    spread = Spread(True, discordance, 0.0, "test")
    detectable = detectable_drop(n, spread, 0.05)
    assert detectable is not None
    for factor in (0.8, 1.0, 1.25):
        drop = detectable * factor
        exact = power_at(drop, n, spread, 0.05)
        assert 0.05 < exact < 0.9999, (drop, exact)
        assert _reaches(drop, n, spread, 0.05, exact)
        assert not _reaches(drop, n, spread, 0.05, float(np.nextafter(exact, 2.0)))
        assert _reaches(drop, n, spread, 0.05, exact - 1e-6)
        assert not _reaches(drop, n, spread, 0.05, exact + 1e-6)
        assert _reaches(drop, n, spread, 0.05, exact - 0.1)
        assert not _reaches(drop, n, spread, 0.05, exact + 0.05)


def simulated_continuous_power(
    centred: np.ndarray, drop: float, n: int, replicates: int, seed: int
) -> float:
    """Share of simulated sets of ``n`` differences (drawn from ``centred`` less ``drop``)
    whose drop the paired sign-flip test finds."""
    rng = np.random.default_rng(seed)
    found = 0
    for row in range(replicates):
        differences = centred[rng.integers(0, len(centred), n)] - drop
        p_value, _, _ = sign_flip_p_value(differences, permutations=400, seed=row)
        found += p_value < 0.05 and differences.sum() < 0
    return found / replicates


@pytest.mark.parametrize("drop", [0.05, 0.1])
def test_questions_needed_for_ndcg_are_within_10_percent_of_the_simulated_count(
    bm25_populations: dict[str, np.ndarray], drop: float
) -> None:
    # A candidate independent of the run (the "one run" basis) on SciFact's real BM25
    # ndcg@10: zero-inflated, with mass at 1, where the plain z-test's count is off.
    values = bm25_populations["ndcg@10"]
    spread = spread_of_run(values)
    rng = np.random.default_rng(9)
    pairs = values[rng.integers(0, len(values), (2, 20_000))]
    centred = pairs[1] - pairs[0]
    centred -= centred.mean()
    needed = questions_needed(drop, spread, 0.05)
    assert needed is not None
    replicates = 800
    error = np.sqrt(0.8 * 0.2 / replicates)
    at_needed = simulated_continuous_power(centred, drop, needed, replicates, seed=1)
    assert abs(at_needed - 0.8) <= 3 * error, (needed, at_needed)
    # 10 % fewer questions fall short, 10 % more reach it: the count is within 10 %.
    fewer = simulated_continuous_power(centred, drop, round(0.9 * needed), replicates, seed=2)
    more = simulated_continuous_power(centred, drop, round(1.1 * needed), replicates, seed=3)
    assert fewer < 0.8 + error and more > 0.8 - error, (fewer, more)


def test_simulated_power_is_the_normal_sign_flip_test_simulated_apart() -> None:
    """The simulated power against a simulation written here from its definition, with
    other random draws (20,000 sets): a set of n pilot differences shifted by -drop is
    found when its sum S < 0 and -S > z_(1 - alpha/2) sqrt(sum of squares). Within four
    Monte Carlo standard errors of both simulations."""
    from scipy.stats import norm

    from retrievalkit.stats.power import simulated_power

    rng = np.random.default_rng(31)
    values = rng.beta(2.0, 3.0, 300)
    pilot = values - values.mean()
    draws = rng.integers(0, pilot.size, (20_000, 40))
    # The last two: differences a tenth as wide, whose sums of squares are below 1.
    cases = ((1.0, 0.05, 0.05), (1.0, 0.12, 0.05), (1.0, 0.2, 0.1), (1.0, 0.35, 0.01))
    for scale, drop, alpha in (*cases, (0.1, 0.005, 0.05), (0.1, 0.012, 0.1)):
        sets = scale * pilot[draws] - drop
        total = sets.sum(axis=1)
        spread = np.sqrt((sets * sets).sum(axis=1))
        expected = float(np.mean((total < 0) & (-total > norm.ppf(1 - alpha / 2) * spread)))
        got = simulated_power(drop, 40, scale * pilot, alpha)
        error = np.sqrt(expected * (1 - expected) * (1 / 4000 + 1 / 20_000))
        assert abs(got - expected) <= 4 * error + 1e-3, (drop, alpha, got, expected)


def _normal_power(drop: float, n: int, sd: float, alpha: float) -> float:
    """The sign-flip test's normal power, written from docs/power.md: the sum of n
    differences has mean -n d and spread sqrt(n) sd; its flips spread by sqrt(n (sd^2 + d^2))."""
    from scipy.stats import norm

    z = norm.ppf(1.0 - alpha / 2.0)
    return float(norm.cdf(drop * np.sqrt(n) / sd - z * np.sqrt(1.0 + (drop / sd) ** 2)))


def _normal_detectable(n: int, sd: float, alpha: float, power: float = 0.8) -> float:
    from scipy.optimize import brentq

    return float(brentq(lambda d: _normal_power(d, n, sd, alpha) - power, 1e-9, 1.0, xtol=1e-12))


def _normal_needed(drop: float, sd: float, alpha: float, power: float = 0.8) -> int:
    n = min_discordant(alpha)
    while _normal_power(drop, n, sd, alpha) < power:
        n += 1
    return n


def test_a_power_row_of_a_normal_spread_against_the_formula_solved_apart() -> None:
    sd = 0.1234567891
    spread = Spread(False, 0.0, sd, "against baseline")
    row = power_row("ndcg@10", "topic:a", 60, spread, alpha=0.05, threshold=0.01, drop=0.03)
    exact = _normal_detectable(60, sd, 0.05)
    assert row.detectable is not None and exact <= row.detectable <= exact + 1.01e-4
    needed = _normal_needed(0.03, sd, 0.05)
    assert 100 < needed < 200  # about (2.8 sd / drop)^2: the loop above found a real count
    assert row == PowerRow(
        metric="ndcg@10",
        slice="topic:a",
        n=60,
        basis="against baseline",
        discordance=None,
        sd=0.123457,
        detectable=row.detectable,
        threshold=0.01,
        drop=0.03,
        needed=needed,
        clusters=None,
        needed_clusters=None,
        method=NORMAL,
        mc_error=None,
        needed_method=NORMAL,
    )
    # Without a drop, nothing is needed and no method says how.
    bare = power_row("ndcg@10", None, 60, spread, alpha=0.05)
    assert bare.needed is None and bare.needed_method is None and bare.drop is None
    assert bare.detectable == row.detectable and bare.slice is None
    # At 90 % power: a larger drop detectable, more questions needed.
    strict = power_row("ndcg@10", None, 60, spread, alpha=0.05, power=0.9, drop=0.03)
    exact = _normal_detectable(60, sd, 0.05, 0.9)
    assert strict.detectable is not None and exact <= strict.detectable <= exact + 1.01e-4
    assert strict.detectable > row.detectable + 0.005
    assert strict.needed == _normal_needed(0.03, sd, 0.05, 0.9) > needed + 20


@pytest.mark.parametrize(("n", "clusters"), [(50, 12), (7, 1)])
def test_a_power_row_of_clusters_detects_for_the_clusters_and_scales_what_is_needed(
    n: int, clusters: int
) -> None:
    sd = 0.25
    spread = Spread(False, 0.0, sd, "one run")
    row = power_row("hit@1", None, n, spread, alpha=0.05, drop=0.1, clusters=clusters)
    units = _normal_needed(0.1, sd, 0.05)
    assert row.needed_clusters == units and row.clusters == clusters
    # As many clusters of the mean size n / clusters: ceil(units n / clusters) questions.
    assert row.needed == -(-units * n // clusters)
    if clusters < min_discordant(0.05):
        assert row.detectable is None
    else:
        exact = _normal_detectable(clusters, sd, 0.05)
        assert row.detectable is not None and exact <= row.detectable <= exact + 1.01e-4
        # Detected with the 12 clusters, not the 50 questions: far larger a drop.
        assert row.detectable > _normal_detectable(n, sd, 0.05) + 0.05


def test_a_power_row_of_a_0_1_metric_gives_its_discordance_not_an_sd() -> None:
    spread = Spread(True, 1.0 / 3.0, 0.0, "against baseline")
    row = power_row("hit@1", None, 90, spread, alpha=0.05)
    assert row.discordance == 0.333333 and row.sd is None and row.method == "exact"
    assert row.mc_error is None


def test_a_power_row_of_a_simulated_spread_gives_its_monte_carlo_error() -> None:
    values = np.linspace(0.0, 1.0, 40) ** 2
    spread = spread_of_run(values)
    assert spread.method == SIMULATED
    row = power_row("ndcg@10", None, 40, spread, alpha=0.05, drop=0.25)
    assert row.detectable is not None and row.method == SIMULATED
    achieved = power_at(row.detectable, 40, spread, 0.05)
    assert 0.8 <= achieved < 0.9
    # The binomial standard error of that power over 4,000 sets, to four places.
    assert row.mc_error == round(np.sqrt(achieved * (1.0 - achieved) / 4000), 4)
    assert row.mc_error is not None and 0.004 < row.mc_error < 0.0064
    # The count needed is small enough to be simulated too.
    assert row.needed is not None and row.needed <= 2000 and row.needed_method == SIMULATED


def test_seeded_pairs_take_every_value_and_are_differences_not_sums() -> None:
    """200 values (39,800 pairs, so 20,000 drawn): 0 and 1 alternating and one outlier 50 at
    the front. A pair holds the outlier with chance 2/200, about 200 of the 20,000, half
    of them 50 above the other value and half 50 below (differences, not sums)."""
    values = np.r_[50.0, np.tile([0.0, 1.0], 100)[:199]]
    pilot = _independent_differences(values)
    assert pilot.size == 20_000
    above, below = int((pilot > 40).sum()), int((pilot < -40).sum())
    assert 70 < above < 130 and 70 < below < 130, (above, below)
    # The other pairs: 0 - 0, 1 - 1, 0 - 1 and 1 - 0, within 1 of the mean, which the
    # few outlier pairs move by 50 (above - below) / 20,000 at most.
    limit = 1.0 + 50.0 * abs(above - below) / 20_000 + 1e-9
    assert np.all(np.abs(pilot[np.abs(pilot) < 40]) <= limit)


def test_the_simulated_sets_are_seeded_draws_of_the_pilot_with_replacement() -> None:
    """The sums and sums of squares of 4,000 sets of n = 40 draws, written again from the
    definition: indices drawn from numpy's generator seeded with (seed, n)."""
    pilot = np.linspace(-1.0, 1.0, 37) ** 3 + 0.001  # a pilot no other test used
    sums, squares = _pilot_sums(40, pilot)
    rng = np.random.default_rng([SIMULATION_SEED, 40])
    draws = pilot[rng.integers(0, pilot.size, (SIMULATIONS, 40))]
    np.testing.assert_allclose(sums, draws.sum(axis=1), rtol=0, atol=1e-12)
    np.testing.assert_allclose(squares, (draws * draws).sum(axis=1), rtol=0, atol=1e-12)
    # The first value of the pilot is drawn as often as any (1/37 of 160,000 draws).
    assert abs(int((draws == pilot[0]).sum()) - 160_000 / 37) < 300


def test_the_spread_of_0_1_clusters_by_hand() -> None:
    """Values 1 0 1 | 0 0 | 1 (clusters of 3, 2 and 1, mean size 2, mean value 0.5).
    Units (sum - size * 0.5) / 2: 0.25, -0.5, 0.25, spread sqrt(0.125), times sqrt(2)
    for an independent candidate: 0.5. Size factor (9 + 4 + 1) / 3 / 2^2 = 7/6; the mean
    size 2 is kept for the 0/1 floor."""
    values = np.array([1.0, 0.0, 1.0, 0.0, 0.0, 1.0])
    spread, count = spread_of_clusters(values, np.array([0, 0, 0, 1, 1, 2]))
    assert count == 3
    assert spread.binary is False and spread.discordance == 0.0 and spread.basis == ONE_RUN
    assert spread.sd == pytest.approx(0.5) and spread.size_factor == pytest.approx(7 / 6)
    assert spread.binary_questions == 2.0
    # The same values but one 0.5: no 0/1 metric, no floor.
    graded, _ = spread_of_clusters(np.r_[values[:5], 0.5], np.array([0, 0, 0, 1, 1, 2]))
    assert graded.binary_questions == 0.0
    only_ones, _ = spread_of_clusters(np.ones(4), np.array([0, 0, 1, 1]))
    assert only_ones.binary_questions == 2.0
    only_zeros, _ = spread_of_clusters(np.zeros(4), np.array([0, 0, 1, 1]))
    assert only_zeros.binary_questions == 2.0


def test_the_spread_of_clusters_against_a_baseline_keeps_questions_both_define() -> None:
    """Defined in both: questions 0, 3 and 4, differences 0.4, 0.5, 0.0 (mean 0.3), one
    per cluster: units 0.1, 0.2, -0.3, spread sqrt(0.14 / 3)."""
    nan = float("nan")
    values = np.array([0.5, nan, 0.2, 0.9, 0.6])
    baseline = np.array([0.1, 0.3, nan, 0.4, 0.6])
    spread, count = spread_of_clusters(values, np.array([0, 0, 1, 1, 2]), baseline=baseline)
    assert count == 3 and spread.basis == "against baseline"
    assert spread.sd == pytest.approx(np.sqrt(0.14 / 3))
    assert spread.size_factor == pytest.approx(1.0) and spread.binary_questions == 0.0
    # Nothing defined: the worst case, and no clusters.
    assert spread_of_clusters(np.full(3, nan), np.array([0, 1, 2])) == (worst_case(), 0)


def test_a_power_row_of_the_worst_case_has_every_question_discordant() -> None:
    row = power_row("hit@1", None, 30, worst_case(), alpha=0.05)
    assert row.discordance == 1.0 and row.sd is None and row.basis == "worst case"
    # Clusters of 1, 1 and 2 questions moving together: still every question, no sd.
    spread, count = worst_case_of_clusters(np.array([0, 1, 2, 2]))
    assert count == 3 and spread.size_factor == pytest.approx((6 / 3) / (4 / 3) ** 2)
    clustered = power_row("hit@1", None, 4, spread, alpha=0.05, clusters=count)
    assert clustered.discordance == 1.0 and clustered.sd is None
    assert clustered.basis == "worst case"
    # No questions: the worst case, and no clusters.
    assert worst_case_of_clusters(np.array([], dtype=np.intp)) == (worst_case(), 0)


def _golden_set() -> Any:
    """40 questions: 30 with an answer, 10 without; every fourth of hard class normal."""
    from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet, QuestionForm

    questions = [
        GoldenQuestion(
            id=f"q{i:02d}",
            question=f"question {i}",
            form=QuestionForm.MATCH,
            hard_class="normal" if i % 4 == 0 else "near-duplicate",
            expected=[f"d{i}"] if i < 30 else [],
        )
        for i in range(40)
    ]
    return GoldenQuestionSet(name="powered", questions=questions)


def test_the_power_of_a_set_alone_is_the_worst_case_for_each_gated_metric_and_slice() -> None:
    from retrievalkit.stats.power import set_power

    golden = _golden_set()
    report = set_power(
        golden,
        {"mrr@10": 0.02, "hit@1": 0.05},
        {"hard_class=normal": {"hit@1": 0.1}},
        alpha=0.05,
        drop=0.2,
    )
    assert (report.set_name, report.questions, report.alpha, report.power) == (
        "powered",
        40,
        0.05,
        0.8,
    )
    assert report.evidence == "the set alone" and report.drop == 0.2
    # 2 / 2^5 = 0.0625 is above 0.05, 2 / 2^6 = 0.031 below: six questions at least.
    assert report.min_discordant == 6 and report.cluster_by is None
    # hit@k counts every question, the others only those with an answer; the slice its own.
    assert [(r.slice, r.metric, r.n, r.threshold) for r in report.rows] == [
        (None, "hit@1", 40, 0.05),
        (None, "mrr@10", 30, 0.02),
        ("hard_class=normal", "hit@1", 10, 0.1),
    ]
    for row in report.rows:
        assert row.basis == "worst case" and row.discordance == 1.0 and row.clusters is None
        assert row.detectable == detectable_drop(row.n, worst_case(), 0.05)
        assert row.drop == 0.2 and row.needed == questions_needed(0.2, worst_case(), 0.05)
    # Fewer questions, a larger drop before it is found.
    hit, mrr, normal = report.rows
    assert hit.detectable is not None and mrr.detectable is not None
    assert normal.detectable is not None and hit.detectable < mrr.detectable < normal.detectable


def test_the_power_of_a_run_takes_its_spread_from_the_run_or_its_baseline() -> None:
    from retrievalkit.model.values import QuestionOutcome
    from retrievalkit.stats.power import set_power

    golden = _golden_set()

    def run(hits: list[float]) -> list[QuestionOutcome]:
        return [
            QuestionOutcome(f"q{i:02d}", (f"d{i}",), {"hit@1": value}, 1.0)
            for i, value in enumerate(hits)
        ]

    candidate = run([1.0] * 30 + [0.0] * 10)
    alone = set_power(golden, {"hit@1": 0.05}, {}, alpha=0.05, outcomes=candidate)
    (row,) = alone.rows
    # A run at rate 0.75 and one independent of it: discordant 2 (0.75)(0.25) = 0.375.
    assert (row.n, row.basis, row.discordance) == (40, "one run", 0.375)
    paired = set_power(
        golden,
        {"hit@1": 0.05},
        {},
        alpha=0.05,
        outcomes=candidate,
        baseline=run([1.0] * 36 + [0.0] * 4),
        evidence="against its baseline",
    )
    (row,) = paired.rows
    # Questions 30 to 35 differ: 6 of 40.
    assert (row.n, row.basis, row.discordance) == (40, "against baseline", 0.15)
    assert paired.evidence == "against its baseline"
    # Less discordance than the worst case: a smaller drop is found.
    worst = detectable_drop(40, worst_case(), 0.05)
    assert row.detectable is not None and worst is not None and row.detectable < worst


def test_the_power_of_a_set_in_clusters_counts_the_clusters() -> None:
    from retrievalkit.stats.power import set_power

    report = set_power(
        _golden_set(), {"hit@1": 0.05}, {}, alpha=0.05, drop=0.2, cluster_by="hard_class"
    )
    (row,) = report.rows
    assert report.cluster_by == "hard_class"
    # Two clusters of 10 and 30 (normal, near-duplicate): a sign test of two units never has
    # p below 0.05 (at best 2 / 2^2), so no drop can be detected.
    assert (row.n, row.clusters, row.detectable, row.basis) == (40, 2, None, "worst case")
    # Clusters of one question (each its own hard class) are the per-question test.
    singles = _golden_set()
    from retrievalkit.model.values import GoldenQuestionSet

    own = GoldenQuestionSet(
        name="own",
        questions=[attrs.evolve(q, hard_class=f"c{i}") for i, q in enumerate(singles.questions)],
    )
    (single,) = set_power(own, {"hit@1": 0.05}, {}, alpha=0.05, cluster_by="hard_class").rows
    assert single.clusters is None
    assert single.detectable == detectable_drop(40, worst_case(), 0.05)


def _outcomes(hits: dict[int, float]) -> list[Any]:
    from retrievalkit.model.values import QuestionOutcome

    return [QuestionOutcome(f"q{i:02d}", (f"d{i}",), {"hit@1": v}, 1.0) for i, v in hits.items()]


def test_the_power_of_a_run_counts_only_the_questions_it_and_its_baseline_define() -> None:
    from retrievalkit.stats.power import set_power

    golden = _golden_set()
    # The run has 34 of the 40 questions (30 found), the baseline 36 (all found): 32 in both.
    run = _outcomes({i: 1.0 if i < 30 else 0.0 for i in range(34)})
    baseline = _outcomes({i: 1.0 for i in range(2, 38)})
    (alone,) = set_power(golden, {"hit@1": 0.05}, {}, alpha=0.05, outcomes=run).rows
    assert alone.n == 34 and alone.discordance == round(2 * (30 / 34) * (4 / 34), 6)
    (paired,) = set_power(
        golden, {"hit@1": 0.05}, {}, alpha=0.05, outcomes=run, baseline=baseline
    ).rows
    # Both define questions 2 to 33; 30 to 33 differ: 4 of 32.
    assert paired.n == 32 and paired.discordance == 0.125
    # At 90 % power the worst case's detectable drop is larger, found by the same search.
    (strict,) = set_power(golden, {"hit@1": 0.05}, {}, alpha=0.05, power=0.9).rows
    assert strict.detectable == detectable_drop(40, worst_case(), 0.05, 0.9)
    assert strict.detectable is not None and strict.detectable > 0.3


def _units_sd(values: np.ndarray, labels: np.ndarray, scale: float) -> float:
    """The spread of clusters' summed values less their share of the mean, in units of
    the mean cluster size, written apart: one loop over the clusters."""
    names = sorted(set(labels.tolist()))
    mean, size = values.mean(), len(values) / len(names)
    units = [(values[labels == c].sum() - (labels == c).sum() * mean) / size for c in names]
    return scale * float(np.std(units))


def test_the_power_of_a_run_in_clusters_takes_the_spread_of_the_clusters() -> None:
    from retrievalkit.stats.power import set_power

    # Seven hard classes c0..c6 (sizes 6, 6, 6, 6, 6, 5, 5); a run finding the first 25.
    golden = _golden_set()
    labels = np.array([f"c{i % 7}" for i in range(40)])
    questions = [
        attrs.evolve(q, hard_class=c) for q, c in zip(golden.questions, labels, strict=True)
    ]
    golden = attrs.evolve(golden, questions=questions)
    hits = np.array([1.0 if i < 25 else 0.0 for i in range(40)])
    run = _outcomes(dict(enumerate(hits.tolist())))
    report = set_power(
        golden, {"hit@1": 0.05}, {}, alpha=0.05, outcomes=run, cluster_by="hard_class"
    )
    (row,) = report.rows
    assert (row.n, row.clusters, row.basis, row.discordance) == (40, 7, "one run", None)
    assert row.sd == round(_units_sd(hits, labels, np.sqrt(2.0)), 6)
    baseline_hits = np.array([1.0 if i < 33 else 0.0 for i in range(40)])
    (paired,) = set_power(
        golden,
        {"hit@1": 0.05},
        {},
        alpha=0.05,
        outcomes=run,
        baseline=_outcomes(dict(enumerate(baseline_hits.tolist()))),
        cluster_by="hard_class",
    ).rows
    assert (paired.clusters, paired.basis) == (7, "against baseline")
    assert paired.sd == round(_units_sd(hits - baseline_hits, labels, 1.0), 6)
    # The set alone: the worst case of the unequal clusters, by the normal formula.
    (worst,) = set_power(golden, {"hit@1": 0.05}, {}, alpha=0.05, cluster_by="hard_class").rows
    assert (worst.clusters, worst.method, worst.basis) == (7, "normal", "worst case")


def test_a_slice_no_question_is_in_has_no_questions_and_detects_nothing() -> None:
    from retrievalkit.stats.power import set_power

    report = set_power(
        _golden_set(), {}, {"hard_class=rare": {"hit@1": 0.1}}, alpha=0.05, cluster_by="hard_class"
    )
    (row,) = report.rows
    assert (row.slice, row.n, row.detectable, row.clusters) == ("hard_class=rare", 0, None, None)


def test_the_fewest_discordant_questions_by_hand() -> None:
    """The fewest m with 2 / 2^m below alpha: 2 / 2^5 = 0.0625, 2 / 2^6 = 0.031 for 0.05;
    2 / 2^2 = 0.5 for 0.6 (one question, 2 / 2 = 1, never is)."""
    assert min_discordant(0.05) == 6 and min_discordant(0.1) == 5 and min_discordant(0.6) == 2


def test_a_drop_is_detectable_from_the_fewest_questions_and_not_past_a_full_drop() -> None:
    # Six questions all lost at a full drop: p = 2 / 2^6 = 0.031, found every time.
    assert detectable_drop(6, worst_case(), 0.05) is not None
    assert detectable_drop(5, worst_case(), 0.05) is None
    # Six questions of sd 0.7: a drop of 1 is found with power 0.53, of 2 with 0.86 (the
    # normal formula above): a drop is at most 1, so none is detectable at 80 %.
    assert _normal_power(1.0, 6, 0.7, 0.05) < 0.8 < _normal_power(2.0, 6, 0.7, 0.05)
    assert detectable_drop(6, Spread(False, 0.0, 0.7, "against baseline"), 0.05) is None


def test_a_0_1_run_against_an_independent_candidate_by_hand() -> None:
    """A run at rate 0.6, a candidate at 0.4 independent of it: losses 0.6 x 0.6 = 0.36,
    wins 0.4 x 0.4 = 0.16, discordant 0.52, 9/13 of them losses. A drop past the rate
    (0.3 by 0.5) is one to rate 0: losses 0.3, no wins."""
    from retrievalkit.stats.power import binary_alternative

    spread = Spread(True, 2 * 0.6 * 0.4, 0.0, ONE_RUN, rate=0.6)
    discordance, lose = binary_alternative(0.2, spread)
    assert discordance == pytest.approx(0.52) and lose == pytest.approx(9 / 13)
    low = Spread(True, 2 * 0.3 * 0.7, 0.0, ONE_RUN, rate=0.3)
    assert binary_alternative(0.5, low) == pytest.approx((0.3, 1.0))
