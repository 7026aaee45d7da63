"""The HTML report of a large run lists only the most telling questions, and says so.

A 100,000-question page was about 100 MB, too big for a browser to sort or filter; past
`TABLE_ROWS` questions the table keeps the errored questions, the largest changes and
the misses, while every metric, chart and count still covers all the questions.
"""

from __future__ import annotations

import re

import pytest
from run_records import run_record

from retrievalkit.model.values import QuestionOutcome, ResultRecord
from retrievalkit.render import html_report
from retrievalkit.render.run_report import build_run_report

COUNT = 60
SCORES = ("hit@1", "hit@3", "rr")


def _record(run_id: str, changed: dict[int, float]) -> ResultRecord:
    """Question i finds its answer at rank 1 when i % 3 else never; ``changed`` overrides
    the rank-1 answer with an ``rr`` of its own; q7 errors."""
    outcomes = []
    for index in range(COUNT):
        judgments = {f"d{index}": 1}
        if index == 7:
            scores = dict.fromkeys(SCORES, 0.0)
            outcomes.append(
                QuestionOutcome("q7", (), scores, 1.0, judgments=judgments, error="timed out")
            )
            continue
        rr = changed.get(index, 1.0 if index % 3 else 0.0)
        rank = None if rr == 0.0 else round(1 / rr)
        ranking = [f"x{index}-{n}" for n in range(4)]
        if rank is not None:
            ranking[rank - 1] = f"d{index}"
        scores = {"hit@1": float(rank == 1), "hit@3": float(rank is not None), "rr": rr}
        outcomes.append(
            QuestionOutcome(f"q{index}", tuple(ranking), scores, 2.0, judgments=judgments)
        )
    return run_record(
        outcomes, SCORES, run_id=run_id, created_at=f"2026-01-01T00:00:0{run_id[-1]}Z"
    )


def _listed_ids(page: str) -> list[str]:
    table = page[page.index('id="questions-table"') :]
    return re.findall(r'<tr class="[^"]*"><td data-v="([^"]*)">', table)


def test_a_large_run_lists_the_errors_changes_and_misses_and_says_what_is_left_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(html_report, "TABLE_ROWS", 30)
    baseline = _record("20260101T000000Z-00000001", {})
    # four questions move: three from rank 1 to 2 or 4, and a miss (q12) now found at 2
    moves = {10: 0.5, 11: 0.25, 12: 0.5, 13: 0.25}
    record = _record("20260101T000000Z-00000002", moves)
    report = build_run_report(record, store="memory:", history=[record], baseline=baseline)
    page = html_report.render_html_report(report)

    listed = _listed_ids(page)
    misses = [f"q{i}" for i in range(COUNT) if i % 3 == 0 and i not in moves and i != 7]
    assert len(listed) == 30
    assert listed == sorted(listed, key=lambda q: int(q[1:]))  # in the run's order
    assert {"q7", *(f"q{i}" for i in moves)} <= set(listed)
    assert set(misses) <= set(listed)  # 19 misses: they fit after the errors and changes
    assert f"This run has {COUNT} questions; the table lists 30 of them" in page
    assert f"leaves out the other {COUNT - 30}" in page
    assert '<span id="question-count">30 of 30 shown</span>' in page
    # the counts above the table still cover every question
    assert f"{COUNT} questions, 1 errored" in page
    assert f"over {COUNT} answerable questions" in page
    assert f"1 of {COUNT} questions errored" in page


def test_when_only_a_few_fit_the_largest_changes_come_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(html_report, "TABLE_ROWS", 3)
    baseline = _record("20260101T000000Z-00000001", {})
    record = _record("20260101T000000Z-00000002", {10: 0.5, 11: 0.25, 13: 0.25, 20: 0.5})
    report = build_run_report(record, store="memory:", history=[record], baseline=baseline)
    page = html_report.render_html_report(report)
    # q7 errored; then -0.75 (q11, q13) outranks -0.5 (q10, q20)
    assert _listed_ids(page) == ["q7", "q11", "q13"]
    assert "leaves out the other 57" in page


def test_a_run_within_the_limit_lists_every_question_without_a_note() -> None:
    record = _record("20260101T000000Z-00000002", {})
    page = html_report.render_html_report(
        build_run_report(record, store="memory:", history=[record])
    )
    assert _listed_ids(page) == [f"q{i}" for i in range(COUNT)]
    assert "questions-left-out" not in page


def test_many_changes_are_drawn_as_two_filled_staircases_with_the_same_counts() -> None:
    from retrievalkit.render import charts

    worse = [(f"w{i}", -1.0 if i % 2 else -0.5) for i in range(700)]
    better = [(f"b{i}", 0.5) for i in range(600)]
    same = [(f"s{i}", 0.0) for i in range(50)]
    svg = charts.difference_chart([*worse, *better, *same], "rr", "base", "new")
    assert "600 better, 700 worse, 50 unchanged (not drawn)" in svg
    # one filled path per sign, in the colours of the bars, rather than 1,300 bars
    assert svg.count(charts.WORSE_COLOUR) == 1
    assert svg.count(charts.BETTER_COLOUR) == 1
    assert len(svg) < 60_000
