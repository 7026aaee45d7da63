"""LlamaIndex nodes to document ids: ``id_field`` paths and chunk ids collapsed."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from retrievalkit.plugin_api import InputError, PluginError, document_id_of


def check_id_field(id_field: Any) -> tuple[str, ...]:
    """``"node.ref_doc_id"`` -> ``("node", "ref_doc_id")``."""
    if not isinstance(id_field, str) or not id_field or "" in id_field.split("."):
        raise InputError(
            "must be a dotted path such as 'node.ref_doc_id' or 'metadata.doc_id', "
            f"got {id_field!r}",
            field="id_field",
        )
    return tuple(id_field.split("."))


def read_path(document: Any, path: tuple[str, ...], id_field: str) -> str:
    """The value at ``path`` of a document (attributes, then mapping keys) as a string."""
    value: Any = document
    for part in path:
        value = value.get(part) if isinstance(value, dict) else getattr(value, part, None)
        if value is None:
            raise PluginError(
                f"a returned node has no {id_field} (stopped at '{part}'): "
                f"{str(document)[:120]}; set id_field to where your nodes keep their id"
            )
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise PluginError(f"{id_field} of a returned node is {value!r}, not a string")
    return str(value)


def ranked_ids(
    documents: Iterable[Any], path: tuple[str, ...], id_field: str, separator: str | None
) -> list[str]:
    """Document ids in the framework's order, chunk ids collapsed to their document.

    Repeats stay (one per chunk), as the retriever contract allows: retrievalkit keeps a
    document's first place when it scores, and a smaller limit still gives the start of
    the same ranking.
    """
    return [document_id_of(read_path(doc, path, id_field), separator) for doc in documents]
