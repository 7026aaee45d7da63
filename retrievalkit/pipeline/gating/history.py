"""The run history of a (set, retriever) key: key metrics, what changed between runs, pruning.

Consecutive runs are told apart by the manifest fields that explain a change in the
numbers: the retriever's options hash, the set's content hash, the retrievalkit
version, the git commit, and the embedding backend and model (read from the index, so a
re-embedded index shows even when no option changed). Pruning keeps the newest N runs
and, always, the pinned baseline, whatever its age.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from retrievalkit.metrics.definitions import TREND
from retrievalkit.model.records import ResultRecord

#: Manifest fields compared between consecutive runs, in the order they are reported.
MANIFEST_FIELDS = (
    "retriever_options_hash",
    "set_hash",
    "retrievalkit_version",
    "git_commit",
    "embedding_backend",
    "embedding_model_id",
    "plugin_packages",
)


@attrs.frozen
class ManifestChange:
    field: str
    before: str | None
    after: str | None
    what: tuple[str, ...] = ()
    """The change by name: ``k1: 1.2 -> 0.9`` for options, ``pkg: 0.1.0 -> 0.2.0`` for plugins."""


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
    metric_names: tuple[str, ...] = TREND
    """The metrics shown for each run: the trend metrics and any asked for (``--metric``),
    including a stage's (``stage.rerank:rr``)."""


def _manifest_value(record: ResultRecord, field: str) -> str | None:
    value = getattr(record.manifest, field)
    if isinstance(value, Mapping):
        # Runs saved before a field existed have it empty: nothing to compare with.
        return ", ".join(f"{key} {value[key]}" for key in sorted(value)) or None
    return None if value is None else str(value)


def manifest_changes(older: ResultRecord, newer: ResultRecord) -> tuple[ManifestChange, ...]:
    """The manifest fields whose value differs from the older run to the newer one."""
    changes = []
    for field in MANIFEST_FIELDS:
        before, after = _manifest_value(older, field), _manifest_value(newer, field)
        if field == "plugin_packages" and (before is None or after is None):
            continue
        if before != after:
            changes.append(ManifestChange(field, before, after, _named(older, newer, field)))
    return tuple(changes)


def _named(older: ResultRecord, newer: ResultRecord, field: str) -> tuple[str, ...]:
    """What changed inside a field, by name (options and plugin package versions)."""
    if field == "retriever_options_hash":
        return mapping_changes(
            older.manifest.retriever_options,
            newer.manifest.retriever_options,
            unchanged="a secret option or an *_env variable's value changed",
        )
    if field == "plugin_packages":
        return mapping_changes(older.manifest.plugin_packages, newer.manifest.plugin_packages)
    return ()


def mapping_changes(
    before: Mapping[str, Any], after: Mapping[str, Any], *, unchanged: str | None = None
) -> tuple[str, ...]:
    """``name: old -> new`` for each key whose value differs (``added``/``removed`` as needed)."""

    def shown(value: Any) -> str:
        if isinstance(value, str):
            return value
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)

    lines = []
    for key in sorted({*before, *after}):
        if key not in before:
            lines.append(f"{key}: added ({shown(after[key])})")
        elif key not in after:
            lines.append(f"{key}: removed (was {shown(before[key])})")
        elif shown(before[key]) != shown(after[key]):
            lines.append(f"{key}: {shown(before[key])} -> {shown(after[key])}")
    if not lines and unchanged:
        lines.append(unchanged)
    return tuple(lines)


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
    metrics: Sequence[str] = (),
) -> History:
    """History of the key from its runs, newest first (as stores return them); ``metrics``
    are shown after the trend metrics (a stage's too, e.g. ``stage.rerank:rr``)."""
    from retrievalkit.pipeline.engine.stages import record_mean

    names = tuple(dict.fromkeys((*TREND, *metrics)))
    entries = []
    for index, record in enumerate(runs[:limit]):
        older = runs[index + 1] if index + 1 < len(runs) else None
        entries.append(
            HistoryEntry(
                run_id=record.run_id,
                created_at=record.manifest.created_at,
                metrics={name: record_mean(record, name) for name in names},
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
        metric_names=names,
    )


def runs_to_prune(runs: Sequence[ResultRecord], *, keep: int, pinned: str | None) -> list[str]:
    """Run ids past the newest ``keep`` (runs are newest first), never the pinned one."""
    return [record.run_id for record in runs[keep:] if record.run_id != pinned]
