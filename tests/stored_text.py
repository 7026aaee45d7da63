"""Everything a command left in a folder, as text a secret scan can search.

A file's raw bytes are not enough: outcome columns are compressed, so an error message
that quotes a credential would hide inside a blob. Every store found in the folder
(SQLite files, JSON Lines files) is therefore also read back whole through retrievalkit
and written out as the JSON export, which holds every outcome's error text.
"""

from __future__ import annotations

from pathlib import Path

from retrievalkit.formats.convert import to_json
from retrievalkit.stores import open_store

SQLITE_MAGIC = b"SQLite format 3\x00"


def _store_url(path: Path) -> str | None:
    with path.open("rb") as handle:
        head = handle.read(len(SQLITE_MAGIC))
    if head == SQLITE_MAGIC:
        return f"sqlite:///{path}"
    if path.suffix == ".jsonl" and Path(f"{path}.columns").is_dir():
        return f"jsonl:///{path}"
    return None


def stored_text(folder: Path, *, skip: tuple[str, ...] = ("retrievalkit.toml",)) -> dict[str, str]:
    """Place -> text: every file's bytes (decoded leniently) and, for every store, each run
    read back and exported as JSON."""
    found: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.name in skip:
            continue
        found[str(path)] = path.read_bytes().decode("utf-8", "replace")
        url = _store_url(path)
        if url is not None:
            store = open_store(url)
            for record in store.all_runs():
                found[f"{path} run {record.run_id}"] = to_json(record)
    return found
