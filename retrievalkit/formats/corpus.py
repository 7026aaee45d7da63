"""Read a BEIR-style ``corpus.jsonl`` (``_id``, ``title``, ``text``) with exact error places."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import attrs

from retrievalkit.errors import InputError
from retrievalkit.formats.text_files import text_lines


def _fields(value: dict[str, str] | None) -> dict[str, str]:
    return dict(value or {})


@attrs.frozen
class CorpusDocument:
    id: str
    title: str
    text: str
    fields: dict[str, str] = attrs.field(factory=dict, converter=_fields, eq=False)
    """Every other string field of the document's line (``description``, ``filename``),
    for retrievers that weigh fields (``bm25`` with ``fields``)."""

    def field(self, name: str) -> str | None:
        """The text of field ``name`` (``title``, ``text`` or another), None if absent."""
        if name == "title":
            return self.title
        if name == "text":
            return self.text
        return self.fields.get(name)


def read_corpus(path: Path) -> Iterator[CorpusDocument]:
    """Yield the documents of a BEIR ``corpus.jsonl``; ``title`` may be missing or empty."""
    if path.is_dir():
        path = path / "corpus.jsonl"
    if not path.exists():
        raise InputError(
            "cannot open the corpus: no such file",
            source=str(path),
            hint="give the path of a BEIR corpus.jsonl (or its directory)",
        )
    for number, line in enumerate(text_lines(path, "the corpus"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            message = f"malformed JSON: {error.msg}"
            raise InputError(message, source=str(path), line=number) from None
        except RecursionError:
            raise InputError("JSON nested too deeply", source=str(path), line=number) from None
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
        others = {
            key: value
            for key, value in record.items()
            if key not in ("_id", "title", "text") and isinstance(value, str)
        }
        yield CorpusDocument(str(record["_id"]), title, text, others)
