"""The ``elasticsearch-bm25`` retriever: a team's own Elasticsearch query, asked once per question.

Everything a bad configuration can get wrong is checked when the retriever is created,
before any question is asked: the cluster answers (one health request), the index
exists and maps every configured field (one field-capabilities request), and a query
template or filter is one Elasticsearch accepts (one validate request, only when given).
Questions are then batched through ``_msearch``; a sub-search Elasticsearch rejects
becomes that question's error outcome and the others keep their rankings.
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from retrievalkit.plugin_api import InputError, document_id_of
from retrievalkit_elasticsearch.connection import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    Target,
    client_errors,
    cluster_name,
    describe_error_body,
    explain,
    server_versions,
    target_from_options,
    version_mismatch,
)
from retrievalkit_elasticsearch.ephemeral import OwnsIndex, check_ephemeral_options
from retrievalkit_elasticsearch.indexing import DEFAULT_B, DEFAULT_K1
from retrievalkit_elasticsearch.query import (
    QUERY_THEN_FETCH,
    MultiMatch,
    SearchPlan,
    Template,
    parse_filter,
    parse_multi_match,
    parse_search_type,
    parse_template,
)

if TYPE_CHECKING:
    from elasticsearch import Elasticsearch

DEFAULT_FIELDS = ("title", "text")
DEFAULT_BATCH_SIZE = 64
#: A question used only to check that a template or filter is a query Elasticsearch accepts.
_PROBE_QUESTION = "retrievalkit configuration check"

log = logging.getLogger(__name__)


class SearchFailed(RuntimeError):
    """Elasticsearch could not answer one question; the evaluator records it as an error."""


class ElasticsearchBM25Retriever(OwnsIndex):
    """Ranked document ids from an Elasticsearch index, best first.

    ``retrieve`` returns one id per hit, so a chunked index may repeat a document (the
    evaluator keeps its first, best, occurrence). ``retrieve_scored`` gives each
    document once, with the score of its best chunk, as score fusion needs.
    """

    def __init__(
        self,
        client: Elasticsearch,
        target: Target,
        index: str,
        plan: SearchPlan,
        *,
        doc_id_separator: str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        cluster: str | None = None,
        indices: Sequence[str] = (),
        search_type: str = QUERY_THEN_FETCH,
    ) -> None:
        self.identifier = f"elasticsearch-bm25:{index}"
        self._client = client
        self._target = target
        self._index = index
        self._plan = plan
        self._separator = doc_id_separator
        self._batch_size = batch_size
        self._cluster = cluster
        self._indices = tuple(indices)
        self._search_type = search_type

    # --- the retriever contract ------------------------------------------------------------

    def retrieve(self, question: str, limit: int) -> list[str]:
        return [doc_id for doc_id, _ in self._search(question, limit)]

    def retrieve_scored(self, question: str, limit: int) -> list[tuple[str, float]]:
        """(document id, score) pairs, best first; a document once, with its best chunk's score."""
        best: dict[str, float] = {}
        for doc_id, score in self._search(question, limit):
            best.setdefault(doc_id, score)  # hits come best first
        return list(best.items())

    def retrieve_many(
        self, questions: Sequence[str], limit: int
    ) -> list[Sequence[str] | BaseException]:
        """One ranking per question through ``_msearch``; a failed search is its exception."""
        answers: list[Sequence[str] | BaseException] = []
        for start in range(0, len(questions), self._batch_size):
            batch = questions[start : start + self._batch_size]
            for answer in self._msearch(batch, limit):
                if isinstance(answer, BaseException):
                    answers.append(answer)
                else:
                    answers.append([doc_id for doc_id, _ in answer])
        return answers

    def describe(self) -> dict[str, str]:
        """What the run manifest records about the cluster (no secrets)."""
        described = {
            "elasticsearch.index": self._index,
            "elasticsearch.search_type": self._search_type,
        }
        if self._indices:
            described["elasticsearch.indices"] = ",".join(self._indices)
        if self._cluster:
            described["elasticsearch.cluster"] = self._cluster
        version = self._server_version()
        if version:
            described["elasticsearch.version"] = version
        return described

    # --- searching -----------------------------------------------------------------------

    def _search(self, question: str, limit: int) -> list[tuple[str, float]]:
        if limit <= 0:
            return []
        try:
            response = self._client.search(
                index=self._index,
                body=self._plan.body(question, limit),
                search_type=self._search_type,
            )
        except client_errors() as error:
            raise SearchFailed(self._failure(error)) from None
        return self._hits(response.body)

    def _msearch(
        self, questions: Sequence[str], limit: int
    ) -> list[list[tuple[str, float]] | BaseException]:
        if limit <= 0:
            return [[] for _ in questions]
        searches: list[Mapping[str, Any]] = []
        for question in questions:
            searches.append({})
            searches.append(self._plan.body(question, limit))
        try:
            response = self._client.msearch(
                index=self._index, searches=searches, search_type=self._search_type
            )
        except client_errors() as error:
            failure = SearchFailed(self._failure(error))
            return [failure for _ in questions]
        responses = response.get("responses", [])
        if len(responses) != len(questions):
            failure = SearchFailed(
                f"_msearch returned {len(responses)} responses for {len(questions)} searches"
            )
            return [failure for _ in questions]
        answers: list[list[tuple[str, float]] | BaseException] = []
        for item in responses:
            if "error" in item:
                answers.append(
                    SearchFailed(
                        f"Elasticsearch rejected the search of index '{self._index}' "
                        f"({item.get('status', '?')}): "
                        f"{describe_error_body(item['error'])}"
                    )
                )
                continue
            try:
                answers.append(self._hits(item))
            except SearchFailed as error:
                answers.append(error)
        return answers

    def _hits(self, response: Mapping[str, Any]) -> list[tuple[str, float]]:
        ranked = []
        for hit in response.get("hits", {}).get("hits", []):
            ranked.append(
                (document_id_of(self._hit_id(hit), self._separator), float(hit.get("_score") or 0))
            )
        return ranked

    def _hit_id(self, hit: Mapping[str, Any]) -> str:
        id_field = self._plan.id_field
        if id_field == "_id":
            return str(hit["_id"])
        value: Any = hit.get("_source") or {}
        if id_field in value:
            value = value[id_field]  # a flat key with dots in its name
        else:
            for part in id_field.split("."):
                value = value.get(part) if isinstance(value, dict) else None
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        if value is None or isinstance(value, (dict, list)):
            raise SearchFailed(
                f"hit {hit.get('_id')!r} in index {hit.get('_index')!r} has no single value "
                f"in its id_field '{id_field}'"
            )
        return str(value)

    def _failure(self, error: Exception) -> str:
        return str(explain(error, self._target, action="search", index=self._index))

    def _server_version(self) -> str | None:
        # Best effort: a search-only user may not read node information.
        return ",".join(server_versions(self._client)) or None


# --- the factory -------------------------------------------------------------------------


def create_elasticsearch_bm25(
    *,
    url: str | None = None,
    hosts: Sequence[str] | None = None,
    index: str | None = None,
    fields: Sequence[str] | None = None,
    id_field: str = "_id",
    doc_id_separator: str | None = None,
    query_type: str | None = None,
    tie_breaker: float | None = None,
    query_template: str | Mapping[str, Any] | None = None,
    filter: str | Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    search_type: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    max_retries: int = DEFAULT_MAX_RETRIES,
    verify_certs: bool = True,
    ca_certs: str | None = None,
    api_key_env: str | None = None,
    username: str | None = None,
    password_env: str | None = None,
    password: Any = None,
    api_key: Any = None,
    ephemeral: bool = False,
    corpus: str | None = None,
    k1: float = DEFAULT_K1,
    b: float = DEFAULT_B,
    analyzer: str = "standard",
) -> ElasticsearchBM25Retriever:
    """Factory of the ``elasticsearch-bm25`` plugin; see docs/elasticsearch.md for the options.

    ``password`` and ``api_key`` are accepted only to refuse them with a message that
    points at ``password_env`` and ``api_key_env``: secrets never go in a config file.

    With ``ephemeral = true`` the index is built here from ``corpus`` (BM25 ``k1``, ``b``
    and the ``analyzer``) and deleted when the run ends (`retrievalkit_elasticsearch.ephemeral`).
    """
    for name, value in (("password", password), ("api_key", api_key)):
        if value is not None:
            raise InputError(
                f"secrets are not accepted in the configuration ({name} = ...)",
                field=name,
                hint=f"remove it, and set {name}_env to the name of an environment variable "
                "that holds the secret",
            )
    if not isinstance(index, str) or not index.strip():
        raise InputError(
            "the elasticsearch-bm25 retriever needs the option 'index'",
            field="index",
            hint='e.g. index = "kb" (an index, an alias or a pattern such as "kb-*")',
        )
    target = target_from_options(
        url=url,
        hosts=hosts,
        timeout=timeout,
        max_retries=max_retries,
        verify_certs=verify_certs,
        ca_certs=ca_certs,
        api_key_env=api_key_env,
        username=username,
        password_env=password_env,
    )
    if not isinstance(id_field, str) or not id_field:
        raise InputError(f"expected a field name, got {id_field!r}", field="id_field")
    if doc_id_separator is not None and (
        not isinstance(doc_id_separator, str) or not doc_id_separator
    ):
        raise InputError(
            f"expected a non-empty string such as '#', got {doc_id_separator!r}",
            field="doc_id_separator",
        )
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"expected a whole number >= 1, got {batch_size!r}", field="batch_size")
    checked_search_type = parse_search_type(search_type)
    query: MultiMatch | Template
    if query_template is not None:
        for name, value in (
            ("fields", fields),
            ("query_type", query_type),
            ("tie_breaker", tie_breaker),
        ):
            if value is not None:
                raise InputError(
                    f"{name} does not apply with a query_template (the template is the query)",
                    field=name,
                    hint=f"remove {name}, or remove query_template",
                )
        query = parse_template(query_template)
    else:
        query = parse_multi_match(
            DEFAULT_FIELDS if fields is None else fields, query_type or "best_fields", tie_breaker
        )
    plan = SearchPlan(query, parse_filter(filter), id_field)
    check_ephemeral_options(ephemeral, corpus)

    client = target.connect()
    cluster = cluster_name(client, target, action="check cluster health")

    def make() -> ElasticsearchBM25Retriever:
        return _checked(
            client, target, index, plan, query, id_field, doc_id_separator, batch_size,
            cluster, checked_search_type,
        )  # fmt: skip

    if not ephemeral:
        return make()
    from retrievalkit_elasticsearch.ephemeral import build_ephemeral, owned

    build_ephemeral(client, target, index, corpus, k1=k1, b=b, analyzer=analyzer)
    return owned(target, index, make)


def _checked(
    client: Elasticsearch,
    target: Target,
    index: str,
    plan: SearchPlan,
    query: MultiMatch | Template,
    id_field: str,
    doc_id_separator: str | None,
    batch_size: int,
    cluster: str | None,
    checked_search_type: str,
) -> ElasticsearchBM25Retriever:
    required = list(query.field_names) if isinstance(query, MultiMatch) else []
    if id_field != "_id":
        required.append(id_field)
    indices = _check_fields(client, target, index, required, id_field=id_field)
    if isinstance(query, Template) or plan.filters:
        _check_query(client, target, index, plan)
    retriever = ElasticsearchBM25Retriever(
        client,
        target,
        index,
        plan,
        doc_id_separator=doc_id_separator,
        batch_size=batch_size,
        cluster=cluster,
        indices=indices,
        search_type=checked_search_type,
    )
    log.info("elasticsearch-bm25 on %s at %s (indices: %s)", index, target.where, indices)
    return retriever


def _check_fields(
    client: Elasticsearch, target: Target, index: str, required: Sequence[str], *, id_field: str
) -> list[str]:
    """The concrete indices behind ``index``; every required field must be mapped."""
    import elasticsearch

    try:
        caps = client.field_caps(index=index, fields="*")
    except client_errors() as error:
        problem = explain(error, target, action=f"read the fields of index '{index}'", index=index)
        if isinstance(error, elasticsearch.BadRequestError):
            problem = version_mismatch(client, target) or problem
        raise problem from None
    indices = [str(name) for name in caps.get("indices", [])]
    if not indices:
        raise InputError(
            f"no index on {target.where} matches '{index}'",
            field="index",
            hint="check the name (GET /_cat/indices) or create it with 'retrievalkit es index'",
        )
    mapped = sorted(name for name in caps.get("fields", {}) if not name.startswith("_"))
    missing = [
        field
        for field in required
        if field != "_id" and not any(fnmatch.fnmatchcase(name, field) for name in mapped)
    ]
    if missing:
        field = "id_field" if missing == [id_field] else "fields"
        shown = ", ".join(mapped[:20]) + (", ..." if len(mapped) > 20 else "")
        raise InputError(
            f"index '{index}' on {target.where} maps no field "
            + ", ".join(f"'{name}'" for name in missing)
            + f" (its fields: {shown or 'none'})",
            field=field,
            hint="use the index's field names, or re-create the index with them",
        )
    return indices


def _check_query(client: Elasticsearch, target: Target, index: str, plan: SearchPlan) -> None:
    """Ask Elasticsearch whether the filter and the template are queries it can run."""
    checks: list[tuple[str, Mapping[str, Any]]] = []
    if plan.filters:
        checks.append(("filter", {"bool": {"filter": [dict(f) for f in plan.filters]}}))
    if isinstance(plan.query, Template):
        checks.append(("query_template", plan.query.fill(_PROBE_QUESTION)["query"]))
    for field, query in checks:
        try:
            answer = client.indices.validate_query(index=index, query=query, explain=True)
        except client_errors() as error:
            raise explain(error, target, action="validate the query", index=index) from None
        if answer.get("valid"):
            continue
        details = [str(item.get("error", "")) for item in answer.get("explanations", [])]
        reason = next((text for text in details if text), str(answer.get("error", "")))
        raise InputError(
            f"Elasticsearch rejects this query: {reason.splitlines()[0][:400]}",
            field=field,
            hint=f"try it with GET /{index}/_validate/query?explain=true",
        )
