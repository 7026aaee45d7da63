"""Run a test folder as a few pytest processes side by side, one share of its files each.

`nox -s tests` runs the core suite this way on the machine's cores, so that CI keeps within
its time: each process is an ordinary pytest run (its own session fixtures and temporary
folders). The files are shared out by how long each took in a recorded run
(tests/durations.json), longest first, onto the least-loaded process; a file not recorded
counts by its size at the recorded files' seconds per byte. Each process's output is
printed whole when it ends; the exit code is the first failing process's to end, else 0.

    python scripts/pytest_parallel.py [--jobs N] [--ignore PATH ...] [--record] PATH [PATH ...]

`--record` rewrites tests/durations.json with this run's time of each file (from each
process's JUnit XML: setup, call and teardown of every test, module fixtures included).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Seconds each test file took in a recorded run, by its path relative to the root.
DURATIONS = ROOT / "tests" / "durations.json"


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


def key_of(file: Path) -> str:
    """A file's name in the durations record: its POSIX path relative to the root."""
    resolved = file.resolve()
    with contextlib.suppress(ValueError):
        return resolved.relative_to(ROOT).as_posix()
    return resolved.as_posix()


def estimates(files: list[Path], recorded: Mapping[str, float]) -> dict[Path, float]:
    """Each file's expected seconds: as recorded, else its size at the recorded rate."""
    sizes = {file: file.stat().st_size for file in files}
    known = {file: recorded[key_of(file)] for file in files if key_of(file) in recorded}
    known_bytes = sum(sizes[file] for file in known)
    rate = sum(known.values()) / known_bytes if known and known_bytes else 1.0
    return {file: known.get(file, sizes[file] * rate) for file in files}


def shares(
    files: list[Path], jobs: int, recorded: Mapping[str, float] | None = None
) -> list[list[Path]]:
    """The files in ``jobs`` groups of about equal expected time (longest file first, onto
    the group with the least so far), each group in name order."""
    expected = estimates(files, recorded or {})
    groups: list[list[Path]] = [[] for _ in range(jobs)]
    loads = [0.0] * jobs
    for file in sorted(files, key=lambda f: (-expected[f], str(f))):
        least = loads.index(min(loads))
        groups[least].append(file)
        loads[least] += expected[file]
    return [sorted(group) for group in groups if group]


def read_durations(path: Path = DURATIONS) -> dict[str, float]:
    """The recorded seconds per file, or nothing when there is no usable record."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        str(name): float(seconds)
        for name, seconds in data.items()
        if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and seconds >= 0
    }


def file_durations(report: Path) -> dict[str, float]:
    """Seconds per test file of one JUnit XML report (``-o junit_family=xunit1``)."""
    totals: dict[str, float] = {}
    for case in ElementTree.parse(report).iter("testcase"):
        name = case.get("file")
        if name:
            key = key_of(ROOT / name)  # relative to pytest's root, this folder
            totals[key] = totals.get(key, 0.0) + float(case.get("time") or 0.0)
    return totals


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--ignore", action="append", default=[])
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--record", action="store_true", help=f"rewrite {key_of(DURATIONS)}")
    args = parser.parse_args()
    files = test_files(args.paths, args.ignore)
    if not files:
        print("no test files found", file=sys.stderr)
        return 5
    recorded = read_durations()
    groups = shares(files, max(1, args.jobs), recorded)
    expected = estimates(files, recorded)
    began = time.monotonic()
    code = 0
    measured: dict[str, float] = {}
    with contextlib.ExitStack() as stack:
        reports = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="shares-")))
        running = []
        for number, group in enumerate(groups, start=1):
            log = stack.enter_context(
                tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
            )
            report = reports / f"share-{number}.xml"
            command = [
                sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                f"--junitxml={report}", "-o", "junit_family=xunit1", *map(str, group),
            ]  # fmt: skip
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
            running.append((number, group, process, log, report))
            guess = sum(expected[file] for file in group)
            about = f", about {guess:.0f} s as recorded" if recorded else ""
            print(f"share {number}: {len(group)} files{about}, pid {process.pid}", flush=True)
        while running:
            ended = [entry for entry in running if entry[2].poll() is not None]
            if not ended:
                time.sleep(0.5)
                continue
            for entry in ended:
                running.remove(entry)
                number, group, process, log, report = entry
                log.seek(0)
                print(
                    f"\n===== share {number} of {len(groups)} ({len(group)} files): "
                    f"exit {process.returncode} after {time.monotonic() - began:.0f} s"
                )
                sys.stdout.write(log.read())
                sys.stdout.flush()
                if process.returncode and not code:
                    code = process.returncode
                with contextlib.suppress(OSError, ElementTree.ParseError):
                    measured.update(file_durations(report))
    print(f"\n{len(groups)} shares done in {time.monotonic() - began:.0f} s; exit {code}")
    if args.record:
        kept = {name: seconds for name, seconds in recorded.items() if (ROOT / name).is_file()}
        record = {**kept, **{name: round(seconds, 1) for name, seconds in measured.items()}}
        DURATIONS.write_text(json.dumps(dict(sorted(record.items())), indent=1) + "\n", "utf-8")
        print(f"{len(measured)} files' times written to {key_of(DURATIONS)}")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
