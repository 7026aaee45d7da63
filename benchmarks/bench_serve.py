"""``retrievalkit serve``: start-up on a store of 1,000 runs, and page times at 100k questions.

Every figure is from a real ``retrievalkit serve`` process on 127.0.0.1 (a free port),
asked over HTTP as a browser would:

- Start-up: a SQLite store holding ``--runs`` (1,000) runs of the demo set (one real
  ``eval``, then copies under new run ids and times saved through the store API, as
  bench_scale.py builds its long history). Measured from the process's start until
  it prints that it listens, and until it has answered its first page (the list of
  the store's sets and retrievers, which reads every run's summary), best and median
  of ``--repeats`` starts. Goal: the first page within 1 s.
- The history page of that key (a chart and table over 1,000 runs).
- At ``--questions`` (100,000, the scale of docs/scale.md): two ``eval`` runs of the
  synthetic set with the instant retriever (bench_overhead.py's), the second gated
  against the first; then history, compare (paired differences of every metric),
  question (both rankings) and the judging queue of the second run (every unjudged
  document of the top 10, 100k questions deep). Each page's first answer (cold: its
  run's columns read, the comparison computed, the queue built) and the median of the
  next ``--repeats`` (warm). Goal: warm pages within 200 ms.

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


def retrievalkit(folder: Path, *arguments: str) -> str:
    env = worker_env()
    env["NO_COLOR"] = "1"
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
    env = worker_env()
    env.pop("RETRIEVALKIT_SERVE_TOKEN", None)
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
    for _ in range(repeats):
        began = time.perf_counter()
        with serving(folder, "--store", url) as (address, listening, process):
            found["listening CPU"].append(cpu_seconds(process.pid))
            found["listening"].append(listening)
            found["first page"].append(first_answer(address + "/", began, f">{runs}<"))
            found["first page CPU"].append(cpu_seconds(process.pid))
    return found


def timed_pages(
    address: str, pages: dict[str, tuple[str, str]], repeats: int, cookies: dict[str, str]
) -> dict[str, tuple[float, float]]:
    """Each page's (cold, warm median) seconds."""
    import httpx

    client = httpx.Client(base_url=address, timeout=300, cookies=cookies)
    results = {}
    for name, (path, must) in pages.items():
        cold = fetch(client, path, must)
        warm = statistics.median(fetch(client, path, must) for _ in range(repeats))
        results[name] = (cold, warm)
        progress(f"{name}: cold {seconds(cold)}, warm {seconds(warm)}")
    return results


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
        many = root / "many"
        many.mkdir()
        progress(f"saving {args.runs:,} runs")
        url = many_runs(many, args.runs)
        load_start = load()
        starts = measure_start(many, url, args.runs, args.repeats)
        with serving(many, "--store", url) as (address, _, _):
            first_answer(address + "/", time.perf_counter(), f">{args.runs}<")
            few = timed_pages(
                address,
                {
                    f"keys over {args.runs:,} runs": ("/", f">{args.runs}<"),
                    f"history over {args.runs:,} runs": (
                        "/history?set=demo&retriever=bm25-demo&limit=20",
                        f"{args.runs} runs",
                    ),
                },
                args.repeats,
                {},
            )

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
        load_pages = load()
        with serving(big, "--store", f"sqlite:///{store}") as (address, _, _):
            first_answer(address + "/static/serve.css", time.perf_counter(), "body")
            pages = timed_pages(
                address,
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

    rows = [
        (what, seconds(min(starts[what])), seconds(statistics.median(starts[what])),
         seconds(statistics.median(starts[f"{what} CPU"])))
        for what in ("listening", "first page")
    ]  # fmt: skip
    print(f"start-up on a store of {args.runs:,} runs (load {load_start:.1f}):")
    print(table(("until", "best", "median", "CPU (median)"), rows))
    print()
    print(f"pages (load {load_pages:.1f} at {args.questions:,} questions):")
    shown = [(name, seconds(cold), seconds(warm)) for name, (cold, warm) in few.items()]
    shown += [
        (f"{name} at {args.questions:,} questions", seconds(cold), seconds(warm))
        for name, (cold, warm) in pages.items()
    ]
    print(table(("page", "first (cold)", "then (median)"), shown))
    print()
    first_page = statistics.median(starts["first page"])
    print(
        goal(
            first_page < START_GOAL,
            f"serve answers its first page {seconds(first_page)} after starting on a store of "
            f"{args.runs:,} runs (median of {args.repeats}; goal < {START_GOAL:.0f} s)",
        )
    )
    for name, (_, warm) in [*few.items(), *pages.items()]:
        where = name if "runs" in name else f"{name} at {args.questions:,} questions"
        print(
            goal(
                warm < PAGE_GOAL,
                f"serve page {where}: {seconds(warm)} (goal < {PAGE_GOAL * 1000:.0f} ms)",
            )
        )
    slowest = max(warm for _, warm in pages.values())
    figure = ", ".join(
        f"{name} {seconds(warm)} (first {seconds(cold)})" for name, (cold, warm) in pages.items()
    )
    full = args.questions >= 100_000
    size = "" if full else f"measured at {args.questions:,} questions only, not 100k: "
    print(
        target(
            "serve",
            full and slowest <= PAGE_GOAL,
            f"{size}slowest {seconds(slowest)}; {figure} (median of {args.repeats} after the "
            f"first; load {load_pages:.2f} before, {load_now()} after)",
        )
    )
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except Disagreement as error:
        print(f"disagreement: {error}")
        raise SystemExit(1) from None
