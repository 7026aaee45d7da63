"""The 27-configuration sweep of bench_sweep.py in this process and on a two-worker Ray cluster.

A Ray head with two CPUs (two workers) is started on 127.0.0.1 for the run and stopped
after it. Both sweeps must agree on every configuration's metrics and on the winner's
confirmation, or the benchmark fails. Skipped (exit code 77) without the [ray] extra or
without SciFact.

    python benchmarks/bench_sweep_ray.py
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_sweep import CONFIG, DATA
from harness import EXIT_SKIPPED, seconds, table
from ray_head import ray_head


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    if not (DATA / "corpus.jsonl").is_file():
        print(f"SciFact is missing ({DATA})")
        return EXIT_SKIPPED
    try:
        import ray  # noqa: F401  (installed? the head below needs it)
    except ImportError:
        print("Ray is not installed: pip install 'retrievalkit-eval[ray]'")
        return EXIT_SKIPPED
    import retrievalkit as rk

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "retrievalkit.toml"
        path.write_text(CONFIG.format(corpus=DATA / "corpus.jsonl"), encoding="utf-8")
        config = rk.load_config(path)
        golden = rk.load_set(DATA)
        began = time.perf_counter()
        local = rk.sweep(golden, "rrf", config=config)
        here = time.perf_counter() - began
        with ray_head(cpus=2) as address:
            began = time.perf_counter()
            remote = rk.sweep(golden, "rrf", config=config, executor="ray", ray_address=address)
            there = time.perf_counter() - began
    agree = [c.metrics for c in local.configurations] == [
        c.metrics for c in remote.configurations
    ] and local.winner.confirmation == remote.winner.confirmation
    print("## sweep on Ray: 27 RRF configurations, SciFact (300 questions)\n")
    rows = [
        ["in this process (--executor local)", seconds(here), "1.000x"],
        ["two Ray workers here (--executor ray)", seconds(there), f"{there / here:.3f}x"],
    ]
    print(table(["sweep", "time", "vs local"], rows))
    print(
        "\nthe Ray time includes connecting and building both BM25 indexes on each worker; "
        f"winner {dict(remote.winner.options)} on both: {agree}"
    )
    if not agree:
        print("the local and the Ray sweeps disagree")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
