"""The run history of a (set, retriever) key: key metrics, what changed between runs, pruning.

Consecutive runs are told apart by the manifest fields that explain a change in the
numbers: the retriever's options hash, the set's content hash, the retrievalkit
version, the git commit, and the embedding backend and model (read from the index, so a
re-embedded index shows even when no option changed). Pruning keeps the newest N runs
and, always, the pinned baseline, whatever its age.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from retrievalkit.metrics import TREND
from retrievalkit.model import ResultRecord

#: Manifest fields compared between consecutive runs, in the order they are reported.
MANIFEST_FIELDS = (
    "retriever_options_hash",
    "set_hash",
    "retrievalkit_version",
    "git_commit",
    "embedding_backend",
    "embedding_model_id",
)


@attrs.frozen
class ManifestChange:
    field: str
    before: str | None
    after: str | None


@attrs.frozen
class HistoryEntry:
    """One run, with what changed in its manifest since the run before it (older)."""

    run_id: str
    created_at: str
    metrics: dict[str, float | None]
    questions: int
    errored: int
    set_hash: str
    retriever_options_hash: str
    retrievalkit_version: str
    git_commit: str | None
    pinned: bool
    changes: tuple[ManifestChange, ...]
    """Empty for the oldest run of the key, and when nothing in the manifest changed."""


@attrs.frozen
class History:
    """What ``retrievalkit history`` shows, computed once and rendered many ways."""

    set_name: str
    retriever: str
    store: str
    entries: tuple[HistoryEntry, ...]
    """Newest first, at most the requested limit."""
    total: int
    """Runs of the key in the store (after any pruning)."""
    pinned: str | None
    pruned: tuple[str, ...] = ()
    """Run ids deleted by ``--prune`` (or that would be, with ``--dry-run``)."""
    pruning: bool = False
    """Whether pruning was asked for."""
    dry_run: bool = False


def _manifest_value(record: ResultRecord, field: str) -> str | None:
    value = getattr(record.manifest, field)
    return None if value is None else str(value)


def manifest_changes(older: ResultRecord, newer: ResultRecord) -> tuple[ManifestChange, ...]:
    """The manifest fields whose value differs from the older run to the newer one."""
    changes = []
    for field in MANIFEST_FIELDS:
        before, after = _manifest_value(older, field), _manifest_value(newer, field)
        if before != after:
            changes.append(ManifestChange(field, before, after))
    return tuple(changes)


def build_history(
    runs: Sequence[ResultRecord],
    *,
    set_name: str,
    retriever: str,
    store: str,
    pinned: str | None,
    limit: int,
    pruned: Sequence[str] = (),
    pruning: bool = False,
    dry_run: bool = False,
) -> History:
    """History of the key from its runs, newest first (as stores return them)."""
    entries = []
    for index, record in enumerate(runs[:limit]):
        older = runs[index + 1] if index + 1 < len(runs) else None
        entries.append(
            HistoryEntry(
                run_id=record.run_id,
                created_at=record.manifest.created_at,
                metrics={
                    name: record.metrics[name].mean if name in record.metrics else None
                    for name in TREND
                },
                questions=len(record.outcomes),
                errored=record.errored,
                set_hash=record.manifest.set_hash,
                retriever_options_hash=record.manifest.retriever_options_hash,
                retrievalkit_version=record.manifest.retrievalkit_version,
                git_commit=record.manifest.git_commit,
                pinned=record.run_id == pinned,
                changes=() if older is None else manifest_changes(older, record),
            )
        )
    return History(
        set_name=set_name,
        retriever=retriever,
        store=store,
        entries=tuple(entries),
        total=len(runs),
        pinned=pinned,
        pruned=tuple(pruned),
        pruning=pruning,
        dry_run=dry_run,
    )


def runs_to_prune(runs: Sequence[ResultRecord], *, keep: int, pinned: str | None) -> list[str]:
    """Run ids past the newest ``keep`` (runs are newest first), never the pinned one."""
    return [record.run_id for record in runs[keep:] if record.run_id != pinned]
