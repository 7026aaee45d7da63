"""Keep a retriever's raw ranking of chunk ids for the chunk-level metrics, and give the
evaluator document ids.

With ``chunk_separator`` (``evaluate(chunk_separator="#")``, ``--chunk-separator``,
``[eval] chunk_separator``), the retriever returns chunk ids such as ``doc-7#3``: the
document-level metrics score them as their documents (``doc-7``, duplicates collapsed to
their first occurrence as always), and ``chunk_recall@k``, ``chunk_rr`` and
``chunk_ndcg@k`` score the distinct chunk ids, in the order returned, against each
question's ``expected_chunks``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from retrievalkit.formats.ids import ReturnedIds, needs_cleaning, returned_id
from retrievalkit.retrievers.contract import document_id_of


class ChunkKeeper:
    """A retriever that answers with documents and remembers the chunks it was given.

    ``chunks_of(question)`` is the raw ranking (distinct chunk ids) of the first answer to
    ``question`` since it was last read: the answer the evaluator scores when a question
    is asked several times (``--repeat``), its later answers only timed.
    """

    def __init__(
        self, retriever: Any, separator: str | None, notes: ReturnedIds | None = None
    ) -> None:
        self.identifier = getattr(retriever, "identifier", "retriever")
        self._retriever = retriever
        self._separator = separator
        self._notes = notes
        self._chunks: dict[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()
        if callable(getattr(retriever, "retrieve_many", None)):
            self.retrieve_many = self._retrieve_many

    def __getattr__(self, name: str) -> Any:
        # describe(), embedding_backend and the like are the retriever's own.
        return getattr(self._retriever, name)

    def _documents(self, question: str, ids: Any) -> Any:
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
            return ids  # the evaluator reports the broken answer
        if all(isinstance(each, str) for each in ids) and needs_cleaning("".join(ids)):
            # Chunk ids are compared as document ids are (`retrievalkit.formats.ids`):
            # cleaned here, where the chunk is still known, and counted once.
            cleaned = [returned_id(each) for each in ids]
            if self._notes is not None and question not in self._chunks:
                for raw, clean in zip(ids, cleaned, strict=True):
                    if clean != raw and clean:
                        self._notes.note(raw, clean, question)
            # An id empty once cleaned goes on as it came, for the evaluator to refuse.
            ids = [clean or raw for raw, clean in zip(ids, cleaned, strict=True)]
        with self._lock:
            self._chunks.setdefault(question, tuple(dict.fromkeys(ids)))
        if self._separator is None:
            return ids
        return [
            document_id_of(each, self._separator) if isinstance(each, str) else each for each in ids
        ]

    def retrieve(self, question: str, limit: int) -> Any:
        return self._documents(question, self._retriever.retrieve(question, limit))

    def _retrieve_many(self, questions: Sequence[str], limit: int) -> list[Any]:
        answers = list(self._retriever.retrieve_many(questions, limit))
        if len(answers) != len(questions):
            return answers  # the evaluator reports the mismatch
        return [self._documents(q, a) for q, a in zip(questions, answers, strict=True)]

    def chunks_of(self, questions: Sequence[str]) -> list[tuple[str, ...]]:
        """The raw chunk rankings of ``questions`` (empty for one that errored), forgotten
        once read."""
        with self._lock:
            found = [self._chunks.get(question, ()) for question in questions]
            for question in questions:
                self._chunks.pop(question, None)
        return found
