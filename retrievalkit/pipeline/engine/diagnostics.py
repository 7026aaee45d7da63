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

import numpy as np

from retrievalkit.metrics.scoring import short_warning

if TYPE_CHECKING:
    from retrievalkit.model.values import QuestionOutcome
    from retrievalkit.pipeline.engine.evaluator import Retrieval

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


#: An id that `chunk_like` can match against some document id: a strong joiner
#: followed by anything, or a weak one followed by a whole chunk suffix.
_MAYBE_CHUNK = re.compile(
    r"[#:|/@~].|[-_.](?:chunk|part|passage|para|seg|segment|c|p)-?\d+\Z", re.IGNORECASE
)
#: What every `_MAYBE_CHUNK` match holds: a strong joiner, or a weak one before the
#: first letter of a chunk suffix (c, p, s, in any case).
_JOINER_SIGNS = (re.compile(r"[#:|/@~]"), re.compile(r"[-_.][cps]", re.IGNORECASE))


def maybe_chunks(ids: Sequence[str]) -> list[int]:
    """The positions of the ids that `_MAYBE_CHUNK` matches, in order.

    Only the ids that hold what every match holds (`_JOINER_SIGNS`, found in one search
    of all the ids joined by newlines, which those signs never hold) are searched one by
    one: most document ids hold none, and a search per id costs more than the others.
    """
    text = "\n".join(ids)
    starts = [match.start() for sign in _JOINER_SIGNS for match in sign.finditer(text)]
    if not starts:
        return []
    ends = np.cumsum(np.fromiter(map(len, ids), np.int64, len(ids)) + 1)
    signed = np.unique(np.searchsorted(ends, starts, side="right")).tolist()
    return [i for i in signed if _MAYBE_CHUNK.search(ids[i]) is not None]


def chunk_id_warning(outcomes: Sequence[QuestionOutcome]) -> str | None:
    """A warning when returned ids look like chunk ids of the documents a question expects.

    An id that some question of the set labels is a document, never a chunk: near
    duplicates such as ``doc-fees`` and ``doc-fees-2019`` are not flagged.

    Read from the outcomes' columns: each distinct returned id is tested once for the
    labelled documents it could be a chunk of, and only then are questions matched
    with their own labels, so the work grows with the distinct ids, not with the
    questions times their rankings.
    """
    from retrievalkit.model.outcomes import Outcomes

    columns = Outcomes.from_outcomes(outcomes)
    if not len(columns):
        return None
    documents = columns.documents
    ranked, labels = columns.rankings, columns.judgments
    is_labelled = np.zeros(len(documents), dtype=bool)
    is_labelled[labels.codes] = True
    is_returned = np.zeros(len(documents), dtype=bool)
    is_returned[ranked.codes] = True
    returned_only = np.flatnonzero(is_returned & ~is_labelled)
    names = [documents[code] for code in returned_only.tolist()]
    maybe = maybe_chunks(names)
    if not maybe:
        return None
    code_of = {documents[code]: code for code in np.flatnonzero(is_labelled).tolist()}
    # (returned document, labelled document it looks like a chunk of), by code.
    chunks: list[int] = []
    wholes: list[int] = []
    for position in maybe:
        code, returned = int(returned_only[position]), names[position]
        for cut in range(len(returned) - 1):
            whole = code_of.get(returned[:cut])
            if whole is not None and chunk_like(returned, returned[:cut]):
                chunks.append(code)
                wholes.append(whole)
    if not chunks:
        return None
    count = len(columns)
    span = len(documents)
    # A question's expected documents (graded 1 or more), as (question, document) keys.
    label_owner = np.repeat(np.arange(count, dtype=np.int64), np.diff(labels.offsets))
    expected = np.unique((label_owner * span + labels.codes)[labels.grades >= 1])
    # Every (question, document it may have returned a chunk of), from its ranking.
    rank_owner = np.repeat(np.arange(count, dtype=np.int64), np.diff(ranked.offsets))
    chunk_codes, whole_codes = np.array(chunks, dtype=np.int64), np.array(wholes, dtype=np.int64)
    order = np.argsort(chunk_codes, kind="stable")
    chunk_codes, whole_codes = chunk_codes[order], whole_codes[order]
    entries = np.flatnonzero(np.isin(ranked.codes, chunk_codes))
    first = np.searchsorted(chunk_codes, ranked.codes[entries], side="left")
    last = np.searchsorted(chunk_codes, ranked.codes[entries], side="right")
    repeat = last - first
    owners = np.repeat(rank_owner[entries], repeat)
    picks = np.repeat(first - np.cumsum(repeat) + repeat, repeat) + np.arange(int(repeat.sum()))
    found = np.isin(owners * span + whole_codes[picks], expected)
    affected = np.unique(owners[found])
    errored = np.fromiter(columns.errors, np.int64, len(columns.errors))
    affected = affected[~np.isin(affected, errored)]
    if not affected.size:
        return None
    example = columns[int(affected[0])]
    expected_ids = sorted(example.expected)
    for returned in example.ranking:
        if returned in code_of:
            continue
        document = next((e for e in expected_ids if chunk_like(returned, e)), None)
        if document is not None:
            break
    assert document is not None
    separator = returned[len(document)]
    return (
        f"{affected.size} question(s) got ids that look like chunk ids of an expected "
        f"document (e.g. {example.question_id}: '{returned}' for expected '{document}') and "
        f"scored them as misses; if the retriever returns chunk ids, set its doc_id_separator "
        f"option (here '{separator}') so they count as their document"
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
    return short_warning(len(short), fewest, depth, overfetch)
