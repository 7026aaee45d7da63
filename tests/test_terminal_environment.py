"""The terminal environment cannot empty a report, fill a log or crash a saved run.

Seeded environments: ``COLUMNS`` of every odd kind (0, negative, not a number, tiny,
huge), ``FORCE_COLOR`` with stderr on a pipe (a CI log), and output encodings that lack
the characters of a report (``PYTHONIOENCODING=ascii``, latin-1). Each ``eval`` must
exit 0 with the whole report on stdout, no progress bar on stderr, and the run saved.
"""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from child_env import child_environment

from retrievalkit.render.terminal import MIN_WIDTH, width_from_environment

ODD_COLUMNS = ("0", "-1", "-80", "", "abc", "1", "5", "39", " 12 ", "1e3", "100000")


def _environments(count: int, seed: int) -> list[dict[str, str]]:
    rng = random.Random(seed)
    found = []
    for _ in range(count):
        env: dict[str, str] = {}
        if rng.random() < 0.7:
            env["COLUMNS"] = rng.choice(ODD_COLUMNS)
        if rng.random() < 0.5:
            env["FORCE_COLOR"] = rng.choice(("1", "2", "3", "true"))
        if rng.random() < 0.5:
            env["PYTHONIOENCODING"] = rng.choice(("ascii", "latin-1", "ascii:strict", "cp1252"))
        found.append(env or {"COLUMNS": "0"})
    return found


NAMED = [{"COLUMNS": "0"}, {"FORCE_COLOR": "1"}, {"PYTHONIOENCODING": "ascii"}]
#: (environment, format): seeded environments as a table, the named ones in both formats.
CASES = [(env, "table") for env in [*_environments(6, seed=10), *NAMED]] + [
    (env, "markdown") for env in NAMED
]

# A set whose ids and texts hold characters no 8-bit encoding has.
GOLDEN = (
    '{"id": "q-\\u00e9\\u4e2d", "question": "library card renew", "expected": ["d\\u2603"]}\n'
    '{"id": "q2", "question": "opening hours \\u2014 weekend", "expected": ["d2"]}\n'
)
CORPUS = (
    '{"_id": "d\\u2603", "text": "renew your library card at the desk"}\n'
    '{"_id": "d2", "text": "opening hours on the weekend"}\n'
)


@pytest.mark.parametrize(("overrides", "fmt"), CASES)
def test_an_odd_terminal_environment_still_gives_the_whole_report(
    overrides: dict[str, str], fmt: str, tmp_path: Path
) -> None:
    (tmp_path / "golden.jsonl").write_text(GOLDEN, encoding="utf-8")
    (tmp_path / "corpus.jsonl").write_text(CORPUS, encoding="utf-8")
    (tmp_path / "retrievalkit.toml").write_text(
        '[retrievers.b]\nplugin = "bm25"\ncorpus = "corpus.jsonl"\n', encoding="utf-8"
    )
    env = {
        key: value
        for key, value in child_environment().items()
        if key not in ("NO_COLOR", "COLUMNS", "FORCE_COLOR", "PYTHONIOENCODING")
    }
    env.update(overrides)
    done = subprocess.run(
        [sys.executable, "-m", "retrievalkit", "eval", "--set", "golden.jsonl", "--retriever",
         "b", "--store", "sqlite:///runs.sqlite3", "--format", fmt],
        cwd=tmp_path, env=env, capture_output=True, check=False, timeout=120,
    )  # fmt: skip
    out, err = done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace")
    assert done.returncode == 0, err
    assert "Traceback" not in err
    assert "hit@1" in out and "q2" in out  # the report is there, the questions too
    assert "\x1b[2K" not in err and "━" not in err  # no progress bar redrawn into a log
    if "PYTHONIOENCODING" not in overrides:
        assert "q-é中" in out  # nothing lost where the encoding has every character
    with sqlite3.connect(tmp_path / "runs.sqlite3") as connection:
        assert connection.execute("SELECT count(*) FROM runs").fetchone()[0] == 1


@pytest.mark.parametrize("text", ODD_COLUMNS)
def test_the_width_is_never_below_a_drawable_table(text: str) -> None:
    width = width_from_environment({"COLUMNS": text})
    assert width is not None and width >= MIN_WIDTH
    assert width_from_environment({}) is None


EMBED = """\
import sys
from retrievalkit.embedders import create_embedder
from retrievalkit.retrievers.dense import embed_corpus
embedder = create_embedder("wordllama", {"dimensions": 128})
embed_corpus("corpus.jsonl", embedder, cache_dir="cache", progress=True, batch_size=1)
from rich.console import Console
Console().print("[bold]done[/bold]")
"""


@pytest.mark.parametrize("force", ["1", "3", "true"])
def test_force_color_on_a_pipe_colours_but_never_draws_the_embedding_bar(
    force: str, tmp_path: Path
) -> None:
    # progress=True asks for the bar (the index commands of backend plugins do); a pipe
    # still never gets one: FORCE_COLOR makes rich treat any stream as a terminal, so the
    # stream itself must decide.
    (tmp_path / "corpus.jsonl").write_text(CORPUS, encoding="utf-8")
    env = child_environment(FORCE_COLOR=force, COLUMNS="120")
    env.pop("NO_COLOR", None)
    done = subprocess.run(
        [sys.executable, "-c", EMBED],
        cwd=tmp_path, env=env, capture_output=True, check=False, timeout=120,
    )  # fmt: skip
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 0, err
    assert "\x1b[?25l" not in err and "\x1b[2K" not in err and "━" not in err
    assert "\x1b[1m" in done.stdout.decode("utf-8", "replace")  # colours asked for: given
