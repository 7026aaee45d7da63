"""The ``postgresql://`` store with a 10,000-question run, against the built-in SQLite store.

One real scored run of 10,000 questions (rankings of 10, every metric at k = 1, 3, 10,
three slices) is saved to each store and read back as ``history`` reads it
(``runs(set, model)``, the whole record), in fresh worker processes: PostgreSQL at
``RETRIEVALKIT_PG_URL`` (default ``postgresql://retrievalkit@127.0.0.1:5433/retrievalkit``,
password from ``PGPASSWORD``) and ``sqlite:///`` in a temporary folder. Values before
times: both stores must give back the very record that was saved. Each path keeps its
best of ``--repeats``.

    python benchmarks/bench_postgres.py [--repeats 3] [--questions 10000]

Exits 77 (run_all.py: skipped) when no PostgreSQL answers or the plugin is not installed.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import EXIT_SKIPPED, emit, goal, ratio, run_worker, seconds, table

DEFAULT_URL = "postgresql://retrievalkit@127.0.0.1:5433/retrievalkit"
#: A shared history must not make saving or reading a run much slower than a local file.
GOAL_RATIO = 5.0


def worker(record_file: str, url: str) -> None:
    """Save the pickled record to ``url``, read its key back; report both times."""
    from retrievalkit.formats.convert import to_json
    from retrievalkit.stores import open_store

    record = pickle.loads(Path(record_file).read_bytes())
    store = open_store(url)
    began = time.perf_counter()
    store.save(record)
    saved = time.perf_counter()
    history = store.runs(record.set, record.model)
    read = time.perf_counter()
    emit(
        {
            "save": saved - began,
            "history": read - saved,
            "same": len(history) == 1 and to_json(history[0]) == to_json(record),
        }
    )


def make_record(questions: int, path: Path) -> None:
    """The plugin tests' real scored run (graded labels, slices, errors), pickled for workers."""
    tests = Path(__file__).resolve().parents[1] / "plugins" / "retrievalkit-postgres" / "tests"
    sys.path.insert(0, str(tests))
    from support import scored_run

    record = scored_run(f"bench-{uuid.uuid4().hex[:8]}", "bench", questions, resamples=200)
    path.write_bytes(pickle.dumps(record))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--questions", type=int, default=10000)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("arguments", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*args.arguments)
        return 0
    try:
        import psycopg
        import retrievalkit_postgres  # noqa: F401
    except ImportError as error:
        print(f"skipped: {error} (pip install -e plugins/retrievalkit-postgres)")
        return EXIT_SKIPPED
    url = os.environ.get("RETRIEVALKIT_PG_URL") or DEFAULT_URL
    try:
        psycopg.connect(url, connect_timeout=5).close()
    except psycopg.Error as error:
        print(f"skipped: no PostgreSQL at {url} ({str(error).strip().splitlines()[0]})")
        return EXIT_SKIPPED
    work = Path(tempfile.mkdtemp(prefix="bench-postgres-"))
    record_file = work / "run.pickle"
    make_record(args.questions, record_file)
    best: dict[str, dict[str, float]] = {}
    schemas = []
    for repeat in range(args.repeats):
        for name in ("postgresql", "sqlite"):
            if name == "postgresql":
                schema = f"bench_{uuid.uuid4().hex[:8]}"
                schemas.append(schema)
                target = f"{url}{'&' if '?' in url else '?'}schema={schema}"
            else:
                target = f"sqlite:///{work / f'runs-{repeat}.sqlite3'}"
            result = run_worker(__file__, [str(record_file), target])
            if not result["same"]:
                print(f"{name}: the record read back differs from the one saved")
                return 1
            for phase in ("save", "history"):
                kept = best.setdefault(name, {}).get(phase, float("inf"))
                best[name][phase] = min(kept, result[phase])
    with psycopg.connect(url, autocommit=True) as connection:
        for schema in schemas:
            connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    rows = []
    for phase in ("save", "history"):
        pg, lite = best["postgresql"][phase], best["sqlite"][phase]
        rows.append([phase, seconds(pg), seconds(lite), ratio(pg / lite)])
    print(f"one run of {args.questions} questions, best of {args.repeats}:")
    print(table(["phase", "postgresql", "sqlite (peer)", "postgresql / sqlite"], rows))
    worst = max(best["postgresql"][p] / best["sqlite"][p] for p in ("save", "history"))
    met = worst <= GOAL_RATIO
    print(goal(met, f"postgres store within {GOAL_RATIO:g}x of sqlite ({ratio(worst)})"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
