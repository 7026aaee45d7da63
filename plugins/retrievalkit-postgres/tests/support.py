"""Helpers the tests share: real scored runs of any size, the CLI in a subprocess, SQL."""

from __future__ import annotations

import datetime as dt
import os
import random
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from retrievalkit.metrics.scoring import ScoringOptions, score_run
from retrievalkit.model.records import ResultRecord
from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet, QuestionForm
from retrievalkit.pipeline.engine.evaluator import Retrieval
from retrievalkit.pipeline.engine.record import build_record, new_run_id

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "postgres.py"
DEFAULT_URL = "postgresql://retrievalkit@127.0.0.1:5433/retrievalkit"


def shared_data() -> Path:
    """The read-only IR collections beside the repository (``shared/data`` in it or above it)."""
    for candidate in [folder / "shared" / "data" for folder in (REPO, *REPO.parents)]:
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("../shared/data with the IR test collections is missing")


def scored_run(
    set_name: str, model: str, questions: int, *, seed: int = 7, resamples: int = 20
) -> ResultRecord:
    """A real scored run over a synthetic set: graded labels, slices, errors, no-answer ones."""
    rng = random.Random(seed)
    golden: list[GoldenQuestion] = []
    retrievals: list[Retrieval] = []
    for number in range(questions):
        expected = [f"d{rng.randrange(500)}" for _ in range(rng.randint(0, 3))]
        golden.append(
            GoldenQuestion(
                id=f"q{number}",
                question=f"question {number}",
                form=rng.choice([QuestionForm.MATCH, QuestionForm.GAP, None]),
                expected=expected,
                grades={doc: rng.randint(1, 2) for doc in expected},
                hard_class=rng.choice(["normal", "near-duplicate", None]),
                meta={"topic": rng.choice(["a", "b", "c"])},
            )
        )
        ranking = tuple(dict.fromkeys(f"d{rng.randrange(500)}" for _ in range(10)))
        if expected and rng.random() < 0.5:
            ranking = (expected[0], *ranking)
        error = "TimeoutError: no answer" if rng.random() < 0.02 else None
        retrievals.append(Retrieval(() if error else ranking, rng.uniform(0.5, 9.0), error=error))
    scoring = ScoringOptions(ks=(1, 3, 10), resamples=resamples, slices=("topic",))
    scores = score_run(golden, retrievals, scoring)
    moment = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    record = build_record(
        GoldenQuestionSet(name=set_name, questions=golden, source="tests"),
        model,
        "pgvector",
        {"table": "docs", "api_key": "not-this-one"},
        scores,
        scoring,
        overfetch=3,
        now=moment,
    )
    return record


def copy_of(record: ResultRecord, label: str, *, model: str | None = None) -> ResultRecord:
    """The record under a fresh run id (and optionally another model)."""
    moment = dt.datetime.now(dt.timezone.utc)
    run_id = f"{new_run_id(moment)}-{label}"
    return attrs.evolve(record, run_id=run_id, model=model or record.model)


def cli(
    *args: str, cwd: Path | None = None, env: Mapping[str, str] | None = None, timeout: int = 600
) -> subprocess.CompletedProcess[str]:
    """``python -m retrievalkit ARGS`` in a subprocess, as a user runs it."""
    environment = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "retrievalkit", *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def script(*args: str) -> subprocess.CompletedProcess[str]:
    """``python3 scripts/postgres.py ARGS``."""
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False
    )


def scalar(url: str, sql: str, parameters: tuple[Any, ...] = ()) -> Any:
    """The first column of the first row of a query, on a connection of its own."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        row = connection.execute(sql, parameters).fetchone()
    return None if row is None else row[0]
