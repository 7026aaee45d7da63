"""A retriever cannot move the ground: the working directory, stdout, a forked copy.

The hostile retriever (tests/fixtures/rk_hostile) changes the working directory while
it starts or answers, prints to stdout through Python and through file descriptor 1,
or forks a copy of the process that carries on. Seeded cases cross each with the
outputs of ``eval``: the store, ``--output-dir``, ``--junit-xml`` and ``--format json``
or ``markdown`` on stdout. The run must land where it was asked, stdout must hold
retrievalkit's document alone, and exactly one run may be saved.
"""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from child_env import child_environment
from hostile import lay_out

ACTS = ("chdir-create", "chdir-retrieve", "print-create", "print-retrieve", "fork")
FORMATS = ("json", "markdown")


def _cases(count: int, seed: int) -> list[tuple[str, str, bool]]:
    rng = random.Random(seed)
    found = {(rng.choice(ACTS), rng.choice(FORMATS), rng.random() < 0.5) for _ in range(count)}
    return sorted(found | {("fork", "json", False), ("chdir-retrieve", "json", True)})


CASES = _cases(8, seed=4)


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return lay_out(tmp_path_factory.mktemp("hostile-site"))


@pytest.mark.parametrize(("act", "fmt", "relative_elsewhere"), CASES)
def test_a_plugin_cannot_move_the_store_the_outputs_or_stdout(
    act: str, fmt: str, relative_elsewhere: bool, hostile_site: Path, tmp_path: Path
) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    (project / "golden.jsonl").write_text(
        '{"id": "q1", "question": "first", "expected": ["d1"]}\n'
        '{"id": "q2", "question": "second", "expected": ["d2"]}\n',
        encoding="utf-8",
    )
    what, _, when = act.partition("-")
    options = [f'act = "{what}"', f'when = "{when or "retrieve"}"']
    options.append(f'text = "{elsewhere if what == "chdir" else "PLUGIN NOISE"}"')
    (project / "retrievalkit.toml").write_text(
        '[retrievers.h]\nplugin = "hostile"\n' + "\n".join(options) + "\n", encoding="utf-8"
    )
    # The outputs named relative to the working directory the run started in.
    out = "../project/out" if relative_elsewhere else "out"
    env = child_environment(hostile_site)
    env.update(NO_COLOR="1")
    done = subprocess.run(
        [sys.executable, "-m", "retrievalkit", "eval", "--set", "golden.jsonl",
         "--retriever", "h", "--store", "sqlite:///runs.sqlite3", "--output-dir", out,
         "--junit-xml", "junit.xml", "--format", fmt],
        cwd=project, env=env, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    if fmt == "json":
        document = json.loads(done.stdout)  # one document, nothing else
        assert document["questions"] == 2  # (the options, noise included, are in its manifest)
    else:
        assert "PLUGIN NOISE" not in done.stdout and done.stdout.startswith("#")
    with sqlite3.connect(project / "runs.sqlite3") as connection:
        assert connection.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
    assert sorted(p.name for p in (project / "out").iterdir()) == [
        "per_question.jsonl", "report.md", "summary.json",
    ]  # fmt: skip
    assert (project / "junit.xml").is_file()
    assert not list(elsewhere.iterdir())
    if what == "fork":
        assert "forked by a plugin" in done.stderr
