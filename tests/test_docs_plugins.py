"""docs/plugins.md is runnable: its tutorial package installs, passes its tests and evaluates.

The tutorial's files are the code blocks after ``<!-- file: PATH -->`` markers; the tour's
excerpts (after ``<!-- excerpt: PATH -->``) must appear verbatim in the example package.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from child_env import child_pythonpath
from conftest import REPO, RunCli, _install

from retrievalkit.testing import RULES

PAGE = REPO / "docs" / "plugins.md"
BLOCK = re.compile(r"<!-- (file|excerpt): (\S+) -->\n```[a-z]*\n(.*?)```", re.DOTALL)


def blocks(kind: str) -> list[tuple[str, str]]:
    found = [
        (path, body)
        for marker, path, body in BLOCK.findall(PAGE.read_text(encoding="utf-8"))
        if marker == kind
    ]
    assert found, f"no {kind} blocks in {PAGE}"
    return found


@pytest.fixture(scope="module")
def tutorial(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The tutorial's package written from the page, and the folder it is installed in."""
    root = tmp_path_factory.mktemp("tutorial")
    for relative, body in blocks("file"):
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body, encoding="utf-8")
    package = root / "my-retriever"
    _install({package: root / "site"})
    return package, root / "site"


def test_the_tutorial_package_passes_its_own_tests(tutorial: tuple[Path, Path]) -> None:
    package, site = tutorial
    env = {**os.environ, "PYTHONPATH": child_pythonpath(site)}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=package,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout


def test_the_tutorial_retriever_evaluates_as_the_page_says(
    cli: RunCli, tutorial: tuple[Path, Path]
) -> None:
    _, site = tutorial
    listing = cli("list", sites=[site])
    assert "my-retriever[word-overlap]" in listing.stdout
    result = cli(
        "eval", "--set", "demo", "--retriever", "word-overlap", "--format", "json", sites=[site]
    )
    assert result.returncode == 0, result.stderr
    hit_at_1 = json.loads(result.stdout)["metrics"]["hit@1"]["mean"]
    assert round(hit_at_1 * 100) == 44, "docs/plugins.md says 'about 44 %'"


def test_every_excerpt_of_the_example_is_verbatim() -> None:
    for relative, body in blocks("excerpt"):
        source = (REPO / relative).read_text(encoding="utf-8")
        assert body in source, f"docs/plugins.md quotes {relative}, which no longer reads so"


def test_the_rule_table_lists_every_rule_of_the_kit() -> None:
    kinds = "retriever|provider|store|embedder"
    rows = re.findall(rf"^\| `((?:{kinds})\.[a-z-]+)` \|", PAGE.read_text(), re.M)
    documented = set(rows)
    assert documented == set(RULES)
