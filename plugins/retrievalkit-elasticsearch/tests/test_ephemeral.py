"""Ephemeral Elasticsearch indices (built at start, deleted at the end) and ``es drop``, live."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from retrievalkit_elasticsearch.retriever import create_elasticsearch_bm25
from support import cli

import retrievalkit as rk
from retrievalkit.errors import InputError

DEMO = Path(rk.__file__).parent / "demo"


def _exists(es: Any, index: str) -> bool:
    return bool(es.indices.exists(index=index))


def _options(url: str, index: str) -> dict[str, object]:
    return {"url": url, "index": index, "ephemeral": True, "corpus": str(DEMO / "corpus.jsonl")}


def test_the_index_is_built_for_the_run_and_deleted_after_it(
    es: Any, es_url: str, index_names: Any
) -> None:
    index = index_names("eph-run")
    run = rk.evaluate(
        DEMO / "golden.jsonl",
        "elasticsearch-bm25",
        options={**_options(es_url, index), "doc_id_separator": "#"},
        git_commit=None,
    )
    assert run.metrics["hit@10"].mean is not None and run.metrics["hit@10"].mean > 0.5
    assert run.errored == 0
    assert not _exists(es, index)


def test_close_deletes_the_index_once(es: Any, es_url: str, index_names: Any) -> None:
    index = index_names("eph-close")
    retriever = create_elasticsearch_bm25(**_options(es_url, index))  # type: ignore[arg-type]
    assert _exists(es, index) and retriever.ephemeral
    assert retriever.retrieve("library card", 5)
    retriever.close()
    assert not _exists(es, index)
    retriever.close()


def test_an_existing_index_is_refused_and_kept(es: Any, es_url: str, index_names: Any) -> None:
    index = index_names("eph-twice")
    first = create_elasticsearch_bm25(**_options(es_url, index))  # type: ignore[arg-type]
    with pytest.raises(InputError, match="already exists") as caught:
        create_elasticsearch_bm25(**_options(es_url, index))  # type: ignore[arg-type]
    assert caught.value.field == "index" and "es drop --index" in str(caught.value)
    assert _exists(es, index)
    first.close()


def test_a_failed_check_after_the_build_deletes_the_index(
    es: Any, es_url: str, index_names: Any
) -> None:
    index = index_names("eph-fields")
    with pytest.raises(InputError, match="maps no field 'summary'"):
        create_elasticsearch_bm25(**_options(es_url, index), fields=["summary"])  # type: ignore[arg-type]
    assert not _exists(es, index)


def test_the_index_is_deleted_when_the_process_dies_of_an_error(
    es: Any, es_url: str, index_names: Any
) -> None:
    index = index_names("eph-crash")
    program = textwrap.dedent(
        f"""
        from retrievalkit_elasticsearch.retriever import create_elasticsearch_bm25
        retriever = create_elasticsearch_bm25(**{_options(es_url, index)!r})
        retriever.retrieve("library card", 3)
        print("built", flush=True)
        raise RuntimeError("the run broke")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=False, timeout=300
    )
    assert done.returncode == 1 and "built" in done.stdout and "the run broke" in done.stderr
    assert not _exists(es, index)


def test_the_index_is_deleted_after_ctrl_c(
    es: Any, es_url: str, index_names: Any, tmp_path: Path
) -> None:
    index = index_names("eph-sigint")
    questions = [json.loads(line) for line in (DEMO / "golden.jsonl").open()]
    with (tmp_path / "many.jsonl").open("w") as handle:
        for copy in range(400):  # long enough to be interrupted while asking
            for question in questions:
                handle.write(json.dumps({**question, "id": f"{question['id']}-{copy}"}) + "\n")
    (tmp_path / "retrievalkit.toml").write_text(
        '[retrievers.keywords]\nplugin = "elasticsearch-bm25"\n'
        + "".join(
            f"{key} = {json.dumps(value)}\n" for key, value in _options(es_url, index).items()
        )
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "retrievalkit", "eval", "--set", "many.jsonl",
         "--retriever", "keywords", "--no-save", "--quiet"],
        cwd=tmp_path, env={**os.environ, "NO_COLOR": "1"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while not _exists(es, index):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the index was never built"
            time.sleep(0.2)
        time.sleep(1.5)  # asking by now
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr
    assert not _exists(es, index)


def test_es_drop_deletes_what_es_index_built_and_nothing_else(
    es: Any, es_url: str, index_names: Any
) -> None:
    index = index_names("eph-drop")
    built = cli("es", "index", "--corpus", str(DEMO / "corpus.jsonl"), "--index", index,
                "--url", es_url)  # fmt: skip
    assert built.returncode == 0, built.stderr
    dropped = cli("es", "drop", "--index", index, "--url", es_url)
    assert dropped.returncode == 0, dropped.stderr
    assert f"dropped '{index}'" in dropped.stdout and not _exists(es, index)
    again = cli("es", "drop", "--index", index, "--url", es_url)
    assert again.returncode == 2 and "no index" in again.stderr
    es.indices.create(index=index)
    foreign = cli("es", "drop", "--index", index, "--url", es_url)
    assert foreign.returncode == 2 and "not built by" in foreign.stderr
    assert _exists(es, index)
    pattern = cli("es", "drop", "--index", "rk-*", "--url", es_url)
    assert pattern.returncode == 2 and "one index" in pattern.stderr
