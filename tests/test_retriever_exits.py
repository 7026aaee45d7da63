"""A retriever's own SystemExit is its question's error outcome; its own KeyboardInterrupt
interrupts the run, in every way questions are asked.

Seeded cases cross what the retriever raises (``SystemExit`` with an exit code, a message
or nothing; ``KeyboardInterrupt``) with the questions it raises on and the way they are
asked: one by one in this thread, with a ``timeout`` (a waiting thread), ``concurrency``
threads (with and without a timeout), ``retrieve_many`` batches (alone and concurrently)
and ``retrieve_stages`` (alone and concurrently). A ``SystemExit`` must leave every other
question answered and its own ones errored, naming the exit; a ``KeyboardInterrupt``
must stop the run (it raises out of `evaluate`, and the command line ends with exit code
130 and nothing saved), never become an error outcome in one path and a stop in another.
"""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from child_env import child_environment
from hostile import lay_out

from retrievalkit.api import evaluate, load_set

QUESTIONS = 150  # more than two batches of 64


def _golden(folder: Path) -> Path:
    path = folder / "golden.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {"id": f"q{n}", "question": f"question {n} about d{n}", "expected": [f"d{n}"]}
            )
            + "\n"
            for n in range(QUESTIONS)
        ),
        encoding="utf-8",
    )
    return path


def _number(question: str) -> int:
    return int(question.split()[1])


class _Raises:
    """Answers ``dN`` to question N, and raises ``error`` on the questions in ``on``."""

    identifier = "raises"

    def __init__(self, error: BaseException, on: set[int]) -> None:
        self.error, self.on = error, on

    def _answer(self, question: str) -> list[str]:
        if _number(question) in self.on:
            raise self.error
        return [f"d{_number(question)}"]

    def retrieve(self, question: str, limit: int) -> list[str]:
        return self._answer(question)


class _Batches(_Raises):
    def retrieve_many(self, questions: Sequence[str], limit: int) -> list[list[str]]:
        return [self._answer(question) for question in questions]


class _Stages(_Raises):
    def retrieve_stages(self, question: str, limit: int) -> dict[str, list[str]]:
        answer = self._answer(question)
        return {"first": answer, "final": answer}


PATHS = {
    "one by one": (_Raises, {}),
    "timeout": (_Raises, {"timeout": 30.0}),
    "concurrency": (_Raises, {"concurrency": 4}),
    "concurrency and timeout": (_Raises, {"concurrency": 3, "timeout": 30.0}),
    "batches": (_Batches, {}),
    "concurrent batches": (_Batches, {"concurrency": 3}),
    "stages": (_Stages, {}),
    "concurrent stages": (_Stages, {"concurrency": 4}),
}
EXITS: tuple[object, ...] = (0, 1, 2, 3, 42, None, "bye")


def _cases(count: int, seed: int) -> list[tuple[str, str, object, tuple[int, ...]]]:
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        kind = rng.choice(("exit", "exit", "interrupt"))
        on = tuple(sorted(rng.sample(range(QUESTIONS), rng.randint(1, 3))))
        cases.append((rng.choice(sorted(PATHS)), kind, rng.choice(EXITS), on))
    return cases


CASES = _cases(48, seed=11)


@pytest.mark.parametrize(("path", "kind", "code", "on"), CASES)
def test_a_retrievers_exit_is_an_error_outcome_and_its_interrupt_stops_the_run(
    path: str, kind: str, code: object, on: tuple[int, ...], tmp_path: Path
) -> None:
    golden = load_set(str(_golden(tmp_path)))
    make, settings = PATHS[path]
    error: BaseException = SystemExit(code) if kind == "exit" else KeyboardInterrupt()
    retriever = make(error, set(on))
    if kind == "interrupt":
        with pytest.raises(KeyboardInterrupt):
            evaluate(golden, retriever, max_error_rate=1.0, resamples=100, **settings)  # type: ignore[arg-type]
        return
    run = evaluate(golden, retriever, max_error_rate=1.0, resamples=100, **settings)  # type: ignore[arg-type]
    errors = dict(
        (outcome.question_id, outcome.error) for outcome in run.record.outcomes if outcome.error
    )
    if make is _Batches:  # a batch fails whole: every question of a batch holding one of them
        wanted = {f"q{n}" for n in range(QUESTIONS) if n // 64 in {m // 64 for m in on}}
    else:
        wanted = {f"q{n}" for n in on}
    assert set(errors) == wanted, (path, errors)
    assert all(f"the retriever called exit({code!r})" in text for text in errors.values()), errors
    answered = [o for o in run.record.outcomes if not o.error]
    assert all(o.ranking == (f"d{o.question_id[1:]}",) for o in answered)


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return lay_out(tmp_path_factory.mktemp("hostile-site"))


@pytest.mark.parametrize("concurrency", ["1", "4"])
@pytest.mark.parametrize("act", ["exit", "interrupt"])
def test_the_command_line_ends_alike_whatever_the_concurrency(
    act: str, concurrency: str, hostile_site: Path, tmp_path: Path
) -> None:
    (tmp_path / "golden.jsonl").write_text(
        "".join(
            json.dumps({"id": f"q{n}", "question": f"q {n}", "expected": ["d1"]}) + "\n"
            for n in range(12)
        ),
        encoding="utf-8",
    )
    (tmp_path / "retrievalkit.toml").write_text(
        f'[retrievers.h]\nplugin = "hostile"\nact = "{act}"\nwhen = "retrieve"\n'
        'question = "q 7"\ncode = 1\n',
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "retrievalkit", "eval", "--set", "golden.jsonl", "--retriever",
         "h", "--store", "sqlite:///runs.sqlite3", "--concurrency", concurrency,
         "--max-error-rate", "0.5", "-q"],
        cwd=tmp_path, env=child_environment(hostile_site, NO_COLOR="1"), capture_output=True,
        text=True, check=False, timeout=120,
    )  # fmt: skip
    assert "Traceback" not in done.stderr
    with sqlite3.connect(tmp_path / "runs.sqlite3") as connection:
        (stored,) = connection.execute("SELECT count(*) FROM runs").fetchone()
    connection.close()
    if act == "exit":  # one question errored, within the allowed rate: saved
        assert done.returncode == 0, done.stderr
        assert stored == 1
    else:
        assert done.returncode == 130, done.stderr
        assert "interrupted (KeyboardInterrupt raised without a signal" in done.stderr
        assert "nothing was saved" in done.stderr and stored == 0
