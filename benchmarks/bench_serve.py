"""``retrievalkit serve``: start-up on a store of 1,000 runs, and page times at 100k questions.

Every figure is from a real ``retrievalkit serve`` process on 127.0.0.1 (a free port),
asked over HTTP as a browser would, with PYTHONDONTWRITEBYTECODE unset as in
bench_startup.py (an installed package has its bytecode; the first start writes it).
The machine these run on may be shared: each time is given as wall time and as the
server process's own CPU time (Linux /proc), with the load average, and the goals are
judged on both.

- Start-up: a SQLite store holding ``--runs`` (1,000) runs of the demo set (one real
  ``eval``, then copies under new run ids and times saved through the store API, as
  bench_scale.py builds its long history). Measured from the process's start until
  it prints that it listens, and until it has answered its first page (the list of
  the store's sets and retrievers, from the store's index), median of ``--repeats``
  starts. Goal: listening within 1 s.
- The history page of that key (a chart and table over 1,000 runs): asked right after
  the first page (while the server's warm-up, which reads the newest keys' runs and
  computes their default history once it listens, may still be at work: the request
  waits for it), then once the server is idle again, then with another metric (the
  runs are read already; the chart and verdicts are new), then warm. Goal: 200 ms.
- At ``--questions`` (100,000, the scale of docs/scale.md): two ``eval`` runs of the
  synthetic set with the instant retriever (bench_overhead.py's), the second gated
  against the first; then history, compare (paired differences of every metric),
  question (both rankings) and the judging queue of the second run (every unjudged
  document of the top 10, 100k questions deep). Each page's first answer (its run's
  columns read, the comparison computed, the queue built) and the median of the next
  ``--repeats``. Goal: 200 ms.

Every page must answer 200 with the content it is for (the runs listed, a table of
differences, the rankings, the queue's progress); otherwise the benchmark exits 1.

    python benchmarks/bench_serve.py [--runs 1000] [--questions 100000] [--repeats 5]
                                     [--quick]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_overhead import prepare, run_eval
from harness import goal, load_now, seconds, table, target, worker_env

START_GOAL = 1.0
PAGE_GOAL = 0.2


class Disagreement(Exception):
    """A page that does not show what it is for: its time means nothing."""


def load() -> float:
    return os.getloadavg()[0]


def progress(text: str) -> None:
    sys.stderr.write(f"[{time.strftime('%H:%M:%S')}] {text}\n")
    sys.stderr.flush()


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds a process has used so far (Linux /proc), else NaN: on a
    busy shared machine this says what the wall times alone cannot."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def environment() -> dict[str, str]:
    """The benchmark's environment, writing .pyc files (see the module documentation)."""
    env = worker_env()
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("RETRIEVALKIT_SERVE_TOKEN", None)
    env["NO_COLOR"] = "1"
    return env


def retrievalkit(folder: Path, *arguments: str) -> str:
    env = environment()
    done = subprocess.run(
        [sys.executable, "-m", "retrievalkit", *arguments],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"retrievalkit {' '.join(arguments)} failed: {done.stderr[-2000:]}")
    return done.stdout


def many_runs(folder: Path, runs: int) -> str:
    """A SQLite store with ``runs`` runs of demo × bm25-demo; returns its URL."""
    import attrs

    from retrievalkit import open_store

    url = f"sqlite:///{folder / 'runs.sqlite3'}"
    retrievalkit(
        folder, "eval", "--set", "demo", "--retriever", "bm25-demo", "--store", url, "--quiet"
    )
    store = open_store(url)
    (record,) = store.runs("demo", "bm25-demo")
    moment = dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc)
    for index in range(1, runs):
        when = moment + dt.timedelta(hours=index)
        store.save(
            attrs.evolve(
                record,
                run_id=f"{when:%Y%m%dT%H%M%SZ}-{index:08x}",
                manifest=attrs.evolve(
                    record.manifest, created_at=when.isoformat().replace("+00:00", "Z")
                ),
            )
        )
    return url


@contextmanager
def serving(folder: Path, *arguments: str) -> Iterator[tuple[str, float, subprocess.Popen[str]]]:
    """A serve process; yields its URL, the seconds until it listened, and the process."""
    env = environment()
    began = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "retrievalkit", "serve", "--port", "0", *arguments],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        listening = time.perf_counter() - began
        found = re.search(r"on (http://\S+?)/?(;| |$)", line)
        if found is None:
            raise Disagreement(f"serve did not start: {line!r}")
        yield found.group(1), listening, process
    finally:
        process.terminate()
        process.wait(timeout=60)
        if process.stdout is not None:
            process.stdout.close()


def fetch(client: object, path: str, must: str) -> float:
    import httpx

    assert isinstance(client, httpx.Client)
    began = time.perf_counter()
    answer = client.get(path)
    elapsed = time.perf_counter() - began
    if answer.status_code != 200 or must not in answer.text:
        raise Disagreement(f"{path}: {answer.status_code}, {must!r} not on the page")
    return elapsed


def first_answer(url: str, began: float, must: str) -> float:
    """Seconds from ``began`` until ``url`` answered with ``must`` on the page."""
    import httpx

    while True:
        try:
            answer = httpx.get(url, timeout=60)
        except httpx.TransportError:
            time.sleep(0.005)
            continue
        if answer.status_code != 200 or must not in answer.text:
            raise Disagreement(f"{url}: {answer.status_code}, {must!r} not on the page")
        return time.perf_counter() - began


def measure_start(folder: Path, url: str, runs: int, repeats: int) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {
        "listening": [],
        "first page": [],
        "listening CPU": [],
        "first page CPU": [],
    }
    # The first start writes the bytecode the measured ones read.
    with serving(folder, "--store", url) as (address, _, _):
        first_answer(address + "/", time.perf_counter(), f">{runs}<")
    for _ in range(repeats):
        began = time.perf_counter()
        with serving(folder, "--store", url) as (address, listening, process):
            found["listening CPU"].append(cpu_seconds(process.pid))
            found["listening"].append(listening)
            found["first page"].append(first_answer(address + "/", began, f">{runs}<"))
            found["first page CPU"].append(cpu_seconds(process.pid))
    return found


def idle(pid: int, *, quiet: float = 0.5, limit: float = 120.0) -> float:
    """Wait until the process used no CPU for ``quiet`` seconds; its CPU seconds then."""
    deadline = time.monotonic() + limit
    used = cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(quiet)
        now = cpu_seconds(pid)
        if now - used < 0.01:
            return now
        used = now
    return used


@attrs.frozen
class Timed:
    """One page's first answer and its later answers: wall seconds, and the server's CPU."""

    cold: float
    cold_cpu: float
    warm: float
    warm_cpu: float


def timed(client: object, pid: int, path: str, must: str, repeats: int) -> Timed:
    before = cpu_seconds(pid)
    cold = fetch(client, path, must)
    after = cpu_seconds(pid)
    walls, cpus = [], []
    for _ in range(repeats):
        began = cpu_seconds(pid)
        walls.append(fetch(client, path, must))
        cpus.append(cpu_seconds(pid) - began)
    return Timed(cold, after - before, statistics.median(walls), statistics.median(cpus))


def client_for(address: str, cookies: dict[str, str]) -> object:
    import httpx

    return httpx.Client(base_url=address, timeout=300, cookies=cookies)


def timed_pages(
    address: str,
    pid: int,
    pages: dict[str, tuple[str, str]],
    repeats: int,
    cookies: dict[str, str],
) -> dict[str, Timed]:
    client = client_for(address, cookies)
    results = {}
    for name, (path, must) in pages.items():
        results[name] = found = timed(client, pid, path, must, repeats)
        progress(f"{name}: first {seconds(found.cold)}, then {seconds(found.warm)}")
    return results


def wall_and_cpu(wall: float, cpu: float) -> str:
    return f"{seconds(wall)} wall, {seconds(cpu)} CPU"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--questions", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="100 runs, 10k questions, 2 repeats")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.questions, args.repeats = 100, 10_000, 2

    print("## serve: start-up and page times")
    with tempfile.TemporaryDirectory(prefix="rk-bench-serve-") as temporary:
        root = Path(temporary)
        history = _history_over_many_runs(root, args)
        pages, load_pages = _pages_at_many_questions(root, args)
    _print_tables(args, history, pages, load_pages)
    _print_goals(args, history, pages, load_pages)
    return 0


@attrs.frozen
class HistoryTimes:
    """serve's start-up and history pages on a store of many runs."""

    load_start: float
    starts: dict[str, list[float]]
    keys: Timed
    at_once: float
    at_once_cpu: float
    settled: Timed
    other: Timed
    load_history: float

    def median(self, name: str) -> float:
        return statistics.median(self.starts[name])


def _history_over_many_runs(root: Path, args: argparse.Namespace) -> HistoryTimes:
    """Start-up and the history pages over ``args.runs`` stored runs."""
    many = root / "many"
    many.mkdir()
    progress(f"saving {args.runs:,} runs")
    url = many_runs(many, args.runs)
    load_start = load()
    starts = measure_start(many, url, args.runs, args.repeats)
    history = "/history?set=demo&retriever=bm25-demo"
    must = f"{args.runs} runs"
    with serving(many, "--store", url) as (address, _, process):
        first_answer(address + "/", time.perf_counter(), f">{args.runs}<")
        client = client_for(address, {})
        keys = timed(client, process.pid, "/", f">{args.runs}<", args.repeats)
        before = cpu_seconds(process.pid)
        at_once = fetch(client, history, must)
        at_once_cpu = cpu_seconds(process.pid) - before
        idle(process.pid)
        settled = timed(client, process.pid, history, must, args.repeats)
        other = timed(client, process.pid, history + "&metric=ndcg@10", must, args.repeats)
    load_history = load()
    return HistoryTimes(
        load_start, starts, keys, at_once, at_once_cpu, settled, other, load_history
    )


def _pages_at_many_questions(
    root: Path, args: argparse.Namespace
) -> tuple[dict[str, Timed], float]:
    """Each page's first and later views on two runs of ``args.questions`` questions, and
    the load before them."""
    big = root / "big"
    big.mkdir()
    progress(f"preparing {args.questions:,} questions")
    prepare(big, args.questions)
    with (big / "retrievalkit.toml").open("a", encoding="utf-8") as config:
        config.write(f'\n[sets.golden]\npath = "{big / "golden.jsonl"}"\n')
    store = big / "runs.sqlite3"
    progress("two evals")
    run_eval(big, store)
    run_eval(big, store)
    listed = retrievalkit(
        big, "history", "--set", "golden", "--retriever", "instant", "--store",
        f"sqlite:///{store}", "--format", "json",
    )  # fmt: skip
    newer, older = (row["run_id"] for row in __import__("json").loads(listed))
    with serving(big, "--store", f"sqlite:///{store}") as (address, _, process):
        first_answer(address + "/static/serve.css", time.perf_counter(), "body")
        idle(process.pid)
        load_pages = load()
        pages = timed_pages(
            address,
            process.pid,
            {
                "history": ("/history?set=golden&retriever=instant", "2 runs"),
                "compare": (f"/compare?run={newer}&other={older}", 'id="deltas"'),
                "question": (
                    f"/question?run={newer}&id=q17&other={older}",
                    "synthetic question 17",
                ),
                "judge": (f"/judge?run={newer}", "graded ("),
            },
            args.repeats,
            {"retrievalkit_grader": "bench"},
        )
    return pages, load_pages


def _print_tables(
    args: argparse.Namespace, history: HistoryTimes, pages: dict[str, Timed], load_pages: float
) -> None:
    """The start-up, history and page tables."""
    keys, other = history.keys, history.other
    at_once, at_once_cpu, settled = history.at_once, history.at_once_cpu, history.settled
    load_start, load_history = history.load_start, history.load_history

    print(f"start-up on a store of {args.runs:,} runs (load {load_start:.1f}), median of "
          f"{args.repeats} starts:")  # fmt: skip
    print(
        table(
            ("until", "wall", "CPU"),
            [(what, seconds(history.median(what)), seconds(history.median(f"{what} CPU")))
             for what in ("listening", "first page")],
        )
    )  # fmt: skip
    print()
    print(f"history over {args.runs:,} runs (load {load_history:.1f}):")
    rows = [
        ("keys (first, then median)", wall_and_cpu(keys.cold, keys.cold_cpu),
         wall_and_cpu(keys.warm, keys.warm_cpu)),
        ("history right after the first page", wall_and_cpu(at_once, at_once_cpu), ""),
        ("history once the server is idle", wall_and_cpu(settled.cold, settled.cold_cpu),
         wall_and_cpu(settled.warm, settled.warm_cpu)),
        ("history with another metric", wall_and_cpu(other.cold, other.cold_cpu),
         wall_and_cpu(other.warm, other.warm_cpu)),
    ]  # fmt: skip
    print(table(("page", "first", "then (median)"), rows))
    print()
    print(f"pages at {args.questions:,} questions (load {load_pages:.1f}):")
    print(
        table(
            ("page", "first", "then (median)"),
            [(name, wall_and_cpu(found.cold, found.cold_cpu),
              wall_and_cpu(found.warm, found.warm_cpu)) for name, found in pages.items()],
        )
    )  # fmt: skip
    print()


def _both(value_wall: float, value_cpu: float, limit: float, text: str) -> None:
    """A time's CPU and wall lines against its goal."""
    print(goal(value_cpu < limit, f"{text}: {seconds(value_cpu)} CPU (goal < {seconds(limit)})"))
    print(
        goal(
            value_wall < limit,
            f"{text}: {seconds(value_wall)} wall at load {load():.1f} (goal < {seconds(limit)})",
        )
    )


def _print_goals(
    args: argparse.Namespace, history: HistoryTimes, pages: dict[str, Timed], load_pages: float
) -> None:
    """Each time against its goal, then the serve target's line."""
    median, at_once, at_once_cpu = history.median, history.at_once, history.at_once_cpu
    settled, other, both = history.settled, history.other, _both
    both(median("listening"), median("listening CPU"), START_GOAL,
         f"serve listens on a store of {args.runs:,} runs")  # fmt: skip
    both(median("first page"), median("first page CPU"), START_GOAL,
         f"serve answers its first page on a store of {args.runs:,} runs")  # fmt: skip
    both(at_once, at_once_cpu, PAGE_GOAL,
         f"history over {args.runs:,} runs, asked right after the first page")  # fmt: skip
    for name, found in (("history over", settled), ("history with another metric over", other)):
        both(found.cold, found.cold_cpu, PAGE_GOAL, f"{name} {args.runs:,} runs, first view")
        both(found.warm, found.warm_cpu, PAGE_GOAL, f"{name} {args.runs:,} runs, then")
    for name, found in pages.items():
        where = f"{name} at {args.questions:,} questions"
        both(found.cold, found.cold_cpu, PAGE_GOAL, f"{where}, first view")
        both(found.warm, found.warm_cpu, PAGE_GOAL, f"{where}, then")
    # Each page, its first view included: that is the one a user opening it waits for.
    slowest = max(max(found.cold, found.warm) for found in pages.values())
    figure = ", ".join(
        f"{name} first {seconds(found.cold)}, then {seconds(found.warm)}"
        for name, found in pages.items()
    )
    full = args.questions >= 100_000
    size = "" if full else f"measured at {args.questions:,} questions only, not 100k: "
    print(
        target(
            "serve",
            full and slowest <= PAGE_GOAL,
            f"{size}slowest {seconds(slowest)} (first views included); {figure} (then: median "
            f"of {args.repeats} after the first; load {load_pages:.2f} before, "
            f"{load_now()} after)",
        )
    )


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except Disagreement as error:
        print(f"disagreement: {error}")
        raise SystemExit(1) from None
