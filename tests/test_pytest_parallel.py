"""scripts/pytest_parallel.py: the core suite's shares, balanced by recorded file times."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "pytest_parallel", REPO / "scripts" / "pytest_parallel.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _files(folder: Path, sizes: dict[str, int]) -> list[Path]:
    files = []
    for name, size in sizes.items():
        path = folder / name
        path.write_text("#" * size, encoding="utf-8")
        files.append(path)
    return files


def test_recorded_times_share_the_files_longest_first_onto_the_least_loaded(
    script: ModuleType, tmp_path: Path
) -> None:
    files = _files(tmp_path, {"test_a.py": 10, "test_b.py": 10, "test_c.py": 10, "test_d.py": 10})
    times = zip(files, (7, 5, 4, 3), strict=True)
    recorded = {script.key_of(file): seconds for file, seconds in times}
    groups = script.shares(files, 2, recorded)
    # Longest first: a (7) to one, b (5) to the other, c (4) to b's (5 < 7), d (3) to a's.
    assert [[file.name for file in group] for group in groups] == [
        ["test_a.py", "test_d.py"],
        ["test_b.py", "test_c.py"],
    ]


def test_a_file_not_recorded_counts_by_its_size_at_the_recorded_rate(
    script: ModuleType, tmp_path: Path
) -> None:
    files = _files(tmp_path, {"test_old.py": 100, "test_other.py": 300, "test_new.py": 200})
    recorded = {script.key_of(files[0]): 10.0, script.key_of(files[1]): 50.0}
    expected = script.estimates(files, recorded)
    # 60 s over 400 bytes: 0.15 s a byte, so 200 bytes are 30 s.
    assert expected[files[2]] == pytest.approx(30.0)
    assert expected[files[0]] == 10.0 and expected[files[1]] == 50.0
    # Without any record the sizes alone decide, as before.
    assert script.estimates(files, {})[files[1]] == 300


def test_a_broken_record_is_no_record(script: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "durations.json"
    path.write_text("{not json", encoding="utf-8")
    assert script.read_durations(path) == {}
    path.write_text(json.dumps({"a": 1.5, "b": "slow", "c": -1, "d": True}), encoding="utf-8")
    assert script.read_durations(path) == {"a": 1.5}
    assert script.read_durations(tmp_path / "missing.json") == {}


def test_junit_times_add_up_per_file_with_the_module_fixture_included(
    script: ModuleType, tmp_path: Path
) -> None:
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "test_slow.py").write_text(
        "import time\nimport pytest\n\n"
        "@pytest.fixture(scope='module')\ndef setup():\n    time.sleep(0.6)\n\n"
        "def test_one(setup):\n    pass\n\ndef test_two(setup):\n    time.sleep(0.2)\n",
        encoding="utf-8",
    )
    (folder / "test_quick.py").write_text("def test_quick():\n    pass\n", encoding="utf-8")
    report = tmp_path / "report.xml"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--rootdir={folder}",
         f"--junitxml={report}", "-o", "junit_family=xunit1", str(folder)],
        cwd=folder, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    times = script.file_durations(report)
    slow = next(seconds for name, seconds in times.items() if name.endswith("test_slow.py"))
    quick = next(seconds for name, seconds in times.items() if name.endswith("test_quick.py"))
    assert slow >= 0.8 and quick < 0.5
