"""What every benchmark shares: fresh worker processes, a clean environment, tables and goals.

A benchmark script runs each measurement in a fresh ``python`` process (a worker: the
same script with ``--worker``), so start-up, imports and first-call costs count the
same for every tool, and one tool's warm caches never help another. Workers print one
JSON line; the parent keeps the best of a few repeats, because the machine is shared
and the least disturbed run is the closest to what the code costs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parent
REPO = BENCHMARKS.parent
#: A benchmark exits with this code when something it needs is missing (a service, a
#: peer library): run_all.py reports it as skipped instead of failed.
EXIT_SKIPPED = 77
#: Set on older OpenBLAS builds' behalf on some processors; they slow a current numpy
#: down, so benchmark processes run without them (tests and CI keep them).
_OPENBLAS_OVERRIDES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def worker_env() -> dict[str, str]:
    """The environment for benchmark processes: ours, less the OpenBLAS core overrides."""
    return {key: value for key, value in os.environ.items() if key not in _OPENBLAS_OVERRIDES}


def run_worker(script: str | Path, arguments: Sequence[str], *, timeout: float = 900) -> Any:
    """Run ``python SCRIPT --worker ARGS`` in a fresh process; return its last JSON line."""
    completed = subprocess.run(
        [sys.executable, str(script), "--worker", *arguments],
        env=worker_env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(
            f"worker {Path(script).name} {' '.join(arguments)} failed "
            f"({completed.returncode}):\n{completed.stderr[-4000:]}"
        )
    lines = [line for line in completed.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"worker {' '.join(arguments)} printed no result:\n{completed.stdout}")
    return json.loads(lines[-1])


def emit(result: Any) -> None:
    """A worker's answer to its parent: one JSON line on stdout."""
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


def blas_kernel() -> str:
    """Which OpenBLAS kernel numpy runs in this process (numpy's BLAS does the matrix work)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "unknown (threadpoolctl not installed)"
    import numpy  # noqa: F401  (loads the BLAS library that threadpool_info inspects)

    for pool in threadpool_info():
        if pool.get("user_api") == "blas":
            kernel = f"{pool.get('internal_api')} {pool.get('architecture')}"
            return f"{kernel}, {pool.get('num_threads')} threads"
    return "no BLAS found"


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain fixed-width text table: the first column left-aligned, the others right."""
    cells = [[str(cell) for cell in header], *[[str(cell) for cell in row] for row in rows]]
    widths = [max(len(row[column]) for row in cells) for column in range(len(header))]
    lines = []
    for index, row in enumerate(cells):
        parts = [
            cell.ljust(widths[column]) if column == 0 else cell.rjust(widths[column])
            for column, cell in enumerate(row)
        ]
        lines.append("  ".join(parts).rstrip())
        if index == 0:
            lines.append("  ".join("-" * width for width in widths))
    return "\n".join(lines)


def goal(met: bool, text: str) -> str:
    """One goal line; run_all.py collects every line that starts with ``goal:``."""
    return f"goal: {'MET ' if met else 'MISSED'} {text}"


def target(key: str, met: bool, figure: str) -> str:
    """The ``goal:`` line of one row of targets.py's table, its figure and ``[KEY]`` at the end.

    Pass ``met=False`` for a figure measured at another size than the goal's.
    """
    from targets import TARGETS

    what, wanted, _ = TARGETS[key]
    return f"{goal(met, f'{what} ({wanted}): {figure}')} [{key}]"


def load_now() -> str:
    """``load 1.23``: the one-minute load average, said with every figure on a shared machine."""
    return f"load {os.getloadavg()[0]:.2f}"


def seconds(value: float) -> str:
    return f"{value:.3f} s" if value >= 0.1 else f"{value * 1000:.1f} ms"


def ratio(value: float) -> str:
    return f"{value:.3f}x"
