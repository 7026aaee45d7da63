"""A golden set file read by its kind: JSON Lines or TOML, named for error messages."""

from __future__ import annotations

from pathlib import Path

from retrievalkit.errors import InputError
from retrievalkit.formats.golden_sets.beir import load_beir
from retrievalkit.formats.golden_sets.jsonl import load_jsonl
from retrievalkit.formats.golden_sets.toml import load_toml
from retrievalkit.formats.limits import check_path
from retrievalkit.model.values import GoldenQuestionSet


def load_set_file(path: Path, *, name: str | None = None) -> GoldenQuestionSet:
    """Load a golden set from a ``.jsonl``/``.json`` file, a ``.toml`` file or a BEIR directory."""
    check_path(str(path), field="--set")
    if not path.exists():
        raise InputError(
            "no such file or directory", source=str(path), hint="check the path given to --set"
        )
    from retrievalkit.formats.ids import canonical_set

    # Every id as `retrievalkit.formats.ids` compares it, whatever format it came in.
    if path.is_dir():
        return canonical_set(load_beir(path, name=name))
    if path.suffix == ".toml":
        return canonical_set(load_toml(path, name=name))
    if path.suffix == ".tsv" and path.parent.name == "qrels":
        return canonical_set(load_beir(path.parent.parent, qrels=path, name=name))
    return canonical_set(load_jsonl(path, name=name))
