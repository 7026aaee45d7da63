"""The SQL queries of docs/postgres.md, run as printed against a store of real runs."""

from __future__ import annotations

import re
from typing import Any

import psycopg
from support import REPO, copy_of, scored_run

from retrievalkit.model.values import ResultRecord
from retrievalkit.stores import open_store

DOCS = REPO / "docs" / "postgres.md"


def query(name: str, schema: str) -> str:
    """The SQL block marked ``-- query: NAME``, on the test's schema, psql variables as %(x)s."""
    blocks = re.findall(r"```sql\n(.*?)```", DOCS.read_text(), flags=re.S)
    found = [block for block in blocks if block.startswith(f"-- query: {name}\n")]
    assert len(found) == 1, f"docs/postgres.md has {len(found)} blocks named {name}"
    text = found[0].replace("retrievalkit.", f"{schema}.")
    return re.sub(r":'(\w+)'", r"%(\1)s", text)


def rows(pg_url: str, sql: str, **parameters: Any) -> list[dict[str, Any]]:
    from psycopg.rows import dict_row

    with psycopg.connect(pg_url, row_factory=dict_row) as connection:
        return list(connection.execute(sql, parameters).fetchall())


def saved_history(store_url: str) -> tuple[list[ResultRecord], Any]:
    """Five runs of two retrievers with different results, one of them pinned."""
    store = open_store(store_url)
    runs = [
        copy_of(scored_run("support", "dense", 60, seed=seed), f"dense-{seed}")
        for seed in (1, 2, 3, 4)
    ]
    runs.insert(2, copy_of(scored_run("support", "bm25", 60, seed=9), "bm25"))
    for record in runs:
        store.save(record)
    store.pin(runs[1])  # type: ignore[attr-defined]
    return runs, store


def test_the_hit3_trend_query(pg_url: str, store_url: str, schema: str) -> None:
    runs, _ = saved_history(store_url)
    found = rows(pg_url, query("hit3-trend", schema), set="support")
    expected = sorted(
        ((run.model, run.run_id, run.metrics["hit@3"].mean) for run in runs),
        key=lambda row: (row[0], runs.index(next(r for r in runs if r.run_id == row[1]))),
    )
    assert [(row["retriever"], row["run_id"], row["hit_at_3"]) for row in found] == expected
    assert all(row["ci_low"] <= row["hit_at_3"] <= row["ci_high"] for row in found)


def test_the_failed_gate_query(pg_url: str, store_url: str, schema: str) -> None:
    runs, _ = saved_history(store_url)
    pinned = runs[1]
    failed = set()
    previous: dict[str, ResultRecord] = {}
    for run in runs:
        baseline = pinned if run.model == pinned.model and run is not pinned else None
        baseline = baseline or previous.get(run.model)
        if baseline and (
            baseline.pass_rate > run.pass_rate or baseline.mean_score > run.mean_score
        ):
            failed.add((run.run_id, baseline.run_id))
        previous[run.model] = run
    found = rows(pg_url, query("failed-gate", schema))
    assert {(row["run_id"], row["baseline"]) for row in found} == failed
    assert failed  # the seeded runs do include drops
