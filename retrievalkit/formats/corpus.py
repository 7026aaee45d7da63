"""Read a BEIR-style ``corpus.jsonl`` (``_id``, ``title``, ``text``) with exact error places."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import attrs

from retrievalkit.errors import InputError


@attrs.frozen
class CorpusDocument:
    id: str
    title: str
    text: str


def read_corpus(path: Path) -> Iterator[CorpusDocument]:
    """Yield the documents of a BEIR ``corpus.jsonl``; ``title`` may be missing or empty."""
    if path.is_dir():
        path = path / "corpus.jsonl"
    try:
        handle = path.open(encoding="utf-8-sig")
    except OSError as error:
        raise InputError(
            f"cannot open the corpus: {error.strerror}",
            source=str(path),
            hint="give the path of a BEIR corpus.jsonl (or its directory)",
        ) from None
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise InputError(
                    f"malformed JSON: {error.msg}", source=str(path), line=number
                ) from None
            if not isinstance(record, dict) or "_id" not in record:
                raise InputError(
                    "expected a JSON object with '_id'", source=str(path), line=number, field="_id"
                )
            title = record.get("title") or ""
            text = record.get("text") or ""
            if not isinstance(title, str) or not isinstance(text, str):
                raise InputError(
                    "title and text must be strings", source=str(path), line=number, field="text"
                )
            yield CorpusDocument(str(record["_id"]), title, text)
