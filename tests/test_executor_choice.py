"""--executor and --ray-address: checked before anything runs, Ray imported only for ray."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from child_env import child_pythonpath

import retrievalkit as rk
from retrievalkit.errors import InputError

if TYPE_CHECKING:
    from conftest import RunCli

DEMO = Path(rk.__file__).parent / "demo"


def test_an_unknown_executor_is_refused_with_the_choices() -> None:
    with pytest.raises(InputError, match="expected one of local, ray, got 'spark'"):
        rk.evaluate(DEMO / "golden.jsonl", "bm25-demo", executor="spark")


def test_a_ray_address_without_the_ray_executor_is_refused(cli: RunCli) -> None:
    result = cli(
        "eval", "--set", str(DEMO / "golden.jsonl"), "--retriever", "bm25-demo",
        "--no-save", "--ray-address", "127.0.0.1:6379",
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "--ray-address" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_ray_not_installed_names_the_extra_and_exits_2(tmp_path: Path) -> None:
    # A Ray that cannot be imported, whether or not it is installed here.
    (tmp_path / "ray.py").write_text("raise ImportError('No module named ray')\n")
    result = subprocess.run(
        [sys.executable, "-m", "retrievalkit", "eval", "--set", str(DEMO / "golden.jsonl"),
         "--retriever", "bm25-demo", "--no-save", "--executor", "ray"],
        cwd=tmp_path, env={"PYTHONPATH": child_pythonpath(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "--executor ray needs Ray, which is not installed" in result.stderr
    assert "retrievalkit-eval[ray]" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
