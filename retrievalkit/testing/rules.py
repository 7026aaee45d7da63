"""The kit's rules and how a broken one is reported: `RULES`, `ContractViolation`, the probes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

#: Every rule the kit checks: id -> what a plugin must do.
RULES: dict[str, str] = {
    "retriever.discovery": "the retriever's entry point is installed and loads",
    "retriever.factory": "the factory builds a retriever from its options",
    "retriever.identifier": "a retriever has a non-empty string `identifier`",
    "retriever.retrieve": "a retriever has a method retrieve(question, limit)",
    "retriever.no-error": "retrieve() answers any question without raising",
    "retriever.sequence": "retrieve() returns a list or tuple of ids (not a string, "
    "generator or None)",
    "retriever.string-ids": "every document id is a non-empty string, without whitespace or "
    "invisible characters around it",
    "retriever.limit": "retrieve() returns at most `limit` ids",
    "retriever.order": "a smaller limit gives the start of the same ranking (order is kept)",
    "retriever.deterministic": "the same question and limit give the same ranking",
    "retriever.answers": "some probe question finds at least one document",
    "retriever.batch": "retrieve_many() gives one ranking per question, in order, each the "
    "one retrieve() gives",
    "provider.discovery": "the provider's entry point is installed and loads",
    "provider.protocol": "a provider (or what calling the entry point gives) has set_names() "
    "and load(name)",
    "provider.names": "set_names() returns at least one name; names are distinct non-empty "
    "strings without whitespace, the same on every call",
    "provider.load": "load(name) returns a GoldenQuestionSet for every offered name",
    "provider.set-name": "the set load(name) returns is called `name`",
    "provider.deterministic": "loading a set twice gives the same questions (content hash)",
    "provider.validates": "every question passes the checks a golden set file gets "
    "(unique clean ids, a question text, valid expected ids and grades)",
    "provider.unknown-name": "load() of a name the provider does not offer raises KeyError",
    "store.discovery": "the URL's scheme names an installed store plugin that opens it",
    "store.protocol": "a store has a string `url` and save, runs, get and all_runs",
    "store.whole": "a saved run reads back whole: every field, outcome and metric equal",
    "store.newest-first": "runs() and all_runs() answer newest first",
    "store.key": "runs(set, model, grader) returns the runs of that key and no other",
    "store.missing": "get() of an unknown run id returns None",
    "store.duplicate": "saving a run id that is already stored raises StoreError and keeps "
    "one copy",
    "store.reopen": "opening the same URL again sees the saved runs",
    "store.pin": "a store with pin(), unpin() and pinned() keeps one pin per key: pin(run) "
    "returns the run id it replaced, pinned(key) names the pinned run, unpin(key) removes "
    "the pin and returns its run id, and pinning a run the store does not hold raises "
    "StoreError",
    "store.delete": "a store with delete(run_ids) deletes those runs whole and returns how "
    "many it deleted; asked to delete a pinned run, it raises StoreError and deletes nothing",
    "embedder.discovery": "the embedder's entry point is installed and loads",
    "embedder.factory": "the factory builds an embedder from its options",
    "embedder.attributes": "an embedder has a non-empty string `model_id`, whole-number "
    "`dimensions` >= 1, a `similarity` Elasticsearch knows (cosine, dot_product, "
    "max_inner_product, l2_norm) and a method embed(texts)",
    "embedder.matrix": "embed() returns a numpy float32 matrix of shape (len(texts), dimensions)",
    "embedder.empty": "embed([]) returns a (0, dimensions) float32 matrix",
    "embedder.finite": "every value is finite (no NaN or infinity), whatever the text",
    "embedder.deterministic": "the same texts give the same bits on every call",
    "embedder.independent": "a text's vector does not depend on the other texts of the call "
    "(equal within 1e-5)",
    "embedder.unit": "with similarity dot_product, every non-zero vector has length 1 "
    "(within 1e-3), as Elasticsearch requires",
    "embedder.distinct": "different probe texts do not all get the same vector",
    "embedder.queries": "embed_queries(), when offered, returns the same shape and dtype",
}


#: Questions every retriever must survive: ordinary, stopwords only, non-ASCII, long.
DEFAULT_PROBES: tuple[str, ...] = (
    "How do I renew it before it expires?",
    "opening hours on public holidays",
    "the of and",
    "Wie viel kostet die Gebühr für Überweisungen?",
    "x",
    " ".join(["a long question about many different things"] * 40),
)


#: Limits asked: 30 is what eval asks by default (max k 10 times overfetch 3).
LIMITS = (1, 3, 10, 30)


class ContractViolation(AssertionError):
    """A plugin broke a rule of its contract; ``rule`` is the id of the rule in `RULES`.

    When a check found more than one broken rule, the exception raised is this class
    too: ``rule`` and ``detail`` are the first violation's, ``violations`` lists them
    all, and the message has one line per violation.
    """

    def __init__(self, rule: str, detail: str, *, more: Sequence[ContractViolation] = ()) -> None:
        self.rule = rule
        self.detail = detail
        self.violations: tuple[ContractViolation, ...] = (self, *more)
        first = f"[{rule}] {RULES[rule]}: {detail}"
        if more:
            lines = [first, *(f"[{v.rule}] {RULES[v.rule]}: {v.detail}" for v in more)]
            message = f"{len(lines)} contract violations:\n" + "\n".join(
                f"  {number}. {line}" for number, line in enumerate(lines, start=1)
            )
        else:
            message = first
        super().__init__(message)


class Violations:
    """Collects violations so that one check reports every broken rule, not only the first.

    A failure inside ``with found.step():`` is recorded and the check goes on with its
    next step; a failure outside any step ends the check (nothing after it can run).
    """

    def __init__(self) -> None:
        self.found: list[ContractViolation] = []

    @contextlib.contextmanager
    def step(self) -> Iterator[None]:
        try:
            yield
        except ContractViolation as violation:
            self.found.extend(violation.violations)

    def raise_any(self) -> None:
        """Every broken rule, each with up to three of its cases (questions, calls, runs)."""
        if not self.found:
            return
        by_rule: dict[str, list[ContractViolation]] = {}
        for violation in self.found:
            by_rule.setdefault(violation.rule, []).append(violation)
        shown: list[ContractViolation] = []
        for rule, cases in by_rule.items():
            shown += cases[:_CASES_SHOWN]
            if len(cases) > _CASES_SHOWN:
                hidden = len(cases) - _CASES_SHOWN
                shown[-1] = ContractViolation(
                    rule, f"{shown[-1].detail} (and {hidden} more case(s) of this rule)"
                )
        first, *more = shown
        raise ContractViolation(first.rule, first.detail, more=more) from self.found[0]


#: How many cases of one broken rule a report spells out.
_CASES_SHOWN = 3


def fail(rule: str, detail: str, cause: BaseException | None = None) -> NoReturn:
    if cause is not None:
        raise ContractViolation(rule, f"{detail}: {type(cause).__name__}: {cause}") from cause
    raise ContractViolation(rule, detail)


def short(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


def load_entry_point(rule: str, group_constant: str, name: str) -> Any:
    from retrievalkit.plugins import registry as plugins

    group = getattr(plugins, group_constant)
    try:
        return plugins.load(plugins.find_one(group, name))
    except Exception as error:
        fail(rule, f"entry point '{name}' in {group}", error)


def name_of(obj: Any) -> str:
    return str(getattr(obj, "__qualname__", None) or type(obj).__name__)
