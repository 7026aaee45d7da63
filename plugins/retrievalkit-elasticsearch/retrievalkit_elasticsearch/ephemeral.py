"""Indices that live for one run (``ephemeral = true``), and dropping what ``es index`` built.

An ephemeral ``elasticsearch-bm25`` retriever loads its ``corpus`` into a new index
(an ephemeral ``elasticsearch-knn`` or ``elasticsearch-hybrid`` one embeds it with its
``embedder`` first, and loads the vectors too) when it is created and deletes that index
when it is closed, garbage-collected, or when the process exits, whether the run
finished, failed with an error, or was stopped with Ctrl-C (the interpreter's exit runs
the delete; a ``kill -9`` leaves the index for ``es drop``). A build that fails or is
interrupted deletes what it had loaded.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from retrievalkit.plugin_api import InputError
from retrievalkit_elasticsearch.connection import client_errors, explain

if TYPE_CHECKING:
    from elasticsearch import Elasticsearch

    from retrievalkit_elasticsearch.connection import Target
    from retrievalkit_elasticsearch.vectors import VectorIndex

log = logging.getLogger(__name__)


class _Ephemeral(Protocol):
    _dropper: Any
    ephemeral: bool


class OwnsIndex:
    """A retriever that may own an ephemeral index (`owned` makes it the owner): ``close``
    closes its client and deletes that index now."""

    _client: Any
    _dropper: Any = None
    ephemeral = False
    """Whether the index was built for this retriever and is deleted with it."""

    def close(self) -> None:
        """Close the client; an ephemeral retriever's index is deleted now."""
        self._client.close()
        if self._dropper is not None:
            self._dropper()


Owner = TypeVar("Owner", bound=_Ephemeral)

#: What ``_meta.created_by`` of an index retrievalkit built starts with.
CREATOR = "retrievalkit-elasticsearch"


def check_ephemeral_options(ephemeral: Any, corpus: Any) -> None:
    """``ephemeral`` a boolean, and ``corpus`` given only with it."""
    if not isinstance(ephemeral, bool):
        raise InputError(f"must be true or false, got {ephemeral!r}", field="ephemeral")
    if corpus is not None and not ephemeral:
        raise InputError(
            "corpus applies only with ephemeral = true (the index is then built from it)",
            field="corpus",
            hint="add ephemeral = true, or build the index with 'retrievalkit es index'",
        )


def check_index_name(name: str, field: str) -> str:
    """One concrete index: ``drop`` and an ephemeral build never touch a pattern or a list."""
    if (
        not isinstance(name, str)
        or not name
        or any(c in name for c in "*?,")
        or name.startswith(("-", "_"))
    ):
        raise InputError(
            f"expected the name of one index, got {name!r}",
            field=field,
            hint="no wildcards, commas or leading - and _",
        )
    return name


def drop_index(client: Elasticsearch, target: Target, name: str) -> None:
    """Delete an index ``es index`` (or an ephemeral retriever) built; refuse any other."""
    import elasticsearch

    try:
        found = client.indices.get_mapping(index=name)
    except elasticsearch.NotFoundError:
        raise InputError(
            f"no index '{name}' on {target.where}; nothing was dropped",
            field="index",
            hint="GET /_cat/indices lists the indices",
        ) from None
    except client_errors() as error:
        raise explain(error, target, action=f"read index '{name}'", index=name) from None
    if list(found) != [name]:
        raise InputError(
            f"'{name}' on {target.where} is an alias of {', '.join(sorted(found))}; name the "
            "index itself",
            field="index",
        )
    meta = found[name].get("mappings", {}).get("_meta", {}).get("retrievalkit", {})
    if not str(meta.get("created_by", "")).startswith(CREATOR):
        raise InputError(
            f"index '{name}' on {target.where} was not built by 'retrievalkit es index' (its "
            "_meta.retrievalkit has no created_by); nothing was dropped",
            field="index",
            hint="delete it with Elasticsearch's own DELETE /INDEX if you mean to",
        )
    try:
        client.indices.delete(index=name)
    except client_errors() as error:
        raise explain(error, target, action=f"delete index '{name}'", index=name) from None
    log.info("dropped %s on %s", name, target.where)


def build_ephemeral(
    client: Elasticsearch,
    target: Target,
    name: str,
    corpus: Any,
    *,
    k1: float,
    b: float,
    analyzer: str,
    vectors: tuple[VectorIndex, Any] | None = None,
) -> None:
    """Load ``corpus`` into the new index ``name`` (refused when it exists); on any
    failure, Ctrl-C included, delete what was loaded. With ``vectors`` (the vector setup
    and the corpus's matrix, row ``i`` for document ``i``) each document carries its
    vector, as ``es index --embedder`` loads it."""
    from retrievalkit.plugin_api import EvaluationError
    from retrievalkit_elasticsearch.indexing import (
        ANALYZERS,
        count_documents,
        create_index,
        index_body,
        load_documents,
    )

    check_index_name(name, "index")
    if not isinstance(corpus, str) or not corpus:
        raise InputError(
            "an ephemeral Elasticsearch retriever needs the option 'corpus' to build its index "
            "from",
            field="corpus",
            hint='e.g. corpus = "data/corpus.jsonl"',
        )
    if analyzer not in ANALYZERS:
        raise InputError(
            f"expected one of {', '.join(ANALYZERS)}, got {analyzer!r}", field="analyzer"
        )
    path = Path(corpus)
    documents = count_documents(path)
    if documents == 0:
        raise InputError("the corpus holds no documents", source=str(path))
    setup = None if vectors is None else vectors[0]
    body = index_body(k1=k1, b=b, analyzer=analyzer, corpus=str(path), vectors=setup)
    try:
        create_index(client, target, name, body, recreate=False)
    except InputError as error:
        if "already exists" in error.detail:
            raise InputError(
                f"index '{name}' already exists on {target.where}; an ephemeral retriever "
                "builds an index of its own and never replaces one",
                field="index",
                hint=f"name another index, or 'retrievalkit es drop --index {name}'",
            ) from None
        raise
    try:
        report = load_documents(
            client,
            target,
            path,
            name,
            documents=documents,
            vectors=None if vectors is None else (vectors[0].field, vectors[1]),
        )
        if report.failed:
            raise EvaluationError(
                f"{report.failed} of {documents} documents could not be loaded into the "
                f"ephemeral index '{name}' (first: {report.failures[0][0]}: "
                f"{report.failures[0][1]}); it was deleted"
            )
    except BaseException:
        _drop_quietly(target, name)
        raise


def owned(target: Target, name: str, make: Callable[[], Owner]) -> Owner:
    """``make()``'s retriever, made the owner of the ephemeral index ``name`` just built:
    the index is deleted when ``make`` fails (its checks refused the index), else when
    the retriever is closed, collected, or at exit."""
    pending = _Pending()  # until the retriever exists, the delete belongs to this call
    dropper = drop_when_done(pending, target, name)
    try:
        retriever = make()
    except BaseException:
        dropper()
        raise
    dropper.detach()
    retriever._dropper = drop_when_done(retriever, target, name)
    retriever.ephemeral = True
    return retriever


class _Pending:
    """What owns an ephemeral index between its build and its retriever."""


def drop_when_done(owner: object, target: Target, name: str) -> weakref.finalize[Any, Any]:
    """Delete ``name`` once ``owner`` is closed (call the result), collected, or at exit."""
    return weakref.finalize(owner, _drop_quietly, target, name)


def _drop_quietly(target: Target, name: str) -> None:
    """The delete at the end of a run: a failure is a warning naming the command that fixes it."""
    try:
        client = target.connect()
        try:
            drop_index(client, target, name)
        finally:
            client.close()
    except Exception as error:  # the run is over; say what is left behind
        log.warning(
            "could not drop the ephemeral index %s on %s (%s); drop it with "
            "'retrievalkit es drop --index %s'",
            name,
            target.where,
            error,
            name,
        )
