"""A plugin factory's options (name, type, default) and description, read from its signature
and docstring: what ``retrievalkit list PLUGIN`` prints and docs/configuration.md shows."""

from __future__ import annotations

import inspect
import json
from typing import Any


def option_rows(factory: Any) -> list[tuple[str, str, str]]:
    """(option, annotated type, default as written in TOML, ``required`` or ``unset``).

    A parameter retrievalkit hands in itself (a composite's ``resolver``) is not an option.
    """
    from retrievalkit.plugins.factories import HANDED

    rows = []
    for parameter in inspect.signature(factory).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if parameter.name in HANDED:
            continue
        annotation = parameter.annotation
        kind = "" if annotation is inspect.Parameter.empty else str(annotation).strip("'")
        default = parameter.default
        if default is inspect.Parameter.empty:
            shown = "required"
        elif default is None:
            shown = "unset"
        else:
            shown = json.dumps(default)
        rows.append((parameter.name, kind, shown))
    return rows


def describe_factory(name: str, group: str, factory: Any) -> list[str]:
    """The lines ``retrievalkit list NAME`` prints for one plugin."""
    doc = inspect.getdoc(factory) or "(no description)"
    lines = [f"{name} ({group.removeprefix('retrievalkit.')[:-1]} plugin)", ""]
    lines += [f"  {line}".rstrip() for line in doc.splitlines()]
    rows = option_rows(factory)
    lines.append("")
    if not rows:
        lines.append("  It takes no options.")
        return lines
    width = max(len(option) for option, _, _ in rows)
    kinds = max(len(kind) for _, kind, _ in rows)
    lines.append(f"  {'option':<{width}}  {'type':<{kinds}}  default")
    lines += [f"  {option:<{width}}  {kind:<{kinds}}  {shown}" for option, kind, shown in rows]
    return lines


_ESCAPES = {
    "\\": "\\\\",
    "|": "\\|",
    "*": "\\*",
    "_": "\\_",
    "[": "\\[",
    "]": "\\]",
    "<": "&lt;",
    ">": "&gt;",
}

#: The markers around the generated retriever reference in docs/configuration.md.
REFERENCE_START = "<!-- retriever-options -->"
REFERENCE_END = "<!-- /retriever-options -->"


def _escape(text: str) -> str:
    return "".join(_ESCAPES.get(character, character) for character in text)


def retriever_reference() -> str:
    """The Markdown reference of the retriever plugins the core distribution registers:
    each one's factory, docstring and options table. docs/configuration.md holds it
    between `REFERENCE_START` and `REFERENCE_END` (a test keeps it current, and the docs
    build regenerates it), so the page reads the same in the repository and on the site."""
    import importlib.metadata

    entry_points = sorted(
        (
            entry_point
            for entry_point in importlib.metadata.distribution("retrievalkit-eval").entry_points
            if entry_point.group == "retrievalkit.retrievers"
        ),
        key=lambda entry_point: entry_point.name,
    )
    lines: list[str] = []
    for entry_point in entry_points:
        factory = entry_point.load()
        doc = (inspect.getdoc(factory) or "").replace("``", "`")
        lines += [
            f"### `{entry_point.name}` {{#plugin-{entry_point.name}}}",
            "",
            f"`{entry_point.value}`",
            "",
            doc,
            "",
        ]
        rows = option_rows(factory)
        if not rows:
            lines += ["It takes no options.", ""]
            continue
        lines += ["| option | type | default |", "|---|---|---|"]
        for name, kind, default in rows:
            shown = default if default in ("required", "unset") else f"`{default}`"
            lines.append(f"| `{name}` | {_escape(kind)} | {shown} |")
        lines.append("")
    return "\n".join(lines)
