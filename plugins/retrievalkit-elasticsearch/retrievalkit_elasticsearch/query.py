"""The search body sent for one question: a ``multi_match`` over fields, or the team's template.

A template is parsed as JSON once, when the retriever starts; each question is then put
into the template's string values (never pasted into JSON text), so quotes, backslashes
and newlines in a question can neither break the body nor change the query's structure.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from retrievalkit.plugin_api import InputError

PLACEHOLDER = re.compile(r"\{\{\s*question\s*\}\}")
QUERY_TYPES = ("best_fields", "most_fields", "cross_fields")
#: How a search over several shards scores: with each shard's own term statistics
#: (Elasticsearch's default), or with statistics gathered from every shard first.
QUERY_THEN_FETCH = "query_then_fetch"
DFS_QUERY_THEN_FETCH = "dfs_query_then_fetch"
SEARCH_TYPES = (QUERY_THEN_FETCH, DFS_QUERY_THEN_FETCH)
_FIELD = re.compile(r"^(?P<name>[^\s^]+)(?:\^(?P<boost>[0-9]*\.?[0-9]+))?$")


@attrs.frozen
class MultiMatch:
    """``multi_match`` of the question over boosted fields (``title^2``)."""

    fields: tuple[str, ...]
    type: str = "best_fields"
    tie_breaker: float | None = None

    def query(self, question: str) -> dict[str, Any]:
        clause: dict[str, Any] = {"query": question, "type": self.type, "fields": list(self.fields)}
        if self.tie_breaker is not None:
            clause["tie_breaker"] = self.tie_breaker
        return {"multi_match": clause}

    @property
    def field_names(self) -> tuple[str, ...]:
        """The fields without their boosts, as a mapping names them (wildcards kept)."""
        return tuple(field.partition("^")[0] for field in self.fields)


@attrs.frozen
class Template:
    """A full search body with ``{{question}}`` in its string values."""

    body: Mapping[str, Any]

    def fill(self, question: str) -> dict[str, Any]:
        filled = _fill(copy.deepcopy(dict(self.body)), question)
        assert isinstance(filled, dict)
        return filled


def _fill(value: Any, question: str) -> Any:
    if isinstance(value, str):
        # A function as replacement: backslashes in the question are kept literally.
        return PLACEHOLDER.sub(lambda _: question, value)
    if isinstance(value, list):
        return [_fill(item, question) for item in value]
    if isinstance(value, dict):
        return {key: _fill(item, question) for key, item in value.items()}
    return value


def _mentions_placeholder(value: Any) -> bool:
    if isinstance(value, str):
        return bool(PLACEHOLDER.search(value))
    if isinstance(value, list):
        return any(_mentions_placeholder(item) for item in value)
    if isinstance(value, dict):
        return any(_mentions_placeholder(item) for item in value.values())
    return False


@attrs.frozen
class SearchPlan:
    """How every question becomes a search body: the query, the filters, what to fetch."""

    query: MultiMatch | Template
    filters: tuple[Mapping[str, Any], ...] = ()
    id_field: str = "_id"

    def body(self, question: str, size: int) -> dict[str, Any]:
        """The search body for ``question``, asking for ``size`` hits."""
        if isinstance(self.query, Template):
            body = self.query.fill(question)
        else:
            body = {"query": self.query.query(question)}
        if self.filters:
            body["query"] = {
                "bool": {"must": [body["query"]], "filter": [dict(f) for f in self.filters]}
            }
        # The evaluator decides how deep to look; a template's own paging is overridden.
        body["size"] = size
        body["from"] = 0
        body["track_total_hits"] = False
        body["_source"] = False if self.id_field == "_id" else {"includes": [self.id_field]}
        return body


def parse_json_option(value: Any, field: str) -> Any:
    """A JSON option given as text (a TOML string) or already as a TOML table or array."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as error:
        raise InputError(
            f"not valid JSON: {error.msg} at line {error.lineno}, column {error.colno}",
            field=field,
            hint='put {{question}} inside a JSON string, e.g. {"query": {"match": '
            '{"text": "{{question}}"}}}'
            if field == "query_template"
            else None,
        ) from None


def parse_template(value: Any) -> Template:
    """Check a ``query_template`` option: a JSON search body that uses ``{{question}}``."""
    body = parse_json_option(value, "query_template")
    if not isinstance(body, dict) or not isinstance(body.get("query"), dict):
        raise InputError(
            "expected a search body: a JSON object with a 'query' object",
            field="query_template",
            hint='e.g. {"query": {"match": {"text": "{{question}}"}}}',
        )
    if not _mentions_placeholder(body):
        raise InputError(
            "the template does not use {{question}}, so every question would get the same results",
            field="query_template",
            hint="put {{question}} where the query text goes",
        )
    return Template(body)


def parse_filter(value: Any) -> tuple[Mapping[str, Any], ...]:
    """Check a ``filter`` option: one query clause, or a list of them (all must match)."""
    if value is None:
        return ()
    parsed = parse_json_option(value, "filter")
    clauses = parsed if isinstance(parsed, list) else [parsed]
    for clause in clauses:
        if not isinstance(clause, dict) or len(clause) != 1:
            raise InputError(
                f'expected a query clause such as {{"term": {{"lang": "en"}}}}, got '
                f"{json.dumps(clause)[:120]}",
                field="filter",
            )
    return tuple(clauses)


def parse_fields(value: Any) -> tuple[str, ...]:
    """Check a ``fields`` option: field names, each with an optional boost (``title^2``)."""
    if isinstance(value, str) or not isinstance(value, Sequence) or not value:
        raise InputError(
            f"expected a non-empty list of field names, got {value!r}",
            field="fields",
            hint='e.g. fields = ["title^2", "text"]',
        )
    for field in value:
        if not isinstance(field, str) or not _FIELD.match(field):
            raise InputError(
                f"{field!r} is not a field name with an optional numeric boost",
                field="fields",
                hint='e.g. "title^2" or "text"',
            )
    return tuple(value)


def parse_multi_match(fields: Any, query_type: Any, tie_breaker: Any) -> MultiMatch:
    """Check the multi_match options together."""
    if query_type not in QUERY_TYPES:
        raise InputError(
            f"unknown query_type {query_type!r}",
            field="query_type",
            hint=f"one of {', '.join(QUERY_TYPES)}; or give a query_template",
        )
    if tie_breaker is not None and (
        isinstance(tie_breaker, bool)
        or not isinstance(tie_breaker, (int, float))
        or not 0.0 <= tie_breaker <= 1.0
    ):
        raise InputError(
            f"expected a number between 0 and 1, got {tie_breaker!r}", field="tie_breaker"
        )
    return MultiMatch(
        parse_fields(fields),
        query_type,
        None if tie_breaker is None else float(tie_breaker),
    )


def parse_search_type(value: Any) -> str:
    """Check a ``search_type`` option: ``query_then_fetch`` or ``dfs_query_then_fetch``.

    With several shards, BM25's document frequencies and average lengths are each shard's
    own under ``query_then_fetch``; ``dfs_query_then_fetch`` first collects them from every
    shard, so scores are those of a one-shard index, at the cost of one more round trip.
    """
    if value is None:
        return QUERY_THEN_FETCH
    if not isinstance(value, str) or value not in SEARCH_TYPES:
        shown = repr(value) if not isinstance(value, str) else f"'{value}'"
        raise InputError(
            f"unknown search_type {shown}",
            field="search_type",
            hint=f'use "{DFS_QUERY_THEN_FETCH}" (BM25 statistics over every shard) or '
            f"\"{QUERY_THEN_FETCH}\" (each shard's own statistics; Elasticsearch's default)",
        )
    return value
