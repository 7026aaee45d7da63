"""The sweeps page's configuration and command, run as written on the demo's files."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import retrievalkit

if TYPE_CHECKING:
    from conftest import RunCli

PAGE = Path(__file__).resolve().parents[1] / "docs" / "sweeps.md"
DEMO = Path(retrievalkit.__file__).parent / "demo"


def test_the_example_prints_what_the_page_shows(cli: RunCli, tmp_path: Path) -> None:
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index("## An example") :]
    config = re.search(r"```toml\n(.*?)```", section, re.S)
    shown = re.search(r"```console\n\$ (retrievalkit sweep [^\n]+)\n(.*?)```", section, re.S)
    assert config is not None and shown is not None
    (tmp_path / "retrievalkit.toml").write_text(config.group(1), encoding="utf-8")
    for name in ("corpus.jsonl", "golden.jsonl"):
        shutil.copy(DEMO / name, tmp_path / name)
    result = cli(*shown.group(1).split()[1:])
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    # Every line the page shows is printed (the configuration rows, elided on the page
    # with "...", carry timings that differ from run to run).
    for line in shown.group(2).splitlines():
        if line != "...":
            assert line in lines, line
