"""docs/engines.md, run as printed: the engine study on a corpus cut from SciFact."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from conftest import shared_data

PAGE = Path(__file__).resolve().parents[1] / "docs" / "engines.md"


def files(text: str) -> dict[str, str]:
    """Each ``<!-- file: NAME -->`` block of the page, by name."""
    return dict(re.findall(r"<!-- file: (\S+) -->\n```\w+\n(.*?)```", text, re.S))


def commands(text: str) -> list[str]:
    return re.findall(r"^\$ (.+)$", text, re.M)


def test_the_engine_study_runs_as_printed(tmp_path: Path) -> None:
    text = PAGE.read_text(encoding="utf-8")
    written = files(text)
    assert set(written) == {"build_study.py", "retrievalkit.toml"}
    for name, content in written.items():
        (tmp_path / name).write_text(content, encoding="utf-8")
    (tmp_path / "scifact").symlink_to(shared_data() / "scifact")
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120"}
    outputs: dict[str, str] = {}
    listed = commands(text)
    assert len(listed) == 7
    for line in listed:
        program, *args = shlex.split(line)
        runner = [sys.executable] if program == "python" else [sys.executable, "-m", program]
        done = subprocess.run(
            [*runner, *args], cwd=tmp_path, capture_output=True, text=True, env=env, check=False
        )
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
        outputs[line] = done.stdout
    first, gated = (
        line
        for line in listed
        if line.startswith("retrievalkit eval --set study --retriever engine-a")
    )
    # The stage table and the attribution of misses, in the terminal.
    assert "Stages" in outputs[first]
    for stage in ("engine-a-first.bm25", "engine-a-first.dense", "engine-a-first.fusion", "rerank"):
        assert stage in outputs[first]
    assert "Misses and rescues by stage" in outputs[first]
    # The second run was gated on the reranked stage's MRR against the first.
    assert "stage.rerank:rr" in outputs[gated] and "no regression" in outputs[gated]
    chunked = next(line for line in listed if "--chunk-separator" in line)
    assert "chunk_rr" in outputs[chunked] and "chunk_recall@10" in outputs[chunked]
    history = next(line for line in listed if line.startswith("retrievalkit history"))
    assert "stage.rerank:rr" in outputs[history]
    runs = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    staged = [run for run in runs if run["model"] == "engine-a"]
    assert len(staged) == 2 and all(run["stages"]["order"][-1] == "rerank" for run in staged)
    assert "stages" not in next(run for run in runs if run["model"] == "engine-b")
