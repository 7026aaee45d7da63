"""Two staged runs compared stage by stage: means, paired differences, where each miss happened."""

from __future__ import annotations

from pathlib import Path

import pytest

import retrievalkit as rk
from retrievalkit.pipeline.gating.stage_comparison import compare_stages
from retrievalkit.render.stages import stage_metrics
from retrievalkit.stats.paired import paired_test

DEMO_CORPUS = Path(__file__).resolve().parents[1] / "retrievalkit" / "demo" / "corpus.jsonl"


def staged_config(folder: Path) -> Path:
    """Two rerankers over one fusion: they share every stage but the last; the one that
    reorders 30 candidates can lift documents into the top 10 and push others out."""
    path = folder / "retrievalkit.toml"
    rerank = (
        'plugin = "rerank"\nfirst_stage = "hyb"\nreranker = "tfidf-cosine"\n'
        f'reranker_options = {{ corpus = "{DEMO_CORPUS}", doc_id_separator = "#" }}\n'
    )
    path.write_text(
        f"""
[retrievers.truncated]
plugin = "bm25"
corpus = "{DEMO_CORPUS}"
doc_id_separator = "#"
max_doc_words = 15

[retrievers.hyb]
plugin = "fusion"
retrievers = ["bm25-demo", "truncated"]

[retrievers.narrow]
{rerank}candidates = 3

[retrievers.wide]
{rerank}candidates = 30
""",
        encoding="utf-8",
    )
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[rk.Run, rk.Run, rk.Run]:
    config = staged_config(tmp_path_factory.mktemp("stages"))
    narrow = rk.evaluate("demo", "narrow", config=config, git_commit=None)
    wide = rk.evaluate("demo", "wide", config=config, git_commit=None)
    plain = rk.evaluate("demo", "bm25-demo", config=config, git_commit=None)
    return narrow, wide, plain


def test_each_stage_of_both_runs_with_the_paired_difference_between_them(
    runs: tuple[rk.Run, rk.Run, rk.Run],
) -> None:
    narrow, wide = runs[0].record, runs[1].record
    assert narrow.stages is not None and wide.stages is not None
    metrics = stage_metrics(wide.stages)
    found = compare_stages(narrow, wide, resamples=500, confidence=0.95, seed=7, metrics=metrics)
    assert found is not None
    assert found.stages == ("hyb.bm25-demo", "hyb.truncated", "hyb.fusion", "rerank")
    assert found.metrics == tuple(metrics) and "rr" in metrics
    assert len(found.rows) == len(found.stages) * len(metrics)
    for row in found.rows:
        assert row.baseline == narrow.stages.metrics[row.stage][row.metric]
        assert row.candidate == wide.stages.metrics[row.stage][row.metric]
        assert row.candidate_step == wide.stages.deltas.get(row.stage, {}).get(row.metric)
        between = row.between
        # Paired over every question where the metric is defined (not the no-answer ones).
        assert row.candidate is not None
        assert between is not None and between.n == row.candidate.n <= len(narrow.outcomes)
        if row.stage.startswith("hyb."):
            # The same first stages: no question moved, nothing to test.
            assert between.difference == 0.0 and between.wins == between.losses == 0
        else:
            name = f"stage.{row.stage}:{row.metric}"
            expected = paired_test(
                narrow.outcomes.values(name),
                wide.outcomes.values(name),
                resamples=500,
                confidence=0.95,
                seed=7,
            )
            assert between.difference == pytest.approx(expected.difference)
            assert between.p_value == pytest.approx(expected.p_value)
            assert between.verdict is not None
    # The rerank stage is the answer: its difference is the runs' difference.
    rr = next(row for row in found.rows if (row.stage, row.metric) == ("rerank", "rr"))
    assert rr.between is not None and rr.between.difference == pytest.approx(
        wide.metrics["rr"].mean - narrow.metrics["rr"].mean  # type: ignore[operator]
    )


def test_each_question_keeps_the_stage_each_run_put_its_miss_down_to(
    runs: tuple[rk.Run, rk.Run, rk.Run],
) -> None:
    narrow, wide = runs[0].record, runs[1].record
    assert narrow.stages is not None and wide.stages is not None
    texts = {question.id: question.question for question in runs[0].set.questions}
    found = compare_stages(
        narrow, wide, resamples=200, confidence=0.95, seed=1, question_texts=texts
    )
    assert found is not None
    labelled = set(narrow.stages.questions) | set(wide.stages.questions)
    assert {q.question_id for q in found.questions} == labelled
    for question in found.questions:
        assert question.baseline == narrow.stages.questions.get(question.question_id)
        assert question.candidate == wide.stages.questions.get(question.question_id)
        assert question.question == texts[question.question_id]
    changed = [q.changed for q in found.questions]
    assert changed == sorted(changed, reverse=True), "the questions that changed come first"
    counts = {label: (before, after) for label, before, after in found.attribution}
    for label, count in narrow.stages.attribution.items():
        assert counts[label][0] == count
    for label, count in wide.stages.attribution.items():
        assert counts[label][1] == count
    # Reordering 30 candidates instead of 3 changes what some questions lost, and where.
    moved = [q for q in found.questions if q.changed]
    assert moved and found.questions[: len(moved)] == tuple(moved)
    assert any("reranker" in (q.candidate or "") for q in moved), moved


def test_a_run_without_stages_beside_a_staged_one(runs: tuple[rk.Run, rk.Run, rk.Run]) -> None:
    narrow, plain = runs[0].record, runs[2].record
    assert compare_stages(plain, plain, resamples=100, confidence=0.95, seed=1) is None
    found = compare_stages(plain, narrow, resamples=100, confidence=0.95, seed=1)
    assert found is not None and found.baseline_order == () and found.baseline_k is None
    assert all(row.baseline is None and row.between is None for row in found.rows)
    assert "judged@10" not in found.metrics
    assert {q.baseline for q in found.questions} == {None}
