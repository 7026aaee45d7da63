"""Messages that used to point the wrong way: a store URL from the config file, `show`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import RunCli


def test_a_bad_store_url_from_the_config_file_is_named_there(cli: RunCli, tmp_path: Path) -> None:
    (tmp_path / "retrievalkit.toml").write_text(
        '[eval]\nk = [1, 3]\n\n[store]\nurl = "bogus:///x"\n'
    )
    for command in (
        ("eval", "--set", "demo", "--retriever", "bm25-demo"),
        ("history", "--set", "demo", "--retriever", "bm25-demo"),
    ):
        result = cli(*command)
        assert result.returncode == 2, result.stderr
        assert f"{tmp_path / 'retrievalkit.toml'}, line 5, field 'store.url': " in result.stderr
        assert "unknown store scheme 'bogus'" in result.stderr
        assert "'--store'" not in result.stderr
    # Given on the command line, the flag is what the message names.
    flag = cli("history", "--set", "demo", "--retriever", "bm25-demo", "--store", "bogus:///y")
    assert flag.returncode == 2 and "field '--store'" in flag.stderr


def test_show_says_where_the_run_is_stored_not_that_it_saved_it(
    cli: RunCli, tmp_path: Path
) -> None:
    done = cli("eval", "--set", "demo", "--retriever", "bm25-demo", "-q", "--format", "json")
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    shown = cli("show", run_id)
    assert shown.returncode == 0, shown.stderr
    last = shown.stdout.strip().splitlines()[-1]
    assert "saved to" not in shown.stdout
    assert last.startswith(f"run {run_id} of ") and "as stored in sqlite:///" in last


def test_document_ids_are_never_split_across_lines_at_80_columns(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    import retrievalkit as rk

    def evaluate(columns: int) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "retrievalkit", "eval", "--set", "demo", "--retriever",
             "bm25-demo", "--no-save"],
            cwd=tmp_path,
            env={**os.environ, "NO_COLOR": "1", "COLUMNS": str(columns)},
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    run = rk.evaluate("demo", "bm25-demo", git_commit=None)
    ids = {doc for o in run.outcomes for doc in (*o.ranking[:3], *o.expected)}
    assert len(max(ids, key=len)) > 25, "the demo has ids too long for an 80-column table cell"
    narrow = evaluate(80)
    assert all(len(line) <= 80 for line in narrow.splitlines())
    words = {word.strip(",") for line in narrow.splitlines() for word in line.split()}
    assert ids <= words, sorted(ids - words)[:5]
    assert "┃ top 3" in evaluate(200), "a wide terminal keeps the table"
