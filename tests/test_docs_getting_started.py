"""The getting-started page's golden set and its `validate` output, run as written."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import RunCli

PAGE = Path(__file__).resolve().parents[1] / "docs" / "getting-started.md"


def test_validate_prints_what_the_page_shows(cli: RunCli, tmp_path: Path) -> None:
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index("### The golden set") :]
    golden = re.search(r"```json\n(.*?)```", section, re.S)
    shown = re.search(r"```console\n\$ (retrievalkit validate [^\n]+)\n(.*?)```", section, re.S)
    assert golden is not None and shown is not None
    (tmp_path / "golden").mkdir()
    (tmp_path / "golden" / "support.jsonl").write_text(golden.group(1), encoding="utf-8")
    command = shown.group(1).split()[1:]
    result = cli(*command)
    assert result.returncode == 0, result.stderr
    # The content hash on the page is the one this very set has.
    assert result.stdout == shown.group(2)
