"""Result stores: the protocol every backend follows, and opening one by URL scheme.

Built-in backends, each registered under ``retrievalkit.stores`` by its scheme:
``sqlite:///PATH`` (the default), ``jsonl:///PATH`` and ``memory:``. Three slashes
introduce a path relative to the working directory; four, an absolute path.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import attrs

from retrievalkit.errors import InputError, PluginError, StoreBusyError, StoreError
from retrievalkit.model.records import GRADER, ResultRecord

DEFAULT_STORE_URL = "sqlite:///.retrievalkit/results.sqlite3"
#: How long a store write waits for another process's lock before giving up (exit code 3).
DEFAULT_LOCK_TIMEOUT = 60.0
LOCK_TIMEOUT_VARIABLE = "RETRIEVALKIT_STORE_TIMEOUT"


def lock_timeout() -> float:
    """Seconds a write waits for a lock: ``$RETRIEVALKIT_STORE_TIMEOUT``, else 60."""
    text = os.environ.get(LOCK_TIMEOUT_VARIABLE, "")
    try:
        value = float(text)
    except ValueError:
        return DEFAULT_LOCK_TIMEOUT
    return value if 0 <= value < 86_400 else DEFAULT_LOCK_TIMEOUT


log = logging.getLogger(__name__)


@runtime_checkable
class ResultStore(Protocol):
    """Saves whole records and answers 'the runs for this key, newest first'."""

    url: str

    def save(self, record: ResultRecord) -> None:
        """Save the record whole, or not at all."""
        ...

    def runs(self, set_name: str, model: str, grader: str = GRADER) -> list[ResultRecord]:
        """Every run of the key, newest first."""
        ...

    def get(self, run_id: str) -> ResultRecord | None:
        """One run by id, or None."""
        ...

    def all_runs(self) -> list[ResultRecord]:
        """Every run of every key, newest first."""
        ...


# Pins and deletion came after the first store protocol, so they are optional protocols of
# their own: a third-party store written against ResultStore keeps working for eval (which
# then compares with the newest earlier run), and only `baseline` and `history --prune`
# tell its user, by name, what the store lacks.


@runtime_checkable
class PinningStore(Protocol):
    """A store that keeps one pinned baseline run per (set, model, grader) key."""

    def pin(self, record: ResultRecord) -> str | None:
        """Pin a stored run as the baseline of its key; returns the run id it replaced.

        Raises StoreError (nothing pinned) when the store does not hold the run.
        """
        ...

    def unpin(self, set_name: str, model: str, grader: str = GRADER) -> str | None:
        """Remove the key's pin; returns the run id that was pinned, or None."""
        ...

    def pinned(self, set_name: str, model: str, grader: str = GRADER) -> str | None:
        """The run id pinned for the key, or None."""
        ...


@runtime_checkable
class DeletingStore(Protocol):
    """A store that can delete runs (used by ``history --prune``)."""

    def delete(self, run_ids: Sequence[str]) -> int:
        """Delete these runs whole; returns how many were deleted.

        Refuses (StoreError, nothing deleted) when one of them is a pinned baseline.
        """
        ...


@runtime_checkable
class VerdictStore(Protocol):
    """A store that keeps each saved run's regression verdict beside it (MLflow's tags).

    ``eval`` calls `save_verdict` right after `ResultStore.save`, with the verdict its gate
    reached against the baseline (a `retrievalkit.Verdict`); from Python, call it after
    `retrievalkit.gate`. The run itself is already saved whole: a failure here is the
    store's to report, and changes neither the run nor the exit code's meaning.
    """

    def save_verdict(self, record: ResultRecord, verdict: Any) -> None:
        """Keep ``verdict`` (a `retrievalkit.Verdict`) with the stored run ``record``."""
        ...


def pinning(store: ResultStore, action: str) -> PinningStore:
    """The store as a `PinningStore`, or a StoreError naming what it lacks."""
    if not isinstance(store, PinningStore):
        raise StoreError(
            f"the store {store.url} ({type(store).__module__}.{type(store).__name__}) cannot "
            f"{action}: it has no pin(), unpin() and pinned() methods; use a built-in store "
            "(sqlite:, jsonl:, memory:) or ask the store plugin's authors to add them"
        )
    return store


def deleting(store: ResultStore, action: str) -> DeletingStore:
    """The store as a `DeletingStore`, or a StoreError naming what it lacks."""
    if not isinstance(store, DeletingStore):
        raise StoreError(
            f"the store {store.url} ({type(store).__module__}.{type(store).__name__}) cannot "
            f"{action}: it has no delete() method; use a built-in store (sqlite:, jsonl:, "
            "memory:) or ask the store plugin's authors to add it"
        )
    return store


def pinned_run_id(
    store: ResultStore, set_name: str, model: str, grader: str = GRADER
) -> str | None:
    """The key's pinned run id, or None (also for stores without pin support)."""
    if isinstance(store, PinningStore):
        return store.pinned(set_name, model, grader)
    return None


def path_from_url(url: str, scheme: str) -> Path:
    """``scheme:///rel/path`` -> ``rel/path``; ``scheme:////abs/path`` -> ``/abs/path``."""
    from retrievalkit.formats.limits import check_path

    prefix = f"{scheme}:///"
    if not url.startswith(prefix) or len(url) == len(prefix):
        raise InputError(
            f"store URL {url!r} is not of the form {scheme}:///PATH",
            field="--store",
            hint=f"e.g. {scheme}:///.retrievalkit/results (relative) or {scheme}:////abs/path",
        )
    check_path(url[len(prefix) :], field="--store")
    return Path(url[len(prefix) :])


def check_parent(path: Path, url: str, *, create: bool) -> None:
    """The store's folder must exist (or be created for the default store)."""
    parent = path.parent
    if create:
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise InputError(
                f"cannot create the store folder {parent}: {error.strerror}", field="--store"
            ) from None
    if not parent.is_dir():
        blocker = next((p for p in (parent, *parent.parents) if p.exists()), None)
        if blocker is not None and not blocker.is_dir():
            raise InputError(
                f"{blocker} in store {url!r} is a file, not a folder",
                field="--store",
                hint="choose another --store",
            )
        raise InputError(
            f"the folder {parent} of store {url!r} does not exist",
            field="--store",
            hint="create it, or choose another --store",
        )


def read_only_reason(path: Path) -> str | None:
    """Why a store file cannot be written ("the folder X is read-only"), or None if it can."""
    if path.exists():
        return None if os.access(path, os.W_OK) else f"the file {path} is read-only"
    parent = path.parent
    if parent.is_dir() and not os.access(parent, os.W_OK | os.X_OK):
        return f"the folder {parent} is read-only"
    return None


@attrs.frozen
class StoredKey:
    """One (set, model, grader) key of a store: how many runs it has, and its newest."""

    set_name: str
    model: str
    grader: str
    runs: int
    newest_run_id: str
    newest_created_at: str


def store_keys(store: ResultStore) -> list[StoredKey]:
    """Every key of the store, sorted, with its run count and newest run.

    A store with a ``keys()`` method answers from its index (SQLite reads no run);
    for the others every run's summary is read.
    """
    keys = getattr(store, "keys", None)
    if callable(keys):
        found: list[StoredKey] = keys()
        return found
    counted: dict[tuple[str, str, str], StoredKey] = {}
    for record in store.all_runs():  # newest first
        key = (record.set, record.model, record.grader)
        seen = counted.get(key)
        counted[key] = (
            StoredKey(*key, 1, record.run_id, record.manifest.created_at)
            if seen is None
            else attrs.evolve(seen, runs=seen.runs + 1)
        )
    return [counted[key] for key in sorted(counted)]


def store_read_only(store: ResultStore) -> str | None:
    """Why ``store`` can only be read ("the file X is read-only"), or None when it can be
    written, as far as is known without taking its lock (a store plugin may say so with a
    ``read_only`` attribute holding the reason)."""
    reason = getattr(store, "read_only", None)
    if isinstance(reason, str):
        return reason
    path = getattr(store, "path", None)
    if isinstance(path, Path):
        return read_only_reason(path)
    return None


#: What `verify_store` found of a run: intact, saved before digests, or damaged.
INTACT, NO_DIGEST, DAMAGED = "ok", "no digest", "damaged"


@attrs.frozen
class RunCheck:
    """One stored run as `verify_store` found it: ``state`` is `INTACT` (read whole, every
    part matching its digest), `NO_DIGEST` (saved before runs carried a digest: read
    whole, nothing to compare) or `DAMAGED` (``detail`` says what)."""

    run_id: str
    where: str
    state: str
    detail: str = ""
    #: The run's (set, model, grader), or None where even that could not be read.
    key: tuple[str, str, str] | None = None


def verify_store(store: ResultStore) -> list[RunCheck]:
    """Every run of ``store`` read whole and checked against its content digest.

    A store with a ``verify_runs()`` method (every built-in one) checks each run on its
    own, so one damaged run is reported beside the others; for any other store every
    record is read through `ResultStore.all_runs` and each one's columns loaded.
    """
    verify = getattr(store, "verify_runs", None)
    if callable(verify):
        checked: list[RunCheck] = verify()
        return checked
    try:
        records = store.all_runs()
    except StoreError as error:
        return [RunCheck("?", store.url, DAMAGED, str(error))]
    found = []
    for record in records:
        found.append(
            check_whole(record.run_id, store.url, lambda record=record: read_whole(record))
        )
    return found


def read_whole(record: ResultRecord) -> bool:
    """Load and decode every outcome column and the slices of ``record``; True."""
    from retrievalkit.stores.columns import encode_columns

    encode_columns(record.outcomes)
    dict(record.slices)
    return True


def check_whole(
    run_id: str, where: str, read: Any, key: tuple[str, str, str] | None = None
) -> RunCheck:
    """`RunCheck` of ``read()`` (which returns whether the run had a digest)."""
    try:
        had_digest = read()
    except StoreError as error:
        return RunCheck(run_id, where, DAMAGED, str(error), key)
    except Exception as error:  # a column that does not decode
        return RunCheck(run_id, where, DAMAGED, f"{type(error).__name__}: {error}", key)
    return RunCheck(run_id, where, INTACT if had_digest else NO_DIGEST, key=key)


def open_store(url: str) -> ResultStore:
    """Open the store a URL names, through the ``retrievalkit.stores`` plugin of its scheme."""
    from retrievalkit.plugins import registry as plugins

    scheme, colon, _ = url.partition(":")
    if "\x00" in url:
        raise InputError(f"store URL {url!r} holds a NUL byte", field="--store")
    if not colon or not scheme:
        raise InputError(
            f"store URL {url!r} has no scheme",
            field="--store",
            hint="use sqlite:///PATH, jsonl:///PATH or memory:",
        )
    if scheme not in plugins.names(plugins.STORES):
        known = ", ".join(plugins.names(plugins.STORES))
        raise InputError(
            f"unknown store scheme '{scheme}' in {url!r} (installed: {known})",
            field="--store",
        )
    # A built-in wins a scheme two packages register; two third-party ones name both.
    plugin = plugins.find_one(plugins.STORES, scheme)
    factory = plugins.load(plugin)
    try:
        store = factory(url)
    except StoreBusyError:
        raise
    except StoreError as error:
        raise InputError(str(error), field="--store") from None
    if not isinstance(store, ResultStore):
        raise PluginError(f"store plugin {plugin.label} did not return a result store")
    log.info("opened store %s through %s", url, plugin.label)
    return store
