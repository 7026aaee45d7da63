"""A staged run under --concurrency: the stages asked at once, the run the same as one by one."""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
from collections.abc import Sequence
from pathlib import Path

import retrievalkit as rk

DEMO = Path(rk.__file__).parent / "demo"
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


class _Staged:
    """Two stages per question (the second a reordering of the first); counts the
    threads that asked at once, so the test can see the questions overlap."""

    identifier = "staged"

    def __init__(self, wait: float) -> None:
        self.inside = 0
        self.most = 0
        self.lock = threading.Lock()
        self.gate = threading.Barrier(2, timeout=wait)

    def retrieve(self, question: str, limit: int) -> list[str]:
        return list(self.retrieve_stages(question, limit)["second"])

    def retrieve_stages(self, question: str, limit: int) -> dict[str, Sequence[str]]:
        with self.lock:
            self.inside += 1
            self.most = max(self.most, self.inside)
        try:
            if self.most < 2:
                # The first two questions meet here when asked at once; asked one by
                # one, the wait ends by its timeout and the run goes on unchanged.
                with contextlib.suppress(threading.BrokenBarrierError):
                    self.gate.wait()
            words = question.lower().split()
            first = [f"doc-{len(word) % 7}" for word in words][:limit]
            first = list(dict.fromkeys(first))
            if "passport" in question.lower():
                raise LookupError("no passport index")
            return {"first": first, "second": list(reversed(first))}
        finally:
            with self.lock:
                self.inside -= 1


def test_concurrency_asks_stages_at_once_with_the_same_outcomes() -> None:
    golden = rk.load_set(DEMO / "golden.jsonl")
    common = {"resamples": 200, "git_commit": None, "now": NOW, "max_error_rate": None}
    alone = _Staged(wait=0.1)
    one = rk.evaluate(golden, alone, concurrency=1, **common)
    together = _Staged(wait=30)
    four = rk.evaluate(golden, together, concurrency=4, **common)
    assert together.most >= 2
    a, b = one.record, four.record
    assert a.stages is not None
    assert a.stages == b.stages
    assert [o.ranking for o in a.outcomes] == [o.ranking for o in b.outcomes]
    assert [o.error for o in a.outcomes] == [o.error for o in b.outcomes]
    assert a.metrics == b.metrics
