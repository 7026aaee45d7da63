"""Several gates at once in ``eval --sequential``: each sequence at alpha / gates.

Bonferroni's split is what keeps the run's chance of a false early fail at alpha when
several metrics (or slices) are gated: the run fails when any gate's sequence does. Each
gate's reported sequence must be exactly a `BettingSequence` at alpha / k fed the gate's
values ((d + 1) / 2 on [0, 1]) in the asked order, and a split of 1 must not be.
"""

from __future__ import annotations

import numpy as np
import pytest

from retrievalkit.stats.sequential import (
    GRID_POINTS,
    BettingSequence,
    run_sequentially,
    sequential_order,
)

METRICS = ("hit@1", "hit@3", "rr", "ndcg@10", "recall@10")


def _scenario(seed: int) -> tuple[list[str], dict[str, dict[str, float]], dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(40, 160))
    ids = [f"q{i}" for i in range(n)]
    before: dict[str, dict[str, float]] = {}
    after: dict[str, np.ndarray] = {}
    for metric in METRICS:
        base = rng.uniform(0, 1, n)
        drop = rng.uniform(0.0, 0.3)
        after[metric] = np.clip(base - drop + rng.normal(0, 0.2, n), 0, 1)
        before[metric] = dict(zip(ids, base.tolist(), strict=True))
    return ids, before, after


@pytest.mark.timeout(600)
def test_each_of_several_gates_runs_at_alpha_over_the_gates() -> None:
    checked = 0
    for seed in range(10):
        ids, before, after = _scenario(seed)
        rng = np.random.default_rng(seed + 100)
        k = int(rng.integers(1, len(METRICS) + 1))
        alpha = float(rng.choice([0.05, 0.1]))
        thresholds = rng.uniform(0.0, 0.2, k)
        gates = [(None, METRICS[g], float(thresholds[g]), ids) for g in range(k)]

        def ask(
            indices: list[int], after: dict[str, np.ndarray] = after
        ) -> list[dict[str, float | None]]:
            return [{m: float(after[m][i]) for m in METRICS} for i in indices]

        asked, result = run_sequentially(
            ids, ask, gates, before, alpha=alpha, seed=seed, points=801
        )
        assert asked == sequential_order(ids, seed)[: len(asked)]
        for g, gate in enumerate(result.gates):
            metric = METRICS[g]
            alone = BettingSequence(len(ids), alpha / k, 801)
            for index in asked:
                alone.update((after[metric][index] - before[metric][ids[index]] + 1) / 2)
            bounds = alone.bounds()
            assert bounds is not None
            assert (gate.low, gate.high) == pytest.approx(
                (2 * bounds[0] - 1, 2 * bounds[1] - 1), abs=1e-12
            ), (seed, k, g)
            if k > 1 and len(asked) > 5:
                # At the whole alpha the sequence would be narrower: the split is real.
                unsplit = BettingSequence(len(ids), alpha, 801)
                for index in asked:
                    unsplit.update((after[metric][index] - before[metric][ids[index]] + 1) / 2)
                wide = unsplit.bounds()
                assert wide is not None
                assert wide[1] - wide[0] <= bounds[1] - bounds[0]
                checked += wide[1] - wide[0] < bounds[1] - bounds[0]
    assert checked > 3
    assert GRID_POINTS > 801
