"""Read and write TREC run files (``qid Q0 docid rank score tag``) and qrels (``qid 0 docid rel``).

These are the formats trec_eval, pytrec_eval, ir_measures and ranx all read, so a run
written here can be re-scored by any of them, and a run any system wrote can be replayed
through the ``run`` retriever.

Order follows trec_eval, not the rank column: a query's documents are ranked by score,
highest first, ties broken by document id in *descending* order (trec_eval's
``comp_sim_docno``). A run written here therefore carries strictly decreasing synthetic
scores, so every tool reads back exactly the ranking that was scored.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import attrs

from retrievalkit.errors import InputError
from retrievalkit.formats.qrels import qrels_rows
from retrievalkit.formats.text_files import text_lines

_WHITESPACE = re.compile(r"\s")


@attrs.frozen
class RunLine:
    """One line of a TREC run file."""

    query_id: str
    doc_id: str
    rank: int
    score: float
    tag: str


def _lines(path: Path) -> Iterator[tuple[int, list[str]]]:
    for number, line in enumerate(text_lines(path), start=1):
        fields = line.split()
        if fields and not fields[0].startswith("#"):
            yield number, fields


def read_run(path: Path) -> list[RunLine]:
    """Every line of a TREC run file; blank lines and ``#`` comments are skipped."""
    rows: list[RunLine] = []
    seen: dict[tuple[str, str, str], int] = {}
    for number, fields in _lines(path):
        if len(fields) != 6:
            raise InputError(
                f"expected 6 columns (qid Q0 docid rank score tag), got {len(fields)}",
                source=str(path),
                line=number,
            )
        query_id, _, doc_id, rank_text, score_text, tag = fields
        try:
            rank = int(rank_text)
        except ValueError:
            raise InputError(
                f"rank {rank_text!r} is not a whole number", source=str(path), line=number
            ) from None
        try:
            score = float(score_text)
        except ValueError:
            score = math.nan
        if not math.isfinite(score):
            raise InputError(
                f"score {score_text!r} is not a finite number", source=str(path), line=number
            )
        key = (tag, query_id, doc_id)
        if key in seen:
            raise InputError(
                f"document '{doc_id}' is listed twice for query '{query_id}' in run '{tag}' "
                f"(first on line {seen[key]})",
                source=str(path),
                line=number,
                hint="trec_eval rejects duplicate documents; keep the best-scored one",
            )
        seen[key] = number
        rows.append(RunLine(query_id, doc_id, rank, score, tag))
    return rows


def run_tags(rows: Iterable[RunLine]) -> list[str]:
    """The distinct run tags of a file, in order of first appearance."""
    return list(dict.fromkeys(row.tag for row in rows))


def rankings_from_run(rows: Iterable[RunLine]) -> dict[str, list[str]]:
    """query id -> document ids in trec_eval's order (score desc, ties by doc id desc)."""
    by_query: dict[str, list[RunLine]] = {}
    for row in rows:
        by_query.setdefault(row.query_id, []).append(row)
    return {
        query_id: [
            row.doc_id
            for row in sorted(entries, key=lambda row: (row.score, row.doc_id), reverse=True)
        ]
        for query_id, entries in by_query.items()
    }


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """query id -> document id -> grade, from ``qid iteration docid grade`` lines
    (tab-separated BEIR rows too; `retrievalkit.formats.qrels` reads both).

    A negative grade (Cranfield's -1) is kept as it is: trec_eval treats every grade
    below its relevance level as not relevant. A document judged twice for one query
    is refused with its line, as trec_eval refuses it.
    """
    judgments: dict[str, dict[str, int]] = {}
    for row in qrels_rows(path):
        judgments.setdefault(row.query_id, {})[row.doc_id] = row.grade
    return judgments


def _check_token(value: str, what: str) -> str:
    if not value or _WHITESPACE.search(value):
        raise InputError(
            f"{what} {value!r} is empty or contains whitespace, which the TREC formats cannot hold",
            hint="rename it in the golden set or the corpus",
        )
    return value


def format_run(rankings: Mapping[str, Sequence[str]], tag: str) -> str:
    """A TREC run: for each query its documents at ranks 1..n with scores n..1.

    Queries with an empty ranking get no lines (trec_eval then leaves them out, unless
    ``-c`` counts them as zero, as retrievalkit does).
    """
    _check_token(tag, "run tag")
    lines = []
    for query_id, ranking in rankings.items():
        _check_token(query_id, "question id")
        for index, doc_id in enumerate(ranking):
            score = len(ranking) - index
            lines.append(
                f"{query_id} Q0 {_check_token(doc_id, 'document id')} {index + 1} {score} {tag}"
            )
    return "".join(line + "\n" for line in lines)


def format_qrels(judgments: Mapping[str, Mapping[str, int]]) -> str:
    """TREC qrels: ``qid 0 docid grade`` for every judged document."""
    lines = []
    for query_id, labels in judgments.items():
        _check_token(query_id, "question id")
        for doc_id, grade in labels.items():
            lines.append(f"{query_id} 0 {_check_token(doc_id, 'document id')} {int(grade)}")
    return "".join(line + "\n" for line in lines)
