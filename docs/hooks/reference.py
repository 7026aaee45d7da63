"""MkDocs hook: the parts of the reference that are generated from the code at build time.

Each page below holds hand-written text and a marker; at build time this hook replaces
the marker with Markdown generated from retrievalkit itself, so the reference cannot
drift from the code (change an option's help and the next ``nox -s docs`` shows it):

* ``cli.md``, ``<!-- cli-reference -->``: one section per built-in command (and per
  sub-action, such as ``baseline pin``), read from
  :func:`retrievalkit.cli.main.build_parser`: usage line, description, every argument with
  its help. Commands that plugins add through the ``retrievalkit.commands``
  entry-point group are left out (``build_parser`` returns them separately), so the
  page does not depend on what happens to be installed where the site is built.
* ``metrics.md``, ``<!-- metric-table -->``: the summary table of
  :data:`retrievalkit.metrics.definitions.METRICS`.
* ``configuration.md``, ``<!-- retriever-options -->``: the retriever plugins the core
  distribution registers, with their factories' options and docstrings.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import inspect
import json
import os
from collections.abc import Callable, Iterator
from typing import Any

from mkdocs.exceptions import PluginError

#: Usage lines are wrapped as a terminal this wide would show them (fits the page width).
WIDTH = "74"
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


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    generators: dict[str, tuple[str, Callable[[], str]]] = {
        "cli.md": ("<!-- cli-reference -->", render_cli),
        "metrics.md": ("<!-- metric-table -->", render_metrics),
        "configuration.md": ("<!-- retriever-options -->", render_retrievers),
    }
    if page.file.src_uri not in generators:
        return markdown
    marker, render = generators[page.file.src_uri]
    if marker not in markdown:
        raise PluginError(f"docs/{page.file.src_uri} lacks the marker {marker}")
    return markdown.replace(marker, render())


# --- metrics.md ---------------------------------------------------------------------------


def render_metrics() -> str:
    from retrievalkit.metrics.definitions import METRICS

    lines = [
        "| metric | definition | no-answer question | trec_eval | ir_measures |",
        "|---|---|---|---|---|",
    ]
    for family, definition in METRICS.items():
        name = f"{family}@k" if definition.per_k else family
        trec = f"`{definition.trec_eval}`" if definition.trec_eval else "none"
        measure = f"`{definition.ir_measures}`" if definition.ir_measures else "none"
        lines.append(
            f"| [`{name}`](#{family}) | {_escape(definition.description)} "
            f"| {_escape(definition.no_answer)} | {trec} | {measure} |"
        )
    return "\n".join(lines)


# --- configuration.md ---------------------------------------------------------------------


def render_retrievers() -> str:
    entry_points = sorted(
        (
            entry_point
            for entry_point in importlib.metadata.distribution("retrievalkit-eval").entry_points
            if entry_point.group == "retrievalkit.retrievers"
        ),
        key=lambda entry_point: entry_point.name,
    )
    if not entry_points:
        raise PluginError("the retrievalkit distribution registers no retriever plugins")
    lines: list[str] = []
    for entry_point in entry_points:
        factory = entry_point.load()
        doc = inspect.getdoc(factory) or ""
        lines += [
            f"### `{entry_point.name}` {{#plugin-{entry_point.name}}}",
            "",
            f"`{entry_point.value}`",
            "",
            _literal_block(doc),
            "",
            *_options(factory),
            "",
        ]
    return "\n".join(lines)


def _options(factory: Any) -> list[str]:
    """The factory's keyword options as a table: name, annotated type, default as in TOML."""
    parameters = list(inspect.signature(factory).parameters.values())
    if not parameters:
        return ["It takes no options."]
    rows = ["| option | type | default |", "|---|---|---|"]
    for parameter in parameters:
        annotation = parameter.annotation
        kind = "" if annotation is inspect.Parameter.empty else str(annotation).strip("'")
        default = parameter.default
        if default is inspect.Parameter.empty:
            shown = "required"
        elif default is None:
            shown = "unset"
        else:
            shown = f"`{json.dumps(default)}`"
        rows.append(f"| `{parameter.name}` | {_escape(kind)} | {shown} |")
    return rows


def _literal_block(doc: str) -> str:
    """A docstring as Markdown: paragraphs kept, reST's double backticks made single."""
    return doc.replace("``", "`")


# --- cli.md -------------------------------------------------------------------------------


def render_cli() -> str:
    from retrievalkit.cli.main import EXIT_CODES, build_parser

    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        parser, plugin_commands = build_parser()
        builtin = [
            (name, sub, help_text)
            for name, sub, help_text in _subcommands(parser)
            if name not in plugin_commands
        ]
        lines = [
            "## `retrievalkit`",
            "",
            _escape(parser.description or ""),
            "",
            "```text",
            parser.format_usage().strip(),
            "```",
            "",
            "| command | what it does |",
            "|---|---|",
        ]
        lines += [
            f"| [`{name}`](#{name}) | {_escape(help_text)} |" for name, _, help_text in builtin
        ]
        lines += ["", *_arguments(parser)]
        for name, sub, _ in builtin:
            lines += _command(["retrievalkit", name], sub, level=2)
        lines += ["", "## Exit codes", "", "```text", EXIT_CODES.strip(), "```", ""]
        return "\n".join(lines)
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous


def _command(words: list[str], parser: argparse.ArgumentParser, *, level: int) -> list[str]:
    anchor = "-".join(words[1:])
    lines = [
        "",
        f"{'#' * level} `{' '.join(words)}` {{#{anchor}}}",
        "",
        _escape(parser.description or ""),
        "",
        "```text",
        parser.format_usage().strip(),
        "```",
        "",
        *_arguments(parser),
    ]
    actions = list(_subcommands(parser))
    if actions:
        lines += ["", "| action | what it does |", "|---|---|"]
        lines += [
            f"| [`{name}`](#{anchor}-{name}) | {_escape(text)} |" for name, _, text in actions
        ]
        for name, sub, _ in actions:
            lines += _command([*words, name], sub, level=level + 1)
    return lines


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, Any, str]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, sub, helps.get(name, "")


def _arguments(parser: argparse.ArgumentParser) -> list[str]:
    formatter = parser._get_formatter()
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
            continue
        rows.append(f"| {_invocation(action)} | {_description(action, formatter)} |")
    if not rows:
        return []
    return ["| argument | description |", "|---|---|", *rows]


def _invocation(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    metavar = action.metavar or action.dest.upper()
    names = [name if action.nargs == 0 else f"{name} {metavar}" for name in action.option_strings]
    return ", ".join(f"`{name}`" for name in names)


def _description(action: argparse.Action, formatter: Any) -> str:
    text = _escape(formatter._expand_help(action)) if action.help else ""
    if text and not text.endswith("."):
        text += "."
    notes = []
    if action.required:
        notes.append("Required.")
    if action.choices is not None:
        notes.append("One of " + ", ".join(f"`{choice}`" for choice in action.choices) + ".")
    if isinstance(action, argparse._AppendAction) and "repeat" not in text:
        notes.append("Repeatable.")
    return " ".join(part for part in (text, *notes) if part)


def _escape(text: str) -> str:
    """Help text as one line of Markdown that renders literally (also inside a table)."""
    return " ".join("".join(_ESCAPES.get(char, char) for char in text).split())
