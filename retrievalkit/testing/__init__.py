"""The contract test kit: the checks retrievalkit runs on its built-ins, for plugin authors' suites.

Call these from your own pytest tests::

    from retrievalkit.testing import check_question_set_provider, check_retriever, check_store

    def test_my_retriever_keeps_the_contract():
        check_retriever("my-retriever", probe_questions=["a question my corpus answers"])

    def test_my_store_keeps_the_contract(tmp_path):
        check_store(f"mystore:///{tmp_path}/runs")

Each function fails with `ContractViolation`, an ``AssertionError`` (so pytest
reports a failed test, not an error), whose message starts with the broken rule's id and
statement, e.g. ``[retriever.limit] retrieve() returns at most `limit` ids: ...``.
`RULES` lists every rule. Naming a plugin by its entry-point name (or a store by
its URL) also checks that it is installed and discoverable, exactly as the command line
finds it.
"""

from __future__ import annotations

from retrievalkit.testing.embedders import check_embedder
from retrievalkit.testing.question_sets import check_question_set_provider
from retrievalkit.testing.retrievers import check_retriever
from retrievalkit.testing.rules import DEFAULT_PROBES, RULES, ContractViolation
from retrievalkit.testing.signals import deliver_stop_signals
from retrievalkit.testing.stores import check_store

__all__ = [
    "DEFAULT_PROBES",
    "RULES",
    "ContractViolation",
    "check_embedder",
    "check_question_set_provider",
    "check_retriever",
    "check_store",
    "deliver_stop_signals",
]
