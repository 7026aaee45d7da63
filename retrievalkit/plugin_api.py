"""The interface promised to plugins: what a plugin package may import besides ``retrievalkit``.

A plugin (a retriever, a store, a question set, a command, an embedder...) imports the
public API from ``retrievalkit``, its test kit from ``retrievalkit.testing``, and everything
else it needs from here. Nothing else inside retrievalkit is promised to keep its name or
its place; the packages under ``plugins/`` import only these three modules (a test checks).

Names load on first use, so importing this module costs nothing at start-up; type
checkers see every name with its type (the imports under ``TYPE_CHECKING``), so mypy checks
a plugin's use of them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from retrievalkit.demo import (
        DEMO_CORPUS as DEMO_CORPUS,
    )
    from retrievalkit.embedders import (
        Embedder as Embedder,
    )
    from retrievalkit.embedders import (
        create_embedder as create_embedder,
    )
    from retrievalkit.embedders import (
        embed_queries as embed_queries,
    )
    from retrievalkit.errors import (
        EXIT_EVALUATION_FAILED as EXIT_EVALUATION_FAILED,
    )
    from retrievalkit.errors import (
        EXIT_OK as EXIT_OK,
    )
    from retrievalkit.errors import (
        EvaluationError as EvaluationError,
    )
    from retrievalkit.errors import (
        InputError as InputError,
    )
    from retrievalkit.errors import (
        PluginError as PluginError,
    )
    from retrievalkit.errors import (
        RetrievalkitError as RetrievalkitError,
    )
    from retrievalkit.errors import (
        StoreError as StoreError,
    )
    from retrievalkit.errors import (
        one_line as one_line,
    )
    from retrievalkit.formats.corpus import (
        CorpusDocument as CorpusDocument,
    )
    from retrievalkit.formats.corpus import (
        read_corpus as read_corpus,
    )
    from retrievalkit.formats.golden_sets import (
        parse_question as parse_question,
    )
    from retrievalkit.model.records import (
        GRADER as GRADER,
    )
    from retrievalkit.model.records import (
        ResultRecord as ResultRecord,
    )
    from retrievalkit.model.values import (
        GoldenQuestion as GoldenQuestion,
    )
    from retrievalkit.model.values import (
        GoldenQuestionSet as GoldenQuestionSet,
    )
    from retrievalkit.plugins.factories import (
        load_factory as load_factory,
    )
    from retrievalkit.plugins.resolution import (
        ResolvedRetriever as ResolvedRetriever,
    )
    from retrievalkit.plugins.resolution import (
        Resolver as Resolver,
    )
    from retrievalkit.redaction import (
        redact_options as redact_options,
    )
    from retrievalkit.redaction import (
        redact_url as redact_url,
    )
    from retrievalkit.redaction import (
        scrub_known as scrub_known,
    )
    from retrievalkit.render.report_files import (
        write_record_report as write_record_report,
    )
    from retrievalkit.rerankers import (
        Reranker as Reranker,
    )
    from retrievalkit.retrievers.contract import (
        BatchRetriever as BatchRetriever,
    )
    from retrievalkit.retrievers.contract import (
        EvaluatableRetriever as EvaluatableRetriever,
    )
    from retrievalkit.retrievers.contract import (
        ScoredRetriever as ScoredRetriever,
    )
    from retrievalkit.retrievers.contract import (
        document_id_of as document_id_of,
    )
    from retrievalkit.retrievers.dense import (
        corpus_hash as corpus_hash,
    )
    from retrievalkit.retrievers.dense import (
        document_text as document_text,
    )
    from retrievalkit.retrievers.dense import (
        embed_corpus as embed_corpus,
    )
    from retrievalkit.retrievers.hybrid import (
        build_hybrid as build_hybrid,
    )
    from retrievalkit.stores import (
        ResultStore as ResultStore,
    )
    from retrievalkit.stores import (
        VerdictStore as VerdictStore,
    )
    from retrievalkit.stores import (
        check_parent as check_parent,
    )
    from retrievalkit.stores import (
        path_from_url as path_from_url,
    )
    from retrievalkit.stores.serialization import (
        dump_columns as dump_columns,
    )
    from retrievalkit.stores.serialization import (
        dump_record as dump_record,
    )
    from retrievalkit.stores.serialization import (
        dump_summary as dump_summary,
    )
    from retrievalkit.stores.serialization import (
        load_record as load_record,
    )
    from retrievalkit.stores.serialization import (
        load_summary as load_summary,
    )
    from retrievalkit.usage import (
        record_usage as record_usage,
    )
    from retrievalkit.usage import (
        usage_of as usage_of,
    )

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
    "EXIT_EVALUATION_FAILED": "retrievalkit.errors",
    # question sets
    "GoldenQuestion": "retrievalkit.model.values",
    "GoldenQuestionSet": "retrievalkit.model.values",
    "parse_question": "retrievalkit.formats.golden_sets",
    # corpora
    "DEMO_CORPUS": "retrievalkit.demo",
    "CorpusDocument": "retrievalkit.formats.corpus",
    "read_corpus": "retrievalkit.formats.corpus",
    # the text files a plugin reads: UTF-8, a bad byte named by file and line (exit 2)
    "read_text": "retrievalkit.formats.text_files",
    "text_lines": "retrievalkit.formats.text_files",
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
    # the tokens an API call spent, for the run's cost (retrievalkit.usage)
    "record_usage": "retrievalkit.usage",
    "usage_of": "retrievalkit.usage",
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
