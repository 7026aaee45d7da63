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

import contextlib
import datetime as dt
import re
import secrets
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NoReturn

import attrs

from retrievalkit.errors import StoreError
from retrievalkit.model.records import GRADER, ResultRecord
from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet, QuestionForm

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
_LIMITS = (1, 3, 10, 30)


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


class _Violations:
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


def _fail(rule: str, detail: str, cause: BaseException | None = None) -> NoReturn:
    if cause is not None:
        raise ContractViolation(rule, f"{detail}: {type(cause).__name__}: {cause}") from cause
    raise ContractViolation(rule, detail)


def _short(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


# --- retrievers ------------------------------------------------------------------------------


def check_retriever(
    factory: Callable[..., Any] | str,
    /,
    *,
    probe_questions: Sequence[str] | None = None,
    default_probes: bool = True,
    approximate: bool = False,
    **options: Any,
) -> Any:
    """Build a retriever with ``factory(**options)`` and check it keeps the retriever contract.

    ``factory`` is a retriever factory (what a ``retrievalkit.retrievers`` entry point
    names) or the entry point's name, which also checks that it is installed.
    ``probe_questions`` are questions your corpus answers: with them, at least one must
    find a document (``retriever.answers``). The kit adds `DEFAULT_PROBES`, which
    a retriever must survive but need not answer, unless ``default_probes=False`` (for a
    retriever that only knows given questions, such as the ``run`` retriever, which
    rightly raises on any other). ``approximate=True`` skips
    ``retriever.order`` and the equality part of ``retriever.batch``, for approximate
    nearest-neighbour search whose top k legitimately depends on k.

    Returns the retriever, for further tests of your own.
    """
    if isinstance(factory, str):
        factory = _load_entry_point("retriever.discovery", "RETRIEVERS", factory)
    assert callable(factory)
    try:
        retriever = factory(**options)
    except Exception as error:
        _fail("retriever.factory", f"calling {_name_of(factory)}(**{options!r}) raised", error)
    own = list(probe_questions or ())
    questions = list(dict.fromkeys([*own, *(DEFAULT_PROBES if default_probes else ())]))
    if not questions:
        raise ValueError("default_probes=False needs probe_questions")
    found = _Violations()
    with found.step():
        identifier = getattr(retriever, "identifier", None)
        if not isinstance(identifier, str) or not identifier.strip():
            _fail(
                "retriever.identifier",
                f"{type(retriever).__name__}.identifier is {identifier!r}",
            )
    with found.step():  # without retrieve() nothing else can be checked
        if not callable(getattr(retriever, "retrieve", None)):
            _fail("retriever.retrieve", f"{type(retriever).__name__} has no callable retrieve")
        deepest: dict[str, list[str]] = {}
        for question in questions:
            with found.step():
                deepest[question] = _check_question(retriever, question, approximate)
        answered = all(question in deepest for question in own)
        if own and answered and not any(deepest[question] for question in own):
            with found.step():
                _fail(
                    "retriever.answers",
                    f"none of the {len(own)} probe questions found a document "
                    f"(e.g. {_short(own[0])}); is the index empty or the corpus option wrong?",
                )
        batch = getattr(retriever, "retrieve_many", None)
        if callable(batch) and len(deepest) == len(questions):
            _check_batch(batch, questions, deepest, approximate=approximate, found=found)
    found.raise_any()
    return retriever


def _check_question(retriever: Any, question: str, approximate: bool) -> list[str]:
    """Every limit, twice the deepest: the ranking of ``max(_LIMITS)`` when all rules hold."""
    rankings = {limit: _ask(retriever, question, limit) for limit in _LIMITS}
    deepest = rankings[max(_LIMITS)]
    again = _ask(retriever, question, max(_LIMITS))
    if again != deepest:
        _fail(
            "retriever.deterministic",
            f"retrieve({_short(question)}, {max(_LIMITS)}) gave {deepest[:5]} and then {again[:5]}",
        )
    if not approximate:
        for limit in _LIMITS[:-1]:
            expected = deepest[:limit]
            if rankings[limit] != expected:
                _fail(
                    "retriever.order",
                    f"retrieve({_short(question)}, {limit}) gave {rankings[limit]}, but the "
                    f"first {limit} of retrieve(..., {max(_LIMITS)}) are {expected}",
                )
    return deepest


def _ask(retriever: Any, question: str, limit: int) -> list[str]:
    call = f"retrieve({_short(question)}, {limit})"
    try:
        ids = retriever.retrieve(question, limit)
    except Exception as error:
        _fail("retriever.no-error", f"{call} raised", error)
    return _check_ranking(ids, call, limit)


def _check_ranking(ids: Any, call: str, limit: int) -> list[str]:
    if not isinstance(ids, (list, tuple)):
        _fail("retriever.sequence", f"{call} returned {type(ids).__name__}")
    from retrievalkit.formats.ids import trimmed

    for rank, doc_id in enumerate(ids, start=1):
        if not isinstance(doc_id, str) or not doc_id:
            _fail(
                "retriever.string-ids",
                f"{call} returned {doc_id!r} ({type(doc_id).__name__}) at rank {rank}",
            )
        if trimmed(doc_id) != doc_id:
            # Scored as the id without them, with a warning: the contract wants them gone.
            _fail(
                "retriever.string-ids",
                f"{call} returned {doc_id!r} at rank {rank}, with whitespace or an invisible "
                f"character around {trimmed(doc_id)!r}",
            )
    if len(ids) > limit:
        _fail("retriever.limit", f"{call} returned {len(ids)} ids")
    return list(ids)


def _check_batch(
    batch: Callable[..., Any],
    questions: list[str],
    expected: Mapping[str, list[str]],
    *,
    approximate: bool,
    found: _Violations,
) -> None:
    limit = max(_LIMITS)
    try:
        answers = batch(questions, limit)
    except Exception as error:
        _fail(
            "retriever.batch", f"retrieve_many({len(questions)} questions, {limit}) raised", error
        )
    if not isinstance(answers, (list, tuple)) or len(answers) != len(questions):
        count = len(answers) if isinstance(answers, (list, tuple)) else type(answers).__name__
        _fail("retriever.batch", f"{len(questions)} questions gave {count} answers")
    for question, answer in zip(questions, answers, strict=True):
        call = f"retrieve_many([..., {_short(question)}, ...], {limit})"
        with found.step():
            if isinstance(answer, BaseException):
                _fail("retriever.batch", f"{call} failed where retrieve() answered", answer)
            ranking = _check_ranking(answer, call, limit)
            if not approximate and ranking != expected[question]:
                _fail(
                    "retriever.batch",
                    f"{call} gave {ranking[:5]}, retrieve() gave {expected[question][:5]}",
                )


# --- question set providers ------------------------------------------------------------------


def check_question_set_provider(provider: Any, /) -> list[GoldenQuestionSet]:
    """Check a question-set provider: its names, its sets, and that they are valid and stable.

    ``provider`` is a provider, a class or callable that makes one (what a
    ``retrievalkit.question_sets`` entry point may name), or the entry point's name,
    which also checks that it is installed. Returns the sets it offers.
    """
    from retrievalkit.plugins.registry import QuestionSetProvider

    if isinstance(provider, str):
        provider = _load_entry_point("provider.discovery", "QUESTION_SETS", provider)
    if isinstance(provider, type) or not isinstance(provider, QuestionSetProvider):
        try:
            provider = provider()
        except Exception as error:
            _fail(
                "provider.protocol",
                f"{_name_of(provider)} is not a provider, and calling it",
                error,
            )
    if not isinstance(provider, QuestionSetProvider):
        _fail("provider.protocol", f"{type(provider).__name__} lacks set_names() or load(name)")
    found = _Violations()
    sets = []
    with found.step():
        names = _set_names(provider)
        with found.step():
            if list(_set_names(provider)) != names:
                _fail("provider.names", "two calls of set_names() gave different names")
        for name in names:
            with found.step():
                golden = _load_set(provider, name)
                sets.append(golden)
                with found.step():
                    if golden.name != name:
                        _fail(
                            "provider.set-name",
                            f"load({name!r}) returned a set called {golden.name!r}",
                        )
                with found.step():
                    again = _load_set(provider, name)
                    if again.content_hash != golden.content_hash:
                        _fail(
                            "provider.deterministic",
                            f"two loads of {name!r} gave different questions",
                        )
                _validate_set(golden, found)
    with found.step():
        unknown = f"no-such-set-{secrets.token_hex(4)}"
        try:
            provider.load(unknown)
        except KeyError:
            pass
        except Exception as error:
            _fail("provider.unknown-name", f"load({unknown!r}) raised another error", error)
        else:
            _fail("provider.unknown-name", f"load({unknown!r}) returned instead of raising")
    found.raise_any()
    return sets


def _set_names(provider: Any) -> list[str]:
    try:
        names = provider.set_names()
    except Exception as error:
        _fail("provider.names", "set_names() raised", error)
    if not isinstance(names, (list, tuple)) or not names:
        _fail("provider.names", f"set_names() returned {names!r}")
    for name in names:
        if not isinstance(name, str) or not name or re.search(r"\s", name):
            _fail("provider.names", f"set name {name!r} is not a non-empty string without spaces")
    if len(set(names)) != len(names):
        _fail("provider.names", f"set_names() lists a name twice: {list(names)}")
    return list(names)


def _load_set(provider: Any, name: str) -> GoldenQuestionSet:
    try:
        golden = provider.load(name)
    except Exception as error:
        _fail("provider.load", f"load({name!r}) raised", error)
    if not isinstance(golden, GoldenQuestionSet):
        _fail("provider.load", f"load({name!r}) returned {type(golden).__name__}")
    return golden


def _validate_set(golden: GoldenQuestionSet, found: _Violations) -> None:
    """Every question against the file rules; each bad question is its own violation."""
    from retrievalkit.errors import InputError
    from retrievalkit.formats.convert import unstructure
    from retrievalkit.formats.golden_sets import parse_question

    if not golden.questions:
        _fail("provider.validates", f"set {golden.name!r} has no questions")
    seen: set[str] = set()
    for index, question in enumerate(golden.questions, start=1):
        with found.step():
            if not isinstance(question, GoldenQuestion):
                _fail("provider.validates", f"question {index} is a {type(question).__name__}")
            where = f"set {golden.name!r}, question {index} ({question.id!r})"
            if question.id in seen:
                _fail("provider.validates", f"{where}: the id is used twice")
            seen.add(question.id)
            data = {k: value for k, value in unstructure(question).items() if value is not None}
            try:
                parse_question(data, source=where)
            except InputError as error:
                _fail("provider.validates", str(error))


# --- stores ----------------------------------------------------------------------------------


def check_store(url: str, /, *, factory: Callable[[str], Any] | None = None) -> Any:
    """Check the store at ``url``: whole runs kept, history newest first, keys apart.

    The store is opened with `retrievalkit.stores.open_store`, so the URL's scheme
    must be an installed ``retrievalkit.stores`` plugin; pass ``factory`` (what the entry
    point names, called with the URL) to check a store class before it is installed.
    The store may already hold runs: the check writes runs of a set name of its own
    (``contract-check-...``) and leaves them there. Returns the opened store.
    """
    store = _open(url, factory)
    set_name = f"contract-check-{secrets.token_hex(4)}"
    start = dt.datetime(2024, 1, 1, 12, 0, 0, tzinfo=dt.timezone.utc)
    plan = [("model-a", 0), ("model-a", 1), ("model-b", 2), ("model-a", 3)]
    records = [
        _sample_record(set_name, model, start + dt.timedelta(seconds=offset))
        for model, offset in plan
    ]
    for record in records:  # nothing else can be checked without them
        try:
            store.save(record)
        except Exception as error:
            _fail("store.whole", f"save() of run {record.run_id} raised", error)
    found = _Violations()
    first = records[0]
    model_a = [record for record in records if record.model == "model-a"]
    with found.step():
        try:
            got = store.get(first.run_id)
        except Exception as error:
            _fail("store.whole", f"get({first.run_id!r}) raised", error)
        _same_run(got, first, f"get({first.run_id!r})")
    with found.step():
        _check_history(store, set_name, model_a, found)
    with found.step():
        other_grader = _call(store, "runs", "store.key", set_name, "model-a", "another_grader")
        if other_grader:
            _fail("store.key", f"runs() for grader 'another_grader' gave {len(other_grader)} runs")
    with found.step():
        ours = {record.run_id for record in records}
        everything = [run for run in _call(store, "all_runs", "store.whole") if run.run_id in ours]
        newest_first = [run.run_id for run in reversed(records)]
        if sorted(run.run_id for run in everything) != sorted(newest_first):
            _fail(
                "store.whole",
                f"all_runs() holds {len(everything)} of the {len(records)} runs saved",
            )
        if [run.run_id for run in everything] != newest_first:
            _fail(
                "store.newest-first",
                f"all_runs() gave {[run.run_id for run in everything]}, newest first is "
                f"{newest_first}",
            )
    with found.step():
        missing = f"no-such-run-{secrets.token_hex(4)}"
        try:
            absent = store.get(missing)
        except Exception as error:
            _fail("store.missing", f"get({missing!r}) raised", error)
        if absent is not None:
            _fail("store.missing", f"get({missing!r}) returned {type(absent).__name__}")
    with found.step():
        _check_duplicate(store, first)
    with found.step():
        reopened = _open(url, factory, rule="store.reopen")
        try:
            seen = {run.run_id for run in reopened.runs(set_name, "model-a", GRADER)}
        except Exception as error:
            _fail("store.reopen", "runs() of the reopened store raised", error)
        if seen != {run.run_id for run in model_a}:
            _fail("store.reopen", f"the reopened store has {len(seen)} of {len(model_a)} runs")
    with found.step():
        _check_pins_and_deletion(store, records, found)
    found.raise_any()
    return store


def _check_history(
    store: Any, set_name: str, model_a: list[ResultRecord], found: _Violations
) -> None:
    history = _call(store, "runs", "store.key", set_name, "model-a", GRADER)
    if {run.run_id for run in history} != {run.run_id for run in model_a}:
        _fail(
            "store.key",
            f"runs({set_name!r}, 'model-a') gave runs {[run.run_id for run in history]}, "
            f"expected {[run.run_id for run in model_a]}",
        )
    expected_order = [run.run_id for run in reversed(model_a)]
    with found.step():
        if [run.run_id for run in history] != expected_order:
            _fail(
                "store.newest-first",
                f"runs() gave {[run.run_id for run in history]}, newest first is {expected_order}",
            )
    for run in history:
        with found.step():
            original = next(record for record in model_a if record.run_id == run.run_id)
            _same_run(run, original, "runs()")


def _check_duplicate(store: Any, first: ResultRecord) -> None:
    try:
        store.save(first)
    except StoreError:
        pass
    except Exception as error:
        _fail("store.duplicate", f"saving run {first.run_id} a second time", error)
    else:
        _fail("store.duplicate", f"saving run {first.run_id} a second time did not fail")
    copies = [
        run for run in _call(store, "all_runs", "store.duplicate") if run.run_id == first.run_id
    ]
    if len(copies) != 1:
        _fail("store.duplicate", f"run {first.run_id} is stored {len(copies)} times")


def _check_pins_and_deletion(store: Any, records: list[ResultRecord], found: _Violations) -> None:
    """The optional protocols: checked when the store offers them, as `baseline` uses them."""
    from retrievalkit.stores import DeletingStore, PinningStore

    older, newer = records[0], records[1]  # two runs of one key
    key = (older.set, older.model, older.grader)
    pins = isinstance(store, PinningStore)
    if pins:
        with found.step():
            _check_pins(store, older, newer, key)
    if isinstance(store, DeletingStore):
        with found.step():
            _check_deletion(store, records, key if pins else None)


def _pin_call(rule: str, call: str, action: Callable[[], Any]) -> Any:
    try:
        return action()
    except Exception as error:
        _fail(rule, f"{call} raised", error)


def _check_pins(
    store: Any, older: ResultRecord, newer: ResultRecord, key: tuple[str, str, str]
) -> None:
    rule = "store.pin"
    if _pin_call(rule, f"pinned{key!r}", lambda: store.pinned(*key)) is not None:
        _fail(rule, f"pinned{key!r} names a run before any pin")
    replaced = _pin_call(rule, f"pin({older.run_id})", lambda: store.pin(older))
    if replaced is not None:
        _fail(rule, f"the first pin() of the key returned {replaced!r}, not None")
    replaced = _pin_call(rule, f"pin({newer.run_id})", lambda: store.pin(newer))
    if replaced != older.run_id:
        _fail(rule, f"pin({newer.run_id}) returned {replaced!r}, not the replaced {older.run_id}")
    named = _pin_call(rule, f"pinned{key!r}", lambda: store.pinned(*key))
    if named != newer.run_id:
        _fail(rule, f"pinned{key!r} is {named!r} after pinning {newer.run_id}")
    unpinned = _pin_call(rule, f"unpin{key!r}", lambda: store.unpin(*key))
    if unpinned != newer.run_id:
        _fail(rule, f"unpin{key!r} returned {unpinned!r}, not {newer.run_id}")
    if _pin_call(rule, f"pinned{key!r}", lambda: store.pinned(*key)) is not None:
        _fail(rule, f"pinned{key!r} still names a run after unpin()")
    stranger = attrs.evolve(newer, run_id=f"not-stored-{secrets.token_hex(4)}")
    try:
        store.pin(stranger)
    except StoreError:
        pass
    except Exception as error:
        _fail(rule, f"pin() of run {stranger.run_id}, which the store does not hold", error)
    else:
        store.unpin(*key)
        _fail(rule, f"pin() of run {stranger.run_id}, which the store does not hold, succeeded")


def _check_deletion(
    store: Any, records: list[ResultRecord], key: tuple[str, str, str] | None
) -> None:
    """Deletes only a copy saved for the purpose: the runs the check wrote stay."""
    rule = "store.delete"
    last = records[-1]
    doomed = attrs.evolve(records[2], run_id=f"{records[2].run_id}-delete-check")
    _pin_call(rule, f"save({doomed.run_id})", lambda: store.save(doomed))
    if key is not None:
        _pin_call("store.pin", f"pin({last.run_id})", lambda: store.pin(last))
        try:
            store.delete([doomed.run_id, last.run_id])
        except StoreError:
            pass
        except Exception as error:
            _fail(rule, f"delete() of the pinned run {last.run_id}", error)
        else:
            _fail(rule, f"delete() of the pinned run {last.run_id} succeeded")
        finally:
            store.unpin(*key)
        if store.get(doomed.run_id) is None:
            _fail(rule, "a refused delete() still deleted the unpinned run asked for with it")
    count = _pin_call(rule, "delete(...)", lambda: store.delete([doomed.run_id, "no-such-run"]))
    if count != 1:
        _fail(rule, f"delete() of one stored run and one unknown id returned {count!r}, not 1")
    if store.get(doomed.run_id) is not None:
        _fail(rule, f"run {doomed.run_id} is still there after delete()")


def _open(url: str, factory: Callable[[str], Any] | None, rule: str = "store.discovery") -> Any:
    from retrievalkit.stores import ResultStore, open_store

    try:
        store = factory(url) if factory is not None else open_store(url)
    except Exception as error:
        _fail(rule, f"opening {url!r} raised", error)
    if not isinstance(store, ResultStore) or not isinstance(getattr(store, "url", None), str):
        _fail(
            "store.protocol",
            f"{type(store).__name__} lacks a string url or one of save, runs, get, all_runs",
        )
    return store


def _call(store: Any, method: str, rule: str, *args: str) -> list[ResultRecord]:
    try:
        result = getattr(store, method)(*args)
    except Exception as error:
        _fail(rule, f"{method}{args!r} raised", error)
    if not isinstance(result, list) or not all(isinstance(r, ResultRecord) for r in result):
        _fail(rule, f"{method}{args!r} returned {type(result).__name__}, not a list of records")
    return result


def _same_run(got: Any, saved: ResultRecord, call: str) -> None:
    from retrievalkit.formats.convert import to_json

    if not isinstance(got, ResultRecord):
        _fail("store.whole", f"{call} returned {type(got).__name__}, not the saved record")
    if to_json(got) != to_json(saved):
        differing = [
            field
            for field in ("run_id", "set", "model", "metrics", "slices", "outcomes", "manifest")
            if to_json(getattr(got, field)) != to_json(getattr(saved, field))
        ]
        _fail(
            "store.whole",
            f"{call} gave back run {saved.run_id} changed in "
            + (", ".join(differing) or "its fields"),
        )


def _sample_record(set_name: str, model: str, moment: dt.datetime) -> ResultRecord:
    """A real scored run over a small set that uses every feature a store must keep."""
    from retrievalkit.api import evaluate

    questions = [
        GoldenQuestion(
            id="c1",
            question="Où est la bibliothèque ?",
            form=QuestionForm.MATCH,
            expected=["doc-1", "doc-2"],
            grades={"doc-1": 2, "doc-9": 0},
            hard_class="near-duplicate",
            gist="either branch",
            meta={"topic": "places"},
        ),
        GoldenQuestion(
            id="c2", question="opening hours", form=QuestionForm.GAP, expected=["doc-3"]
        ),
        # A no-answer question alone in its slice: every mean there is None, not 0.0.
        GoldenQuestion(
            id="c3",
            question="fishing licence",
            form=QuestionForm.GAP,
            expected=[],
            meta={"topic": "elsewhere"},
        ),
        GoldenQuestion(id="c4", question="late fees", expected=["doc-4"], hard_class="normal"),
    ]
    golden = GoldenQuestionSet(name=set_name, questions=questions, source="retrievalkit.testing")
    run = evaluate(
        golden,
        _ScriptedRetriever(),
        name=model,
        options={"api_key": "s3cret"},
        k=(1, 3, 5),
        resamples=50,
        slices=("topic",),
        max_error_rate=None,
        git_commit=None,
        now=moment,
    )
    return run.record


class _ScriptedRetriever:
    """Answers the sample set's questions from a script; one question errors."""

    identifier = "contract-check"
    _ANSWERS: Mapping[str, tuple[str, ...]] = {
        "Où est la bibliothèque ?": ("doc-2", "doc-9", "doc-1"),
        "opening hours": ("doc-7", "doc-3"),
        "fishing licence": (),
    }

    def retrieve(self, question: str, limit: int) -> list[str]:
        if question not in self._ANSWERS:
            raise ConnectionError("backend unreachable")
        return list(self._ANSWERS[question][:limit])


# --- embedders -------------------------------------------------------------------------------


def check_embedder(
    factory: Callable[..., Any] | str,
    /,
    *,
    probe_texts: Sequence[str] | None = None,
    **options: Any,
) -> Any:
    """Build an embedder with ``factory(**options)`` and check it keeps the embedder contract.

    ``factory`` is an embedder factory (what a ``retrievalkit.embedders`` entry point names)
    or the entry point's name, which also checks that it is installed. ``probe_texts`` are
    added to `DEFAULT_PROBES` (which include an empty-ish, a non-ASCII and a long text).
    Returns the embedder, for further tests of your own.
    """
    import numpy as np

    from retrievalkit.embedders import SIMILARITIES

    if isinstance(factory, str):
        factory = _load_entry_point("embedder.discovery", "EMBEDDERS", factory)
    assert callable(factory)
    try:
        embedder = factory(**options)
    except Exception as error:
        _fail("embedder.factory", f"calling {_name_of(factory)}(**{options!r}) raised", error)
    kind = type(embedder).__name__
    model_id = getattr(embedder, "model_id", None)
    dimensions = getattr(embedder, "dimensions", None)
    similarity = getattr(embedder, "similarity", None)
    found = _Violations()
    for broken, detail in (
        (not isinstance(model_id, str) or not model_id.strip(), f"{kind}.model_id is {model_id!r}"),
        (
            isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1,
            f"{kind}.dimensions is {dimensions!r}",
        ),
        (similarity not in SIMILARITIES, f"{kind}.similarity is {similarity!r}"),
    ):
        with found.step():
            if broken:
                _fail("embedder.attributes", detail)
    if not callable(getattr(embedder, "embed", None)):
        with found.step():
            _fail("embedder.attributes", f"{kind} has no callable embed")
    found.raise_any()  # every rule below needs the attributes

    texts = list(dict.fromkeys([*(probe_texts or ()), *DEFAULT_PROBES, ""]))

    def embed(batch: list[str], method: str = "embed") -> Any:
        call = f"{method}({len(batch)} texts)"
        try:
            matrix = getattr(embedder, method)(batch)
        except Exception as error:
            _fail("embedder.matrix" if batch else "embedder.empty", f"{call} raised", error)
        rule = "embedder.matrix" if batch else "embedder.empty"
        if method != "embed":
            rule = "embedder.queries"
        if not isinstance(matrix, np.ndarray):
            _fail(rule, f"{call} returned {type(matrix).__name__}")
        if matrix.dtype != np.float32:
            _fail(rule, f"{call} returned dtype {matrix.dtype}")
        if matrix.shape != (len(batch), dimensions):
            _fail(rule, f"{call} returned shape {matrix.shape}, not {(len(batch), dimensions)}")
        return matrix

    with found.step():
        embed([])
    with found.step():  # the rules below all read the matrix of every probe text
        matrix = embed(texts)
        with found.step():
            bad = [texts[row] for row in np.flatnonzero(~np.isfinite(matrix).all(axis=1))]
            if bad:
                _fail("embedder.finite", f"the vector of {_short(bad[0])} has NaN or infinity")
        with found.step():
            again = embed(texts)
            if not np.array_equal(matrix.view(np.uint32), again.view(np.uint32)):
                row = int(np.flatnonzero((matrix != again).any(axis=1))[0])
                _fail("embedder.deterministic", f"{_short(texts[row])} gave different bits twice")
        for row, text in enumerate(texts):
            with found.step():
                alone = embed([text])[0]
                if not np.allclose(alone, matrix[row], rtol=1e-5, atol=1e-5):
                    _fail(
                        "embedder.independent",
                        f"{_short(text)} embedded alone differs from the same text in a batch "
                        f"of {len(texts)} by up to {float(np.abs(alone - matrix[row]).max()):.3g}",
                    )
        with found.step():
            if similarity == "dot_product":
                norms = np.linalg.norm(matrix, axis=1)
                off = np.flatnonzero((norms > 0) & (np.abs(norms - 1) > 1e-3))
                if len(off):
                    _fail(
                        "embedder.unit", f"the vector of {_short(texts[off[0]])} is not unit length"
                    )
        with found.step():
            if len({matrix[row].tobytes() for row in range(len(texts))}) < 2:
                _fail("embedder.distinct", f"all {len(texts)} probe texts got the same vector")
    with found.step():
        if callable(getattr(embedder, "embed_queries", None)):
            embed(texts, "embed_queries")
    found.raise_any()
    return embedder


# --- shared ----------------------------------------------------------------------------------


def _load_entry_point(rule: str, group_constant: str, name: str) -> Any:
    from retrievalkit.plugins import registry as plugins

    group = getattr(plugins, group_constant)
    try:
        return plugins.load(plugins.find_one(group, name))
    except Exception as error:
        _fail(rule, f"entry point '{name}' in {group}", error)


def _name_of(obj: Any) -> str:
    return str(getattr(obj, "__qualname__", None) or type(obj).__name__)


def deliver_stop_signals() -> None:
    """Let the processes a test suite starts receive Ctrl-C (SIGINT) and hang-up (SIGHUP).

    A job started in the background (``cmd &`` in a script, ``nohup``) ignores them, and
    every process it starts inherits that, so a test that stops a run with Ctrl-C would
    wait for a run that never stops. Call it from a ``conftest.py``: where either signal
    is ignored, Ctrl-C raises `KeyboardInterrupt` again and a hang-up ends the process,
    as at a terminal; a signal with a handler is left alone.
    """
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    hangup = getattr(signal, "SIGHUP", None)  # not on Windows
    if hangup is not None and signal.getsignal(hangup) is signal.SIG_IGN:
        signal.signal(hangup, signal.SIG_DFL)
