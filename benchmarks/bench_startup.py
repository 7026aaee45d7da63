"""Start-up: ``retrievalkit --version``, ``--help``, ``list`` and ``eval --help`` against
``python -c pass``, with every plugin of this repository installed.

Each command runs as a fresh process, the way a user or a CI step starts it (the
installed ``retrievalkit`` console script when there is one, else ``python -m
retrievalkit``), in an empty folder so no config file is read. The commands take
turns, and each keeps its best of ``--repeats`` runs. The goal (under 0.25 s over bare
Python) holds with every plugin installed, so the benchmark first checks that each
plugin package under ``plugins/`` is installed (``nox -s bench`` installs them) and
says which are missing; ``--allow-missing`` measures anyway.

    python benchmarks/bench_startup.py [--repeats 15] [--allow-missing]
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

from harness import REPO, goal, load_now, seconds, table, target, worker_env

GOAL_SECONDS = 0.25
#: The release's start-up row (targets.py): ``--help`` and ``list`` over bare python.
TARGET_SECONDS = 0.1
#: The commands the goal is about (``--version`` is measured too, for comparison).
GOALS = ("retrievalkit --help", "retrievalkit list", "retrievalkit eval --help")


def _repository_plugins() -> list[str]:
    """The distribution names of the plugin packages in this repository."""
    import tomllib

    names = []
    for pyproject in sorted(REPO.glob("plugins/*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
        names.append(project["name"])
    return names


def _installed(names: list[str]) -> tuple[list[str], list[str]]:
    """(installed, missing) among ``names``, in the interpreter the benchmark runs."""
    import importlib.metadata

    installed, missing = [], []
    for name in names:
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
        else:
            installed.append(name)
    return installed, missing


def _command() -> list[str]:
    # The console script next to this interpreter is what `nox -s bench` installed.
    script = Path(sys.executable).with_name("retrievalkit")
    if script.exists():
        return [str(script)]
    found = shutil.which("retrievalkit")
    return [found] if found else [sys.executable, "-m", "retrievalkit"]


def _environment() -> dict[str, str]:
    """The benchmark's environment, writing .pyc files: an installed package has its
    bytecode (pip and uv compile it), so a start-up without it is not what users see."""
    env = worker_env()
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _wall(command: list[str], folder: str) -> float:
    began = time.perf_counter()
    completed = subprocess.run(
        command, cwd=folder, env=_environment(), capture_output=True, check=False
    )
    elapsed = time.perf_counter() - began
    if completed.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{completed.stderr.decode()[-2000:]}")
    return elapsed


def _largest_imports(command: list[str], count: int = 8) -> list[tuple[str, str]]:
    """The top-level imports of one run of ``command`` taking the most time, cumulated."""
    python = [sys.executable, "-X", "importtime"]
    if command[0] != sys.executable:
        python += ["-m", "retrievalkit"]
        command = command[1:]
    with tempfile.TemporaryDirectory() as folder:
        completed = subprocess.run(
            [*python, *command], cwd=folder, env=_environment(), capture_output=True, text=True
        )
    found = []
    for line in completed.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) == 3 and parts[1].strip().isdigit() and not parts[2].startswith("  "):
            found.append((int(parts[1]), parts[2].strip()))
    return [(name, seconds(micro / 1e6)) for micro, name in sorted(found, reverse=True)[:count]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument(
        "--allow-missing",
        action="store_true",
        help="measure even when a plugin package of the repository is not installed",
    )
    args = parser.parse_args()
    installed, missing = _installed(_repository_plugins())
    if missing and not args.allow_missing:
        print("## Start-up: not measured")
        for name in GOALS:
            print(
                goal(
                    False,
                    f"{name} under {GOAL_SECONDS} s over bare python: not measured, the "
                    f"plugins {', '.join(missing)} are not installed (nox -s bench installs "
                    "them; --allow-missing measures anyway)",
                )
            )
        print(
            target(
                "startup",
                False,
                f"not measured: the plugins {', '.join(missing)} are not installed",
            )
        )
        return 0
    rk = _command()
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "retrievalkit --version": [*rk, "--version"],
        "retrievalkit --help": [*rk, "--help"],
        "retrievalkit list": [*rk, "list"],
        "retrievalkit eval --help": [*rk, "eval", "--help"],
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
    print(f"command: {' '.join(rk)}")
    print(f"plugins installed: {', '.join(installed) or 'none'}")
    if missing:
        print(f"NOT installed: {', '.join(missing)}")
    print()
    rows = [(name, seconds(value), seconds(value - bare)) for name, value in best.items()]
    print(table(("command", "wall", "over bare python"), rows))
    print()
    print("largest top-level imports of `retrievalkit list` (python -X importtime, one run):")
    print(table(("module", "cumulative"), _largest_imports([*rk, "list"])))
    print()
    plugins = "every plugin of the repository" if not missing else f"{len(installed)} plugins"
    for name in GOALS:
        extra = best[name] - bare
        print(
            goal(
                extra < GOAL_SECONDS,
                f"{name} under {GOAL_SECONDS} s over bare python with {plugins} installed: "
                f"{seconds(extra)}",
            )
        )
    over = {name: best[name] - bare for name in ("retrievalkit --help", "retrievalkit list")}
    figure = ", ".join(f"{name} {seconds(extra)}" for name, extra in over.items())
    installed_all = "" if not missing else f" (NOT installed: {', '.join(missing)})"
    print(
        target(
            "startup",
            not missing and max(over.values()) <= TARGET_SECONDS,
            f"{figure} over bare python {seconds(bare)}, best of {args.repeats}"
            f"{installed_all}; {load_now()}",
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
