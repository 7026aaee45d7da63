"""Chunk-level metrics: the raw chunk ranking scored against expected_chunks, as trec_eval would."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import pytrec_eval

import retrievalkit as rk
from retrievalkit.errors import InputError
from retrievalkit.metrics.definitions import chunk_metrics
from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet
from retrievalkit.render.summary import EvalReport, per_question_lines

KS = (1, 3, 5, 10)


@pytest.mark.parametrize("seed", range(5))
def test_chunk_metrics_equal_trec_eval(seed: int) -> None:
    rng = random.Random(seed)
    chunks = [f"d{d}#{c}" for d in range(30) for c in range(4)]
    rankings, expected = [], []
    for _ in range(40):
        rankings.append(rng.sample(chunks, rng.randint(0, 15)))
        expected.append(rng.sample(chunks, rng.randint(1, 4)) if rng.random() < 0.9 else [])
    values = chunk_metrics(rankings, expected, KS, [False] * len(rankings))
    depth = max(KS)
    qrels = {f"q{i}": dict.fromkeys(e, 1) for i, e in enumerate(expected) if e}
    run = {
        f"q{i}": {doc: float(depth - rank) for rank, doc in enumerate(r[:depth])}
        for i, r in enumerate(rankings)
        if expected[i]
    }
    measures = {"recip_rank", *(f"recall.{k}" for k in KS), *(f"ndcg_cut.{k}" for k in KS)}
    oracle = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    for index, chunks_expected in enumerate(expected):
        if not chunks_expected:
            assert np.isnan(values["chunk_rr"][index])
            continue
        theirs = oracle.get(f"q{index}", {})
        assert values["chunk_rr"][index] == pytest.approx(theirs.get("recip_rank", 0.0))
        for k in KS:
            assert values[f"chunk_recall@{k}"][index] == pytest.approx(
                theirs.get(f"recall_{k}", 0.0)
            )
            assert values[f"chunk_ndcg@{k}"][index] == pytest.approx(
                theirs.get(f"ndcg_cut_{k}", 0.0)
            )


class Chunks:
    """Returns chunk ids: the second chunk of the wanted document first, then others."""

    identifier = "chunks"

    def retrieve(self, question: str, limit: int) -> list[str]:
        wanted = question.split()[-1]
        return [f"{wanted}#2", "other#1", f"{wanted}#1", "other#2", "third#1"][:limit]


def chunked_set() -> GoldenQuestionSet:
    return GoldenQuestionSet(
        "chunked",
        (
            GoldenQuestion(
                "q1", "about a", expected=("a",), expected_chunks=("a#1",), meta={"t": "x"}
            ),
            GoldenQuestion(
                "q2", "about b", expected=("b",), expected_chunks=("b#2",), meta={"t": "y"}
            ),
            GoldenQuestion("q3", "about c", expected=("c",), meta={"t": "y"}),
        ),
    )


def test_chunk_ids_score_as_documents_and_as_chunks() -> None:
    run = rk.evaluate(chunked_set(), Chunks(), chunk_separator="#", slices=("t",), git_commit=None)
    # As documents: a#2 -> a at rank 1 (the other chunk of a collapses into it).
    assert run.metrics["hit@1"].mean == 1.0
    assert run.outcomes[0].ranking[:3] == ("a", "other", "third")
    # As chunks: q1's a#1 is third of the raw ranking, q2's b#2 first; q3 has no chunks.
    assert run.outcomes[0].scores["chunk_rr"] == pytest.approx(1 / 3)
    assert run.outcomes[1].scores["chunk_rr"] == 1.0
    assert run.outcomes[2].scores["chunk_rr"] is None
    assert run.metrics["chunk_rr"].n == 2
    assert run.metrics["chunk_rr"].mean == pytest.approx((1 / 3 + 1) / 2)
    assert run.metrics["chunk_recall@1"].ci is not None
    assert run.slices["t"]["x"]["chunk_rr"].mean == pytest.approx(1 / 3)
    assert run.record.manifest.extra["chunk_separator"] == "#"


def test_a_set_without_chunks_has_no_chunk_metrics_and_keeps_its_hash() -> None:
    plain = GoldenQuestionSet("s", (GoldenQuestion("q1", "about a", expected=("a",)),))
    run = rk.evaluate(plain, Chunks(), chunk_separator="#", git_commit=None)
    assert not any(name.startswith("chunk_") for name in run.metrics)
    with_chunks = GoldenQuestionSet(
        "s", (GoldenQuestion("q1", "about a", expected=("a",), expected_chunks=("a#1",)),)
    )
    assert plain.content_hash != with_chunks.content_hash
    # A set without chunks hashes as before chunks existed: the field is not in its JSON.
    from retrievalkit.model.values import _canonical_data

    assert "expected_chunks" not in _canonical_data(plain.questions[0])


def test_expected_chunks_are_read_from_a_file_and_checked(tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text(
        '{"id": "q1", "question": "about a", "expected": ["a"], "expected_chunks": ["a#1"]}\n'
        '{"id": "q2", "question": "about b", "expected": ["b"]}\n',
        encoding="utf-8",
    )
    golden = rk.load_set(good)
    assert golden.questions[0].expected_chunks == ("a#1",)
    assert golden.questions[1].expected_chunks == ()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"id": "q1", "question": "about a", "expected": ["a"], "expected_chunks": "a#1"}\n',
        encoding="utf-8",
    )
    with pytest.raises(InputError, match="expected_chunks") as raised:
        rk.load_set(bad)
    assert "line 1" in str(raised.value) or raised.value.line == 1


def test_per_question_lines_keep_meta_and_chunks() -> None:
    run = rk.evaluate(chunked_set(), Chunks(), chunk_separator="#", git_commit=None)
    lines = [
        json.loads(line)
        for line in per_question_lines(EvalReport(run.record, run.set.questions, None, None))
    ]
    assert lines[0]["meta"] == {"t": "x"}
    assert lines[0]["expected_chunks"] == ["a#1"]
    assert "expected_chunks" not in lines[2]


def test_evaluate_honours_the_configurations_eval_table(tmp_path: Path) -> None:
    config = tmp_path / "retrievalkit.toml"
    config.write_text('[eval]\nk = [1, 2, 7]\nchunk_separator = "#"\n', encoding="utf-8")
    run = rk.evaluate(chunked_set(), Chunks(), config=config, git_commit=None)
    assert run.record.manifest.ks == (1, 2, 3, 7)
    assert "hit@7" in run.metrics and "hit@10" not in run.metrics
    assert run.record.manifest.extra["chunk_separator"] == "#"
    # An argument given wins over the configuration.
    assert rk.evaluate(
        chunked_set(), Chunks(), k=(5,), config=config, git_commit=None
    ).record.manifest.ks == (1, 3, 5)
