"""The ``elasticsearch://`` store: retrievalkit's store contract, pins, and fields to chart on."""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path
from typing import Any

import attrs
import pytest
from retrievalkit_elasticsearch import store as store_module
from retrievalkit_elasticsearch.store import ElasticsearchStore
from support import cli, write_config

from retrievalkit.errors import InputError, StoreError
from retrievalkit.formats.convert import to_json
from retrievalkit.model.outcomes import Outcomes
from retrievalkit.model.records import ResultRecord
from retrievalkit.pipeline.gating.history import build_history
from retrievalkit.stores import open_store
from retrievalkit.stores.columns import columns_header
from retrievalkit.stores.serialization import load_record
from retrievalkit.testing import check_store

#: Runs of record schema 2 as retrievalkit 0.1 stored them: each a whole document.
FIXTURE = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "schema_v2_runs.jsonl"


def store_url(es_url: str, index: str, query: str = "") -> str:
    netloc = urllib.parse.urlsplit(es_url).netloc
    return f"elasticsearch://{netloc}/{index}" + (f"?{query}" if query else "")


@pytest.fixture(scope="module")
def keeper(es_url: str, index_names: Any) -> ElasticsearchStore:
    """A store holding the runs check_store writes, for the tests that read them."""
    store = check_store(store_url(es_url, index_names("store")))
    assert isinstance(store, ElasticsearchStore)
    return store


def test_the_store_keeps_retrievalkits_store_contract(keeper: ElasticsearchStore) -> None:
    assert keeper.all_runs()


def test_runs_are_chartable_documents(es: Any, keeper: ElasticsearchStore) -> None:
    mapping = es.indices.get_mapping(index=keeper.index)[keeper.index]["mappings"]["properties"]
    for keyword in ("set", "model", "grader", "run_id"):
        assert mapping[keyword]["type"] == "keyword"
    assert mapping["created_at"]["type"] == "date"
    assert mapping["pass_rate"]["type"] == mapping["mean_score"]["type"] == "double"
    assert mapping["record"] == {"type": "object", "enabled": False}
    record = keeper.all_runs()[0]
    found = es.search(
        index=keeper.index,
        query={
            "bool": {"filter": [{"term": {"kind": "run"}}, {"term": {"run_id": record.run_id}}]}
        },
        aggs={"mean_pass_rate": {"avg": {"field": "pass_rate"}}},
    )
    source = found["hits"]["hits"][0]["_source"]
    assert source["pass_rate"] == record.pass_rate and source["model"] == record.model
    assert source["metrics"]["hit@1"] == record.metrics["hit@1"].mean
    assert mapping["metrics"]["properties"]["hit@1"]["type"] == "double"
    assert found["aggregations"]["mean_pass_rate"]["value"] == pytest.approx(record.pass_rate)
    assert "s3cret" not in json.dumps(source)  # check_store's record has an api_key option


def test_pins_and_deletion(keeper: ElasticsearchStore) -> None:
    newest, older = keeper.all_runs()[:2]
    assert keeper.pinned(*newest.key) is None
    assert keeper.pin(newest) is None
    assert keeper.pinned(*newest.key) == newest.run_id
    with pytest.raises(StoreError, match="pinned baseline"):
        keeper.delete([newest.run_id])
    assert keeper.get(newest.run_id) is not None  # nothing was deleted
    assert keeper.unpin(*newest.key) == newest.run_id
    assert keeper.pinned(*newest.key) is None
    copy = attrs.evolve(older, run_id=older.run_id + "-copy")
    keeper.save(copy)
    assert keeper.delete([copy.run_id, "no-such-run"]) == 1
    assert keeper.get(copy.run_id) is None
    with pytest.raises(StoreError, match="is not stored"):
        keeper.pin(copy)


def test_outcomes_are_column_documents_loaded_only_when_read(
    es: Any, es_url: str, index_names: Any, monkeypatch: pytest.MonkeyPatch
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
    name = index_names("column-store")
    store = check_store(store_url(es_url, name))
    loads.clear()  # the check compares whole runs
    runs = store.all_runs()
    newest, older = runs[:2]
    history = build_history(
        store.runs(*newest.key), set_name=newest.set, retriever=newest.model, store=store.url,
        pinned=None, limit=10,
    )  # fmt: skip
    assert len(history.entries) == 3 and {entry.questions for entry in history.entries} == {4}
    assert loads == []
    source = es.get(index=name, id=newest.run_id)["_source"]
    assert source["record"]["outcomes"] == columns_header(newest.outcomes)
    columns = es.search(
        index=name,
        query={
            "bool": {"filter": [{"term": {"kind": "column"}}, {"term": {"run_id": older.run_id}}]}
        },
        size=100,
    )["hits"]["hits"]
    assert sorted(hit["_source"]["column"] for hit in columns) == sorted(
        columns_header(older.outcomes)["columns"]
    )
    assert [outcome.question_id for outcome in older.outcomes] == ["c1", "c2", "c3", "c4"]
    assert sorted(loads) == sorted(set(loads)) and "question_ids" in loads
    unread = store.get(older.run_id)
    assert unread is not None
    assert store.delete([older.run_id]) == 1  # type: ignore[attr-defined]
    with pytest.raises(StoreError, match=f"run {older.run_id} is no longer in"):
        unread.outcomes.values("rr")
    left = es.count(index=name, query={"term": {"run_id": older.run_id}})["count"]
    assert left == 0  # its column documents went with it


def test_an_index_of_whole_documents_keeps_loading_and_takes_new_runs(
    es: Any, es_url: str, index_names: Any
) -> None:
    """An index written before outcome columns: its mapping gains them on the next save."""
    name = index_names("whole-documents")
    old_mapping = {
        **store_module.MAPPING,
        "properties": {
            field: value
            for field, value in store_module.MAPPING["properties"].items()
            if field not in store_module.COLUMN_FIELDS
        },
    }
    es.indices.create(index=name, mappings=old_mapping)
    whole = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines()]
    for number, record in enumerate(whole):
        es.index(
            index=name,
            id=record["run_id"],
            document={
                "kind": "run", "run_id": record["run_id"], "set": record["set"],
                "model": record["model"], "grader": record["grader"],
                "saved_at_ns": number, "record": record,
            },
            refresh=True,
        )  # fmt: skip
    store = open_store(store_url(es_url, name))
    expected = [to_json(load_record(json.dumps(record), where="fixture")) for record in whole]
    assert [to_json(run) for run in reversed(store.all_runs())] == expected
    newest = load_record(json.dumps(whole[-1]), where="fixture")
    store.save(attrs.evolve(newest, run_id="after-columns"))
    mapping = es.indices.get_mapping(index=name)[name]["mappings"]["properties"]
    assert mapping["data"] == {"type": "binary"}
    runs = store.runs(newest.set, newest.model)
    assert [run.run_id for run in runs] == ["after-columns", *[r["run_id"] for r in whole][::-1]]
    assert to_json(runs[0]) == to_json(attrs.evolve(newest, run_id="after-columns"))


def test_a_new_store_reads_empty_and_creates_nothing(
    es: Any, es_url: str, index_names: Any
) -> None:
    name = index_names("empty-store")
    store = open_store(store_url(es_url, name))
    assert store.all_runs() == [] and store.get("x") is None and store.runs("s", "m") == []
    assert not es.indices.exists(index=name)


def test_an_index_that_is_not_a_store_is_refused(es_url: str, demo_index: str) -> None:
    # open_store reports a store that cannot be opened as a usage error (exit code 2).
    with pytest.raises(InputError, match="is not a retrievalkit run store"):
        open_store(store_url(es_url, demo_index))


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("elasticsearch://127.0.0.1:9200/", "not of the form"),
        ("elasticsearch://127.0.0.1:9200/a/b", "not of the form"),
        ("elasticsearch://u:pw@127.0.0.1:9200/runs", "carries credentials"),
        ("elasticsearch://127.0.0.1:9200/runs?password=pw", "unknown option password"),
        ("elasticsearch://127.0.0.1:9200/runs?username=u", "needs a password_env"),
        ("elasticsearch://127.0.0.1:1/runs?timeout=2", "cannot reach Elasticsearch"),
    ],
)
def test_bad_store_urls(url: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as raised:
        open_store(url)
    assert "pw" not in str(raised.value).replace("password", "")


def test_eval_saves_to_elasticsearch_and_history_reads_it(
    tmp_path: Path, es: Any, es_url: str, demo_index: str, index_names: Any
) -> None:
    url = store_url(es_url, index_names("cli-store"))
    write_config(tmp_path, {"es": {"url": es_url, "index": demo_index, "doc_id_separator": "#"}})
    run_ids = []
    for _ in range(2):
        done = cli(
            "eval",
            "--set",
            "demo",
            "--retriever",
            "es",
            "--store",
            url,
            "--format",
            "json",
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr
        run_ids.append(json.loads(done.stdout)["run_id"])
    store = open_store(url)
    runs = store.runs("demo", "es")
    assert [run.run_id for run in runs] == run_ids[::-1]  # newest first
    assert isinstance(runs[0], ResultRecord) and runs[0].manifest.plugin == "elasticsearch-bm25"
    history = cli("history", "--set", "demo", "--retriever", "es", "--store", url, cwd=tmp_path)
    assert history.returncode == 0, history.stderr
    assert run_ids[0] in history.stdout and run_ids[1] in history.stdout
    shown = cli("show", run_ids[0], "--store", url, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
