"""The files a command reads, and refusing a store or an output that is one of them.

A run reads its set, its configuration, extra labels and whatever files the configured
plugins name (a BM25 corpus, a rankings file), and writes its store (with the files
SQLite and the JSON Lines store keep beside it) and the outputs asked for. Each output,
and the store, is checked against all of them before any work (`check_outputs` in
`retrievalkit.formats.files`), so no option can point a write at an input.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrievalkit.formats.files import check_outputs, store_files

if TYPE_CHECKING:
    from retrievalkit.formats.config import Config

#: How many files of a folder given as an input (a BEIR set) are compared at most.
_FOLDER_FILES = 1000

Named = tuple[str, "str | Path | None"]


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # a name no file system takes: loading it names the place
        return False


def _files_in(folder: Path) -> Iterator[Path]:
    count = 0
    for root, _folders, names in os.walk(folder):
        for name in names:
            yield Path(root) / name
            count += 1
            if count >= _FOLDER_FILES:
                return


def _option_paths(options: Mapping[str, Any], prefix: str) -> Iterator[tuple[str, Path]]:
    """Every string option that names an existing file, nested tables included.

    A folder an option names (a working directory, an index folder) is not read whole,
    so it is not taken for an input: only sets given as folders (BEIR) are."""
    for key, value in options.items():
        name = f"{prefix}.{key}"
        if isinstance(value, Mapping):
            yield from _option_paths(value, name)
        elif isinstance(value, str) and value and "\x00" not in value and len(value) < 4096:
            try:
                if os.path.isfile(value):
                    yield name, Path(value)
            except (OSError, ValueError):
                continue


def read_files(config: Config | None, *named: Named) -> list[Named]:
    """(option, path) for every file the run reads: ``named`` ones, the configuration and
    every file a configured plugin's options name; a folder stands for its files."""
    found: list[Named] = [(name, path) for name, path in named if path]
    if config is not None:
        if config.source is not None:
            found.append(("--config", str(config.source)))
        for set_name, path in config.sets.items():
            found.append((f"sets.{set_name}", path))
        sections: list[tuple[str, Mapping[str, Any]]] = [
            (f"retrievers.{name}", entry.options) for name, entry in config.retrievers.items()
        ]
        for kind, table in (("generators", config.generators), ("judges", config.judges)):
            sections += [
                (f"{kind}.{name}", getattr(item, "options", {})) for name, item in table.items()
            ]
        for prefix, options in sections:
            found += list(_option_paths(options, prefix))
    expanded: list[Named] = []
    for name, given in found:
        expanded.append((name, given))
        if given and (name == "--set" or name.startswith("sets.")) and _is_dir(Path(given)):
            expanded += [(name, inner) for inner in _files_in(Path(given))]
    return expanded


def check_store_is_no_input(
    store: object, inputs: Iterable[Named], place: Mapping[str, Any] | None = None
) -> None:
    """Refuse a store (or a file beside it) that is a file the run reads."""
    field = str((place or {}).get("field", "--store"))
    check_outputs([(field, path) for path in store_files(store)], inputs)


class _StoreAt:
    """Where a built-in file store keeps its file, known from its URL before it is opened."""

    def __init__(self, path: Path) -> None:
        self.path = path


def store_at(url: str) -> object:
    """An object with the ``path`` of the store ``url`` names (sqlite:, jsonl:), or None."""
    from retrievalkit.stores import path_from_url

    scheme = url.partition(":")[0]
    if scheme not in ("sqlite", "jsonl") or "\x00" in url:
        return None  # checked once the store is open, from its path
    try:
        return _StoreAt(path_from_url(url, scheme))
    except Exception:  # a malformed URL: opening the store names what is wrong
        return None


def check_store_url(url: str, inputs: Iterable[Named], place: Mapping[str, Any]) -> None:
    """`check_store_is_no_input` before the store is opened, for the built-in file stores."""
    check_store_is_no_input(store_at(url), inputs, place)


def check_run_outputs(
    outputs: Sequence[Named],
    store: object,
    inputs: Iterable[Named],
) -> None:
    """Refuse an output that is an input, the store, a file beside it, or another output."""
    check_outputs(outputs, inputs, store=store)


def step_summary_output() -> Named:
    """The GitHub job summary as an output, when ``$GITHUB_STEP_SUMMARY`` names one."""
    return ("GITHUB_STEP_SUMMARY", os.environ.get("GITHUB_STEP_SUMMARY") or None)


def outputs_of(args: argparse.Namespace) -> list[Named]:
    """The outputs an ``eval`` writes beside its store: report files, JUnit, job summary."""
    from retrievalkit.cli.commands.output import OUTPUT_FILES

    outputs: list[Named] = []
    if getattr(args, "output_dir", None):
        outputs += [("--output-dir", Path(args.output_dir) / name) for name in OUTPUT_FILES]
    outputs.append(("--junit-xml", getattr(args, "junit_xml", None)))
    outputs.append(step_summary_output())
    return outputs
