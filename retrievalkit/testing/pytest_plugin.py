"""A pytest plugin: gate a retriever on a golden set inside your own test suite.

Installed with retrievalkit (through the `pytest11` entry point), it gives every test
the `retrieval_gate` fixture; `assert_retrieval` is the same check as a plain function:

```python
def test_search_did_not_get_worse(retrieval_gate):
    run = retrieval_gate(
        "golden/support.jsonl",
        my_search,  # an object with retrieve(question, limit), or a configured name
        minimums={"hit@3": 0.7},
        store="jsonl:///baselines/runs.jsonl",
        thresholds={"hit@1": 0.02, "hit@3": 0.02},
    )
    assert run.errored == 0
```

A floor in `minimums` that a metric's mean falls below, or a regression against the
baseline in `store` (pinned, else the newest earlier run of the same set and retriever),
fails the test with the same verdict `retrievalkit eval` prints. Nothing is saved
unless asked (`save=True`, or `pytest --retrievalkit-save`), and a run that fails is
never saved, so it can never become a baseline.

After the tests, the terminal summary lists each gated run with its headline metrics.
The plugin imports nothing heavy until a test uses it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from retrievalkit.api import Run
    from retrievalkit.pipeline.gating.thresholds import Thresholds
    from retrievalkit.stores import ResultStore

#: The metrics the terminal summary shows for each gated run.
SUMMARY_METRICS = ("hit@1", "hit@3", "rr", "ndcg@10")


class RetrievalGateFailed(AssertionError):
    """A gated run fell below a floor or regressed against its baseline; `run` is the run."""

    def __init__(self, message: str, run: Run) -> None:
        super().__init__(message)
        self.run = run


def assert_retrieval(
    set: Any,
    retriever: Any,
    *,
    minimums: Mapping[str, float] | None = None,
    store: ResultStore | str | None = None,
    thresholds: Thresholds | Mapping[str, float] | None = None,
    baseline: str | None = None,
    save: bool = False,
    **evaluate_options: Any,
) -> Run:
    """Evaluate `retriever` on `set` and raise `RetrievalGateFailed` if the run is not good
    enough; return the run otherwise.

    - `set`, `retriever` and `evaluate_options` (`k`, `options`, `name`, `config`,
      `concurrency`, ...) are those of `retrievalkit.evaluate`.
    - `minimums`: metric name to the lowest acceptable mean (`{"hit@3": 0.7}`); a metric
      undefined for every question fails its floor.
    - `store`: a store or its URL; with it, the run is gated against its baseline there
      with `thresholds` and `baseline` as in `retrievalkit.gate`.
    - `save`: save the run to `store` when it passes (never when it fails).
    """
    from retrievalkit.api import evaluate, gate, open_store
    from retrievalkit.render.text import number, verdict_lines

    run = evaluate(set, retriever, **evaluate_options)
    problems: list[str] = []
    for metric, floor in (minimums or {}).items():
        value = run.metrics.get(metric)
        if value is None:
            known = ", ".join(run.metrics)
            raise KeyError(f"minimums: the run has no metric '{metric}' (it has: {known})")
        if value.mean is None or value.mean < floor:
            problems.append(
                f"{metric} = {number(value.mean)} is below its minimum {floor:g} "
                f"(over {value.n} questions)"
            )
    opened = open_store(store) if isinstance(store, str) else store
    if opened is not None:
        verdict = gate(run, opened, thresholds, baseline=baseline)
        if verdict.regressed:
            confidence = run.record.manifest.confidence
            problems.extend(verdict_lines(verdict, verdict.note, confidence=confidence))
    _GATED.append((run, not problems))
    if problems:
        where = f"{run.record.set} × {run.retriever}"
        raise RetrievalGateFailed(
            f"retrieval gate failed for {where}:\n" + "\n".join(problems), run
        )
    if save:
        if opened is None:
            raise ValueError("save=True needs a store to save to")
        opened.save(run.record)
    return run


#: Every run gated in this session, with whether it passed, for the terminal summary.
_GATED: list[tuple[Run, bool]] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("retrievalkit", "retrieval gates (retrievalkit)")
    group.addoption(
        "--retrievalkit-store",
        metavar="URL",
        default=os.environ.get("RETRIEVALKIT_STORE"),
        help="store every retrieval_gate compares with when the test names none "
        "(also $RETRIEVALKIT_STORE)",
    )
    group.addoption(
        "--retrievalkit-save",
        action="store_true",
        help="save each run that passes its gate to its store (to move the baseline)",
    )


@pytest.fixture
def retrieval_gate(request: pytest.FixtureRequest) -> Iterator[Callable[..., Run]]:
    """`assert_retrieval`, with the store and saving of the command-line options as defaults."""
    default_store = request.config.getoption("--retrievalkit-store")
    save_all = bool(request.config.getoption("--retrievalkit-save"))

    def check(set: Any, retriever: Any, **options: Any) -> Run:
        __tracebackhide__ = True
        options.setdefault("store", default_store)
        if save_all and options["store"] is not None:
            options.setdefault("save", True)
        return assert_retrieval(set, retriever, **options)

    yield check


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _GATED:
        return
    from retrievalkit.render.text import number

    terminalreporter.section("retrieval gates")
    for run, passed in _GATED:
        metrics = ", ".join(
            f"{name} {number(run.metrics[name].mean)}"
            for name in SUMMARY_METRICS
            if name in run.metrics
        )
        verdict = "passed" if passed else "FAILED"
        terminalreporter.write_line(
            f"{run.record.set} × {run.retriever}: {verdict} ({len(run.outcomes)} questions; "
            f"{metrics})"
        )
