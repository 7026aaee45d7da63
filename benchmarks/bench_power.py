"""How many questions a continuous metric's drop needs: `power`'s count against simulation.

For each population of real BM25 per-query values (benchmarks/populations.py) and each
drop, a candidate independent of the run (the ``one run`` basis) is simulated: sets of
n differences drawn from the population's paired differences, shifted by the drop,
tested with the gate's sign-flip test. The simulated count is where a probit fit of
the share of detected drops against sqrt(n) crosses 80 %; beside it,
``questions_needed`` today and the plain z-test's count used before 0.3. Goal: today's
count within 10 % of the simulated one in every cell.

    python benchmarks/bench_power.py [--replicates 400]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import numpy.typing as npt
from harness import goal, table
from populations import population
from scipy.special import ndtri

from retrievalkit.stats.paired import sign_flip_p_value
from retrievalkit.stats.power import questions_needed, spread_of_run

CELLS = (("scifact", "ndcg@10"), ("scifact", "rr"), ("cranfield", "ndcg@10"))
DROPS = (0.05, 0.1)
ALPHA = 0.05


def simulated_power(
    centred: npt.NDArray[np.float64], drop: float, n: int, replicates: int, seed: int
) -> float:
    rng = np.random.default_rng(seed)
    found = 0
    for row in range(replicates):
        differences = centred[rng.integers(0, len(centred), n)] - drop
        p_value, _, _ = sign_flip_p_value(differences, permutations=400, seed=row)
        found += p_value < ALPHA and differences.sum() < 0
    return found / replicates


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=400, help="simulated sets per n")
    args = parser.parse_args()
    began = time.perf_counter()
    rows = []
    errors = []
    for collection, metric in CELLS:
        values = population(collection)[metric]
        spread = spread_of_run(values)
        rng = np.random.default_rng(9)
        pairs = values[rng.integers(0, len(values), (2, 20_000))]
        centred = pairs[1] - pairs[0]
        centred -= centred.mean()
        for drop in DROPS:
            needed = questions_needed(drop, spread, ALPHA)
            assert needed is not None
            before = math.ceil(((1.959964 + 0.841621) * spread.sd / drop) ** 2)
            # Power at a grid of n around the count, then the n where a probit line in
            # sqrt(n) fitted to them crosses 80 %: the first grid point past 80 % would
            # be biased low by the noise of each estimate.
            grid = sorted({max(6, round(needed * share)) for share in np.arange(0.6, 1.45, 0.1)})
            powers = np.array(
                [simulated_power(centred, drop, n, args.replicates, seed=n) for n in grid]
            )
            scores = ndtri(np.clip(powers, 0.01, 0.99))
            slope, intercept = np.polyfit(np.sqrt(grid), scores, 1)
            simulated = round(((ndtri(0.8) - intercept) / slope) ** 2)
            errors.append(abs(needed - simulated) / simulated)
            rows.append(
                (f"{collection} {metric}", drop, simulated, needed, before,
                 f"{needed / simulated - 1:+.0%}", f"{before / simulated - 1:+.0%}")
            )  # fmt: skip
    print(
        f"## power: questions needed at 80 % power, alpha {ALPHA} ({args.replicates} sets per n)\n"
    )
    header = ("values", "drop", "simulated", "power now", "before", "now vs sim", "before vs sim")
    print(table(header, rows))
    print(f"\n{time.perf_counter() - began:.0f} s")
    print(goal(max(errors) <= 0.10, "power's count within 10 % of the simulated one"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
