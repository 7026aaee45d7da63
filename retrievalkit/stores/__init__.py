"""Result stores: the protocol every backend follows, and opening one by URL scheme.

Built-in backends, each registered under ``retrievalkit.stores`` by its scheme:
``sqlite:///PATH`` (the default), ``jsonl:///PATH`` and ``memory:``. Three slashes
introduce a path relative to the working directory; four, an absolute path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

from retrievalkit.errors import InputError, PluginError
from retrievalkit.model import GRADER, ResultRecord

DEFAULT_STORE_URL = "sqlite:///.retrievalkit/results.sqlite3"


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


def path_from_url(url: str, scheme: str) -> Path:
    """``scheme:///rel/path`` -> ``rel/path``; ``scheme:////abs/path`` -> ``/abs/path``."""
    prefix = f"{scheme}:///"
    if not url.startswith(prefix) or len(url) == len(prefix):
        raise InputError(
            f"store URL {url!r} is not of the form {scheme}:///PATH",
            field="--store",
            hint=f"e.g. {scheme}:///.retrievalkit/results (relative) or {scheme}:////abs/path",
        )
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
        raise InputError(
            f"the folder {parent} of store {url!r} does not exist",
            field="--store",
            hint="create it, or choose another --store",
        )


def open_store(url: str) -> ResultStore:
    """Open the store a URL names, through the ``retrievalkit.stores`` plugin of its scheme."""
    from retrievalkit import plugins

    scheme, colon, _ = url.partition(":")
    if not colon or not scheme:
        raise InputError(
            f"store URL {url!r} has no scheme",
            field="--store",
            hint="use sqlite:///PATH, jsonl:///PATH or memory:",
        )
    try:
        plugin = plugins.find_one(plugins.STORES, scheme)
    except PluginError:
        known = ", ".join(p.name for p in plugins.find(plugins.STORES))
        raise InputError(
            f"unknown store scheme '{scheme}' in {url!r} (installed: {known})",
            field="--store",
        ) from None
    factory = plugins.load(plugin)
    store = factory(url)
    if not isinstance(store, ResultStore):
        raise PluginError(f"store plugin {plugin.label} did not return a result store")
    return store
