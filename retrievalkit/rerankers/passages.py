"""The texts a reranker scores for candidate ids: every chunk of a document, or one chunk.

A candidate is a document id (its chunks are found through ``doc_id_separator``) or the
id of one corpus record. Rerankers score each chunk on its own and give a document the
best score of its chunks: the collapse to documents comes after scoring, so a document
is never judged by a truncated concatenation or by whichever chunk came first.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from retrievalkit.errors import InputError
from retrievalkit.formats.corpus import read_corpus
from retrievalkit.formats.ids import returned_id
from retrievalkit.retrievers.contract import document_id_of


def passage_text(title: str, text: str) -> str:
    """What a reranker reads for a record: its title and text, as the dense retriever embeds."""
    return f"{title}\n{text}" if title else text


class CandidatePassages:
    """A corpus's records by id, and the record ids of each document."""

    def __init__(self, corpus: str | Path, *, doc_id_separator: str | None = None) -> None:
        path = Path(corpus)
        if not path.is_file():
            raise InputError(
                "the corpus file does not exist", source=str(path), field="corpus",
                hint="a BEIR corpus.jsonl with _id, title and text",
            )  # fmt: skip
        self.texts: dict[str, str] = {}
        self.rows: dict[str, int] = {}
        self.chunks_of: dict[str, list[str]] = {}
        for row, document in enumerate(read_corpus(path)):
            self.texts[document.id] = passage_text(document.title, document.text)
            self.rows[document.id] = row
            parent = document_id_of(document.id, doc_id_separator)
            self.chunks_of.setdefault(parent, []).append(document.id)

    def records_of(self, candidate: str) -> list[str]:
        """The record ids a candidate stands for: itself if it is one, else its chunks.

        A candidate with whitespace or an invisible character around it (``"doc-7 "``)
        stands for the id without them, as the evaluator compares ids
        (`retrievalkit.formats.ids`); it stays as returned in the answer, where the
        evaluator counts it."""
        if candidate in self.texts:
            return [candidate]
        found = self.chunks_of.get(candidate)
        if found is not None:
            return found
        clean = returned_id(candidate) if isinstance(candidate, str) else candidate
        return self.records_of(clean) if clean != candidate and clean else []

    def expand(self, candidates: Sequence[str]) -> tuple[list[str], list[int]]:
        """The record ids to score, and for each the position of its candidate.

        Candidates the corpus does not know are left out: the rerank retriever keeps
        them after the scored ones, in first-stage order.
        """
        records: list[str] = []
        owners: list[int] = []
        for position, candidate in enumerate(candidates):
            for record in self.records_of(candidate):
                records.append(record)
                owners.append(position)
        return records, owners


def collapse_max(
    candidates: Sequence[str], owners: Sequence[int], scores: Sequence[float]
) -> list[tuple[str, float]]:
    """Each candidate's best record score, for the candidates that had a record scored."""
    best: dict[int, float] = {}
    for owner, score in zip(owners, scores, strict=True):
        value = float(score)
        if owner not in best or value > best[owner]:
            best[owner] = value
    return [(candidates[owner], best[owner]) for owner in sorted(best)]
