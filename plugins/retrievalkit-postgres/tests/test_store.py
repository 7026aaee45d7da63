"""The ``postgresql://`` store: the store contract, summary rows and column blobs, pins, prunes."""

from __future__ import annotations

import json
from typing import Any

import attrs
import numpy as np
import psycopg
import pytest
from retrievalkit_postgres.schema import LATEST
from retrievalkit_postgres.store import PostgresStore
from support import cli, copy_of, scalar, scored_run

from retrievalkit.errors import InputError, StoreError
from retrievalkit.formats.convert import to_json
from retrievalkit.model.outcomes import Outcomes
from retrievalkit.pipeline.gating.baselines import choose_baseline
from retrievalkit.pipeline.gating.history import build_history
from retrievalkit.stores import open_store
from retrievalkit.stores.columns import columns_header
from retrievalkit.testing import check_store


def test_the_store_keeps_retrievalkits_store_contract(store_url: str) -> None:
    store = check_store(store_url)
    assert isinstance(store, PostgresStore)
    assert len(store.all_runs()) == 4


def test_a_run_is_a_summary_row_metric_rows_and_column_blobs(
    pg_url: str, store_url: str, schema: str
) -> None:
    store = open_store(store_url)
    record = scored_run("tables", "model-a", 120)
    store.save(record)
    assert to_json(store.get(record.run_id)) == to_json(record)
    columns = scalar(
        pg_url,
        f"SELECT array_agg(c.name ORDER BY c.name) FROM {schema}.run_columns c"
        f" JOIN {schema}.runs r ON r.seq = c.run_seq WHERE r.run_id = %s",
        (record.run_id,),
    )
    assert columns == sorted(columns_header(record.outcomes)["columns"])
    hit3 = scalar(
        pg_url,
        f"SELECT m.mean FROM {schema}.run_metrics m JOIN {schema}.runs r ON r.seq = m.run_seq"
        " WHERE r.run_id = %s AND m.slice_field = '' AND m.metric = 'hit@3'",
        (record.run_id,),
    )
    assert hit3 == record.metrics["hit@3"].mean == record.mean_score
    sliced = scalar(
        pg_url,
        f"SELECT count(*) FROM {schema}.run_metrics WHERE slice_field = 'topic'",
    )
    assert sliced == sum(len(metrics) for metrics in record.slices["topic"].values())
    questions, errored = (
        scalar(pg_url, f"SELECT {name} FROM {schema}.runs WHERE run_id = %s", (record.run_id,))
        for name in ("questions", "errored")
    )
    assert questions == 120
    assert errored == sum(1 for outcome in record.outcomes if outcome.error) > 0
    summary = scalar(
        pg_url, f"SELECT summary FROM {schema}.runs WHERE run_id = %s", (record.run_id,)
    )
    assert json.loads(summary)["outcomes"] == columns_header(record.outcomes)
    assert record.outcomes[0].question_id not in summary.replace('"question_ids"', "")
    assert scalar(pg_url, "SELECT to_regclass(%s)", (f"{schema}.run_questions",)) is None
    indexes = scalar(
        pg_url,
        "SELECT string_agg(indexdef, ' | ') FROM pg_indexes WHERE schemaname = %s",
        (schema,),
    )
    assert "(set_name, model, grader, created_at, seq)" in indexes
    assert scalar(pg_url, f"SELECT max(version) FROM {schema}.schema_version") == LATEST


def test_stored_records_load_their_columns_only_when_used(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads: list[str] = []
    from retrievalkit.stores import serialization

    original = serialization.decode_columns

    def counting(header: Any, load: Any, **options: Any) -> Outcomes:
        def counted(name: str) -> bytes:
            loads.append(name)
            return bytes(load(name))

        return original(header, counted, **options)

    monkeypatch.setattr(serialization, "decode_columns", counting)
    store = open_store(store_url)
    assert isinstance(store, PostgresStore)
    base = scored_run("lazy", "model-a", 40)
    saved = [copy_of(base, f"n{number}") for number in range(4)]
    for record in saved:
        store.save(record)
    runs = store.runs("lazy", "model-a")
    history = build_history(
        runs, set_name="lazy", retriever="model-a", store=store.url, pinned=None, limit=10
    )
    assert [entry.questions for entry in history.entries] == [40] * 4
    assert choose_baseline(store, "lazy", "model-a").record.run_id == saved[-1].run_id  # type: ignore[union-attr]
    assert loads == []
    store.close()  # a record outlives its connection: the store reconnects to load
    assert np.array_equal(runs[0].outcomes.values("rr"), base.outcomes.values("rr"), equal_nan=True)
    assert loads == ["metric/rr"]
    assert store.delete([saved[0].run_id]) == 1
    with pytest.raises(StoreError, match=f"run {saved[0].run_id} is no longer in"):
        runs[-1].outcomes.values("hit@1")
    assert to_json(runs[1]) == to_json(saved[2])


def test_history_is_newest_first_per_key(store_url: str) -> None:
    store = open_store(store_url)
    base = scored_run("history", "model-a", 20)
    saved = [copy_of(base, f"n{number}") for number in range(5)]
    other = copy_of(base, "other", model="model-b")
    for record in [*saved[:3], other, *saved[3:]]:
        store.save(record)
    assert [run.run_id for run in store.runs("history", "model-a")] == [
        run.run_id for run in reversed(saved)
    ]
    assert [run.run_id for run in store.runs("history", "model-b")] == [other.run_id]
    assert store.runs("history", "model-a", "another_grader") == []


def test_pins_and_deletion(store_url: str) -> None:
    store = open_store(store_url)
    assert isinstance(store, PostgresStore)
    base = scored_run("pins", "model-a", 10)
    older, newest = copy_of(base, "older"), copy_of(base, "newest")
    store.save(older)
    store.save(newest)
    assert store.pinned(*newest.key) is None
    assert store.pin(older) is None
    assert store.pin(newest) == older.run_id
    assert store.pinned(*newest.key) == newest.run_id
    with pytest.raises(StoreError, match=f"run {newest.run_id} is a pinned baseline"):
        store.delete([older.run_id, newest.run_id])
    assert store.get(older.run_id) is not None  # nothing was deleted
    assert store.unpin(*newest.key) == newest.run_id
    assert store.unpin(*newest.key) is None
    assert store.delete([older.run_id, "no-such-run"]) == 1
    assert store.get(older.run_id) is None
    with pytest.raises(StoreError, match="is not stored"):
        store.pin(older)


def test_a_save_is_whole_or_nothing(pg_url: str, store_url: str, schema: str) -> None:
    store = open_store(store_url)
    record = scored_run("whole", "model-a", 50)
    # PostgreSQL cannot keep a NUL character: the run row and its columns are in when the
    # metric rows fail, at the last slice label.
    slices = {"topic": {**record.slices["topic"], "bad \x00 label": record.metrics}}
    broken = attrs.evolve(record, slices=slices)
    with pytest.raises(StoreError, match="nothing was saved"):
        store.save(broken)
    for table in ("runs", "run_columns", "run_metrics"):
        assert scalar(pg_url, f"SELECT count(*) FROM {schema}.{table}") == 0
    store.save(record)  # the connection is usable after the failed transaction
    with pytest.raises(StoreError, match="already stored"):
        store.save(record)
    assert scalar(pg_url, f"SELECT count(*) FROM {schema}.run_columns") == len(
        columns_header(record.outcomes)["columns"]
    )


def test_a_store_written_by_a_newer_layout_is_refused(
    pg_url: str, store_url: str, schema: str
) -> None:
    open_store(store_url)
    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute(
            f"INSERT INTO {schema}.schema_version (version, description) VALUES (%s, 'future')",
            (LATEST + 1,),
        )
    with pytest.raises(InputError, match=f"layout version {LATEST + 1}, newer"):
        open_store(store_url)


def test_every_field_of_a_record_is_kept(store_url: str) -> None:
    store = open_store(store_url)
    record = scored_run("fields", "model-a", 5)
    manifest = attrs.evolve(record.manifest, extra={"note": "kept"})
    store.save(attrs.evolve(record, manifest=manifest))
    assert store.get(record.run_id).manifest.extra == {"note": "kept"}  # type: ignore[union-attr]


def test_eval_saves_to_the_store_and_history_reads_it(store_url: str, tmp_path: Any) -> None:
    for _ in range(2):
        done = cli(
            "eval", "--set", "demo", "--retriever", "bm25-demo", "--store", store_url, cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr
    shown = cli(
        "history",
        "--set",
        "demo",
        "--retriever",
        "bm25-demo",
        "--store",
        store_url,
        "--format",
        "json",
        cwd=tmp_path,
    )
    assert shown.returncode == 0, shown.stderr
    store = open_store(store_url)
    runs = store.runs("demo", "bm25-demo")
    assert len(runs) == 2 and all(run.run_id in shown.stdout for run in runs)
