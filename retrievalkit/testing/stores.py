"""The result store contract, on a store opened from its URL (`check_store`)."""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Callable
from typing import Any

import attrs

from retrievalkit.errors import StoreError
from retrievalkit.model.records import GRADER, ResultRecord
from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet, QuestionForm
from retrievalkit.testing.embedders import ScriptedRetriever
from retrievalkit.testing.rules import Violations, fail


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
            fail("store.whole", f"save() of run {record.run_id} raised", error)
    found = Violations()
    first = records[0]
    model_a = [record for record in records if record.model == "model-a"]
    with found.step():
        try:
            got = store.get(first.run_id)
        except Exception as error:
            fail("store.whole", f"get({first.run_id!r}) raised", error)
        _same_run(got, first, f"get({first.run_id!r})")
    with found.step():
        _check_history(store, set_name, model_a, found)
    with found.step():
        other_grader = _call(store, "runs", "store.key", set_name, "model-a", "another_grader")
        if other_grader:
            fail("store.key", f"runs() for grader 'another_grader' gave {len(other_grader)} runs")
    with found.step():
        ours = {record.run_id for record in records}
        everything = [run for run in _call(store, "all_runs", "store.whole") if run.run_id in ours]
        newest_first = [run.run_id for run in reversed(records)]
        if sorted(run.run_id for run in everything) != sorted(newest_first):
            fail(
                "store.whole",
                f"all_runs() holds {len(everything)} of the {len(records)} runs saved",
            )
        if [run.run_id for run in everything] != newest_first:
            fail(
                "store.newest-first",
                f"all_runs() gave {[run.run_id for run in everything]}, newest first is "
                f"{newest_first}",
            )
    with found.step():
        missing = f"no-such-run-{secrets.token_hex(4)}"
        try:
            absent = store.get(missing)
        except Exception as error:
            fail("store.missing", f"get({missing!r}) raised", error)
        if absent is not None:
            fail("store.missing", f"get({missing!r}) returned {type(absent).__name__}")
    with found.step():
        _check_duplicate(store, first)
    with found.step():
        reopened = _open(url, factory, rule="store.reopen")
        try:
            seen = {run.run_id for run in reopened.runs(set_name, "model-a", GRADER)}
        except Exception as error:
            fail("store.reopen", "runs() of the reopened store raised", error)
        if seen != {run.run_id for run in model_a}:
            fail("store.reopen", f"the reopened store has {len(seen)} of {len(model_a)} runs")
    with found.step():
        _check_pins_and_deletion(store, records, found)
    found.raise_any()
    return store


def _check_history(
    store: Any, set_name: str, model_a: list[ResultRecord], found: Violations
) -> None:
    history = _call(store, "runs", "store.key", set_name, "model-a", GRADER)
    if {run.run_id for run in history} != {run.run_id for run in model_a}:
        fail(
            "store.key",
            f"runs({set_name!r}, 'model-a') gave runs {[run.run_id for run in history]}, "
            f"expected {[run.run_id for run in model_a]}",
        )
    expected_order = [run.run_id for run in reversed(model_a)]
    with found.step():
        if [run.run_id for run in history] != expected_order:
            fail(
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
        fail("store.duplicate", f"saving run {first.run_id} a second time", error)
    else:
        fail("store.duplicate", f"saving run {first.run_id} a second time did not fail")
    copies = [
        run for run in _call(store, "all_runs", "store.duplicate") if run.run_id == first.run_id
    ]
    if len(copies) != 1:
        fail("store.duplicate", f"run {first.run_id} is stored {len(copies)} times")


def _check_pins_and_deletion(store: Any, records: list[ResultRecord], found: Violations) -> None:
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
        fail(rule, f"{call} raised", error)


def _check_pins(
    store: Any, older: ResultRecord, newer: ResultRecord, key: tuple[str, str, str]
) -> None:
    rule = "store.pin"
    if _pin_call(rule, f"pinned{key!r}", lambda: store.pinned(*key)) is not None:
        fail(rule, f"pinned{key!r} names a run before any pin")
    replaced = _pin_call(rule, f"pin({older.run_id})", lambda: store.pin(older))
    if replaced is not None:
        fail(rule, f"the first pin() of the key returned {replaced!r}, not None")
    replaced = _pin_call(rule, f"pin({newer.run_id})", lambda: store.pin(newer))
    if replaced != older.run_id:
        fail(rule, f"pin({newer.run_id}) returned {replaced!r}, not the replaced {older.run_id}")
    named = _pin_call(rule, f"pinned{key!r}", lambda: store.pinned(*key))
    if named != newer.run_id:
        fail(rule, f"pinned{key!r} is {named!r} after pinning {newer.run_id}")
    unpinned = _pin_call(rule, f"unpin{key!r}", lambda: store.unpin(*key))
    if unpinned != newer.run_id:
        fail(rule, f"unpin{key!r} returned {unpinned!r}, not {newer.run_id}")
    if _pin_call(rule, f"pinned{key!r}", lambda: store.pinned(*key)) is not None:
        fail(rule, f"pinned{key!r} still names a run after unpin()")
    stranger = attrs.evolve(newer, run_id=f"not-stored-{secrets.token_hex(4)}")
    try:
        store.pin(stranger)
    except StoreError:
        pass
    except Exception as error:
        fail(rule, f"pin() of run {stranger.run_id}, which the store does not hold", error)
    else:
        store.unpin(*key)
        fail(rule, f"pin() of run {stranger.run_id}, which the store does not hold, succeeded")


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
            fail(rule, f"delete() of the pinned run {last.run_id}", error)
        else:
            fail(rule, f"delete() of the pinned run {last.run_id} succeeded")
        finally:
            store.unpin(*key)
        if store.get(doomed.run_id) is None:
            fail(rule, "a refused delete() still deleted the unpinned run asked for with it")
    count = _pin_call(rule, "delete(...)", lambda: store.delete([doomed.run_id, "no-such-run"]))
    if count != 1:
        fail(rule, f"delete() of one stored run and one unknown id returned {count!r}, not 1")
    if store.get(doomed.run_id) is not None:
        fail(rule, f"run {doomed.run_id} is still there after delete()")


def _open(url: str, factory: Callable[[str], Any] | None, rule: str = "store.discovery") -> Any:
    from retrievalkit.stores import ResultStore, open_store

    try:
        store = factory(url) if factory is not None else open_store(url)
    except Exception as error:
        fail(rule, f"opening {url!r} raised", error)
    if not isinstance(store, ResultStore) or not isinstance(getattr(store, "url", None), str):
        fail(
            "store.protocol",
            f"{type(store).__name__} lacks a string url or one of save, runs, get, all_runs",
        )
    return store


def _call(store: Any, method: str, rule: str, *args: str) -> list[ResultRecord]:
    try:
        result = getattr(store, method)(*args)
    except Exception as error:
        fail(rule, f"{method}{args!r} raised", error)
    if not isinstance(result, list) or not all(isinstance(r, ResultRecord) for r in result):
        fail(rule, f"{method}{args!r} returned {type(result).__name__}, not a list of records")
    return result


def _same_run(got: Any, saved: ResultRecord, call: str) -> None:
    from retrievalkit.formats.convert import to_json

    if not isinstance(got, ResultRecord):
        fail("store.whole", f"{call} returned {type(got).__name__}, not the saved record")
    if to_json(got) != to_json(saved):
        differing = [
            field
            for field in ("run_id", "set", "model", "metrics", "slices", "outcomes", "manifest")
            if to_json(getattr(got, field)) != to_json(getattr(saved, field))
        ]
        fail(
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
        ScriptedRetriever(),
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
