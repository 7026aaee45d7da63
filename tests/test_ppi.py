"""Judge-corrected (prediction-powered) means: coverage with a deliberately biased judge, by
seeded simulation, and the human sample end to end through ``eval --extra-labels``.

The truth is BM25's reciprocal rank on SciFact; the judge is lenient: for 40 % of the
questions it grades as well as a random other question would, never worse, so its mean
is about 0.08 too high. Humans label a random 50 of 300 questions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from retrievalkit.stats.ppi import corrected_mean, labels_needed

QUESTIONS, HUMAN = 300, 50


def simulate(
    population: npt.NDArray[np.float64], *, replicates: int, confidence: float = 0.95
) -> dict[str, float]:
    rng = np.random.default_rng(5)
    truth = float(population.mean())
    found = {"ppi": 0.0, "judge": 0.0, "ppi_width": 0.0, "judge_width": 0.0}
    for replicate in range(replicates):
        human = population[rng.integers(0, len(population), QUESTIONS)]
        other = population[rng.integers(0, len(population), QUESTIONS)]
        judged = np.where(rng.random(QUESTIONS) < 0.6, human, np.maximum(human, other))
        sample = np.full(QUESTIONS, np.nan)
        picked = rng.choice(QUESTIONS, HUMAN, replace=False)
        sample[picked] = human[picked]
        estimate = corrected_mean(
            judged, sample, confidence=confidence, resamples=500, seed=replicate
        )
        assert estimate.ci is not None and estimate.judge_ci is not None
        found["ppi"] += estimate.ci[0] <= truth <= estimate.ci[1]
        found["judge"] += estimate.judge_ci[0] <= truth <= estimate.judge_ci[1]
        found["ppi_width"] += estimate.ci[1] - estimate.ci[0]
        found["judge_width"] += estimate.judge_ci[1] - estimate.judge_ci[0]
    return {key: value / replicates for key, value in found.items()}


def test_the_corrected_interval_covers_where_the_judges_own_does_not(
    bm25_populations: dict[str, Any],
) -> None:
    found = simulate(bm25_populations["rr"], replicates=800)
    assert found["ppi"] >= 0.935
    assert found["judge"] < 0.5
    # Wider than the judge's (it admits the judge's error), narrower than the human
    # sample's own t interval of 50 questions (0.237 on this population).
    assert found["judge_width"] < found["ppi_width"] < 0.22


def test_a_90_percent_corrected_interval_fails_the_95_percent_check(
    bm25_populations: dict[str, Any],
) -> None:
    assert simulate(bm25_populations["rr"], replicates=800, confidence=0.90)["ppi"] < 0.935


def test_a_perfect_judge_needs_few_human_labels_and_a_useless_one_as_many_as_none() -> None:
    rng = np.random.default_rng(1)
    human = (rng.random(400) < 0.4).astype(int)
    perfect = np.stack([human, human], axis=1)
    needed, alone, weight = labels_needed(perfect, half_width=0.05)
    assert weight == pytest.approx(1.0) and needed == 2 and alone is not None and alone > 300
    useless = np.stack([human, (rng.random(400) < 0.5).astype(int)], axis=1)
    needed, alone, _ = labels_needed(useless, half_width=0.05)
    assert needed is not None and alone is not None and needed >= 0.9 * alone


def test_eval_extra_labels_with_human_rows_reports_corrected_means(
    cli: Any, tmp_path: Path
) -> None:
    from retrievalkit.demo import DemoSetProvider

    questions = [q for q in DemoSetProvider().load("demo").questions if q.answerable]
    rows = ["query-id\tcorpus-id\tscore\tjudge"]
    for index, question in enumerate(questions):
        # The judge calls a document relevant that no one else does; humans label a
        # sample of the questions with the set's own view.
        rows.append(f"{question.id}\tdoc-judge-favourite\t1\tmodel")
        if index % 3 == 0:
            rows.append(f"{question.id}\tdoc-judge-favourite\t0\thuman")
    labels = tmp_path / "labels.tsv"
    labels.write_text("\n".join(rows) + "\n", encoding="utf-8")
    result = cli("eval", "--set", "demo", "--retriever", "bm25-demo", "--no-save", "--store",
                 f"sqlite:///{tmp_path / 'runs.db'}", "--extra-labels", str(labels),
                 "--format", "json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    corrected = json.loads(result.stdout)["extra_labels"]["corrected"]
    hit = corrected["hit@1"]
    assert hit["method"] == "ppi-bca" and hit["labelled"] == len(range(0, len(questions), 3))
    assert hit["ci"][0] <= hit["mean"] <= hit["ci"][1]
    plain = cli("eval", "--set", "demo", "--retriever", "bm25-demo", "--no-save", "--store",
                f"sqlite:///{tmp_path / 'runs.db'}", "--extra-labels", str(labels))  # fmt: skip
    assert "Judge-corrected (PPI)" in plain.stdout
