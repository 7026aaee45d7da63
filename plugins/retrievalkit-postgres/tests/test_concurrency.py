"""Many writers at once, and pins racing prunes: nothing lost, nothing dangling."""

from __future__ import annotations

import multiprocessing
import threading
from typing import Any

import pytest
from support import copy_of, scalar, scored_run

from retrievalkit.errors import StoreError
from retrievalkit.stores import open_store
from retrievalkit.stores.columns import columns_header

WRITERS = 8
RUNS_PER_WRITER = 50
RACES = 1000
QUESTIONS = 12


def write_runs(url: str, writer: int, count: int) -> list[str]:
    """One writer process: open the store and save ``count`` runs; their ids."""
    store = open_store(url)
    base = scored_run("concurrent", f"model-{writer % 3}", QUESTIONS, seed=writer)
    saved = []
    for number in range(count):
        record = copy_of(base, f"w{writer}-{number}")
        store.save(record)
        saved.append(record.run_id)
    return saved


def test_eight_processes_saving_fifty_runs_each_lose_none(
    pg_url: str, store_url: str, schema: str
) -> None:
    # fork: the writers start with retrievalkit imported; no connection is open yet.
    context = multiprocessing.get_context("fork")
    with context.Pool(WRITERS) as pool:
        results = pool.starmap(
            write_runs, [(store_url, writer, RUNS_PER_WRITER) for writer in range(WRITERS)]
        )
    expected = {run_id for saved in results for run_id in saved}
    assert len(expected) == WRITERS * RUNS_PER_WRITER
    store = open_store(store_url)
    stored = store.all_runs()
    assert {run.run_id for run in stored} == expected
    assert all(len(run.outcomes) == QUESTIONS for run in stored)
    columns = len(columns_header(stored[0].outcomes)["columns"])
    assert scalar(pg_url, f"SELECT count(*) FROM {schema}.run_columns") == columns * len(expected)
    per_key = sum(len(store.runs("concurrent", f"model-{n}")) for n in range(3))
    assert per_key == len(expected)


def test_pins_racing_prunes_never_leave_a_dangling_pin(
    pg_url: str, store_url: str, schema: str
) -> None:
    pinner, pruner, writer = (open_store(store_url) for _ in range(3))
    base = scored_run("race", "model-a", 3)
    keeper = copy_of(base, "keeper")
    writer.save(keeper)
    outcomes = {"pinned": 0, "pruned": 0}
    barrier = threading.Barrier(2)
    for attempt in range(RACES):
        record = copy_of(base, f"race-{attempt}")
        writer.save(record)
        results: dict[str, Any] = {}

        def pin(record: Any = record, results: dict[str, Any] = results) -> None:
            barrier.wait()
            try:
                results["pin"] = pinner.pin(record)  # type: ignore[attr-defined]
            except StoreError as error:
                results["pin"] = error

        def prune(record: Any = record, results: dict[str, Any] = results) -> None:
            barrier.wait()
            try:
                results["prune"] = pruner.delete([record.run_id])  # type: ignore[attr-defined]
            except StoreError as error:
                results["prune"] = error

        threads = [threading.Thread(target=pin), threading.Thread(target=prune)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        pinned_now = not isinstance(results["pin"], StoreError)
        pruned_now = results["prune"] == 1
        # Exactly one of the two wins, and the loser says why.
        assert pinned_now != pruned_now, results
        if pinned_now:
            assert "pinned baseline" in str(results["prune"])
            outcomes["pinned"] += 1
        else:
            assert "is not stored" in str(results["pin"])
            outcomes["pruned"] += 1
        if attempt % 100 == 99:
            # Keep the pin on a run that stays, so the next pins replace a live one.
            pinner.pin(keeper)  # type: ignore[attr-defined]
    dangling = scalar(
        pg_url,
        f"SELECT count(*) FROM {schema}.pins p LEFT JOIN {schema}.runs r USING (run_id)"
        " WHERE r.run_id IS NULL",
    )
    assert dangling == 0
    assert outcomes["pinned"] + outcomes["pruned"] == RACES
    pinned = pinner.pinned("race", "model-a")  # type: ignore[attr-defined]
    assert pinned is not None and writer.get(pinned) is not None
    print(f"pin/prune races: {RACES}, pin won {outcomes['pinned']}, prune won {outcomes['pruned']}")


@pytest.fixture(autouse=True)
def _quiet_threads() -> None:
    threading.excepthook = threading.__excepthook__
