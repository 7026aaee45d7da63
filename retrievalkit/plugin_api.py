"""The declared plugin interface: what packages under plugins/ import beyond `retrievalkit`.

A third-party plugin imports `retrievalkit` (the public API), `retrievalkit.testing`
(contract checks) and this module, nothing else: the names here keep their meaning
across releases while the modules behind them may move.

- `InputError`, `PluginError`: the errors retrievalkit turns into one line and exit 2 / 3;
- `document_id_of`: the document a chunk id belongs to (``doc-7#3`` -> ``doc-7``);
- `create_embedder`, `embed_queries`, `Embedder`: embedder plugins by name, and the
  embedder contract, for adapters that wrap them in a framework's embedding interface;
- `load_factory`: ``"module:function"`` to the callable, with an error naming the option.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

from retrievalkit.embedders import Embedder, create_embedder, embed_queries
from retrievalkit.errors import InputError, PluginError
from retrievalkit.retrievers.contract import document_id_of

__all__ = [
    "Embedder",
    "InputError",
    "PluginError",
    "create_embedder",
    "document_id_of",
    "embed_queries",
    "load_factory",
]


def load_factory(reference: Any, *, field: str = "factory") -> Callable[..., Any]:
    """The callable ``"package.module:function"`` names, imported from the team's own code.

    Errors name ``field`` and say what was wrong: the shape, a module that does not
    import (with its error), or a missing or non-callable attribute.
    """
    if not isinstance(reference, str) or reference.count(":") != 1:
        raise InputError(
            f"must be 'module:function', got {reference!r}",
            field=field,
            hint='e.g. factory = "my_rag.pipelines:build_retriever"',
        )
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise InputError(f"must be 'module:function', got {reference!r}", field=field)
    # The team's code lives in the project folder, which a console script's sys.path
    # lacks; appended, it never shadows an installed package.
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise InputError(
            f"cannot import {module_name} ({type(error).__name__}: {error})",
            field=field,
            hint="is the module on sys.path? run from the project folder or install it",
        ) from None
    target: Any = module
    for part in attribute.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise InputError(f"{module_name} has no attribute {attribute}", field=field)
    if not callable(target):
        raise InputError(f"{reference} is not callable", field=field)
    return target  # type: ignore[no-any-return]
