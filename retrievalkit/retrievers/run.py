"""The ``run`` retriever: replay a TREC run file, so any system's precomputed results are evaluated.

The retriever contract hands a retriever only the question *text*, while a run file is
keyed by question *id*. Rather than widen the contract for one adapter, the run
retriever is told how texts map to ids: the ``queries`` option names the questions the
run answers, as a golden set (a file, a BEIR directory, a ``[sets.NAME]`` of
``./retrievalkit.toml`` or a plugin's set name), a BEIR
``queries.jsonl`` or a ``qid<TAB>text`` TSV file. Usually that is the very set given to
``--set``. Question texts are matched with whitespace normalised; two questions with
the same text are refused, because no text-keyed lookup could tell them apart.

A question the queries do not list is an error outcome for that question (never a
silent miss). A listed question without lines in the run returned nothing, as in
trec_eval. Rankings are in trec_eval's order: score descending, ties broken by
document id descending; the rank column is not used.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from retrievalkit.errors import InputError
from retrievalkit.formats.text_files import lines_of, read_text, text_lines
from retrievalkit.formats.trec import rankings_from_run, read_run, run_tags
from retrievalkit.retrievers.contract import document_id_of

if TYPE_CHECKING:
    from retrievalkit.model.values import GoldenQuestionSet

log = logging.getLogger(__name__)


def _normalise(text: str) -> str:
    return " ".join(text.split())


class RunRetriever:
    """Answers each question with the ranking a TREC run file holds for its id."""

    def __init__(
        self,
        path: Path,
        question_ids: dict[str, str],
        *,
        tag: str | None = None,
        doc_id_separator: str | None = None,
        queries_source: str = "queries",
    ) -> None:
        rows = read_run(path)
        if not rows:
            raise InputError("the run file holds no lines", source=str(path), field="path")
        tags = run_tags(rows)
        if tag is None:
            if len(tags) > 1:
                raise InputError(
                    f"the run file holds {len(tags)} runs ({', '.join(tags)})",
                    source=str(path),
                    field="tag",
                    hint='choose one with tag = "NAME"',
                )
            tag = tags[0]
        elif tag not in tags:
            raise InputError(
                f"no run tagged '{tag}' in the file (tags: {', '.join(tags)})",
                source=str(path),
                field="tag",
            )
        rankings = rankings_from_run(row for row in rows if row.tag == tag)
        self._rankings = {
            query_id: [document_id_of(doc_id, doc_id_separator) for doc_id in ranking]
            for query_id, ranking in rankings.items()
        }
        self._question_ids = question_ids
        self._queries_source = queries_source
        self.identifier = f"run:{tag}"
        answered = sum(1 for query_id in set(question_ids.values()) if query_id in rankings)
        if answered == 0:
            raise InputError(
                f"none of the {len(set(question_ids.values()))} question ids of "
                f"{queries_source} occurs in run '{tag}' ({len(rankings)} query ids, "
                f"e.g. {next(iter(rankings))})",
                source=str(path),
                field="queries",
                hint="point queries at the set (or queries file) this run was made for",
            )
        log.info(
            "run '%s' from %s: rankings for %d of %d questions",
            tag,
            path,
            answered,
            len(set(question_ids.values())),
        )

    def retrieve(self, question: str, limit: int) -> list[str]:
        query_id = self._question_ids.get(_normalise(question))
        if query_id is None:
            raise LookupError(
                f"question {question[:60]!r} is not in {self._queries_source}, so its id "
                "(and its ranking in the run) is unknown"
            )
        return self._rankings.get(query_id, [])[: max(limit, 0)]


def question_ids_from(queries: str) -> dict[str, str]:
    """Normalised question text -> question id, from any source the ``queries`` option takes."""
    path = Path(queries)
    pairs: list[tuple[str, str]]
    if path.is_file() and path.suffix == ".tsv":
        pairs = _tsv_pairs(path)
    elif path.is_file() and path.suffix == ".jsonl" and _is_beir_queries(path):
        pairs = _beir_pairs(path)
    else:
        pairs = [
            (question.id, question.question) for question in load_queries_as_set(queries).questions
        ]
    mapping: dict[str, str] = {}
    for query_id, text in pairs:
        key = _normalise(text)
        other = mapping.get(key)
        if other is not None and other != query_id:
            raise InputError(
                f"questions '{other}' and '{query_id}' have the same text; the run retriever "
                "sees only the text, so it cannot tell them apart",
                source=queries,
                field="queries",
                hint="reword one of them, or evaluate them in separate sets",
            )
        mapping[key] = query_id
    if not mapping:
        raise InputError("holds no questions", source=queries, field="queries")
    return mapping


def load_queries_as_set(queries: str) -> GoldenQuestionSet:
    from retrievalkit.formats.config import find_config
    from retrievalkit.plugins.resolution import resolve_set

    # The working directory's config, so a [sets.NAME] can be named here as with --set.
    return resolve_set(queries, find_config(None))


def _is_beir_queries(path: Path) -> bool:
    for line in text_lines(path, "the queries"):
        if line.strip():
            try:
                first = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                return False
            return isinstance(first, dict) and "_id" in first and "question" not in first
    return False


def _beir_pairs(path: Path) -> list[tuple[str, str]]:
    # The reader of a BEIR directory's queries, so both refuse the same lines alike.
    from retrievalkit.formats.golden_sets.beir import read_beir_queries

    return list(read_beir_queries(path, whole_number_ids=True).texts.items())


def _tsv_pairs(path: Path) -> list[tuple[str, str]]:
    pairs = []
    for number, line in enumerate(lines_of(read_text(path)), start=1):
        if not line.strip():
            continue
        query_id, tab, text = line.partition("\t")
        if not tab or not query_id.strip() or not text.strip():
            raise InputError(
                "expected a question id, a tab, and the question text",
                source=str(path),
                line=number,
            )
        pairs.append((query_id.strip(), text))
    return pairs


def create_run(
    path: str | None = None,
    *,
    queries: str | None = None,
    tag: str | None = None,
    doc_id_separator: str | None = None,
) -> RunRetriever:
    """Factory of the ``run`` plugin: replay the TREC run file ``path``.

    ``queries`` (required) maps question texts to the run's query ids: a golden set
    file, a BEIR directory, a ``[sets.NAME]``, a plugin's set name, a BEIR ``queries.jsonl`` or a
    ``qid<TAB>text`` file. ``tag`` picks one run when the file holds several.
    ``doc_id_separator`` maps chunk ids to document ids (``doc-7#3`` -> ``doc-7``).
    """
    if path is None:
        raise InputError(
            "the run retriever needs the option 'path'",
            field="path",
            hint='set path = "runs/system.trec" in a [retrievers.NAME] block with plugin = "run"',
        )
    if queries is None:
        raise InputError(
            "the run retriever needs the option 'queries'",
            field="queries",
            hint="a retriever is only given question text; queries maps texts to the run's ids: "
            "usually the same golden set file as --set, or a BEIR queries.jsonl",
        )
    run_path = Path(path)
    if not run_path.is_file():
        raise InputError("no such run file", source=path, field="path")
    return RunRetriever(
        run_path,
        question_ids_from(queries),
        tag=tag,
        doc_id_separator=doc_id_separator,
        queries_source=queries,
    )
