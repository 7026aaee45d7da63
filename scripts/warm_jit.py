"""Compile ranx's numba functions into their on-disk cache, once per venv.

ranx compiles each metric on its first call and keeps the machine code in numba's cache
beside its sources. `nox -s tests` runs this at install time, so that the tests comparing
retrievalkit's numbers with ranx's (tests/test_document_ids.py, tests/test_ndcg_exp.py)
load compiled code instead of compiling it under the load of a whole CI run.
"""

from __future__ import annotations

import time
import warnings

#: The metrics the tests ask ranx for; each one compiles its own functions.
METRICS = ("hit_rate@1", "ndcg_burges@3")


def main() -> None:
    began = time.perf_counter()
    try:
        import ranx
    except ImportError:
        print("warm_jit: ranx is not installed here; nothing to compile")
        return
    warnings.simplefilter("ignore")  # numba's type-safety notes on ranx's own casts
    judged = ranx.Qrels.from_dict({"q1": {"d1": 1, "d2": 2}, "q2": {"d3": 1}})
    ranked = ranx.Run.from_dict({"q1": {"d1": 1.0, "d4": 0.5}, "q2": {"d3": 0.7, "d1": 0.2}})
    for metric in METRICS:
        ranx.evaluate(judged, ranked, metric)
    took = time.perf_counter() - began
    print(f"warm_jit: ranx's {len(METRICS)} metrics ready in {took:.0f} s")


if __name__ == "__main__":
    main()
