"""Outputs never destroy inputs, and are written whole or not at all.

Seeded cases cross every output (``--output-dir``'s files, ``--junit-xml``,
``$GITHUB_STEP_SUMMARY``, ``export --output``, ``report -o``, ``generate --output``
and the store URL itself) with every file a run reads or writes (the set, the
configuration, the corpus a retriever reads, the store and the files beside it) and
every way of naming the same file (as given, through ``./`` and ``..``, a symlink, a
hard link). Each must be refused before any work with exit code 2, leaving the file
byte for byte as it was. A write cut short by a file-size limit (as by a full disk)
leaves the old output whole, and a job summary is appended whole or not at all.
"""

from __future__ import annotations

import hashlib
import os
import random
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from child_env import child_environment

from retrievalkit.cli.main import main

GOLDEN = (
    '{"id": "q1", "question": "apple pie", "expected": ["d1"]}\n'
    '{"id": "q2", "question": "pear tart", "expected": ["d2"]}\n'
)
CORPUS = '{"_id": "d1", "text": "apple pie recipe"}\n{"_id": "d2", "text": "pear tart"}\n'
CONFIG = '[retrievers.b]\nplugin = "bm25"\ncorpus = "corpus.jsonl"\n'
STORE = "runs.sqlite3"

#: The files a run reads or writes, by what they are.
TARGETS = {
    "set": "golden.jsonl",
    "config": "retrievalkit.toml",
    "corpus": "corpus.jsonl",
    "store": STORE,
    "store-wal": STORE + "-wal",
    "store-shm": STORE + "-shm",
    "store-journal": STORE + "-journal",
}
#: Ways of naming a file: as given, through other path spellings, symlinks, hard links.
SPELLINGS = ("plain", "dotted", "parent", "symlink", "hardlink", "absolute")
OUTPUTS = ("junit", "output-dir", "step-summary", "store-url", "export", "report", "generate")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project folder with a set, a corpus, a configuration and a store holding a run."""
    folder = tmp_path_factory.mktemp("project")
    (folder / "golden.jsonl").write_text(GOLDEN, encoding="utf-8")
    (folder / "corpus.jsonl").write_text(CORPUS, encoding="utf-8")
    (folder / "retrievalkit.toml").write_text(CONFIG, encoding="utf-8")
    here = Path.cwd()
    os.chdir(folder)
    try:
        for url in (f"sqlite:///{STORE}", "jsonl:///runs.jsonl"):
            assert main(["eval", "--set", "golden.jsonl", "--retriever", "b", "--store", url,
                         "--format", "json", "-q"]) == 0  # fmt: skip
    finally:
        os.chdir(here)
    return folder


def _digests(folder: Path) -> dict[str, str]:
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in folder.iterdir()
        if path.is_file() and not path.is_symlink()
    }


def _spell(folder: Path, target: str, spelling: str) -> str:
    """A name for ``folder/target`` in the given spelling (creating links as needed)."""
    if spelling == "plain":
        return target
    if spelling == "dotted":
        return f"./{target}"
    if spelling == "parent":
        (folder / "sub").mkdir(exist_ok=True)
        return f"sub/../{target}"
    if spelling == "absolute":
        return str(folder / target)
    link = folder / "links" / f"{spelling}-{target}"
    link.parent.mkdir(exist_ok=True)
    if spelling == "symlink":
        link.symlink_to(folder / target)
    else:
        os.link(folder / target, link)
    return str(link.relative_to(folder))


def _run_id(folder: Path) -> str:
    import json

    first = (folder / "runs.jsonl").read_text(encoding="utf-8").splitlines()[0]
    return str(json.loads(first)["run_id"])


def _command(output: str, name: str, folder: Path) -> tuple[list[str], dict[str, str]]:
    store = ["--store", f"sqlite:///{STORE}"]
    evaluate = ["eval", "--set", "golden.jsonl", "--retriever", "b", "--format", "json", "-q"]
    if output == "junit":
        return [*evaluate, *store, "--junit-xml", name], {}
    if output == "output-dir":
        return [*evaluate, *store, "--output-dir", name], {}
    if output == "step-summary":
        return [*evaluate, *store], {"GITHUB_STEP_SUMMARY": name}
    if output == "store-url":
        absolute = name if name.startswith("/") else None
        url = f"sqlite:////{absolute.lstrip('/')}" if absolute else f"sqlite:///{name}"
        return [*evaluate, "--store", url], {}
    if output == "export":
        return ["export", _run_id(folder), *store, "--format", "trec-run", "--output", name], {}
    if output == "report":
        return ["report", _run_id(folder), *store, "-o", name], {}
    return ["generate", "--corpus", "corpus.jsonl", "--generator", "offline", "--output",
            name], {}  # fmt: skip


def _cases(count: int, seed: int) -> list[tuple[str, str, str]]:
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        output = rng.choice(OUTPUTS)
        targets = list(TARGETS)
        if output == "output-dir":
            targets = ["set-as-report", "store-as-summary"]
        elif output == "generate":
            targets = ["corpus", "config-as-jsonl", "set-read-by-config"]
        elif output == "store-url":
            targets = ["set", "config", "corpus"]
        elif output in ("export", "report"):  # they read the config, the store, not the set
            targets = [target for target in targets if target != "set"]
        target = rng.choice(targets)
        spellings = SPELLINGS
        if target.startswith("store-") and target not in ("store-as-summary",):
            spellings = ("plain", "dotted", "parent", "symlink", "absolute")
        cases.append((output, target, rng.choice(spellings)))
    return sorted(set(cases))


CASES = _cases(80, seed=2026)


@pytest.mark.parametrize(("output", "target", "spelling"), CASES)
def test_an_output_that_is_a_file_of_the_run_is_refused_before_any_work(
    output: str,
    target: str,
    spelling: str,
    template: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    folder = tmp_path / "project"
    shutil.copytree(template, folder, symlinks=True)
    monkeypatch.chdir(folder)
    if target == "set-as-report":  # --output-dir whose report.md is the set
        (folder / "out").mkdir()
        os.link(folder / "golden.jsonl", folder / "out" / "report.md")
        name = _spell(
            folder, "out", spelling if spelling in ("plain", "dotted", "absolute") else "plain"
        )
    elif target == "store-as-summary":
        (folder / "out").mkdir()
        (folder / "out" / "summary.json").symlink_to(folder / STORE)
        name = "out"
    elif target == "config-as-jsonl":
        os.link(folder / "retrievalkit.toml", folder / "config-link.jsonl")
        name = "config-link.jsonl"
    elif target == "set-read-by-config":  # the config names the set, generate would replace it
        with open(folder / "retrievalkit.toml", "a", encoding="utf-8") as config:
            config.write('\n[sets.mine]\npath = "golden.jsonl"\n')
        name = _spell(folder, "golden.jsonl", spelling)
    else:
        name = _spell(folder, TARGETS[target], spelling)
    before = _digests(folder)
    argv, env = _command(output, name, folder)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    code = main(argv)
    err = capfd.readouterr().err
    assert code == 2, err
    assert "would overwrite" in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    after = _digests(folder)
    if output in ("export", "report"):
        # Reading a store may rewrite its header; what counts is that it still holds its run.
        for name in TARGETS.values():
            before.pop(name, None) if name.startswith(STORE) else None
        import sqlite3

        with sqlite3.connect(folder / STORE) as connection:
            assert connection.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
    assert {name: after.get(name) for name in before} == before


def _limited(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def _cli_limited(
    folder: Path, limit: int, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    environment = child_environment()
    environment.update(env, NO_COLOR="1", PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run(
        [sys.executable, "-m", "retrievalkit", *args], cwd=folder, env=environment,
        capture_output=True, text=True, check=False, timeout=120,
        preexec_fn=lambda: _limited(limit),
    )  # fmt: skip


@pytest.mark.parametrize("output", ["junit", "output-dir", "export"])
def test_a_full_disk_leaves_the_old_output_whole(
    output: str, template: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "project"
    shutil.copytree(template, folder, symlinks=True)
    old = b"the old output, which must survive\n"
    name = {"junit": "junit.xml", "output-dir": "out", "export": "run.trec"}[output]
    if output == "output-dir":
        (folder / "out").mkdir()
        (folder / "out" / "report.md").write_bytes(old)
        kept = folder / "out" / "report.md"
    else:
        (folder / name).write_bytes(old)
        kept = folder / name
    flag = {"junit": "--junit-xml", "output-dir": "--output-dir", "export": "--output"}[output]
    if output == "export":
        # A JSON Lines store is read without writing beside it (SQLite writes its -shm).
        args = ["export", _run_id(folder), "--store", "jsonl:///runs.jsonl", "--format",
                "trec-run", flag, name]  # fmt: skip
    else:
        args = ["eval", "--set", "golden.jsonl", "--retriever", "b", "--no-save", "-q",
                "--store", "memory:", "--format", "json", flag, name]  # fmt: skip
    # Smaller than the output (a trec-run of two questions is 30 bytes), larger than none.
    done = _cli_limited(folder, 10 if output == "export" else 40, *args)
    assert done.returncode == 3, done.stderr
    assert "disk full" in done.stderr and "Traceback" not in done.stderr
    assert kept.read_bytes() == old
    assert not [p for p in kept.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_job_summary_is_appended_whole_or_not_at_all(template: Path, tmp_path: Path) -> None:
    folder = tmp_path / "project"
    shutil.copytree(template, folder, symlinks=True)
    summary = folder / "summary.md"
    earlier = b"# an earlier step's summary\n" * 10
    summary.write_bytes(earlier)
    done = _cli_limited(
        folder, len(earlier) + 100,
        "eval", "--set", "golden.jsonl", "--retriever", "b", "--no-save", "-q",
        "--store", "memory:", GITHUB_STEP_SUMMARY=str(summary),
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "disk full" in done.stderr
    assert summary.read_bytes() == earlier
