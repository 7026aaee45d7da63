"""The ``elasticsearch://HOST:PORT/INDEX`` result store: one document per run, chartable in Kibana.

Each run is one document whose id is the run id. Its summary (the record without its
per-question outcomes, `retrievalkit.stores.serialization.dump_summary`) is kept in
``record``: an object Elasticsearch stores but does not index (``enabled: false``), so
records of any shape never touch the mapping. The outcome columns are documents of
``kind: column`` beside it, one a column, its bytes in the ``binary`` field ``data``;
a record read from the store fetches each column document when it first reads that
column, so history reads summaries only, and no request carries a whole large run. The
run document names its columns' ``columns_id`` (random for each save): a record never
reads the columns of another run saved later under its id. Runs stored before (their
whole record in ``record``) keep loading as they are. Beside
it, the fields worth filtering and charting on: keywords ``set``, ``model``, ``grader``,
``run_id``, ``plugin``, ``git_commit``; the date ``created_at`` (a Kibana time field);
the numbers ``pass_rate``, ``mean_score``, ``questions``, ``errored`` and every metric's
mean under ``metrics.<name>`` (``metrics.ndcg@10``). Pinned baselines are small
documents of ``kind: pin`` in the same index; runs are ``kind: run``.

A save writes the column documents (one bulk request), then creates the run document
with ``refresh=true``: the run exists, whole and visible to the next read, once that
create succeeds, and not before; column documents of a save that failed are deleted,
and any a crash leaves behind belong to no run. Deleting runs deletes their column
documents after them. The index is created on the first save (an index created before
gets the column fields added to its mapping then); reading a store that does not exist
yet answers "no runs".

Options go in the URL's query string: ``https=true``, ``api_key_env=VAR``,
``username=NAME&password_env=VAR``, ``ca_certs=PATH``, ``verify_certs=false``,
``timeout=SECONDS``. Secrets themselves never do.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from retrievalkit.errors import RetrievalkitError, StoreError
from retrievalkit.model.values import GRADER, ResultRecord
from retrievalkit.stores.serialization import dump_columns, dump_summary, load_record, load_summary
from retrievalkit_elasticsearch.connection import (
    Target,
    client_errors,
    explain,
    target_from_options,
)

if TYPE_CHECKING:
    from elasticsearch import Elasticsearch

SCHEME = "elasticsearch"
_PAGE = 500
_URL_OPTIONS = (
    "https",
    "api_key_env",
    "username",
    "password_env",
    "ca_certs",
    "verify_certs",
    "timeout",
)

#: The fields of a column document (``kind: column``): which save of which run, which
#: column, and its bytes (stored, not indexed).
COLUMN_FIELDS: dict[str, Any] = {
    "columns_id": {"type": "keyword"},
    "column": {"type": "keyword"},
    "data": {"type": "binary"},
}

MAPPING: dict[str, Any] = {
    "dynamic": "strict",
    "_meta": {"retrievalkit": {"store": "runs", "schema": 2}},
    "dynamic_templates": [
        {"metric_means": {"path_match": "metrics.*", "mapping": {"type": "double"}}}
    ],
    "properties": {
        "kind": {"type": "keyword"},
        "run_id": {"type": "keyword"},
        "set": {"type": "keyword"},
        "model": {"type": "keyword"},
        "grader": {"type": "keyword"},
        "plugin": {"type": "keyword"},
        "git_commit": {"type": "keyword"},
        "retrievalkit_version": {"type": "keyword"},
        "created_at": {"type": "date"},
        # Save order, for "newest first" among runs created in the same second.
        "saved_at_ns": {"type": "long"},
        "pass_rate": {"type": "double"},
        "mean_score": {"type": "double"},
        "questions": {"type": "integer"},
        "errored": {"type": "integer"},
        "metrics": {"type": "object", "dynamic": True},
        "record": {"type": "object", "enabled": False},
        **COLUMN_FIELDS,
    },
}


class ElasticsearchStore:
    """Runs as documents of one index; reads answer newest (last saved) first."""

    def __init__(self, client: Elasticsearch, target: Target, index: str, *, url: str) -> None:
        self.url = url
        self.index = index
        self._client = client
        self._target = target
        self._ready = False
        self._columns_mapped = False

    @classmethod
    def from_url(cls, url: str) -> ElasticsearchStore:
        """Open ``elasticsearch://HOST:PORT/INDEX[?options]``; checks the cluster answers."""
        parts = urllib.parse.urlsplit(url)
        # Messages show the URL without credentials or query values, whatever it holds.
        shown = parts._replace(netloc=parts.netloc.rpartition("@")[2], query="").geturl()
        if parts.username is not None or parts.password is not None:
            raise StoreError(
                f"the store URL {shown} carries credentials; put username=NAME&"
                "password_env=VAR (or api_key_env=VAR) in its query string and the secret in "
                "that environment variable"
            )
        index = parts.path.strip("/")
        if parts.scheme != SCHEME or not parts.hostname or not index or "/" in index:
            raise StoreError(
                f"store URL {shown!r} is not of the form elasticsearch://HOST:PORT/INDEX "
                "(e.g. elasticsearch://127.0.0.1:9200/retrievalkit-runs)"
            )
        options = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
        unknown = sorted(set(options) - set(_URL_OPTIONS))
        if unknown:
            raise StoreError(
                f"unknown option {', '.join(unknown)} in store URL {shown!r} "
                f"(known: {', '.join(_URL_OPTIONS)}; secrets go in environment variables)"
            )
        scheme = "https" if _flag(options.get("https"), default=False) else "http"
        try:
            target = target_from_options(
                url=f"{scheme}://{parts.netloc}",
                timeout=float(options.get("timeout", 30)),
                verify_certs=_flag(options.get("verify_certs"), default=True),
                ca_certs=options.get("ca_certs"),
                api_key_env=options.get("api_key_env"),
                username=options.get("username"),
                password_env=options.get("password_env"),
            )
            client = target.connect()
        except (RetrievalkitError, ValueError) as error:
            raise StoreError(f"store {url}: {error}") from None
        store = cls(client, target, index, url=url)
        store._check()
        return store

    # --- the ResultStore protocol ----------------------------------------------------------

    def save(self, record: ResultRecord) -> None:
        import elasticsearch

        self._ensure_index()
        summary = dump_summary(record)
        columns_id = secrets.token_hex(8)
        ids = self._save_columns(record.run_id, columns_id, dump_columns(record))
        try:
            self._client.create(
                index=self.index,
                id=record.run_id,
                document=_document(record, json.loads(summary), columns_id),
                refresh=True,
            )
        except elasticsearch.ConflictError:
            self._forget(ids)
            raise StoreError(f"run {record.run_id} is already stored in {self.url}") from None
        except client_errors() as error:
            self._forget(ids)
            raise self._error(error, f"save run {record.run_id}; nothing was saved") from None

    def _save_columns(
        self, run_id: str, columns_id: str, columns: Mapping[str, bytes]
    ) -> list[str]:
        """Write a run's column documents (not yet part of any run); their ids."""
        ids = [_column_id(run_id, columns_id, name) for name in columns]
        operations: list[Mapping[str, Any]] = []
        for (name, data), column_id in zip(columns.items(), ids, strict=True):
            operations.append({"index": {"_index": self.index, "_id": column_id}})
            operations.append(
                {
                    "kind": "column",
                    "run_id": run_id,
                    "columns_id": columns_id,
                    "column": name,
                    "data": base64.b64encode(data).decode("ascii"),
                }
            )
        try:
            answer = self._client.bulk(operations=operations)
        except client_errors() as error:
            self._forget(ids)
            raise self._error(error, f"save run {run_id}; nothing was saved") from None
        if answer.get("errors"):
            self._forget(ids)
            reasons = [
                item["index"]["error"].get("reason", "")
                for item in answer.get("items", [])
                if "error" in item.get("index", {})
            ]
            raise StoreError(
                f"store {self.url}: cannot save run {run_id}: {reasons[0] if reasons else ''}; "
                "nothing was saved"
            )
        return ids

    def _forget(self, ids: Sequence[str]) -> None:
        """Delete column documents no run names (best effort: orphans are never read)."""
        import contextlib

        operations = [{"delete": {"_index": self.index, "_id": column_id}} for column_id in ids]
        with contextlib.suppress(*client_errors()):
            self._client.bulk(operations=operations)

    def _column(self, run_id: str, columns_id: str, name: str) -> bytes:
        """One outcome column of a stored run, fetched when a record first reads it."""
        import elasticsearch

        try:
            found = self._client.get(
                index=self.index,
                id=_column_id(run_id, columns_id, name),
                source_includes=["data", "run_id", "columns_id"],
            )
        except elasticsearch.NotFoundError:
            found = None
        except client_errors() as error:
            raise self._error(error, f"read column '{name}' of run {run_id}") from None
        source = {} if found is None else found.get("_source", {})
        if source.get("run_id") != run_id or source.get("columns_id") != columns_id:
            raise StoreError(
                f"run {run_id} is no longer in {self.url} (deleted or pruned after it was "
                f"read), so its column '{name}' cannot be loaded; read the run again"
            )
        try:
            return base64.b64decode(source["data"], validate=True)
        except (KeyError, TypeError, ValueError):
            raise StoreError(
                f"store {self.url}: column '{name}' of run {run_id} cannot be read (the "
                "document was changed outside retrievalkit)"
            ) from None

    def _record(self, source: Mapping[str, Any], run_id: str) -> ResultRecord:
        where = f"{self.url}, run {run_id}"
        stored = source["record"]
        columns_id = source.get("columns_id")
        if isinstance(stored, dict) and isinstance(stored.get("outcomes"), dict):
            if not isinstance(columns_id, str):
                raise StoreError(f"{where}: the run names no outcome columns")
            return load_summary(_json(stored), _ColumnReader(self, run_id, columns_id), where=where)
        return load_record(_json(stored), where=where)  # stored whole, outcomes inline

    def runs(self, set_name: str, model: str, grader: str = GRADER) -> list[ResultRecord]:
        return list(self._search({"set": set_name, "model": model, "grader": grader}))

    def get(self, run_id: str) -> ResultRecord | None:
        import elasticsearch

        try:
            found = self._client.get(
                index=self.index, id=run_id, source_includes=["kind", "record", "columns_id"]
            )
        except elasticsearch.NotFoundError:
            return None  # no such run, or no store index yet
        except client_errors() as error:
            raise self._error(error, f"read run {run_id}") from None
        source = found.get("_source", {})
        if source.get("kind") != "run" or "record" not in source:
            return None
        return self._record(source, run_id)

    def all_runs(self) -> list[ResultRecord]:
        return list(self._search({}))

    # --- pinned baselines and deletion (the optional store protocols) --------------------

    def pin(self, record: ResultRecord) -> str | None:
        if self.get(record.run_id) is None:
            raise StoreError(f"run {record.run_id} is not stored in {self.url}")
        before = self.pinned(*record.key)
        set_name, model, grader = record.key
        document = {"kind": "pin", "set": set_name, "model": model, "grader": grader}
        document["run_id"] = record.run_id
        try:
            self._client.index(
                index=self.index, id=_pin_id(record.key), document=document, refresh=True
            )
        except client_errors() as error:
            raise self._error(error, f"pin run {record.run_id}") from None
        return before

    def unpin(self, set_name: str, model: str, grader: str = GRADER) -> str | None:
        import elasticsearch

        before = self.pinned(set_name, model, grader)
        if before is None:
            return None
        try:
            self._client.delete(
                index=self.index, id=_pin_id((set_name, model, grader)), refresh=True
            )
        except elasticsearch.NotFoundError:
            return None
        except client_errors() as error:
            raise self._error(error, "unpin") from None
        return before

    def pinned(self, set_name: str, model: str, grader: str = GRADER) -> str | None:
        import elasticsearch

        try:
            found = self._client.get(index=self.index, id=_pin_id((set_name, model, grader)))
        except elasticsearch.NotFoundError:
            return None
        except client_errors() as error:
            raise self._error(error, "read the pinned baseline") from None
        return str(found["_source"]["run_id"])

    def delete(self, run_ids: Sequence[str]) -> int:
        wanted = sorted(set(run_ids))
        if not wanted or not self._exists():
            return 0
        pins = self._hits({"bool": {"filter": [{"term": {"kind": "pin"}}]}}, ["run_id"])
        pinned = sorted({str(hit["_source"]["run_id"]) for hit in pins} & set(wanted))
        if pinned:
            raise StoreError(
                f"run {pinned[0]} is a pinned baseline in {self.url}; unpin it first "
                "(retrievalkit baseline unpin); nothing was deleted"
            )
        operations: list[Mapping[str, Any]] = [
            {"delete": {"_index": self.index, "_id": run_id}} for run_id in wanted
        ]
        try:
            answer = self._client.bulk(operations=operations, refresh=True)
            # After the runs: a failure here leaves column documents no run names.
            columns = self._hits(
                {"bool": {"filter": [{"term": {"kind": "column"}}, {"terms": {"run_id": wanted}}]}},
                ["run_id"],
            )
            column_ids = [str(hit["_id"]) for hit in columns]
            if column_ids:
                self._client.bulk(
                    operations=[
                        {"delete": {"_index": self.index, "_id": column_id}}
                        for column_id in column_ids
                    ],
                    refresh=True,
                )
        except client_errors() as error:
            raise self._error(error, "delete runs") from None
        return sum(
            1 for item in answer.get("items", []) if item["delete"].get("result") == "deleted"
        )

    # --- internals -------------------------------------------------------------------------

    def _error(self, error: Exception, action: str) -> StoreError:
        return StoreError(f"store {self.url}: {explain(error, self._target, action=action)}")

    def _exists(self) -> bool:
        if self._ready:
            return True
        try:
            return bool(self._client.indices.exists(index=self.index))
        except client_errors() as error:
            raise self._error(error, f"look for index '{self.index}'") from None

    def _check(self) -> None:
        """The cluster answers, and an existing index is a run store (not, say, a corpus)."""
        import elasticsearch

        try:
            mapping = self._client.indices.get_mapping(index=self.index)
        except elasticsearch.NotFoundError:
            return  # created on the first save
        except client_errors() as error:
            raise self._error(error, f"read the mapping of '{self.index}'") from None
        for name, body in mapping.items():
            properties = body.get("mappings", {}).get("properties", {})
            record = properties.get("record", {})
            if record.get("enabled") is not False or "kind" not in properties:
                raise StoreError(
                    f"index '{name}' of store {self.url} is not a retrievalkit run store (its "
                    "mapping has no unindexed 'record' object); name a new index for the store"
                )
            self._columns_mapped = "data" in properties
        self._ready = True

    def _ensure_index(self) -> None:
        import elasticsearch

        if self._ready:
            if not self._columns_mapped:
                try:  # an index created before outcome columns: add their fields
                    self._client.indices.put_mapping(index=self.index, properties=COLUMN_FIELDS)
                except client_errors() as error:
                    raise self._error(error, f"add the column fields to '{self.index}'") from None
                self._columns_mapped = True
            return
        try:
            self._client.indices.create(
                index=self.index,
                settings={"number_of_shards": 1, "number_of_replicas": 0},
                mappings=MAPPING,
            )
        except elasticsearch.BadRequestError as error:
            if "resource_already_exists_exception" not in str(error):
                raise self._error(error, f"create index '{self.index}'") from None
            self._check()  # created meanwhile by another writer: make sure it is ours
            self._ensure_index()
            return
        except client_errors() as error:
            raise self._error(error, f"create index '{self.index}'") from None
        self._ready = self._columns_mapped = True

    def _search(self, terms: Mapping[str, str]) -> Iterator[ResultRecord]:
        if not self._exists():
            return
        filters = [{"term": {"kind": "run"}}]
        filters += [{"term": {name: value}} for name, value in terms.items()]
        for hit in self._hits({"bool": {"filter": filters}}, ["record", "columns_id"]):
            source = hit.get("_source", {})
            if "record" not in source:
                continue
            yield self._record(source, hit["_id"])

    def _hits(self, query: Mapping[str, Any], fields: list[str]) -> Iterator[Mapping[str, Any]]:
        """Every matching document, newest saved first, page by page (search_after)."""
        sort = [{"saved_at_ns": {"order": "desc", "missing": "_last"}}, {"run_id": "desc"}]
        after: list[Any] | None = None
        while True:
            body: dict[str, Any] = {
                "query": query,
                "sort": sort,
                "size": _PAGE,
                "_source": fields,
                "track_total_hits": False,
            }
            if after is not None:
                body["search_after"] = after
            try:
                page = self._client.search(index=self.index, body=body)
            except client_errors() as error:
                raise self._error(error, "read runs") from None
            hits = page.get("hits", {}).get("hits", [])
            yield from hits
            if len(hits) < _PAGE:
                return
            after = hits[-1]["sort"]


class _ColumnReader:
    """Fetches one stored run's outcome columns through its store, on first use."""

    __slots__ = ("_columns_id", "_run_id", "_store")

    def __init__(self, store: ElasticsearchStore, run_id: str, columns_id: str) -> None:
        self._store, self._run_id, self._columns_id = store, run_id, columns_id

    def __call__(self, name: str) -> bytes:
        return self._store._column(self._run_id, self._columns_id, name)


def _column_id(run_id: str, columns_id: str, name: str) -> str:
    key = "\x1f".join((run_id, columns_id, name)).encode("utf-8")
    return f"column-{hashlib.sha256(key).hexdigest()[:40]}"


def _document(record: ResultRecord, summary: Mapping[str, Any], columns_id: str) -> dict[str, Any]:
    manifest = record.manifest
    return {
        "kind": "run",
        "run_id": record.run_id,
        "set": record.set,
        "model": record.model,
        "grader": record.grader,
        "plugin": manifest.plugin,
        "git_commit": manifest.git_commit,
        "retrievalkit_version": manifest.retrievalkit_version,
        "created_at": manifest.created_at,
        "saved_at_ns": time.time_ns(),
        "pass_rate": record.pass_rate,
        "mean_score": record.mean_score,
        "questions": len(record.outcomes),
        "errored": record.errored,
        "metrics": {
            name: value.mean
            for name, value in record.metrics.items()
            if value.mean is not None and "." not in name
        },
        "record": summary,
        "columns_id": columns_id,
    }


def _json(value: Any) -> str:
    return json.dumps(value)


def _pin_id(key: tuple[str, str, str]) -> str:
    digest = hashlib.sha256("\x1f".join(key).encode("utf-8")).hexdigest()[:32]
    return f"pin-{digest}"


def _flag(text: str | None, *, default: bool) -> bool:
    if text is None or text == "":
        return default
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise StoreError(f"expected true or false in the store URL, got {text!r}")
