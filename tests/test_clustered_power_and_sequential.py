"""Clusters of related questions in `power` and `eval --sequential`: question counts that
hold in simulation with whole clusters as the unit, and a sequential gate whose A/A false
fails stay at alpha when related questions move together."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import RunCli
from test_power import power_json

from retrievalkit.stats.paired import sign_flip_p_value
from retrievalkit.stats.power import (
    Spread,
    detectable_drop,
    questions_needed,
    spread_of_clusters,
    spread_of_pair,
    worst_case_of_clusters,
)
from retrievalkit.stats.sequential import PASS, run_sequentially, sequential_order

SIZE = 5


def clustered_differences(
    clusters: int, icc: float, rng: np.random.Generator, sd: float = 0.3, size: int = SIZE
) -> np.ndarray:
    """(clusters * size) per-question differences (mean 0, sd ``sd``) whose questions in
    one cluster correlate by ``icc``."""
    shared = rng.normal(0.0, sd * math.sqrt(icc), clusters)
    own = rng.normal(0.0, sd * math.sqrt(1.0 - icc), (clusters, size))
    return np.asarray((shared[:, None] + own).ravel())


def clustered_power(drop: float, clusters: int, icc: float, replicates: int, seed: int) -> float:
    """Share of simulated sets whose drop the clustered paired test (the sign-flip test
    of the clusters' sums) finds."""
    rng = np.random.default_rng(seed)
    found = 0
    for row in range(replicates):
        differences = clustered_differences(clusters, icc, rng) - drop
        sums = differences.reshape(clusters, SIZE).sum(axis=1)
        p_value, _, _ = sign_flip_p_value(sums, permutations=400, seed=row)
        found += p_value < 0.05 and sums.sum() < 0
    return found / replicates


def pilot_spread(icc: float, seed: int) -> Spread:
    """The spread `power` takes from a run against its baseline: 400 clusters seen."""
    rng = np.random.default_rng(seed)
    differences = clustered_differences(400, icc, rng)
    codes = np.repeat(np.arange(400), SIZE)
    baseline = np.zeros_like(differences)
    spread, clusters = spread_of_clusters(differences, codes, baseline=baseline)
    assert clusters == 400
    return spread


@pytest.mark.parametrize("icc", [0.25, 0.64, 1.0])
def test_clusters_needed_are_within_10_percent_of_the_simulated_count(icc: float) -> None:
    drop = 0.05
    spread = pilot_spread(icc, seed=int(icc * 100))
    needed = questions_needed(drop, spread, 0.05)
    assert needed is not None
    replicates = 600
    error = math.sqrt(0.8 * 0.2 / replicates)
    at_needed = clustered_power(drop, needed, icc, replicates, seed=1)
    assert abs(at_needed - 0.8) <= 3 * error, (icc, needed, at_needed)
    fewer = clustered_power(drop, round(0.9 * needed), icc, replicates, seed=2)
    more = clustered_power(drop, round(1.1 * needed), icc, replicates, seed=3)
    assert fewer < 0.8 + error and more > 0.8 - error, (icc, fewer, more)


def test_counting_related_questions_as_independent_asks_too_few() -> None:
    # What the test above guards against: at ICC 0.64 the per-question count, spread
    # into clusters of five, finds the drop far less than 80 % of the time.
    rng = np.random.default_rng(5)
    differences = clustered_differences(400, 0.64, rng)
    unclustered = spread_of_pair(np.zeros_like(differences), differences)
    per_question = questions_needed(0.05, unclustered, 0.05)
    assert per_question is not None
    found = clustered_power(0.05, math.ceil(per_question / SIZE), 0.64, 400, seed=4)
    assert found < 0.6, (per_question, found)


def test_the_worst_case_of_unequal_clusters_holds_in_simulation() -> None:
    # Every question moves by a full 1 with its whole cluster: a loss with chance
    # (1 + drop) / 2. Sizes 1..8, as a set of rewordings and chunk questions has them.
    rng = np.random.default_rng(11)
    sizes = rng.integers(1, 9, 60)
    codes = np.repeat(np.arange(60), sizes)
    spread, clusters = worst_case_of_clusters(codes)
    assert clusters == 60 and spread.size_factor > 1.0
    drop = detectable_drop(clusters, spread, 0.05)
    assert drop is not None and 0.2 < drop < 0.9
    replicates, found = 800, 0
    for row in range(replicates):
        signs = np.where(rng.random(60) < (1 + drop) / 2, -1.0, 1.0)
        sums = signs * sizes
        p_value, _, _ = sign_flip_p_value(sums, permutations=400, seed=row)
        found += p_value < 0.05 and sums.sum() < 0
    error = math.sqrt(0.8 * 0.2 / replicates)
    assert abs(found / replicates - 0.8) <= 3 * error, (drop, found / replicates)


def test_clusters_of_one_question_are_the_per_question_spread() -> None:
    rng = np.random.default_rng(2)
    before, after = rng.random(200), rng.random(200)
    spread, clusters = spread_of_clusters(after, np.arange(200), baseline=before)
    assert clusters == 200 and spread.size_factor == 1.0
    assert spread.sd == pytest.approx(spread_of_pair(before, after).sd, rel=1e-12)


def test_power_counts_the_demo_sets_clusters(cli: RunCli) -> None:
    plain = power_json(cli, "--set", "demo", "--drop", "0.1")
    clustered = power_json(cli, "--set", "demo", "--drop", "0.1", "--cluster-by", "expected")
    assert clustered["cluster_by"] == "expected" and plain["cluster_by"] is None
    for before, after in zip(plain["rows"], clustered["rows"], strict=True):
        assert after["n"] == before["n"] == 75 and before["clusters"] is None
        assert 1 < after["clusters"] < 75
        # Related questions that move together carry less: more questions are needed.
        assert after["detectable"] > before["detectable"]
        assert after["needed"] > before["needed"]
        mean_size = after["n"] / after["clusters"]
        assert after["needed"] == math.ceil(after["needed_clusters"] * mean_size)
    table = cli("power", "--set", "demo", "--cluster-by", "expected")
    assert table.returncode == 0 and "clusters" in table.stdout


def test_power_with_a_field_no_question_has_says_so(cli: RunCli) -> None:
    done = cli("power", "--set", "demo", "--cluster-by", "meta.colour")
    assert done.returncode == 2 and "--cluster-by" in done.stderr


# --- eval --sequential with clusters -----------------------------------------------------


def test_clusters_are_asked_whole_in_a_seeded_order() -> None:
    codes = [3, 1, 3, 2, 1, 0, 2, 3]
    order = sequential_order([f"q{i}" for i in range(8)], seed=7, clusters=codes)
    assert sorted(order) == list(range(8))
    seen = [codes[index] for index in order]
    runs = [code for i, code in enumerate(seen) if i == 0 or code != seen[i - 1]]
    assert len(runs) == len(set(codes)), "each cluster's questions are asked together"
    assert order == sequential_order([f"q{i}" for i in range(8)], seed=7, clusters=codes)


def _sequential(
    baseline: np.ndarray,
    candidate: np.ndarray,
    threshold: float,
    codes: list[int] | None,
    seed: int,
) -> Any:
    ids = [f"q{i}" for i in range(len(baseline))]
    before = {"hit@1": {qid: float(value) for qid, value in zip(ids, baseline, strict=True)}}

    def ask(indices: list[int]) -> list[dict[str, float | None]]:
        return [{"hit@1": float(candidate[index])} for index in indices]

    gates = [(None, "hit@1", threshold, ids)]
    _, result = run_sequentially(
        ids, ask, gates, before, alpha=0.05, seed=seed, points=801, clusters=codes, batch=4
    )
    return result


def _aa_pair(clusters: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Two runs of one system over clusters of five rewordings: a cluster's questions
    share their 0/1 value, and each run re-draws a whole cluster with chance 0.3."""
    base = (rng.random(clusters) < 0.5).astype(float)
    runs = []
    for _ in range(2):
        redraw = rng.random(clusters) < 0.3
        values = np.where(redraw, (rng.random(clusters) < 0.5).astype(float), base)
        own = rng.random((clusters, SIZE)) < 0.05  # a rewording that goes its own way
        runs.append(np.where(own, 1.0 - values[:, None], values[:, None]).ravel())
    return runs[0], runs[1]


@pytest.mark.parametrize("threshold", [0.0, 0.05])
def test_clustered_aa_runs_fail_the_sequential_gate_at_most_5_percent(threshold: float) -> None:
    rng = np.random.default_rng(int(threshold * 100) + 21)
    replicates = 150
    for questions in (30, 100, 300):
        clusters = questions // SIZE
        codes = np.repeat(np.arange(clusters), SIZE).tolist()
        fails = ignored = 0
        for _ in range(replicates):
            baseline, candidate = _aa_pair(clusters, rng)
            seed = int(rng.integers(1 << 30))
            fails += _sequential(baseline, candidate, threshold, codes, seed).decision != PASS
            ignored += _sequential(baseline, candidate, threshold, None, seed).decision != PASS
        assert fails / replicates <= 0.05, (questions, threshold, fails / replicates)
        if questions >= 100:
            # Treating the rewordings as independent questions fails such pairs far
            # more often: the check above is one that could fail.
            assert ignored / replicates > 0.1, (questions, threshold, ignored / replicates)


def test_identical_clustered_reruns_always_pass() -> None:
    rng = np.random.default_rng(4)
    for questions in (10, 30, 100):
        codes = np.repeat(np.arange(questions // SIZE), SIZE).tolist()
        baseline = np.repeat((rng.random(questions // SIZE) < 0.5).astype(float), SIZE)
        result = _sequential(baseline, baseline.copy(), 0.0, codes, seed=3)
        assert result.decision == PASS and result.gates[0].clusters == questions // SIZE


def test_eval_sequential_with_clusters_gates_whole_clusters(cli: RunCli, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.sqlite3'}"
    base = ("eval", "--set", "demo", "--retriever", "bm25-demo", "--store", store)
    assert cli(*base).returncode == 0
    done = cli(*base, "--sequential", "--cluster-by", "expected", "--fail-on-regression",
               "--format", "json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["cluster_by"] == "expected"
    regression = report["regression"]
    sequence = regression["sequential"]
    assert sequence["decision"] == "pass"
    assert all(gate["clusters"] is not None and gate["clusters"] < 75 for gate in sequence["gates"])
    assert regression["cluster_by"] == "expected"
