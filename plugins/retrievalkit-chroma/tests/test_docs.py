"""docs/chroma.md's complete example, run as printed on the demo set."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

from support import CORPUS, REPO, run_cli

DOCS = REPO / "docs" / "chroma.md"


def example() -> tuple[list[list[str]], str]:
    """The commands and the configuration of the section 'A complete example'."""
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("## A complete example", 1)[1].split("\n## ", 1)[0]
    bash = re.search(r"```bash\n(.*?)```", section, re.S)
    toml = re.search(r"```toml\n(.*?)```", section, re.S)
    assert bash and toml, "docs/chroma.md: the example needs a bash and a toml block"
    commands = [shlex.split(line) for line in bash.group(1).splitlines() if line.strip()]
    assert all(command[0] == "retrievalkit" for command in commands)
    return [command[1:] for command in commands], toml.group(1)


def test_the_documented_example_runs_as_printed(tmp_path: Path) -> None:
    commands, config = example()
    (tmp_path / "retrievalkit.toml").write_text(config, encoding="utf-8")
    shutil.copyfile(CORPUS, tmp_path / "corpus.jsonl")
    outputs = []
    for command in commands:
        code, out, err = run_cli(*command, cwd=tmp_path)
        assert code == 0, f"retrievalkit {shlex.join(command)}: {err}"
        outputs.append(out)
    assert "indexed 55 documents into kb-docs" in outputs[0]
    assert (tmp_path / ".chroma" / "chroma.sqlite3").is_file()
    assert "ndcg@10" in outputs[1]
    # 55 documents and hnsw:search_ef 100: HNSW finds the true ten.
    assert "overlap@10: 1.000" in outputs[2]
