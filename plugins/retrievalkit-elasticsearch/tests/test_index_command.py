"""``retrievalkit es index``: the index it builds, its refusals, its report and its progress bar."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from support import DEMO_CORPUS, cli, index_corpus


def settings_of(es: Any, index: str) -> dict[str, Any]:
    return dict(es.indices.get_settings(index=index)[index]["settings"]["index"])


def test_the_index_states_its_scoring_setup(es: Any, es_url: str, index_names: Any) -> None:
    name = index_names("setup")
    done = index_corpus(es_url, DEMO_CORPUS, name, "--k1", "0.9", "--b", "0.4")
    assert f"indexed 55 of 55 documents into '{name}'" in done.stdout
    assert "0 failed; 55 searchable" in done.stdout
    assert "BM25 k1=0.9 b=0.4" in done.stdout
    assert done.stderr == ""  # no progress bar without a terminal
    settings = settings_of(es, name)
    assert settings["number_of_replicas"] == "0" and settings["number_of_shards"] == "1"
    similarity = settings["similarity"]["retrievalkit_bm25"]
    assert similarity == {"type": "BM25", "k1": "0.9", "b": "0.4"}
    assert "refresh_interval" not in settings  # back to the default after loading
    mapping = es.indices.get_mapping(index=name)[name]["mappings"]
    for field in ("title", "text"):
        assert mapping["properties"][field] == {
            "type": "text",
            "analyzer": "standard",
            "similarity": "retrievalkit_bm25",
        }
    assert mapping["_meta"]["retrievalkit"]["analyzer"] == "standard"
    assert es.count(index=name)["count"] == 55
    assert es.get(index=name, id="doc-faq#2")["_source"]["title"]


def test_an_existing_index_is_refused_without_recreate(
    es: Any, es_url: str, index_names: Any
) -> None:
    name = index_names("refuse")
    index_corpus(es_url, DEMO_CORPUS, name)
    refused = cli(
        "es", "index", "--corpus", str(DEMO_CORPUS), "--index", name, "--url", es_url, "--k1", "2.0"
    )
    assert refused.returncode == 2, refused.stderr
    assert f"index '{name}' already exists" in refused.stderr and "--recreate" in refused.stderr
    assert settings_of(es, name)["similarity"]["retrievalkit_bm25"]["k1"] == "1.2"  # untouched

    recreated = index_corpus(es_url, DEMO_CORPUS, name, "--k1", "2.0", "--recreate")
    assert "indexed 55 of 55" in recreated.stdout
    assert settings_of(es, name)["similarity"]["retrievalkit_bm25"]["k1"] == "2.0"
    assert es.count(index=name)["count"] == 55


def test_progress_bar_on_a_terminal(es_url: str, index_names: Any) -> None:
    name = index_names("progress")
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "retrievalkit",
            "es",
            "index",
            "--corpus",
            str(DEMO_CORPUS),
            "--index",
            name,
            "--url",
            es_url,
            "--batch-size",
            "5",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=follower,
        env=env,
    )
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    stdout, _ = process.communicate(timeout=120)
    assert process.returncode == 0, shown.decode(errors="replace")
    terminal = shown.decode(errors="replace")
    assert f"indexing into {name}" in terminal
    assert "/55" in terminal and "documents" in terminal
    assert b"indexed 55 of 55" in stdout


def test_a_malformed_corpus_fails_before_the_index_is_touched(
    tmp_path: Path, es: Any, es_url: str, index_names: Any
) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "a", "text": "fine"}\n{"_id": "b", "text": \n', encoding="utf-8")
    name = index_names("malformed")
    done = cli("es", "index", "--corpus", str(corpus), "--index", name, "--url", es_url)
    assert done.returncode == 2
    assert f"{corpus}, line 2" in done.stderr and "malformed JSON" in done.stderr
    assert not es.indices.exists(index=name)


def test_rejected_documents_are_reported_and_exit_3(
    tmp_path: Path, es: Any, es_url: str, index_names: Any
) -> None:
    corpus = tmp_path / "corpus.jsonl"
    rows = [
        {"_id": "one", "title": "First", "text": "the first document"},
        {"_id": "two", "title": "Second", "text": "the second document"},
        {"_id": "one", "title": "Again", "text": "a repeated id"},
        {"_id": "one", "title": "Third", "text": "and again"},
    ]
    corpus.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    name = index_names("failures")
    done = cli("es", "index", "--corpus", str(corpus), "--index", name, "--url", es_url)
    assert done.returncode == 3, done.stderr
    assert "indexed 2 of 4 documents" in done.stdout and "2 failed; 2 searchable" in done.stdout
    assert "failed: one: version_conflict_engine_exception" in done.stdout
    assert "2 of 4 documents could not be indexed" in done.stderr
    assert es.get(index=name, id="one")["_source"]["title"] == "First"  # never overwritten


def test_an_id_elasticsearch_cannot_take_fails_before_the_index_is_touched(
    tmp_path: Path, es: Any, es_url: str, index_names: Any
) -> None:
    corpus = tmp_path / "corpus.jsonl"
    rows = [{"_id": "fine", "text": "a document"}, {"_id": "x" * 600, "text": "a long id"}]
    corpus.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    name = index_names("long-id")
    done = cli("es", "index", "--corpus", str(corpus), "--index", name, "--url", es_url)
    assert done.returncode == 2
    assert "document 2 has an _id of 600 bytes" in done.stderr
    assert not es.indices.exists(index=name)


def _has_english_analyzer(url: str) -> bool:
    request = urllib.request.Request(
        f"{url}/_analyze",
        data=json.dumps({"analyzer": "english", "text": "running"}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=60):
            return True
    except urllib.error.HTTPError:
        return False


def test_an_english_index_stems_on_a_node_with_the_analyzer(
    es: Any, es_url: str, index_names: Any
) -> None:
    assert _has_english_analyzer(es_url), "scripts/elasticsearch.py adds an english analyzer"
    name = index_names("english")
    done = cli(
        "es", "index", "--corpus", str(DEMO_CORPUS), "--index", name, "--url", es_url,
        "--analyzer", "english",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    mapping = es.indices.get_mapping(index=name)[name]["mappings"]["properties"]
    assert mapping["text"]["analyzer"] == "english"
    tokens = es.indices.analyze(index=name, field="text", text="The libraries' opening")
    assert [token["token"] for token in tokens["tokens"]] == ["librari", "open"]


def test_a_node_without_the_english_analyzer_is_refused_clearly() -> None:
    # The 7.17 integ-test node that nox -s es-up starts for _rank_eval lacks analysis-common.
    url = (os.environ.get("RETRIEVALKIT_RANK_EVAL_URL") or "http://127.0.0.1:9201").rstrip("/")
    assert not _has_english_analyzer(url), f"{url} was expected to lack the english analyzer"
    name = f"rk-test-{uuid.uuid4().hex[:8]}-english"
    done = cli(
        "es", "index", "--corpus", str(DEMO_CORPUS), "--index", name, "--url", url,
        "--analyzer", "english",
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "has no 'english' analyzer" in done.stderr and "--analyzer standard" in done.stderr
    request = urllib.request.Request(f"{url}/{name}", method="HEAD")
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(request, timeout=60)
    assert missing.value.code == 404  # nothing was left behind


def test_unreachable_node_exits_3(tmp_path: Path) -> None:
    done = cli(
        "es",
        "index",
        "--corpus",
        str(DEMO_CORPUS),
        "--index",
        "x",
        "--url",
        "http://127.0.0.1:1",
        "--timeout",
        "5",
    )
    assert (
        done.returncode == 3 and "cannot reach Elasticsearch at http://127.0.0.1:1" in done.stderr
    )


def test_help_lists_the_options() -> None:
    done = cli("es", "index", "--help")
    assert done.returncode == 0
    for option in (
        "--corpus",
        "--index",
        "--k1",
        "--b",
        "--analyzer",
        "--recreate",
        "--batch-size",
    ):
        assert option in done.stdout
