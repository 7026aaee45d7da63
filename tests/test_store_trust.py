"""Stores the gate can trust: summaries that agree with their columns, files that stay put.

Seeded edits of a stored baseline's summary (a mean, a count of defined values, the
question or errored count), in SQLite and in JSON Lines, must be named and refused by
the gate (exit 3), never compared. A JSON Lines line written again by another tool
(other key order, spacing, escaped unicode) must still read. A SQLite file deleted or
replaced while a run is evaluated must not take the run ("not saved", exit 3), and a
full disk (a real 256 KiB tmpfs) must say "disk full" when the store is opened and when
the run is saved.
"""

from __future__ import annotations

import contextlib
import json
import random
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from child_env import child_environment, child_pythonpath
from hostile import lay_out

from retrievalkit.api import evaluate, gate, load_set
from retrievalkit.stores import open_store
from retrievalkit.stores.consistency import UntrustedRun

METRICS = ("hit@1", "hit@3", "rr", "ndcg@10", "recall@5")


@pytest.fixture(scope="module")
def demo_run() -> object:
    return evaluate(load_set("demo"), "bm25-demo")


def _edits(count: int, seed: int) -> list[tuple[str, str, str]]:
    rng = random.Random(seed)
    found = set()
    for _ in range(count):
        backend = rng.choice(("sqlite", "jsonl"))
        what = rng.choice(("mean", "n", "count", "errored"))
        found.add((backend, what, rng.choice(METRICS)))
    return sorted(found)


EDITS = _edits(16, seed=7)


def _edit(summary: dict[str, object], what: str, metric: str) -> None:
    # Without its digest, as a run saved before runs carried one: the check of the summary
    # against the columns is what stands between such an edit and the gate
    # (tests/test_store_digests.py edits runs that keep their digest).
    summary.pop("digest", None)
    metrics = summary["metrics"]
    assert isinstance(metrics, dict)
    header = summary["outcomes"]
    assert isinstance(header, dict)
    if what == "mean":
        metrics[metric]["mean"] = round(1.0 - metrics[metric]["mean"] + 0.013, 6)
    elif what == "n":
        metrics[metric]["n"] -= 1
    elif what == "count":
        header["count"] -= 1
    else:
        header["errored"] += 2


def _store_with_edited_baseline(
    folder: Path, backend: str, run: object, what: str, metric: str
) -> str:
    url = f"{backend}:///{folder / ('runs.' + ('sqlite3' if backend == 'sqlite' else 'jsonl'))}"
    url = url.replace(":///" + "/", ":////")
    store = open_store(url)
    store.save(run.record)  # type: ignore[attr-defined]
    if backend == "sqlite":
        path = folder / "runs.sqlite3"
        with sqlite3.connect(path) as connection:
            (text,) = connection.execute("SELECT record FROM runs").fetchone()
            summary = json.loads(text)
            _edit(summary, what, metric)
            connection.execute("UPDATE runs SET record = ?", (json.dumps(summary),))
    else:
        path = folder / "runs.jsonl"
        summary = json.loads(path.read_text(encoding="utf-8"))
        _edit(summary, what, metric)
        path.write_text(json.dumps(summary) + "\n", encoding="utf-8")
    return url


@pytest.mark.parametrize(("backend", "what", "metric"), EDITS)
def test_the_gate_refuses_a_baseline_whose_summary_disagrees_with_its_columns(
    backend: str, what: str, metric: str, demo_run: object, tmp_path: Path
) -> None:
    url = _store_with_edited_baseline(tmp_path, backend, demo_run, what, metric)
    fresh = evaluate(load_set("demo"), "bm25-demo")
    with pytest.raises(UntrustedRun) as raised:
        gate(fresh, open_store(url), {metric: 0.0})
    message = str(raised.value)
    assert demo_run.record.run_id in message  # type: ignore[attr-defined]
    assert "gate does not use it" in message or "cannot be trusted" in message


def test_an_edited_summary_is_exit_3_through_the_command_line(tmp_path: Path) -> None:
    run = evaluate(load_set("demo"), "bm25-demo")
    _store_with_edited_baseline(tmp_path, "sqlite", run, "mean", "hit@1")
    done = subprocess.run(
        [sys.executable, "-m", "retrievalkit", "eval", "--set", "demo", "--retriever",
         "bm25-demo", "--store", "sqlite:///runs.sqlite3", "-q"],
        cwd=tmp_path, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "disagrees with its outcome columns" in done.stderr and "hit@1" in done.stderr


def _rewrites(count: int, seed: int) -> list[dict[str, object]]:
    rng = random.Random(seed)
    return [
        {
            "sort_keys": rng.random() < 0.5,
            "reverse": rng.random() < 0.5,
            "ensure_ascii": rng.random() < 0.5,
            "separators": rng.choice([(",", ":"), (", ", ": "), (" ,", " : ")]),
        }
        for _ in range(count)
    ]


def _reordered(node: object, reverse: bool) -> object:
    if isinstance(node, dict):
        keys = sorted(node, reverse=reverse)
        return {key: _reordered(node[key], reverse) for key in keys}
    if isinstance(node, list):
        return [_reordered(item, reverse) for item in node]
    return node


@pytest.mark.parametrize("style", _rewrites(8, seed=3))
def test_a_line_written_again_by_another_tool_still_reads(
    style: dict[str, object], demo_run: object, tmp_path: Path
) -> None:
    path = tmp_path / "runs.jsonl"
    url = f"jsonl:////{str(path).lstrip('/')}"
    open_store(url).save(demo_run.record)  # type: ignore[attr-defined]
    data = _reordered(json.loads(path.read_text(encoding="utf-8")), bool(style["reverse"]))
    path.write_text(
        json.dumps(
            data,
            sort_keys=bool(style["sort_keys"]),
            ensure_ascii=bool(style["ensure_ascii"]),
            separators=style["separators"],  # type: ignore[arg-type]
        )
        + "\n",
        encoding="utf-8",
    )
    store = open_store(url)
    [record] = store.all_runs()
    assert list(record.outcomes.values("hit@1")) == list(
        demo_run.record.outcomes.values("hit@1")  # type: ignore[attr-defined]
    )
    verdict = gate(evaluate(load_set("demo"), "bm25-demo"), store, {"hit@1": 0.0})
    assert verdict.baseline_run_id == record.run_id and not verdict.regressed
    with pytest.raises(Exception, match="already stored"):
        store.save(demo_run.record)  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return lay_out(tmp_path_factory.mktemp("hostile-site"))


def _eval(
    folder: Path, site: Path | None, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**child_environment(), **(env or {})}
    if site is not None:
        env["PYTHONPATH"] = child_pythonpath(site)
    return subprocess.run(
        [sys.executable, "-m", "retrievalkit", "eval", *args], cwd=folder, env=env,
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("act", ["unlink", "replace"])
def test_a_sqlite_file_deleted_or_replaced_during_the_run_is_not_saved_into(
    act: str, hostile_site: Path, tmp_path: Path
) -> None:
    (tmp_path / "golden.jsonl").write_text(
        '{"id": "q1", "question": "first", "expected": ["d1"]}\n', encoding="utf-8"
    )
    (tmp_path / "retrievalkit.toml").write_text(
        # Named through the environment: a configuration naming the store is refused.
        f'[retrievers.h]\nplugin = "hostile"\nact = "{act}"\ntext = "$RK_STORE_FILE"\n',
        encoding="utf-8",
    )
    done = _eval(tmp_path, hostile_site, "--set", "golden.jsonl", "--retriever", "h",
                 "--store", "sqlite:///runs.sqlite3", "-q",
                 env={"RK_STORE_FILE": str(tmp_path / "runs.sqlite3")})  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "not saved" in done.stderr and "Traceback" not in done.stderr
    if (tmp_path / "runs.sqlite3").exists():
        with sqlite3.connect(tmp_path / "runs.sqlite3") as connection:
            names = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
            assert (
                "runs" not in names
                or not connection.execute("SELECT count(*) FROM runs").fetchone()[0]
            )


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real file system of 256 KiB (tmpfs), mounted for the test and unmounted after."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"these tests mount a tmpfs (run as root): {done.stderr}"
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def _fill(folder: Path, leave: int) -> None:
    """Fill ``folder``'s file system until only about ``leave`` bytes are free."""
    free = shutil.disk_usage(folder).free
    with open(folder / "filler", "wb") as filler, contextlib.suppress(OSError):  # full already
        filler.write(b"\0" * max(0, free - leave))


@pytest.mark.parametrize("backend", ["sqlite", "jsonl"])
@pytest.mark.parametrize("moment", ["open", "save"])
def test_a_full_disk_says_disk_full(
    backend: str, moment: str, small_disk: Path, tmp_path: Path
) -> None:
    name = "runs.sqlite3" if backend == "sqlite" else "runs.jsonl"
    url = f"{backend}:////{str(small_disk / name).lstrip('/')}"
    if moment == "save":
        first = _eval(tmp_path, None, "--set", "demo", "--retriever", "bm25-demo",
                      "--store", url, "-q")  # fmt: skip
        assert first.returncode == 0, first.stderr
    _fill(small_disk, leave=0 if moment == "open" else 2048)
    done = _eval(tmp_path, None, "--set", "demo", "--retriever", "bm25-demo", "--store",
                 url, "-q")  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "disk full" in done.stderr and "Traceback" not in done.stderr
    assert "nothing was saved" in done.stderr or "not saved" in done.stderr
