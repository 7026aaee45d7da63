"""Start-up: ``retrievalkit --version``, ``--help`` and ``list`` against ``python -c pass``.

Each command runs as a fresh process, the way a user or a CI step starts it (the
installed ``retrievalkit`` console script when there is one, else ``python -m
retrievalkit``), in an empty folder so no config file is read. The four commands take
turns, and each keeps its best of ``--repeats`` runs.

    python benchmarks/bench_startup.py [--repeats 15]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import goal, seconds, table, worker_env

GOAL_SECONDS = 0.25


def _command() -> list[str]:
    # The console script next to this interpreter is what `nox -s bench` installed.
    script = Path(sys.executable).with_name("retrievalkit")
    if script.exists():
        return [str(script)]
    found = shutil.which("retrievalkit")
    return [found] if found else [sys.executable, "-m", "retrievalkit"]


def _wall(command: list[str], folder: str) -> float:
    began = time.perf_counter()
    completed = subprocess.run(
        command, cwd=folder, env=worker_env(), capture_output=True, check=False
    )
    elapsed = time.perf_counter() - began
    if completed.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{completed.stderr.decode()[-2000:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    rk = _command()
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "retrievalkit --version": [*rk, "--version"],
        "retrievalkit --help": [*rk, "--help"],
        "retrievalkit list": [*rk, "list"],
    }
    best = dict.fromkeys(cases, float("inf"))
    with tempfile.TemporaryDirectory() as folder:
        for command in cases.values():
            _wall(command, folder)  # first run warms the OS file cache and .pyc files
        for _ in range(args.repeats):
            for name, command in cases.items():
                best[name] = min(best[name], _wall(command, folder))
    bare = best["python -c pass"]
    print("## Start-up: fresh processes, best of", args.repeats)
    print(f"command: {' '.join(rk)}\n")
    rows = [(name, seconds(value), seconds(value - bare)) for name, value in best.items()]
    print(table(("command", "wall", "over bare python"), rows))
    print()
    for name, value in list(best.items())[1:]:
        extra = value - bare
        print(
            goal(
                extra < GOAL_SECONDS,
                f"{name} under {GOAL_SECONDS} s over bare python: {seconds(extra)}",
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
