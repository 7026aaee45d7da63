"""Choose the run a candidate is compared with: ``--baseline``, the key's pin, or the newest run.

The order is the one the design fixes: an explicit ``--baseline RUN_ID`` wins; else the
run pinned with ``retrievalkit baseline pin`` for the candidate's (set, model, grader)
key; else the newest earlier run of that key. A pin that names a run the store no
longer holds is an error, never a silent fall-back: a CI gate must not quietly start
comparing with something else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from retrievalkit.errors import InputError, StoreError
from retrievalkit.metrics.definitions import TREND
from retrievalkit.model.records import GRADER, ResultRecord
from retrievalkit.stores import ResultStore, pinned_run_id

EXPLICIT = "--baseline"
PINNED = "pinned"
NEWEST = "newest earlier run"


@attrs.frozen
class BaselineChoice:
    """The chosen baseline (None for the first run of a key) and how it was chosen."""

    record: ResultRecord | None
    kind: str
    """``--baseline``, ``pinned``, ``newest earlier run``, or ``none``."""
    note: str | None = None


def choose_baseline(
    store: ResultStore,
    set_name: str,
    model: str,
    *,
    explicit: str | None = None,
    grader: str = GRADER,
    exclude: str | None = None,
    fetch: Callable[[str], ResultRecord | None] | None = None,
    runs: Callable[[], Sequence[ResultRecord]] | None = None,
) -> BaselineChoice:
    """The baseline of a (set, model, grader) key in ``store``.

    ``exclude`` is the candidate's own run id: once saved, it is not its own baseline, and
    the newest earlier run is the newest one stored before it. ``fetch`` (a run by id) and
    ``runs`` (the key's runs, newest first) read through a cache of the caller's, as
    `serve` keeps one; by default they read ``store``.
    """
    get = store.get if fetch is None else fetch
    if explicit:
        record = get(explicit)
        if record is None:
            raise InputError(
                f"no run {explicit} in {store.url}",
                field="--baseline",
                hint="retrievalkit history lists the stored runs",
            )
        if record.set != set_name:
            # Question by question comparison needs the same questions: another set's run
            # contradicts --set.
            raise InputError(
                f"run {explicit} is a run of the set '{record.set}', not of '{set_name}'",
                field="--baseline",
                hint=f"name a run of '{set_name}' (retrievalkit history --set {set_name} ...)",
            )
        return BaselineChoice(record, EXPLICIT)
    pinned = pinned_run_id(store, set_name, model, grader)
    if pinned is not None and pinned != exclude:
        record = get(pinned)
        if record is None:
            raise StoreError(
                f"the pinned baseline {pinned} of {set_name} × {model} is not in {store.url}; "
                f"pin another run (retrievalkit baseline pin RUN_ID) or unpin it "
                f"(retrievalkit baseline unpin --set {set_name} --retriever {model})"
            )
        return BaselineChoice(record, PINNED)
    stored = list(runs() if runs is not None else store.runs(set_name, model, grader))
    ids = [run.run_id for run in stored]
    # Newest first: the runs stored before the candidate, when it is stored itself.
    earlier = stored[ids.index(exclude) + 1 :] if exclude in ids else stored
    if earlier:
        return BaselineChoice(earlier[0], NEWEST)
    return BaselineChoice(
        None,
        "none",
        f"no baseline: this is the first run of {set_name} × {model} in {store.url}",
    )


@attrs.frozen
class RunBrief:
    """A run in one line: id, date, the record's two rates and rr, and its commit."""

    run_id: str
    created_at: str
    metrics: dict[str, float | None]
    questions: int
    git_commit: str | None

    @classmethod
    def of(cls, record: ResultRecord) -> RunBrief:
        return cls(
            run_id=record.run_id,
            created_at=record.manifest.created_at,
            metrics={
                name: record.metrics[name].mean if name in record.metrics else None
                for name in TREND
            },
            questions=len(record.outcomes),
            git_commit=record.manifest.git_commit,
        )


@attrs.frozen
class BaselineStatus:
    """What ``retrievalkit baseline pin|unpin|show`` did and what eval will compare with now."""

    action: str
    set_name: str
    retriever: str
    store: str
    pinned: RunBrief | None
    """The pinned run after the action."""
    previous: str | None
    """The run id the action replaced (pin) or removed (unpin)."""
    next_baseline: RunBrief | None
    """The run the next eval of this key compares with: the pin, else the newest run."""
    next_baseline_kind: str


def baseline_status(
    store: ResultStore, action: str, set_name: str, model: str, previous: str | None = None
) -> BaselineStatus:
    """The key's pin and the baseline the next ``eval`` would use, after ``action``."""
    choice = choose_baseline(store, set_name, model)
    pinned = choice.record if choice.kind == PINNED else None
    return BaselineStatus(
        action=action,
        set_name=set_name,
        retriever=model,
        store=store.url,
        pinned=None if pinned is None else RunBrief.of(pinned),
        previous=previous,
        next_baseline=None if choice.record is None else RunBrief.of(choice.record),
        next_baseline_kind=choice.kind,
    )
