"""Helpers the tests share: the CLI in a subprocess, the demo set, a configuration file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import retrievalkit

REPO = Path(__file__).resolve().parents[3]
DEMO = Path(retrievalkit.__file__).parent / "demo"
CORPUS = DEMO / "corpus.jsonl"


def cli(
    *args: str, cwd: Path | None = None, env: Mapping[str, str] | None = None, timeout: int = 600
) -> subprocess.CompletedProcess[str]:
    """``python -m retrievalkit ARGS`` in a subprocess, as a user runs it."""
    environment = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "retrievalkit", *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_cli(*args: str, cwd: Path | None = None) -> tuple[int, str, str]:
    """``retrievalkit ARGS`` in this process (exit code, stdout, stderr): a subprocess
    costs seconds of imports, and Qdrant's local mode shares one client per folder here."""
    import contextlib
    import io

    from retrievalkit.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    previous = Path.cwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    finally:
        os.chdir(previous)
    return code, out.getvalue(), err.getvalue()


def write_config(folder: Path, **retrievers: Mapping[str, Any]) -> Path:
    """A retrievalkit.toml with one ``[retrievers.NAME]`` block per keyword."""
    lines = []
    for name, options in retrievers.items():
        lines.append(f"[retrievers.{name}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in options.items()]
    path = folder / "retrievalkit.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
