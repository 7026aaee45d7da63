"""Renderers of a `pipeline.gating.history.History`: JSON rows, Markdown and a rich table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from retrievalkit.metrics.definitions import TREND
from retrievalkit.pipeline.gating.history import History, HistoryEntry, ManifestChange
from retrievalkit.render.terminal import plain, printable
from retrievalkit.render.text import number

if TYPE_CHECKING:
    from retrievalkit.render.fitting import FittedTable

#: How each compared manifest field is named in the "changed" column.
SHORT_NAMES = {
    "retriever_options_hash": "options",
    "plugin_packages": "plugins",
    "set_hash": "set",
    "retrievalkit_version": "version",
    "git_commit": "commit",
    "embedding_backend": "vectors",
    "embedding_model_id": "embedding",
}
COLUMNS = ("run id", "created", *TREND, "questions", "errored", "commit", "pin")
COMPACT_COLUMNS = ("run id", *TREND, "n", "commit", "pin")


def _columns(history: History, columns: tuple[str, ...]) -> tuple[str, ...]:
    """``columns`` with the history's metric names in place of the trend metrics."""
    at = columns.index(TREND[0])
    return (*columns[:at], *history.metric_names, *columns[at + len(TREND) :])


def history_rows(history: History) -> list[dict[str, Any]]:
    """The JSON form: one object per run, newest first (a list, as it always was)."""
    return [
        {
            "run_id": entry.run_id,
            "created_at": entry.created_at,
            **{name: entry.metrics.get(name) for name in history.metric_names},
            "questions": entry.questions,
            "errored": entry.errored,
            "set_hash": entry.set_hash[:12],
            "git_commit": (entry.git_commit or "")[:12] or None,
            "retriever_options_hash": entry.retriever_options_hash,
            "retrievalkit_version": entry.retrievalkit_version,
            "pinned": entry.pinned,
            "changes": {
                change.field: {"before": change.before, "after": change.after, "what": change.what}
                for change in entry.changes
            },
        }
        for entry in history.entries
    ]


def _short(field: str, value: str | None) -> str:
    if value is None:
        return "none"
    return value if field == "retrievalkit_version" else value[:8]


def change_text(change: ManifestChange) -> str:
    """``options k1: 1.2 -> 0.9``; a field without named parts shows its values shortened."""
    name = SHORT_NAMES.get(change.field, change.field)
    if change.what:
        return f"{name} " + ", ".join(change.what)
    return f"{name} {_short(change.field, change.before)}→{_short(change.field, change.after)}"


def _cells(entry: HistoryEntry, *, compact: bool = False) -> list[str]:
    """Markdown has every column; the terminal drops ``created`` (the run id starts with it)."""
    metrics = [number(entry.metrics.get(name)) for name in entry.metrics]
    if compact:
        errored = f" ({entry.errored} errored)" if entry.errored else ""
        return [
            entry.run_id,
            *metrics,
            f"{entry.questions}{errored}",
            (entry.git_commit or "")[:8],
            "yes" if entry.pinned else "",
        ]
    return [
        entry.run_id,
        entry.created_at,
        *metrics,
        str(entry.questions),
        str(entry.errored),
        (entry.git_commit or "")[:12],
        "pinned" if entry.pinned else "",
    ]


def _changes_cell(entry: HistoryEntry) -> str:
    return "; ".join(change_text(change) for change in entry.changes)


def title(history: History) -> str:
    shown = len(history.entries)
    more = f" (newest {shown} of {history.total})" if shown < history.total else ""
    return f"{history.set_name} × {history.retriever} in {history.store}{more}"


def prune_line(history: History) -> str | None:
    """What pruning did (or would do); None when no pruning was asked for."""
    if not history.pruning:
        return None
    verb = "would prune" if history.dry_run else "pruned"
    kept = f"; the pinned run {history.pinned} is kept" if history.pinned else ""
    listing = ": " + ", ".join(history.pruned) if history.pruned else ""
    key = f"{history.set_name} × {history.retriever}"
    runs = "run" if len(history.pruned) == 1 else "runs"
    return f"{verb} {len(history.pruned)} {runs} of {key}{listing}{kept}"


def render_history_markdown(history: History) -> str:
    columns = [*_columns(history, COLUMNS), "changed since the run before"]
    lines = [f"## {printable(title(history))}", ""]
    lines.append("| " + " | ".join(columns) + " |")
    lines.append("|" + "---|" * len(columns))
    for entry in history.entries:
        cells = [*_cells(entry), _changes_cell(entry)]
        lines.append("| " + " | ".join(printable(c).replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def history_renderable(history: History) -> FittedTable:
    from rich import box
    from rich.table import Table

    from retrievalkit.render.fitting import fit

    # Narrow terminals first: no "created" (the run id starts with it), and no commit
    # column when no run was made inside a git repository.
    with_commit = any(entry.git_commit for entry in history.entries)
    view = Table(
        title=plain(title(history), style="italic"),
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    compact = _columns(history, COMPACT_COLUMNS)
    for column in compact:
        if column != "commit" or with_commit:
            view.add_column(column)
    view.add_column("changes")
    for entry in history.entries:
        cells = [*_cells(entry, compact=True), _changes_cell(entry)]
        if not with_commit:
            del cells[compact.index("commit")]
        view.add_row(*[plain(cell) for cell in cells])
    # The run id and the first metric stay; the changes wrap between words.
    metrics = [*range(len(history.metric_names), 1, -1)]
    drop = [*(["commit"] if with_commit else []), "pin", "n", "changes", *metrics]
    return fit(view, drop=drop, wrap=("changes",))
