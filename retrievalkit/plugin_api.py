"""The interface promised to plugins: what a plugin package may import besides ``retrievalkit``.

A plugin (a retriever, a store, a question set, a command, an embedder...) imports the
public API from ``retrievalkit``, its test kit from ``retrievalkit.testing``, and everything
else it needs from here. Nothing else inside retrievalkit is promised to keep its name or
its place; the packages under ``plugins/`` import only these three modules (a test checks).

Names load on first use, so importing this module costs nothing at start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass

#: Each promised name and the module that holds it.
_EXPORTS = {
    # errors and exit codes
    "RetrievalkitError": "retrievalkit.errors",
    "InputError": "retrievalkit.errors",
    "EvaluationError": "retrievalkit.errors",
    "PluginError": "retrievalkit.errors",
    "StoreError": "retrievalkit.errors",
    "one_line": "retrievalkit.errors",
    "EXIT_OK": "retrievalkit.errors",
    "EXIT_REGRESSION": "retrievalkit.errors",
    "EXIT_INTERRUPTED": "retrievalkit.errors",
    "EXIT_USAGE": "retrievalkit.errors",
    "EXIT_EVALUATION_FAILED": "retrievalkit.errors",
    # question sets
    "GoldenQuestion": "retrievalkit.model.values",
    "GoldenQuestionSet": "retrievalkit.model.values",
    "parse_question": "retrievalkit.formats.golden_sets",
    # corpora
    "DEMO_CORPUS": "retrievalkit.demo",
    "CorpusDocument": "retrievalkit.formats.corpus",
    "read_corpus": "retrievalkit.formats.corpus",
    # retrievers
    "EvaluatableRetriever": "retrievalkit.retrievers.contract",
    "BatchRetriever": "retrievalkit.retrievers.contract",
    "ScoredRetriever": "retrievalkit.retrievers.contract",
    "document_id_of": "retrievalkit.retrievers.contract",
    "ResolvedRetriever": "retrievalkit.plugins.resolution",
    "Resolver": "retrievalkit.plugins.resolution",
    "load_factory": "retrievalkit.plugins.factories",
    "build_hybrid": "retrievalkit.retrievers.hybrid",
    # embedders and vectors
    "Embedder": "retrievalkit.embedders",
    "create_embedder": "retrievalkit.embedders",
    "embed_queries": "retrievalkit.embedders",
    # rerankers
    "Reranker": "retrievalkit.rerankers",
    "create_reranker": "retrievalkit.rerankers",
    "corpus_hash": "retrievalkit.retrievers.dense",
    "document_text": "retrievalkit.retrievers.dense",
    "embed_corpus": "retrievalkit.retrievers.dense",
    # stores
    "ResultStore": "retrievalkit.stores",
    "GRADER": "retrievalkit.model.records",
    "ResultRecord": "retrievalkit.model.records",
    "path_from_url": "retrievalkit.stores",
    "check_parent": "retrievalkit.stores",
    "dump_record": "retrievalkit.stores.serialization",
    "load_record": "retrievalkit.stores.serialization",
    "dump_summary": "retrievalkit.stores.serialization",
    "load_summary": "retrievalkit.stores.serialization",
    "dump_columns": "retrievalkit.stores.serialization",
    "verify_stored": "retrievalkit.stores.serialization",
    "RunCheck": "retrievalkit.stores",
    "check_whole": "retrievalkit.stores",
    "DamagedRun": "retrievalkit.stores.consistency",
    "VerdictStore": "retrievalkit.stores",
    # what a store may write beside a run, and how it keeps secrets out of it
    "OUTPUT_FILES": "retrievalkit.render.report_files",
    "write_record_report": "retrievalkit.render.report_files",
    "redact_options": "retrievalkit.redaction",
    "redact_url": "retrievalkit.redaction",
    "scrub_known": "retrievalkit.redaction",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(
            f"retrievalkit.plugin_api has no {name!r}; promised: {', '.join(__all__)}"
        )
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
