"""The plugin keeps retrievalkit's contracts, checked with retrievalkit.testing as CI does.

Naming a plugin by its entry point (``check_retriever("tfidf")``) also proves it is
installed and discoverable, so run these against the installed package.
"""

from __future__ import annotations

from pathlib import Path

from retrievalkit.demo import DEMO_CORPUS
from retrievalkit.testing import check_question_set_provider, check_retriever, check_store

from retrievalkit_example.questions import CsvQuestionSets
from retrievalkit_example.tfidf import create_tfidf


def test_the_installed_tfidf_retriever_keeps_the_contract() -> None:
    retriever = check_retriever("tfidf", probe_questions=["How do I fix a flat tyre?"])
    assert retriever.retrieve("How do I fix a flat tyre?", 1) == ["bk-flat-tyre"]


def test_tfidf_over_the_demo_corpus_keeps_the_contract() -> None:
    # The demo corpus holds chunks (doc-x#2): the separator maps them back to documents.
    retriever = check_retriever(
        create_tfidf,
        corpus=str(DEMO_CORPUS),
        doc_id_separator="#",
        probe_questions=["How do I get a library card?"],
    )
    assert all("#" not in doc_id for doc_id in retriever.retrieve("library card", 30))


def test_the_installed_question_set_provider_keeps_the_contract() -> None:
    sets = check_question_set_provider("example-csv")
    assert [golden.name for golden in sets] == ["bikes"]
    assert len(sets[0].questions) == 20


def test_a_provider_over_another_folder_keeps_the_contract(tmp_path: Path) -> None:
    (tmp_path / "tiny.csv").write_text(
        "id,question,form,expected,grades,hard_class,gist\n"
        "t1,How do I oil the chain?,MATCH,bk-chain-lube,,,\n",
        encoding="utf-8",
    )
    sets = check_question_set_provider(CsvQuestionSets(tmp_path))
    assert sets[0].questions[0].expected == ("bk-chain-lube",)


def test_the_installed_rundir_store_keeps_the_contract(tmp_path: Path) -> None:
    store = check_store(f"rundir:///{tmp_path}/runs")
    assert len(list((tmp_path / "runs").glob("*.json"))) == 4
    assert not list((tmp_path / "runs").glob(".saving-*")), "no temporary file is left behind"
    assert store.url.startswith("rundir:")
