"""A child process a test starts imports the retrievalkit the test imports, not another copy."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from child_env import child_environment, child_pythonpath, tree_root
from conftest import RunCli

import retrievalkit

PRINT_FILE = "import retrievalkit, sys; sys.stdout.write(retrievalkit.__file__)"


def decoy(folder: Path) -> Path:
    """A folder holding another ``retrievalkit`` package that says it is the decoy."""
    package = folder / "retrievalkit"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("DECOY = True\n", encoding="utf-8")
    return folder


def child_file(env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", PRINT_FILE], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


def test_a_child_imports_the_parents_retrievalkit_over_a_decoy_on_pythonpath(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(decoy(tmp_path / "elsewhere")))
    assert child_file(child_environment()) == retrievalkit.__file__


def test_plugin_sites_come_first_then_the_tree_then_the_parents_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["/parent/a", "", "/parent/b"]))
    parts = child_pythonpath(tmp_path / "site", ["/x", "/y"]).split(os.pathsep)
    assert parts == [str(tmp_path / "site"), "/x", "/y", str(tree_root()), "/parent/a", "/parent/b"]


def test_the_tree_is_named_once_when_a_site_is_the_tree_itself() -> None:
    parts = child_pythonpath(tree_root()).split(os.pathsep)
    assert parts.count(str(tree_root())) == 1


def test_a_broken_decoy_on_the_parents_pythonpath_does_not_reach_the_cli_fixture(
    cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = decoy(tmp_path / "elsewhere")
    (folder / "retrievalkit" / "__init__.py").write_text("raise ImportError('decoy')\n")
    monkeypatch.setenv("PYTHONPATH", str(folder))
    done = cli("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["retrievalkit", retrievalkit.__version__]
