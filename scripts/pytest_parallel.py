"""Run a test folder as a few pytest processes side by side, one share of its files each.

`nox -s tests` runs the core suite this way on the machine's cores, so that CI keeps within
its time: each process is an ordinary pytest run (its own session fixtures and temporary
folders), and the files are shared out by size, largest first, onto the least-loaded
process. Each process's output is printed whole when it ends; the exit code is the first
failing process's, else 0.

    python scripts/pytest_parallel.py [--jobs N] [--ignore PATH ...] PATH [PATH ...]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def test_files(paths: list[str], ignored: list[str]) -> list[Path]:
    """Every test_*.py under ``paths`` (or the files named), outside the ``ignored`` paths."""
    skip = [Path(path).resolve() for path in ignored]
    found: list[Path] = []
    for path in map(Path, paths):
        candidates = [path] if path.is_file() else sorted(path.rglob("test_*.py"))
        for candidate in candidates:
            resolved = candidate.resolve()
            if not any(resolved == s or s in resolved.parents for s in skip):
                found.append(candidate)
    return found


def shares(files: list[Path], jobs: int) -> list[list[Path]]:
    """The files in ``jobs`` groups of about equal size (largest file first, onto the
    smallest group), each group in name order."""
    groups: list[list[Path]] = [[] for _ in range(jobs)]
    sizes = [0] * jobs
    for file in sorted(files, key=lambda f: (-f.stat().st_size, str(f))):
        smallest = sizes.index(min(sizes))
        groups[smallest].append(file)
        sizes[smallest] += file.stat().st_size
    return [sorted(group) for group in groups if group]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--ignore", action="append", default=[])
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    args = parser.parse_args()
    files = test_files(args.paths, args.ignore)
    if not files:
        print("no test files found", file=sys.stderr)
        return 5
    groups = shares(files, max(1, args.jobs))
    began = time.monotonic()
    code = 0
    with contextlib.ExitStack() as logs:
        running = []
        for number, group in enumerate(groups, start=1):
            log = logs.enter_context(
                tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
            )
            command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *map(str, group)]
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
            running.append((number, group, process, log))
            print(f"share {number}: {len(group)} files, pytest pid {process.pid}", flush=True)
        for number, group, process, log in running:
            returned = process.wait()
            log.seek(0)
            print(f"\n===== share {number} of {len(groups)} ({len(group)} files): exit {returned}")
            sys.stdout.write(log.read())
            if returned and not code:
                code = returned
    print(f"\n{len(groups)} shares done in {time.monotonic() - began:.0f} s; exit {code}")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
