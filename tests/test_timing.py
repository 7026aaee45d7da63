"""Timing noise: ``--repeat`` (median latency, first ranking), ``--warmup`` (questions
asked and discarded), the manifest's machine record, and the gate's warning when two
runs' latencies were measured on different machines or under different load.

Nothing here asserts a duration: the retrievers count their calls and measure their own
work, and what is asserted follows from those counts, or from an inequality that holds
whatever the machine's speed (the evaluator's clock encloses the retriever's).
"""

from __future__ import annotations

import json
import os
import platform
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

import retrievalkit as rk
from retrievalkit.errors import InputError
from retrievalkit.formats.config import parse_config
from retrievalkit.formats.convert import converter, to_json
from retrievalkit.metrics.scoring import ScoringOptions, score_run
from retrievalkit.model.records import ResultRecord
from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet, Machine
from retrievalkit.pipeline.engine.evaluator import (
    Retrieval,
    Retrievals,
    ask_in_batches,
    warmup_questions,
    with_median_latency,
)
from retrievalkit.pipeline.engine.machine import cpu_model, load_average, machine_at_start
from retrievalkit.pipeline.engine.record import build_record
from retrievalkit.pipeline.gating.gate import compare_runs
from retrievalkit.pipeline.gating.latency import machine_warning
from retrievalkit.render.summary import EvalReport, summary, to_json_text
from retrievalkit.render.text import verdict_lines

QUESTIONS = [
    GoldenQuestion(id=f"q{i}", question=f"question {i}", expected=[f"d{i}"]) for i in range(5)
]
GOLDEN = GoldenQuestionSet(name="timed", questions=QUESTIONS)
COMMON: dict[str, Any] = {"resamples": 10, "git_commit": None}


class Counting:
    """Answers ``d<i>`` to question i on its first call and a wrong id on every later one,
    counting the calls of each question in order; ``work`` calls of a question spin a
    counted loop whose duration the retriever measures itself."""

    identifier = "counting"

    def __init__(self, work: int = 0) -> None:
        self.calls: list[str] = []
        self.took: dict[str, list[float]] = {}
        self.work = work
        self.lock = threading.Lock()

    def retrieve(self, question: str, limit: int) -> list[str]:
        began = time.perf_counter()
        with self.lock:
            seen = self.calls.count(question)
            self.calls.append(question)
        total = 0
        for step in range(self.work * (3 - seen % 3)):  # 3, 2, 1 times the work
            total += step
        number = question.rpartition(" ")[2]
        answer = [f"d{number}"] if seen == 0 else ["wrong", f"w{total % 7}"]
        with self.lock:
            self.took.setdefault(question, []).append(time.perf_counter() - began)
        return answer


class CountingMany(Counting):
    def retrieve_many(self, questions: Sequence[str], limit: int) -> list[list[str]]:
        return [self.retrieve(question, limit) for question in questions]


def test_median_latency_keeps_the_first_answers() -> None:
    """Three asks of two questions: latencies (5, 1, 9) and (2, 8, 4) have medians 5
    and 4; the rankings, counts and errors are the first ask's."""
    first = Retrievals([("a",), ()], [5.0, 2.0], [1, 0], {1: "boom"})
    kept = with_median_latency(first, [[5.0, 2.0], [1.0, 8.0], [9.0, 4.0]])
    assert kept.latency_ms == [5.0, 4.0]
    assert kept.rankings == first.rankings and kept.errors == {1: "boom"}
    assert kept.returned == [1, 0]
    even = with_median_latency(first, [[1.0, 2.0], [3.0, 6.0]])
    assert even.latency_ms == [2.0, 4.0]  # the mean of the middle two


@pytest.mark.parametrize(
    ("kind", "options"),
    [
        (Counting, {}),
        (Counting, {"timeout": 30.0}),
        (Counting, {"concurrency": 3}),
        (CountingMany, {}),
        (CountingMany, {"concurrency": 2}),
    ],
)
def test_repeat_asks_each_question_n_times_and_scores_the_first_answer(
    kind: type[Counting], options: dict[str, Any]
) -> None:
    retriever = kind()
    run = rk.evaluate(GOLDEN, retriever, repeat=3, **options, **COMMON)
    assert Counter(retriever.calls) == {q.question: 3 for q in QUESTIONS}
    # Every later answer is wrong: a perfect hit@1 is the first answer's.
    assert run.metrics["hit@1"].mean == 1.0
    assert [o.ranking[0] for o in run.record.outcomes] == [f"d{i}" for i in range(5)]


def test_repeat_one_is_one_ask_and_warmup_zero_asks_nothing_first() -> None:
    retriever = Counting()
    run = rk.evaluate(GOLDEN, retriever, **COMMON)
    assert retriever.calls == [q.question for q in QUESTIONS]
    assert run.record.manifest.machine is not None
    assert (run.record.manifest.machine.repeat, run.record.manifest.machine.warmup) == (1, 0)


def test_the_recorded_latency_is_at_least_the_median_of_the_retrievers_own_times() -> None:
    """The evaluator's clock encloses each call, so each ask's latency is at least the
    retriever's own time for it, and so is the median of the asks (the median is
    monotone): whatever the machine's speed, the recorded latency is not below the
    median of what the retriever measured. With three asks doing 3, 2 and 1 times the
    work, that median is the second ask's."""
    retriever = Counting(work=20_000)
    run = rk.evaluate(GOLDEN, retriever, repeat=3, **COMMON)
    for outcome, question in zip(run.record.outcomes, QUESTIONS, strict=True):
        own = sorted(retriever.took[question.question])
        assert len(own) == 3
        assert outcome.latency_ms >= own[1] * 1000.0 - 1e-3  # scorer rounds to 3 decimals


def test_warmup_asks_the_first_questions_cycling_and_discards_them() -> None:
    retriever = Counting()
    run = rk.evaluate(GOLDEN, retriever, warmup=7, **COMMON)
    texts = [q.question for q in QUESTIONS]
    assert retriever.calls[:7] == [*texts, *texts[:2]]
    assert retriever.calls[7:] == texts
    # The warm-up reached every question and took its first (right) answer: the run's
    # are the later, wrong ones.
    assert [o.ranking[0] == f"d{i}" for i, o in enumerate(run.record.outcomes)] == [False] * 5
    assert run.record.manifest.machine is not None
    assert run.record.manifest.machine.warmup == 7
    assert warmup_questions(QUESTIONS, 0) == [] and warmup_questions([], 3) == []


def test_warmup_and_repeat_together_on_a_retriever_of_chunks() -> None:
    """Chunk ids: the chunk ranking scored is the first answer of the run's own asks,
    not the warm-up's nor a repeat's."""

    class Chunks(Counting):
        def retrieve(self, question: str, limit: int) -> list[str]:
            return [f"{doc}#1" for doc in super().retrieve(question, limit)]

    retriever = Chunks()
    golden = GoldenQuestionSet(name="chunks", questions=QUESTIONS[:2])
    run = rk.evaluate(golden, retriever, repeat=2, warmup=0, chunk_separator="#", **COMMON)
    assert Counter(retriever.calls) == {"question 0": 2, "question 1": 2}
    assert run.metrics["hit@1"].mean == 1.0


def test_a_staged_retriever_is_repeated_and_warmed_up_too() -> None:
    class Staged(Counting):
        def retrieve_stages(self, question: str, limit: int) -> dict[str, list[str]]:
            answer = self.retrieve(question, limit)
            return {"first": answer, "second": answer}

    retriever = Staged()
    run = rk.evaluate(GOLDEN, retriever, repeat=2, warmup=1, **COMMON)
    assert retriever.calls[0] == "question 0"
    assert Counter(retriever.calls[1:]) == {q.question: 2 for q in QUESTIONS}
    assert run.record.stages is not None


def test_ask_in_batches_counts_progress_once_a_question() -> None:
    told: list[int] = []
    asked = list(
        ask_in_batches(Counting(), QUESTIONS, depth=3, repeat=4, progress=told.append, batch=2)
    )
    assert sum(len(part) for part in asked) == 5
    assert sum(told) == 5


@pytest.mark.parametrize(
    ("key", "value"),
    [("repeat", 0), ("repeat", 2.5), ("repeat", 1001), ("warmup", -1), ("warmup", "3")],
)
def test_a_bad_eval_key_is_refused_naming_it(key: str, value: Any) -> None:
    with pytest.raises(InputError) as raised:
        parse_config({"eval": {key: value}}, Path("retrievalkit.toml"))
    assert raised.value.field == f"eval.{key}"


def test_the_api_refuses_bad_values_naming_the_option() -> None:
    for keyword, value, field in (("repeat", 0, "--repeat"), ("warmup", -2, "--warmup")):
        with pytest.raises(InputError) as raised:
            rk.evaluate(GOLDEN, Counting(), **{keyword: value}, **COMMON)
        assert raised.value.field == field


def test_the_configuration_gives_repeat_and_warmup(tmp_path: Path) -> None:
    path = tmp_path / "retrievalkit.toml"
    path.write_text("[eval]\nrepeat = 2\nwarmup = 3\n", encoding="utf-8")
    retriever = Counting()
    run = rk.evaluate(GOLDEN, retriever, config=path, **COMMON)
    assert len(retriever.calls) == 3 + 2 * 5
    machine = run.record.manifest.machine
    assert machine is not None and (machine.repeat, machine.warmup) == (2, 3)
    given = Counting()
    rk.evaluate(GOLDEN, given, config=path, repeat=1, warmup=0, **COMMON)
    assert len(given.calls) == 5  # a given value wins over the configuration's


def test_the_command_line_takes_repeat_and_warmup_and_refuses_bad_ones(cli: Any) -> None:
    base = ("eval", "--set", "demo", "--retriever", "bm25-demo", "--store", "memory:")
    done = cli(*base, "--repeat", "2", "--warmup", "3", "--format", "json", "--resamples", "10")
    assert done.returncode == 0, done.stderr
    machine = json.loads(done.stdout)["manifest"]["machine"]
    assert (machine["repeat"], machine["warmup"], machine["concurrency"]) == (2, 3, 1)
    for option, value in (("--repeat", "0"), ("--repeat", "1.5"), ("--warmup", "-1")):
        bad = cli(*base, option, value)
        assert bad.returncode == 2, bad.stderr
        assert option in bad.stderr


def test_the_manifest_records_the_machine() -> None:
    run = rk.evaluate(GOLDEN, Counting(), concurrency=2, **COMMON)
    machine = run.record.manifest.machine
    assert machine is not None
    assert machine.cores == os.cpu_count()
    assert machine.python == platform.python_version()
    assert machine.cpu == cpu_model()
    assert machine.concurrency == 2
    if hasattr(os, "getloadavg"):
        assert machine.load_at_start is not None and len(machine.load_at_start) == 3
        assert machine.load_at_end is not None and len(machine.load_at_end) == 3


def test_the_cpu_model_is_read_from_cpuinfo_else_the_platform(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text(
        "processor\t: 0\nvendor_id\t: Acme\nmodel name\t: Acme Turbo 9000 @ 3.1GHz\n",
        encoding="utf-8",
    )
    assert cpu_model(info) == "Acme Turbo 9000 @ 3.1GHz"
    assert cpu_model(tmp_path / "absent") == (platform.processor().strip() or None)


def test_the_cpu_model_is_the_whole_value_of_its_line_whatever_it_holds(tmp_path: Path) -> None:
    """A model name with a colon of its own keeps it; a byte that is not UTF-8 is
    replaced, not a crash; an ARM board's ``Hardware`` line (any case) names it where no
    ``model name`` line does; a line without a value is passed over."""
    info = tmp_path / "cpuinfo"
    info.write_bytes(b"model name\t:\nmodel name\t: Acme Turbo rev:3 \xff edition\n")
    assert cpu_model(info) == "Acme Turbo rev:3 \ufffd edition"
    info.write_bytes(b"processor\t: 0\nBogoMIPS\t: 38.40\nHardware\t: BCM2835\n")
    assert cpu_model(info) == "BCM2835"
    info.write_bytes(b"HARDWARE : Allwinner sun50i\n")
    assert cpu_model(info) == "Allwinner sun50i"


def test_the_load_average_is_kept_to_two_decimals(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the system reports, each value rounded to 0.01 and still a float."""
    monkeypatch.setattr(os, "getloadavg", lambda: (1.23456, 0.5, 12.0))
    found = load_average()
    assert found == (1.23, 0.5, 12.0)
    assert found is not None and all(type(value) is float for value in found)
    monkeypatch.setattr(os, "getloadavg", lambda: (3.14159, 0.0049, 2.675))
    assert load_average() == (3.14, 0.0, round(2.675, 2))
    monkeypatch.delattr(os, "getloadavg")
    assert load_average() is None


def _record(machine: Machine | None, latency: float = 10.0) -> ResultRecord:
    scoring = ScoringOptions(ks=(1, 3), resamples=20)
    answers = [Retrieval((f"d{i}",), latency + i) for i in range(len(QUESTIONS))]
    scores = score_run(QUESTIONS, answers, scoring)
    return build_record(GOLDEN, "sys", "test", {}, scores, scoring, overfetch=1, machine=machine)


MACHINE = Machine(
    cpu="Acme Turbo 9000",
    cores=8,
    load_at_start=(1.0, 1.0, 1.0),
    load_at_end=(1.2, 1.0, 1.0),
    python="3.12.1",
    concurrency=1,
    repeat=3,
    warmup=10,
)


def test_a_record_without_a_machine_is_written_and_read_as_before(tmp_path: Path) -> None:
    """An older record has no machine: it loads (None), and written again its JSON has
    no machine key, so its digest in a store is what it was."""
    old = _record(None)
    data = json.loads(to_json(old))
    assert "machine" not in data["manifest"]
    assert converter.structure(data, ResultRecord) == old
    timed = _record(MACHINE)
    back = converter.structure(json.loads(to_json(timed)), ResultRecord)
    assert back.manifest.machine == MACHINE
    assert to_json(back) == to_json(timed)  # the same record, the same text
    store = rk.open_store(f"sqlite:///{tmp_path / 'runs.sqlite3'}")
    store.save(old)
    store.save(timed)
    stored_old, stored_timed = store.get(old.run_id), store.get(timed.run_id)
    assert stored_old is not None and stored_old.manifest.machine is None
    assert stored_timed is not None and stored_timed.manifest.machine == MACHINE


def _gate(baseline: ResultRecord, candidate: ResultRecord, **latency: float) -> Any:
    return compare_runs(
        candidate.outcomes,
        GOLDEN.content_hash,
        baseline,
        {"hit@1": 0.0},
        resamples=50,
        confidence=0.95,
        seed=1,
        candidate_record=candidate,
        latency_thresholds=latency or None,
    )


def _timing_warnings(verdict: Any) -> list[str]:
    return [warning for warning in verdict.warnings if warning.startswith("latency: ")]


def test_the_same_machine_gives_no_warning() -> None:
    verdict = _gate(_record(MACHINE), _record(attrs.evolve(MACHINE, repeat=1)), p95=1.0)
    assert _timing_warnings(verdict) == []
    assert machine_warning(MACHINE, MACHINE) is None


@pytest.mark.parametrize(
    ("candidate", "words"),
    [
        (attrs.evolve(MACHINE, cpu="Other CPU"), "different machines"),
        (attrs.evolve(MACHINE, cores=4), "cores 8 -> 4"),
        # 1.0 / 8 = 0.125 against 5.2 / 8 = 0.65: 0.525 apart per core, above 0.5.
        (attrs.evolve(MACHINE, load_at_start=(5.2, 1.0, 1.0)), "different load"),
        (None, "candidate run has no machine record"),
    ],
)
def test_the_gate_warns_when_latencies_were_timed_apart(
    candidate: Machine | None, words: str
) -> None:
    baseline, timed = _record(MACHINE), _record(candidate)
    verdict = _gate(baseline, timed, p95=10.0)
    (warning,) = _timing_warnings(verdict)
    assert words in warning
    assert not verdict.regressed  # a warning, never a failure
    document = json.loads(to_json_text(summary(EvalReport(timed, tuple(QUESTIONS), verdict, None))))
    assert warning in document["regression"]["warnings"]
    text = "\n".join(verdict_lines(verdict, None, confidence=0.95))
    assert "latency timing (a warning, never a failure):" in text and warning in text
    # Without a latency threshold the machine is not the gate's business.
    assert _timing_warnings(_gate(baseline, timed)) == []


def test_load_within_half_a_core_is_the_same_load() -> None:
    """1.0 / 8 = 0.125 against 4.8 / 8 = 0.6: 0.475 apart per core, within 0.5."""
    close = attrs.evolve(MACHINE, load_at_start=(4.8, 1.0, 1.0))
    assert machine_warning(MACHINE, close) is None
    assert "baseline and the candidate runs have" in (machine_warning(None, None) or "")


def test_machine_at_start_has_no_end_load_yet() -> None:
    machine = machine_at_start(concurrency=4, repeat=2, warmup=1)
    assert machine.load_at_end is None and machine.concurrency == 4


def test_the_machine_warnings_name_what_differs() -> None:
    """The whole text of each warning: a missing record, an unknown CPU on either side,
    every difference listed, and load exactly half a core apart (not more than it)."""
    assert machine_warning(MACHINE, None) == (
        "latency: the candidate run has no machine record, so whether both were timed on the "
        "same machine under the same load is unknown (a run asked by Ray workers, or stored "
        "before runs recorded one, has none)"
    )
    unknown = attrs.evolve(MACHINE, cpu=None)
    assert "(CPU unknown -> Acme Turbo 9000)" in (machine_warning(unknown, MACHINE) or "")
    assert "(CPU Acme Turbo 9000 -> unknown)" in (machine_warning(MACHINE, unknown) or "")
    other = attrs.evolve(MACHINE, cpu="Other", cores=4)
    assert machine_warning(MACHINE, other) == (
        "latency: the runs were timed on different machines (CPU Acme Turbo 9000 -> Other, "
        "cores 8 -> 4); a latency change may be the machine's"
    )
    # 1.0 / 8 = 0.125 against 5.0 / 8 = 0.625: exactly 0.5 apart per core.
    assert machine_warning(MACHINE, attrs.evolve(MACHINE, load_at_start=(5.0, 1.0, 1.0))) is None
    # Without a core count the load per core is unknown: no load warning, whatever the load.
    coreless = attrs.evolve(MACHINE, cores=None)
    busy = attrs.evolve(coreless, load_at_start=(40.0, 1.0, 1.0))
    assert machine_warning(coreless, busy) is None
