"""Renderers of a `retrievalkit.pipeline.gating.baselines.BaselineStatus`: JSON and plain lines."""

from __future__ import annotations

from typing import Any

from retrievalkit.formats.convert import unstructure
from retrievalkit.pipeline.gating.baselines import NEWEST, BaselineStatus, RunBrief
from retrievalkit.render.text import number


def baseline_document(status: BaselineStatus) -> dict[str, Any]:
    document: dict[str, Any] = unstructure(status)
    return document


def brief_text(brief: RunBrief) -> str:
    values = ", ".join(f"{name} {number(value)}" for name, value in brief.metrics.items())
    commit = f", commit {brief.git_commit[:12]}" if brief.git_commit else ""
    details = f"created {brief.created_at}, {values}, {brief.questions} questions{commit}"
    return f"{brief.run_id} ({details})"


def baseline_lines(status: BaselineStatus) -> list[str]:
    key = f"{status.set_name} × {status.retriever}"
    lines = []
    if status.action == "pin" and status.pinned is not None:
        replaced = f", replacing {status.previous}" if status.previous else ""
        if status.previous == status.pinned.run_id:
            replaced = " (it already was)"
        lines.append(f"pinned {status.pinned.run_id} as the baseline of {key}{replaced}")
    elif status.action == "unpin":
        lines.append(
            f"unpinned {status.previous} from {key}"
            if status.previous
            else f"nothing was pinned for {key}; nothing changed"
        )
    elif status.pinned is not None:
        lines.append(f"pinned baseline of {key}: {brief_text(status.pinned)}")
    else:
        lines.append(f"no pinned baseline for {key}")
    if status.next_baseline is None:
        lines.append(f"the next eval of {key} has no baseline: {status.store} holds no run of it")
    elif status.next_baseline_kind == NEWEST:
        lines.append(
            f"the next eval of {key} compares with the newest earlier run: "
            f"{brief_text(status.next_baseline)}"
        )
    elif status.action != "show":
        lines.append(
            f"the next eval of {key} compares with the pinned run: "
            f"{brief_text(status.next_baseline)}"
        )
    lines.append(f"store: {status.store}")
    return lines
