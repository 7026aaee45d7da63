"""retrievalkit.testing: the built-ins keep their contracts; each broken rule is caught by name."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

from retrievalkit.demo import DEMO_CORPUS, DEMO_SET, DemoSetProvider
from retrievalkit.errors import StoreError
from retrievalkit.model.records import GRADER, ResultRecord
from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet
from retrievalkit.retrievers.bm25 import create_bm25
from retrievalkit.retrievers.run import create_run
from retrievalkit.testing import (
    RULES,
    ContractViolation,
    check_question_set_provider,
    check_retriever,
    check_store,
)

# --- the built-ins pass -----------------------------------------------------------------------


def test_bm25_demo_keeps_the_retriever_contract_found_by_its_entry_point() -> None:
    retriever = check_retriever("bm25-demo", probe_questions=["How do I get a library card?"])
    assert retriever.identifier == "bm25-demo"


def test_bm25_over_the_demo_corpus_keeps_the_retriever_contract() -> None:
    check_retriever(
        create_bm25,
        corpus=str(DEMO_CORPUS),
        doc_id_separator="#",
        probe_questions=["renew a book online", "library card"],
    )


def test_the_run_retriever_keeps_the_contract(tmp_path: Path) -> None:
    run = tmp_path / "run.trec"
    run.write_text(
        "q01 Q0 doc-membership-card 1 9.5 sys\n"
        "q01 Q0 doc-fees-summary 2 3.0 sys\n"
        "q03 Q0 doc-membership-non-residents 1 1.0 sys\n",
        encoding="utf-8",
    )
    check_retriever(
        create_run,
        path=str(run),
        queries=str(DEMO_SET),
        default_probes=False,  # it rightly refuses questions the queries do not hold
        probe_questions=[
            "How do I get a library card?",
            "How much is the annual fee for non-residents?",
            "Can a child under 16 have their own library card?",  # no lines in the run
        ],
    )


@pytest.mark.parametrize("provider", ["demo", DemoSetProvider, DemoSetProvider()])
def test_the_demo_provider_keeps_the_provider_contract(provider: Any) -> None:
    (golden,) = check_question_set_provider(provider)
    assert golden.name == "demo"


@pytest.mark.parametrize(
    "url", ["sqlite:///{dir}/results.sqlite3", "jsonl:///{dir}/runs.jsonl", "memory:", "memory:kit"]
)
def test_the_built_in_stores_keep_the_store_contract(url: str, tmp_path: Path) -> None:
    check_store(url.format(dir=tmp_path))
    check_store(url.format(dir=tmp_path))  # again: a store that already holds runs still passes


def test_every_violation_is_an_assertion_error_naming_its_rule() -> None:
    violation = ContractViolation("retriever.limit", "retrieve('x', 3) returned 5 ids")
    assert isinstance(violation, AssertionError)
    assert str(violation) == (
        "[retriever.limit] retrieve() returns at most `limit` ids: retrieve('x', 3) returned 5 ids"
    )


# --- broken retrievers ------------------------------------------------------------------------

DOCS = [f"doc-{index}" for index in range(40)]


class Ranked:
    """A well-behaved retriever to break one way at a time: a fixed ranking per question."""

    identifier = "ranked"

    def ranking(self, question: str) -> list[str]:
        start = sum(map(ord, question)) % 10
        return DOCS[start:]

    def retrieve(self, question: str, limit: int) -> Sequence[Any]:
        return self.ranking(question)[:limit]


class NoIdentifier(Ranked):
    identifier = ""


class ReturnsText(Ranked):
    def retrieve(self, question: str, limit: int) -> Any:
        return " ".join(super().retrieve(question, limit))


class ReturnsGenerator(Ranked):
    def retrieve(self, question: str, limit: int) -> Any:
        return (doc for doc in super().retrieve(question, limit))


class ReturnsNumbers(Ranked):
    def retrieve(self, question: str, limit: int) -> Any:
        return list(range(limit))


class ReturnsPaddedIds(Ranked):
    def retrieve(self, question: str, limit: int) -> Any:
        return [f"{doc}\r\n" for doc in super().retrieve(question, limit)]


class IgnoresLimit(Ranked):
    def retrieve(self, question: str, limit: int) -> Any:
        return self.ranking(question)[: limit + 2]


class ReordersShortLists(Ranked):
    def retrieve(self, question: str, limit: int) -> Any:
        found = super().retrieve(question, limit)
        return list(reversed(found)) if limit < 10 else found


class Random(Ranked):
    def retrieve(self, question: str, limit: int) -> Any:
        found = list(super().retrieve(question, limit))
        random.shuffle(found)
        return found


class FailsOnUnicode(Ranked):
    def retrieve(self, question: str, limit: int) -> Any:
        question.encode("ascii")
        return super().retrieve(question, limit)


class FindsNothing(Ranked):
    def retrieve(self, question: str, limit: int) -> Any:
        return []


class BatchDropsOne(Ranked):
    def retrieve_many(self, questions: Sequence[str], limit: int) -> Any:
        return [self.retrieve(question, limit) for question in questions[1:]]


class BatchDisagrees(Ranked):
    def retrieve_many(self, questions: Sequence[str], limit: int) -> Any:
        return [self.retrieve(question + "!", limit) for question in questions]


def failing_factory() -> Ranked:
    raise ConnectionError("index not reachable")


@pytest.mark.parametrize(
    ("factory", "rule"),
    [
        (NoIdentifier, "retriever.identifier"),
        (ReturnsText, "retriever.sequence"),
        (ReturnsGenerator, "retriever.sequence"),
        (ReturnsNumbers, "retriever.string-ids"),
        (ReturnsPaddedIds, "retriever.string-ids"),
        (IgnoresLimit, "retriever.limit"),
        (ReordersShortLists, "retriever.order"),
        (Random, "retriever.deterministic"),
        (FailsOnUnicode, "retriever.no-error"),
        (FindsNothing, "retriever.answers"),
        (BatchDropsOne, "retriever.batch"),
        (BatchDisagrees, "retriever.batch"),
        (failing_factory, "retriever.factory"),
        ("no-such-retriever", "retriever.discovery"),
    ],
)
def test_a_broken_retriever_fails_naming_the_rule(factory: Any, rule: str) -> None:
    with pytest.raises(ContractViolation) as caught:
        check_retriever(factory, probe_questions=["anything at all"])
    assert caught.value.rule == rule
    # The rule is the first one reported; every other broken rule follows it.
    first = next(line for line in str(caught.value).splitlines() if "[" in line)
    assert f"[{rule}] {RULES[rule]}: " in first


def test_the_well_behaved_base_passes_so_each_failure_is_its_own_flaw() -> None:
    check_retriever(Ranked, probe_questions=["anything at all"])
    check_retriever(ReordersShortLists, approximate=True)


def test_options_reach_the_factory() -> None:
    seen: dict[str, Any] = {}

    def factory(*, depth: int) -> Ranked:
        seen["depth"] = depth
        return Ranked()

    check_retriever(factory, depth=7)
    assert seen == {"depth": 7}


# --- broken question set providers -------------------------------------------------------------


def question(qid: str, text: str = "How do I renew a book?", **fields: Any) -> GoldenQuestion:
    return GoldenQuestion(
        id=qid, question=text, expected=fields.pop("expected", ["doc-1"]), **fields
    )


@attrs.define
class Provider:
    """A correct provider of one set, made from parts a test can break."""

    names: Any = attrs.field(factory=lambda: ["kit"])
    questions: Callable[[], list[GoldenQuestion]] = lambda: [question("k1"), question("k2", "Why?")]
    rename: str | None = None
    strict: bool = True
    returns: Any = None
    unknown: type[Exception] = KeyError

    def set_names(self) -> Any:
        return self.names

    def load(self, name: str) -> Any:
        if self.returns is not None:
            return self.returns
        if self.strict and name not in self.names:
            raise self.unknown(name)
        return GoldenQuestionSet(name=self.rename or name, questions=self.questions())


def counter() -> Iterator[int]:
    number = 0
    while True:
        number += 1
        yield number


_changing = counter()


@pytest.mark.parametrize(
    ("provider", "rule"),
    [
        (object(), "provider.protocol"),
        (Provider(names=[]), "provider.names"),
        (Provider(names=["kit", "kit"]), "provider.names"),
        (Provider(names=["my set"]), "provider.names"),
        (Provider(names=[3]), "provider.names"),
        (Provider(returns={"questions": []}), "provider.load"),
        (Provider(rename="other"), "provider.set-name"),
        (
            Provider(questions=lambda: [question("k1", f"Version {next(_changing)}?")]),
            "provider.deterministic",
        ),
        (
            Provider(questions=lambda: [question("k1"), question("k1", "Why?")]),
            "provider.validates",
        ),
        (Provider(questions=lambda: [question("k 1")]), "provider.validates"),
        (Provider(questions=lambda: [question("k1", expected=["doc 1"])]), "provider.validates"),
        (Provider(questions=lambda: [question("k1", grades={"doc-1": -1})]), "provider.validates"),
        (Provider(questions=lambda: []), "provider.validates"),
        (Provider(strict=False), "provider.unknown-name"),
        (Provider(unknown=ValueError), "provider.unknown-name"),
        ("no-such-provider", "provider.discovery"),
    ],
)
def test_a_broken_provider_fails_naming_the_rule(provider: Any, rule: str) -> None:
    with pytest.raises(ContractViolation) as caught:
        check_question_set_provider(provider)
    assert caught.value.rule == rule, str(caught.value)


def test_the_unbroken_provider_passes() -> None:
    (golden,) = check_question_set_provider(Provider())
    assert [q.id for q in golden.questions] == ["k1", "k2"]


def test_a_validation_failure_names_the_question_and_field() -> None:
    bad = Provider(questions=lambda: [question("k1", expected=["doc 1"])])
    with pytest.raises(ContractViolation, match=r"question 1 \('k1'\).*field 'expected'"):
        check_question_set_provider(bad)


# --- broken stores -----------------------------------------------------------------------------

_SHARED: dict[str, list[ResultRecord]] = {}


class ListStore:
    """A correct in-memory store (shared by URL), to break one way at a time."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.records = _SHARED.setdefault(url, [])

    def save(self, record: ResultRecord) -> None:
        if any(existing.run_id == record.run_id for existing in self.records):
            raise StoreError("already stored")
        self.records.append(record)

    def runs(self, set_name: str, model: str, grader: str = GRADER) -> list[ResultRecord]:
        return [r for r in self.all_runs() if r.key == (set_name, model, grader)]

    def get(self, run_id: str) -> ResultRecord | None:
        return next((r for r in self.records if r.run_id == run_id), None)

    def all_runs(self) -> list[ResultRecord]:
        return list(reversed(self.records))


class OldestFirst(ListStore):
    def all_runs(self) -> list[ResultRecord]:
        return list(self.records)


class DropsOutcomes(ListStore):
    def get(self, run_id: str) -> ResultRecord | None:
        found = super().get(run_id)
        return None if found is None else attrs.evolve(found, outcomes=found.outcomes[:-1])


class LosesNoneValues(ListStore):
    """Stores undefined per-question values as 0.0: a fabricated zero."""

    def save(self, record: ResultRecord) -> None:
        outcomes = [
            attrs.evolve(
                outcome,
                scores={name: value or 0.0 for name, value in outcome.scores.items()},
            )
            for outcome in record.outcomes
        ]
        super().save(attrs.evolve(record, outcomes=outcomes))


class MixesModels(ListStore):
    def runs(self, set_name: str, model: str, grader: str = GRADER) -> list[ResultRecord]:
        return [r for r in self.all_runs() if r.set == set_name and r.grader == grader]


class IgnoresGrader(ListStore):
    def runs(self, set_name: str, model: str, grader: str = GRADER) -> list[ResultRecord]:
        return [r for r in self.all_runs() if (r.set, r.model) == (set_name, model)]


class RaisesOnMissing(ListStore):
    def get(self, run_id: str) -> ResultRecord | None:
        found = super().get(run_id)
        if found is None:
            raise KeyError(run_id)
        return found


class AcceptsDuplicates(ListStore):
    def save(self, record: ResultRecord) -> None:
        self.records.append(record)


class RefusesDuplicatesWithTheWrongError(ListStore):
    """Refuses a duplicate, but not with the StoreError retrievalkit reports (exit code 3)."""

    def save(self, record: ResultRecord) -> None:
        if any(existing.run_id == record.run_id for existing in self.records):
            raise RuntimeError("already stored")
        self.records.append(record)


class Forgetful(ListStore):
    def __init__(self, url: str) -> None:
        self.url = url
        self.records = []


class NoAllRuns:
    def __init__(self, url: str) -> None:
        self.url = url


class PinningListStore(ListStore):
    """ListStore with pins and deletion, kept as the optional protocols say."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.pins: dict[tuple[str, str, str], str] = {}

    def pin(self, record: ResultRecord) -> str | None:
        if self.get(record.run_id) is None:
            raise StoreError(f"run {record.run_id} is not stored")
        before = self.pins.get(record.key)
        self.pins[record.key] = record.run_id
        return before

    def unpin(self, set_name: str, model: str, grader: str = GRADER) -> str | None:
        return self.pins.pop((set_name, model, grader), None)

    def pinned(self, set_name: str, model: str, grader: str = GRADER) -> str | None:
        return self.pins.get((set_name, model, grader))

    def delete(self, run_ids: list[str]) -> int:
        if set(run_ids) & set(self.pins.values()):
            raise StoreError("a pinned baseline; nothing was deleted")
        kept = [record for record in self.records if record.run_id not in run_ids]
        deleted = len(self.records) - len(kept)
        self.records[:] = kept
        return deleted


class PinsAnUnknownRunWithTheWrongError(PinningListStore):
    """Refuses to pin a run it does not hold, but with KeyError, not StoreError (exit 3)."""

    def pin(self, record: ResultRecord) -> str | None:
        if self.get(record.run_id) is None:
            raise KeyError(record.run_id)
        return super().pin(record)


class RefusesAPinnedDeleteWithTheWrongError(PinningListStore):
    def delete(self, run_ids: list[str]) -> int:
        if set(run_ids) & set(self.pins.values()):
            raise RuntimeError("pinned")
        return super().delete(run_ids)


@pytest.mark.parametrize(
    ("factory", "rule"),
    [
        (OldestFirst, "store.newest-first"),
        (DropsOutcomes, "store.whole"),
        (LosesNoneValues, "store.whole"),
        (MixesModels, "store.key"),
        (IgnoresGrader, "store.key"),
        (RaisesOnMissing, "store.missing"),
        (AcceptsDuplicates, "store.duplicate"),
        (RefusesDuplicatesWithTheWrongError, "store.duplicate"),
        (Forgetful, "store.reopen"),
        (NoAllRuns, "store.protocol"),
        (PinsAnUnknownRunWithTheWrongError, "store.pin"),
        (RefusesAPinnedDeleteWithTheWrongError, "store.delete"),
    ],
)
def test_a_broken_store_fails_naming_the_rule(factory: Any, rule: str) -> None:
    with pytest.raises(ContractViolation) as caught:
        check_store(f"kit:{factory.__name__}", factory=factory)
    assert caught.value.rule == rule, str(caught.value)


def test_the_unbroken_store_passes() -> None:
    check_store("kit:correct", factory=ListStore)
    check_store("kit:correct-pins", factory=PinningListStore)


def test_a_store_changing_a_run_says_which_part_changed() -> None:
    with pytest.raises(ContractViolation, match="changed in outcomes"):
        check_store("kit:drops", factory=DropsOutcomes)


def test_an_unknown_scheme_is_a_discovery_failure(tmp_path: Path) -> None:
    with pytest.raises(ContractViolation) as caught:
        check_store(f"nosuchscheme:///{tmp_path}/x")
    assert caught.value.rule == "store.discovery"
    assert "nosuchscheme" in str(caught.value)


def test_deliver_stop_signals_undoes_an_ignore_inherited_from_a_background_job() -> None:
    import signal
    import subprocess
    import sys

    code = (
        "import signal; from retrievalkit.testing import deliver_stop_signals; "
        "before = signal.getsignal(signal.SIGINT) is signal.SIG_IGN; deliver_stop_signals(); "
        "print(before, signal.getsignal(signal.SIGINT) is signal.default_int_handler, "
        "signal.getsignal(signal.SIGHUP) is signal.SIG_DFL)"
    )

    def as_a_background_job() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    done = subprocess.run(
        [sys.executable, "-c", code],
        preexec_fn=as_a_background_job,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "True"]
