"""User text reaches a terminal as text: never markup, never a control sequence.

The renderers return rich renderables built from the report object; these tests render
them through ``Console(record=True)`` with generated hostile strings in every field a
golden set, a store or a plugin controls, and check what a terminal would receive.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from child_env import child_environment
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from retrievalkit.errors import InputError
from retrievalkit.formats.golden_sets import load_jsonl
from retrievalkit.model.records import ResultRecord
from retrievalkit.model.values import Manifest, MetricValue, QuestionOutcome
from retrievalkit.pipeline.gating.gate import MetricComparison, Verdict
from retrievalkit.render.markdown import render_markdown
from retrievalkit.render.summary import EvalReport
from retrievalkit.render.table import eval_renderable
from retrievalkit.render.terminal import UNSAFE, printable

EXAMPLES = int(os.environ.get("RETRIEVALKIT_FUZZ_EXAMPLES", "60"))

#: Markup, escape sequences, bidirectional overrides, lone surrogates and plain letters.
PIECES = [
    "[bold]", "[/bold]", "[/]", "[red]", "[link=https://x.test]", ":smile:", "\\", "[",
    "\x1b[2J", "\x1b]52;c;aGk=\x07", "\x9b31m", "\x07", "\r", "\n", "\t", "\x00", "\x7f",
    "\u202e", "\u2066", "\u200b", "\u2028", "\ud800", "é", "漢", "|", "`", "<b>", "q",
]  # fmt: skip
hostile = st.lists(st.sampled_from(PIECES) | st.text(max_size=3), min_size=1, max_size=6).map(
    "".join
)
SCORES = {"hit@1": 1.0, "hit@3": 1.0, "rr": 1.0, "ndcg@10": 1.0}


def _value(mean: float = 0.5) -> MetricValue:
    return MetricValue(mean=mean, ci=(0.25, 0.75), n=2)


def _record(texts: list[str], *, confidence: float = 0.95) -> ResultRecord:
    """A record whose every user-controlled string is one of ``texts``."""
    qid, hard, error, model, set_name, label, meta_field = (texts * 7)[:7]
    outcomes = (
        QuestionOutcome(qid, (label, "d2"), SCORES, 1.0, hard_class=hard, judgments={label: 1}),
        QuestionOutcome(qid + "-2", (), dict.fromkeys(SCORES, 0.0), 1.0, error=error),
    )
    metrics = {name: _value() for name in SCORES}
    manifest = Manifest(
        retrievalkit_version="0",
        set_name=set_name,
        set_hash="0" * 64,
        retriever=model,
        plugin=model,
        retriever_options={},
        retriever_options_hash="0" * 16,
        created_at="2026-01-01T00:00:00Z",
        ks=(1, 3, 10),
        overfetch=3,
        confidence=confidence,
        resamples=100,
        seed=1,
    )
    return ResultRecord(
        run_id="20260101T000000Z-00000000",
        set=set_name,
        model=model,
        grader="retrieval_hit_rate",
        pass_rate=0.5,
        mean_score=0.5,
        metrics=metrics,
        slices={"hard_class": {hard: metrics}, meta_field: {label: metrics}},
        outcomes=outcomes,
        manifest=manifest,
    )


def _verdict(regressed: bool) -> Verdict:
    item = MetricComparison(
        "hit@1", 0.9, 0.5, -0.4, (-0.6, -0.2), 0.01, threshold=0.0, regressed=regressed, n=2
    )
    failures = (item,) if regressed else ()
    return Verdict("20250101T000000Z-11111111", regressed, failures, (item,), 2, True)


def _shown(report: EvalReport) -> str:
    console = Console(record=True, width=4000, file=io.StringIO(), force_terminal=True)
    console.print(eval_renderable(report))
    return console.export_text()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(hostile, min_size=7, max_size=7))
def test_every_user_string_is_shown_as_escaped_text(texts: list[str]) -> None:
    report = EvalReport(_record(texts), (), _verdict(True), "jsonl:///runs.jsonl")
    shown = _shown(report)
    assert not UNSAFE.search(shown.replace("\n", "")), repr(shown)
    for text in texts:
        # The whole string, brackets and all: nothing was taken as markup.
        assert printable(text) in shown, (text, shown)
    markdown = render_markdown(report)
    assert not UNSAFE.search(markdown.replace("\n", ""))
    section = markdown.split("\n## Questions\n", 1)[1].split("\n## ", 1)[0]
    rows = [row for row in section.splitlines() if row.startswith("| ")]
    # One line per table row (header, two questions): a newline in a field cannot
    # start a row of its own.
    assert len(rows) == 3, section


def test_the_interval_label_comes_from_the_record() -> None:
    """'95%' was printed above 80% intervals; the level is the record's own."""
    report = EvalReport(_record(["q1"], confidence=0.8), (), _verdict(False), None)
    shown = _shown(report)
    markdown = render_markdown(report)
    assert "Metrics (mean, 80% CI" in shown and "| 80% CI |" in markdown
    for text in (shown, markdown):
        assert "80% CI [-0.600, -0.200]" in text
        assert "95%" not in text


SET_WITH_BRACKETS = [
    {"id": "q[bold]1[/bold]", "question": "How do I get a library card?", "expected": ["doc-card"],
     "hard_class": "[red]near", "meta": {"topic": "[link=https://x.test]cards"}},
    {"id": "q[/]2", "question": "renew [/] a book", "expected": []},
]  # fmt: skip


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = child_environment()
    env.update(NO_COLOR="1", COLUMNS="300")
    return subprocess.run(
        [sys.executable, "-m", "retrievalkit", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_brackets_in_ids_print_in_eval_and_show_and_the_label_follows_confidence(
    tmp_path: Path,
) -> None:
    (tmp_path / "s.jsonl").write_text(
        "".join(json.dumps(row) + "\n" for row in SET_WITH_BRACKETS), encoding="utf-8"
    )
    args = ("eval", "--set", "s.jsonl", "--retriever", "bm25-demo", "--store", "jsonl:///r.jsonl")
    first = _cli(*args, "--confidence", "0.8", "--slice", "topic", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    for text in ("q[bold]1[/bold]", "q[/]2", "[red]near", "[link=https://x.test]cards"):
        assert text in first.stdout
    assert "Metrics (mean, 80% CI" in first.stdout and "95%" not in first.stdout
    second = _cli(*args, "--confidence", "0.8", "--format", "markdown", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert "80% CI [" in second.stdout and "95%" not in second.stdout
    run_id = json.loads((tmp_path / "r.jsonl").read_text(encoding="utf-8").splitlines()[0])
    shown = _cli("show", run_id["run_id"], "--store", "jsonl:///r.jsonl", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "q[bold]1[/bold]" in shown.stdout and "Metrics (mean, 80% CI" in shown.stdout


CONTROLS = ["\x1b", "\x07", "\x00", "\x9b", "\x7f", "\u202e", "\u2067", "\u200b", "\ufeff"]
FIELDS = ["question", "gist", "hard_class", "meta-key", "meta-value"]


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    field=st.sampled_from(FIELDS),
    control=st.sampled_from(CONTROLS),
    before=st.text(st.characters(categories=("L", "N")), max_size=5),
    line=st.integers(1, 4),
)
def test_control_characters_are_refused_at_load_naming_file_line_and_field(
    tmp_path_factory: pytest.TempPathFactory, field: str, control: str, before: str, line: int
) -> None:
    value = f"{before}{control}x"
    row: dict[str, object] = {"id": "qx", "question": "what?", "expected": []}
    if field == "meta-key":
        row["meta"] = {value: "v"}
    elif field == "meta-value":
        row["meta"] = {"topic": value}
    else:
        row[field] = value
    good = [json.dumps({"id": f"g{n}", "question": "ok?", "expected": []}) for n in range(1, line)]
    path = tmp_path_factory.mktemp("set") / "s.jsonl"
    path.write_text("\n".join([*good, json.dumps(row)]) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_jsonl(path)
    message = str(caught.value)
    expected_field = {"meta-key": "meta", "meta-value": "meta.topic"}.get(field, field)
    assert f"{path}, line {line}, field '{expected_field}'" in message, message
    assert f"U+{ord(control):04X}" in message


def test_tabs_and_line_breaks_in_free_text_are_still_accepted(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    row = {"id": "q1", "question": "two\tcolumns\nand\u2028lines", "expected": [], "gist": "a\nb"}
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    assert load_jsonl(path).questions[0].question == row["question"]
