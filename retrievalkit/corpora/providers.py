"""Corpus providers: read a corpus as documents and as the chunks questions are written from.

A ``retrievalkit.corpora`` entry point is a factory called with the corpus path and
keyword options; it returns an object with ``documents()`` (whole documents, for
judges) and ``chunks()`` (the passages a generator writes questions from). Built-ins:
``beir`` (a ``corpus.jsonl``: one chunk per document) and ``folder`` (``.txt`` and
``.md`` files cut into overlapping word windows with chunk ids ``DOC#N``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import attrs

from retrievalkit.errors import InputError
from retrievalkit.formats.corpus import CorpusDocument, read_corpus
from retrievalkit.formats.text_files import read_text

#: Separates a document id from the chunk number in the ``folder`` corpus: ``guide.md#2``.
CHUNK_SEPARATOR = "#"

FOLDER_SUFFIXES = (".txt", ".md", ".markdown")


@attrs.frozen
class Chunk:
    """A passage a question is written from; ``document_id`` is what retrievers return."""

    id: str
    document_id: str
    text: str
    title: str = ""

    @property
    def content_hash(self) -> str:
        """sha256 of the title and text: the cache key's part that changes when the text does."""
        payload = f"{self.title}\n\n{self.text}".encode()
        return hashlib.sha256(payload).hexdigest()


@runtime_checkable
class CorpusProvider(Protocol):
    """What a ``retrievalkit.corpora`` factory returns."""

    def documents(self) -> Iterator[CorpusDocument]:
        """Every document, whole, in corpus order."""
        ...

    def chunks(self) -> Iterator[Chunk]:
        """Every chunk, in corpus order; chunk ids are unique."""
        ...


def is_clean_id(value: str) -> bool:
    """Ids in golden sets are non-empty and have no whitespace or control characters."""
    return bool(value) and not any(ch.isspace() or not ch.isprintable() for ch in value)


class BeirCorpus:
    """A BEIR ``corpus.jsonl`` (``_id``, ``title``, ``text``): one chunk per record.

    With ``doc_id_separator`` (e.g. ``#``), records are chunks whose ids carry their
    document's id before the separator (``doc-7#3``), and a question written from one
    expects that document (``doc-7``), as a retriever with the same option returns it.
    """

    def __init__(self, path: str | Path, *, doc_id_separator: str | None = None) -> None:
        self.path = Path(path)
        if doc_id_separator is not None and not isinstance(doc_id_separator, str):
            raise InputError(
                f"must be a string such as '#', got {doc_id_separator!r}",
                field="doc_id_separator",
            )
        self.doc_id_separator = doc_id_separator or None

    def documents(self) -> Iterator[CorpusDocument]:
        source = self.path / "corpus.jsonl" if self.path.is_dir() else self.path
        for number, document in enumerate(read_corpus(self.path), start=1):
            if not is_clean_id(document.id):
                # The line number counts documents; read_corpus skips blank lines.
                raise InputError(
                    f"document id {document.id!r} has spaces or control characters, so no "
                    "golden set can name it",
                    source=f"{source}, document {number}",
                    field="_id",
                )
            yield document

    def chunks(self) -> Iterator[Chunk]:
        from retrievalkit.retrievers.contract import document_id_of

        for document in self.documents():
            parent = document_id_of(document.id, self.doc_id_separator)
            yield Chunk(document.id, parent, document.text, document.title)


def create_beir(path: str | Path, *, doc_id_separator: str | None = None) -> BeirCorpus:
    """Factory of the ``beir`` corpus; ``doc_id_separator`` collapses chunk ids (``doc-7#3``)."""
    return BeirCorpus(path, doc_id_separator=doc_id_separator)


def documents_by_id(
    corpus: CorpusProvider, separator: str = CHUNK_SEPARATOR
) -> dict[str, CorpusDocument]:
    """Every document by id, plus each chunked document (``doc-7#1``, ``doc-7#2``) whole.

    A run ranks documents (chunk ids collapsed), so a judge needs ``doc-7``'s text even
    when the corpus stores it in chunks; those are joined in corpus order. An id that
    exists as such always wins over a joined one.
    """
    exact: dict[str, CorpusDocument] = {}
    parts: dict[str, list[CorpusDocument]] = {}
    for document in corpus.documents():
        exact[document.id] = document
        head, found, _ = document.id.partition(separator)
        if found and head:
            parts.setdefault(head, []).append(document)
    joined = {
        head: CorpusDocument(head, chunks[0].title, "\n\n".join(chunk.text for chunk in chunks))
        for head, chunks in parts.items()
    }
    return {**joined, **exact}


_WORD = re.compile(r"\S+")


class FolderCorpus:
    """``.txt`` and ``.md`` files under a folder, each cut into windows of words.

    The document id is the file's path relative to the folder (``guides/passport.md``),
    with whitespace and ``#`` replaced by ``_`` so that it is a valid id and the chunk
    separator stays unambiguous. Chunk ``N`` (counted from 0) of a document is
    ``DOC#N``; windows hold ``chunk_size`` words and start ``chunk_size - chunk_overlap``
    words apart, keeping the text's own spacing and line breaks. A Markdown file's
    first ``#`` heading is its title. Hidden files and folders are skipped.
    """

    def __init__(self, path: str | Path, *, chunk_size: int = 200, chunk_overlap: int = 40) -> None:
        self.path = Path(path)
        for name, value, least in (
            ("chunk_size", chunk_size, 1),
            ("chunk_overlap", chunk_overlap, 0),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise InputError(f"must be a whole number >= {least}, got {value!r}", field=name)
        if chunk_overlap >= chunk_size:
            raise InputError(
                f"overlap {chunk_overlap} must be smaller than the chunk size {chunk_size}",
                field="chunk_overlap",
            )
        if not self.path.is_dir():
            raise InputError(
                "not a folder", source=str(self.path), hint="give a folder of .txt/.md files"
            )
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap

    def _files(self) -> list[tuple[str, Path]]:
        found: dict[str, Path] = {}
        for file in sorted(self.path.rglob("*")):
            relative = file.relative_to(self.path)
            if any(part.startswith(".") for part in relative.parts):
                continue
            if not file.is_file() or file.suffix.lower() not in FOLDER_SUFFIXES:
                continue
            document_id = re.sub(r"[\s#]", "_", relative.as_posix())
            document_id = "".join(ch if ch.isprintable() else "_" for ch in document_id)
            if document_id in found:
                raise InputError(
                    f"two files map to the document id '{document_id}': "
                    f"{found[document_id]} and {file}",
                    source=str(self.path),
                    hint="rename one (whitespace and # become _ in ids)",
                )
            found[document_id] = file
        if not found:
            raise InputError("no .txt or .md files found", source=str(self.path), field="--corpus")
        return list(found.items())

    def documents(self) -> Iterator[CorpusDocument]:
        for document_id, file in self._files():
            text = read_text(file)
            yield CorpusDocument(document_id, _title(file, text), text)

    def chunks(self) -> Iterator[Chunk]:
        step = self.chunk_size - self.chunk_overlap
        for document in self.documents():
            words = list(_WORD.finditer(document.text))
            starts = range(0, max(len(words) - self.chunk_overlap, 1), step)
            for number, start in enumerate(starts):
                window = words[start : start + self.chunk_size]
                if not window:
                    break
                text = document.text[window[0].start() : window[-1].end()]
                yield Chunk(
                    f"{document.id}{CHUNK_SEPARATOR}{number}", document.id, text, document.title
                )


def create_folder(
    path: str | Path, *, chunk_size: int = 200, chunk_overlap: int = 40
) -> FolderCorpus:
    """Factory of the ``folder`` corpus: ``chunk_size`` and ``chunk_overlap`` are in words."""
    return FolderCorpus(path, chunk_size=chunk_size, chunk_overlap=chunk_overlap)


def _title(file: Path, text: str) -> str:
    if file.suffix.lower() in (".md", ".markdown"):
        for line in text.splitlines():
            if line.startswith("# "):
                return line[2:].strip()
    return ""


def detect_corpus_type(path: Path) -> str:
    """``beir`` for a ``.jsonl`` file or a folder holding ``corpus.jsonl``, else ``folder``."""
    if not path.exists():
        raise InputError("no such file or folder", source=str(path), field="--corpus")
    if path.is_file():
        return "beir" if path.suffix == ".jsonl" else "folder"
    return "beir" if (path / "corpus.jsonl").is_file() else "folder"


def open_corpus(path: Path, corpus_type: str | None, options: Mapping[str, Any]) -> Any:
    """The corpus provider for ``path``: the named ``retrievalkit.corpora`` plugin, or detected."""
    from retrievalkit.plugins import registry as plugins
    from retrievalkit.plugins.factories import call_factory

    kind = corpus_type or detect_corpus_type(path)
    provider = call_factory(plugins.CORPORA, kind, {"path": path, **options}, source="--corpus")
    if not isinstance(provider, CorpusProvider):
        raise InputError(
            f"corpus plugin '{kind}' returned {type(provider).__name__}, which lacks "
            "documents() and chunks()",
            field="--corpus-type",
        )
    return provider
