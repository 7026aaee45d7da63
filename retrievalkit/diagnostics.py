"""Warnings about a run that its numbers alone do not show.

Two mistakes of retriever plugins score as plain misses and are easy to take for bad
retrieval: chunk ids (``DOC#3``) returned for a set that expects document ids (``DOC``)
because no separator was configured, and an overfetch too small for a retriever that
returns many chunks of one document, which leaves questions with fewer than ``max(k)``
distinct documents.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from retrievalkit.evaluator import Retrieval
    from retrievalkit.model import QuestionOutcome

#: Separators that only chunk ids use after a document id (``DOC#3``, ``DOC::p2``).
_JOINERS = "#:|/@~"
#: After characters document ids use themselves (``-``, ``_``, ``.``), only an explicit
#: chunk suffix counts (``DOC-chunk3``, ``DOC_p2``), never a bare number (``fees-2019``).
_CHUNK_SUFFIX = re.compile(r"(?:chunk|part|passage|para|seg|segment|c|p)-?\d+", re.IGNORECASE)


def chunk_like(returned: str, expected: str) -> bool:
    """Whether ``returned`` looks like a chunk id of the document ``expected``."""
    if len(returned) <= len(expected) + 1 or not returned.startswith(expected):
        return False
    joiner, suffix = returned[len(expected)], returned[len(expected) + 1 :]
    if joiner in _JOINERS:
        return True
    return joiner in "-_." and _CHUNK_SUFFIX.fullmatch(suffix) is not None


def chunk_id_warning(outcomes: Sequence[QuestionOutcome]) -> str | None:
    """A warning when returned ids look like chunk ids of the documents a question expects.

    An id that some question of the set labels is a document, never a chunk: near
    duplicates such as ``doc-fees`` and ``doc-fees-2019`` are not flagged.
    """
    labelled = {doc for outcome in outcomes for doc in outcome.judgments}
    affected: list[tuple[str, str, str]] = []
    for outcome in outcomes:
        expected = sorted(outcome.expected)
        if outcome.error is not None or not expected:
            continue
        for returned in outcome.ranking:
            if returned in labelled:
                continue
            document = next((e for e in expected if chunk_like(returned, e)), None)
            if document is not None:
                affected.append((outcome.question_id, returned, document))
                break
    if not affected:
        return None
    question, returned, document = affected[0]
    separator = returned[len(document)]
    return (
        f"{len(affected)} question(s) got ids that look like chunk ids of an expected "
        f"document (e.g. {question}: '{returned}' for expected '{document}') and scored them "
        f"as misses; if the retriever returns chunk ids, set its doc_id_separator option "
        f"(here '{separator}') so they count as their document"
    )


def short_of_documents_warning(
    retrievals: Sequence[Retrieval], *, depth: int, overfetch: int
) -> str | None:
    """A warning when the retriever filled its limit but fewer than ``depth`` documents remained.

    Such a question had more results to give: the overfetch was too small for how many
    ids per document the retriever returns, and metrics at the deepest k undercount.
    """
    limit = depth * overfetch
    short = [
        retrieval
        for retrieval in retrievals
        if retrieval.error is None
        and retrieval.returned >= limit
        and len(retrieval.ranking) < depth
    ]
    if not short:
        return None
    fewest = min(len(retrieval.ranking) for retrieval in short)
    return (
        f"{len(short)} question(s) got {limit} ids (max(k) {depth} × overfetch {overfetch}) but "
        f"fewer than {depth} distinct documents after duplicates collapsed (as few as "
        f"{fewest}); metrics at k = {depth} undercount them: raise --overfetch"
    )
