"""A store of demo runs and a real ``retrievalkit serve`` process over it, for the serve tests."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import attrs
from child_env import child_environment

from retrievalkit.demo import DEMO_CORPUS


def retrievalkit(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "retrievalkit", *args],
        cwd=cwd,
        env=environment(env),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = child_environment()
    env.pop("RETRIEVALKIT_SERVE_TOKEN", None)
    env["NO_COLOR"] = "1"
    env.update(extra or {})
    return env


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@attrs.frozen
class DemoRuns:
    folder: Path
    store: str
    demo: str
    """The newer of two bm25-demo runs."""
    demo_older: str
    titles: str
    """BM25 over the demo's titles only: a weak run with many unjudged documents."""


def demo_runs(folder: Path) -> DemoRuns:
    """Two bm25-demo runs and one titles-only run of the demo set in a JSON Lines store."""
    titles = folder / "titles.jsonl"
    with titles.open("w", encoding="utf-8") as handle:
        for line in DEMO_CORPUS.read_text(encoding="utf-8").splitlines():
            document = json.loads(line)
            document["text"] = ""
            handle.write(json.dumps(document) + "\n")
    (folder / "retrievalkit.toml").write_text(
        f'[retrievers.titles-only]\nplugin = "bm25"\ncorpus = "{titles}"\n'
        'doc_id_separator = "#"\nstemmer = ""\n\n[store]\nurl = "jsonl:///runs.jsonl"\n',
        encoding="utf-8",
    )
    for retriever in ("bm25-demo", "bm25-demo", "titles-only"):
        ok(retrievalkit("eval", "--set", "demo", "--retriever", retriever, "--quiet", cwd=folder))

    def run_ids(retriever: str) -> list[str]:
        listed = ok(
            retrievalkit(
                "history", "--set", "demo", "--retriever", retriever, "--format", "json", cwd=folder
            )
        )
        return [row["run_id"] for row in json.loads(listed)]

    demo, demo_older = run_ids("bm25-demo")
    (titles_run,) = run_ids("titles-only")
    return DemoRuns(folder, "jsonl:///runs.jsonl", demo, demo_older, titles_run)


@attrs.frozen
class Server:
    url: str
    process: subprocess.Popen[str]
    log: Path

    def log_lines(self) -> list[str]:
        return self.log.read_text(encoding="utf-8").splitlines()


@contextmanager
def serving(
    folder: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> Iterator[Server]:
    """``retrievalkit serve --port 0 ARGS`` in ``folder``; stopped (SIGTERM) on leaving."""
    log = folder / f"serve-{time.monotonic_ns()}.log"
    with log.open("w", encoding="utf-8") as errors:
        process = subprocess.Popen(
            [sys.executable, "-m", "retrievalkit", "serve", "--port", "0", *args],
            cwd=folder,
            env=environment(env),
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        found = re.search(r"on (http://\S+?)/?(;| |$)", line)
        if found is None:
            process.wait(timeout=timeout)
            raise AssertionError(f"serve did not start: {line!r} {log.read_text()}")
        yield Server(found.group(1), process, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def wait_until_answering(url: str, timeout: float = 60) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        try:
            httpx.get(url + "/static/serve.css", timeout=5)
            return
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def grade_lines(path: Path) -> list[list[str]]:
    """The data lines of a labels file, split into cells."""
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0].split("\t")[:3] == ["query-id", "corpus-id", "score"]
    return [line.split("\t") for line in lines[1:]]


def answerable(outcomes: Sequence[object]) -> int:
    return sum(1 for outcome in outcomes if getattr(outcome, "expected", ()))
