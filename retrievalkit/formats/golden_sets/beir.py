"""Golden sets from BEIR directories (queries, qrels, an optional cluster field)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from retrievalkit.errors import InputError
from retrievalkit.formats.golden_sets.questions import is_clean_id, parse_cluster
from retrievalkit.formats.golden_sets.strict_json import DuplicateKey, parse_json
from retrievalkit.formats.golden_sets.text import MAX_QUESTION_CHARS, unsafe_character
from retrievalkit.formats.limits import MAX_GRADE, MAX_LINE_BYTES, line_too_long
from retrievalkit.formats.qrels import qrels_rows
from retrievalkit.formats.text_files import lines_of, read_text
from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet


def load_beir(
    directory: Path, *, qrels: Path | None = None, name: str | None = None
) -> GoldenQuestionSet:
    """Import a BEIR directory: ``queries.jsonl`` and ``qrels/test.tsv`` (or the given qrels).

    Grades come from the qrels' score column. A row with score 0 is judged not
    relevant; a negative score (Cranfield's -1) is read as 0, as trec_eval does.
    Queries without any qrels row are left out, as in BEIR's own evaluation.
    """
    qrels = qrels or directory / "qrels" / "test.tsv"
    queries_file = directory / "queries.jsonl"
    for required in (queries_file, qrels):
        if not required.exists():
            raise InputError(
                "missing file",
                source=str(required),
                hint="a BEIR directory has corpus.jsonl, queries.jsonl and qrels/test.tsv",
            )
    judgments, first_lines = _judgments(qrels)
    queries = read_beir_queries(queries_file)
    texts, clusters = queries.texts, queries.clusters
    missing = [query_id for query_id in judgments if query_id not in texts]
    if missing:
        raise InputError(
            f"query id '{missing[0]}' is judged but not in {queries_file.name}",
            source=str(qrels),
            line=first_lines[missing[0]],
        )
    if not judgments:
        raise InputError(
            "no judged queries: the qrels file holds no rows",
            source=str(qrels),
            hint="one row per judgment: query-id, corpus-id, score",
        )
    questions = []
    for query_id in sorted(judgments, key=_natural_key):
        labels = judgments[query_id]
        questions.append(
            GoldenQuestion(
                id=query_id,
                question=texts[query_id],
                expected=[doc for doc, grade in labels.items() if grade >= 1],
                grades={doc: grade for doc, grade in labels.items() if grade != 1},
                cluster=clusters.get(query_id),
            )
        )
    split = qrels.stem
    set_name = name or (directory.name if split == "test" else f"{directory.name}-{split}")
    return GoldenQuestionSet(name=set_name, questions=questions, source=str(qrels))


@attrs.frozen
class BeirQueries:
    """A BEIR ``queries.jsonl``: each query's text, cluster (where given) and line."""

    texts: dict[str, str]
    clusters: dict[str, str]
    lines: dict[str, int]


def read_beir_queries(queries_file: Path, *, whole_number_ids: bool = False) -> BeirQueries:
    """Read a BEIR ``queries.jsonl``, every line checked: an ``_id`` that is a clean,
    unique string, a ``text`` that is a non-empty question without unsafe characters, an
    optional ``cluster`` (or ``metadata.cluster``); each error names the line and key.

    ``whole_number_ids`` reads an ``_id`` given as a JSON whole number (``7``) as its
    decimal string, as a TREC run names that query; a golden set's ids are strings."""
    texts: dict[str, str] = {}
    clusters: dict[str, str] = {}
    query_lines: dict[str, int] = {}
    for number, line in enumerate(lines_of(read_text(queries_file)), start=1):
        if not line.strip():
            continue
        try:
            if len(line) > MAX_LINE_BYTES:
                raise line_too_long(len(line), source=str(queries_file), line=number)
            record = parse_json(line)
            query_text = record["text"]
            query_id = record["_id"]
            if whole_number_ids and type(query_id) is int:
                query_id = str(query_id)
        except DuplicateKey as error:
            raise InputError(
                "the key appears twice in one object",
                source=str(queries_file),
                line=number,
                field=error.key,
            ) from None
        except (json.JSONDecodeError, KeyError, TypeError, RecursionError) as error:
            raise InputError(
                f"expected a JSON object with _id and text ({type(error).__name__}: {error})",
                source=str(queries_file),
                line=number,
            ) from None
        if not isinstance(query_id, str) or not is_clean_id(query_id):
            # As a JSON Lines question's id: str(None) or str(7) would be an id no qrels
            # row ever names, and the question would be dropped without a word.
            raise InputError(
                "must be a non-empty string without spaces or control characters, got "
                f"{query_id!r}",
                source=str(queries_file),
                line=number,
                field="_id",
            )
        if query_id in query_lines:
            raise InputError(
                f"query id '{query_id}' appears again; first on line {query_lines[query_id]}",
                source=str(queries_file),
                line=number,
                field="_id",
                hint="ids must be unique within queries.jsonl",
            )
        query_lines[query_id] = number
        texts[query_id] = query_text
        cluster = _beir_cluster(record, str(queries_file), number)
        if cluster is not None:
            clusters[query_id] = cluster
        if not isinstance(query_text, str) or not query_text.strip():
            raise InputError(
                f"must be the query as a non-empty string, got {query_text!r}",
                source=str(queries_file),
                line=number,
                field="text",
            )
        if len(query_text) > MAX_QUESTION_CHARS:
            raise InputError(
                f"is {len(query_text)} characters long; the limit is {MAX_QUESTION_CHARS}",
                source=str(queries_file),
                line=number,
                field="text",
                hint="a golden question is a question, not a document",
            )
        problem = unsafe_character(query_text, free_text=True)
        if problem is not None:
            raise InputError(
                f"holds a {problem}", source=str(queries_file), line=number, field="text"
            )
    return BeirQueries(texts, clusters, query_lines)


def _judgments(qrels: Path) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
    """Each query's grades (a negative score read as 0), and the line that first judges it."""
    judgments: dict[str, dict[str, int]] = {}
    first_lines: dict[str, int] = {}
    for number, query_id, doc_id, grade in qrels_rows(qrels):
        for column, value in (("query-id", query_id), ("corpus-id", doc_id)):
            if not is_clean_id(value):
                raise InputError(
                    f"id {value!r} is empty or has spaces or control characters",
                    source=str(qrels),
                    line=number,
                    field=column,
                )
        first_lines.setdefault(query_id, number)
        if grade > MAX_GRADE:
            raise InputError(
                f"score {grade} is above the largest grade, {MAX_GRADE}",
                source=str(qrels),
                line=number,
                field="score",
            )
        judgments.setdefault(query_id, {})[doc_id] = max(grade, 0)
    return judgments, first_lines


def _beir_cluster(record: Mapping[str, Any], source: str, line: int) -> str | None:
    """A BEIR query's cluster: its ``cluster`` key, or ``metadata.cluster``."""
    metadata = record.get("metadata")
    cluster = record.get("cluster")
    if cluster is None and isinstance(metadata, Mapping):
        cluster = metadata.get("cluster")

    def fail(message: str, field: str | None = None, hint: str | None = None) -> InputError:
        return InputError(message, source=source, line=line, field=field, hint=hint)

    return parse_cluster(cluster, fail)


def _natural_key(value: str) -> tuple[int, int | str]:
    # ASCII digits only: '²'.isdigit() holds, and int('²') raises.
    return (0, int(value)) if value.isascii() and value.isdigit() else (1, value)
