"""Our metrics equal trec_eval's (through pytrec_eval) on real judgments and on random ones."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pytest
import pytrec_eval

from retrievalkit.formats.golden_sets import load_beir
from retrievalkit.metrics.definitions import compute_metrics, judge_rankings
from retrievalkit.retrievers.bm25 import BM25Retriever

KS = (1, 3, 5, 10)
#: our family -> trec_eval measure prefix
TREC_NAMES = {
    "hit": "success",
    "precision": "P",
    "recall": "recall",
    "ndcg": "ndcg_cut",
    "ap": "map_cut",
}


def trec_eval_values(
    rankings: Mapping[str, Sequence[str]],
    judgments: Mapping[str, Mapping[str, int]],
    ks: Sequence[int],
) -> dict[str, dict[str, float]]:
    cut = ",".join(str(k) for k in ks)
    measures = {f"{prefix}.{cut}" for prefix in TREC_NAMES.values()} | {"recip_rank"}
    evaluator = pytrec_eval.RelevanceEvaluator(
        {qid: dict(labels) for qid, labels in judgments.items()}, measures
    )
    run = {
        qid: {doc: float(len(ranking) - rank) for rank, doc in enumerate(ranking)}
        for qid, ranking in rankings.items()
        if ranking
    }
    return evaluator.evaluate(run)  # type: ignore[no-any-return]


def assert_parity(
    rankings: dict[str, list[str]],
    judgments: dict[str, dict[str, int]],
    ks: Sequence[int],
) -> int:
    """Compare every metric of every answerable question with a ranking; return the count.

    Rankings are cut at max(k) first, as the evaluator does: rr is RR within that depth.
    """
    rankings = {qid: ranking[: max(ks)] for qid, ranking in rankings.items()}
    ids = list(rankings)
    ours = compute_metrics(
        judge_rankings([rankings[i] for i in ids], [judgments[i] for i in ids], depth=max(ks)),
        ks,
    )
    reference = trec_eval_values(rankings, judgments, ks)
    compared = 0
    for row, qid in enumerate(ids):
        answerable = any(grade >= 1 for grade in judgments[qid].values())
        if not answerable:
            assert np.isnan(ours["rr"][row])
            continue
        if not rankings[qid]:
            assert ours["hit@1"][row] == 0.0 and ours["ndcg@10" if 10 in ks else "rr"][row] == 0.0
            continue
        expected = reference[qid]
        for k in ks:
            for family, prefix in TREC_NAMES.items():
                assert ours[f"{family}@{k}"][row] == pytest.approx(
                    expected[f"{prefix}_{k}"], abs=1e-12
                ), f"{family}@{k} of question {qid}"
        assert ours["rr"][row] == pytest.approx(expected["recip_rank"], abs=1e-12)
        compared += 1
    return compared


@pytest.fixture(scope="module")
def scifact_bm25(data_dir: Path) -> tuple[dict[str, list[str]], dict[str, dict[str, int]]]:
    golden = load_beir(data_dir / "scifact")
    retriever = BM25Retriever(data_dir / "scifact" / "corpus.jsonl")
    rankings = {q.id: retriever.retrieve(q.question, 10) for q in golden.questions}
    return rankings, {q.id: q.judgments() for q in golden.questions}


def test_scifact_bm25_rankings_match_trec_eval(
    scifact_bm25: tuple[dict[str, list[str]], dict[str, dict[str, int]]],
) -> None:
    rankings, judgments = scifact_bm25
    assert len(rankings) == 300
    assert assert_parity(rankings, judgments, KS) >= 290


def test_scifact_bm25_lands_near_published_numbers(
    scifact_bm25: tuple[dict[str, list[str]], dict[str, dict[str, int]]],
) -> None:
    # bm25s with Snowball stemming: 0.676 published for this setting (shared/data/README.md).
    rankings, judgments = scifact_bm25
    ids = list(rankings)
    ours = compute_metrics(
        judge_rankings([rankings[i] for i in ids], [judgments[i] for i in ids], depth=10), KS
    )
    assert 0.64 <= float(np.nanmean(ours["ndcg@10"])) <= 0.70


@pytest.mark.parametrize("qrels", ["test.tsv", "test_readme_gain.tsv"])
def test_cranfield_graded_judgments_match_trec_eval(data_dir: Path, qrels: str) -> None:
    directory = data_dir / "cranfield"
    golden = load_beir(directory, qrels=directory / "qrels" / qrels)
    retriever = BM25Retriever(directory / "corpus.jsonl", k1=1.2, b=0.75)
    rankings = {q.id: retriever.retrieve(q.question, 20) for q in golden.questions}
    judgments = {q.id: q.judgments() for q in golden.questions}
    assert any(grade > 1 for labels in judgments.values() for grade in labels.values())
    assert assert_parity(rankings, judgments, (1, 3, 5, 10, 20)) == 225


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_judgments_and_rankings_match_trec_eval(seed: int) -> None:
    rng = random.Random(seed)
    pool = [f"d{i}" for i in range(60)]
    rankings: dict[str, list[str]] = {}
    judgments: dict[str, dict[str, int]] = {}
    for index in range(400):
        qid = f"q{index}"
        labelled = rng.sample(pool, rng.randint(1, 12))
        judgments[qid] = {doc: rng.choice([0, 0, 1, 1, 2, 3, 4]) for doc in labelled}
        rankings[qid] = rng.sample(pool, rng.randint(0, 25))
    compared = assert_parity(rankings, judgments, (1, 2, 3, 5, 10, 20))
    assert compared > 300


@pytest.mark.parametrize("seed", [1, 2])
def test_judged_at_k_equals_ir_measures_judged(seed: int) -> None:
    """judged@k divides by the documents returned in the top k, as ir_measures' Judged@k."""
    import ir_measures
    from ir_measures import Judged

    rng = random.Random(seed)
    pool = [f"d{i}" for i in range(40)]
    rankings: dict[str, list[str]] = {}
    judgments: dict[str, dict[str, int]] = {}
    for index in range(300):
        qid = f"q{index}"
        labelled = rng.sample(pool, rng.randint(1, 15))
        judgments[qid] = {doc: rng.choice([0, 0, 1, 2]) for doc in labelled}
        # Many rankings shorter than the deepest cut-off: where the two definitions differ.
        rankings[qid] = rng.sample(pool, rng.choice([1, 2, 4, 7, 10, 10, 12]))
    ks = (1, 3, 5, 10)
    ids = list(rankings)
    ours = compute_metrics(
        judge_rankings([rankings[i] for i in ids], [judgments[i] for i in ids], depth=10),
        ks,
        with_judged=True,
    )
    run = {
        qid: {doc: float(len(ranking) - rank) for rank, doc in enumerate(ranking)}
        for qid, ranking in rankings.items()
    }
    measures = [Judged @ k for k in ks]
    reference = {
        (metric.query_id, str(metric.measure)): metric.value
        for metric in ir_measures.iter_calc(measures, judgments, run)
    }
    compared = shorter = 0
    for row, qid in enumerate(ids):
        if not any(grade >= 1 for grade in judgments[qid].values()):
            assert np.isnan(ours["judged@10"][row])  # undefined on a no-answer question
            continue
        for k in ks:
            expected = reference[(qid, f"Judged@{k}")]
            assert ours[f"judged@{k}"][row] == pytest.approx(expected, abs=1e-12), (qid, k)
            compared += 1
        shorter += len(rankings[qid]) < 10
    assert compared > 800 and shorter > 100


def test_a_repeated_id_is_graded_at_every_rank_and_errors_score_nothing() -> None:
    # Scoring collapses repeated ids before this point; judge_rankings itself grades each
    # rank, as a lookup per rank would, and an errored question keeps no ranking at all.
    judged = judge_rankings(
        [["a", "a", "x", "b", "a"], ["a", "b"], ["a"]],
        [{"a": 2, "b": 0}, {"a": 1}, {}],
        depth=4,
        errored=[False, True, False],
    )
    assert judged.grades.tolist() == [[2, 2, -1, 0], [-2, -2, -2, -2], [-1, -2, -2, -2]]
    assert judged.grades.dtype == np.int64  # whole grades, as JudgedRankings declares
    assert judged.returned_any.tolist() == [True, False, True]
    assert judged.errored.tolist() == [False, True, False]
    assert judged.relevant_total.tolist() == [1.0, 1.0, 0.0]
    assert judged.ideal.tolist() == [[2, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]]
    values = compute_metrics(judged, (1, 3))
    assert not [name for name in values if name.startswith("judged@")]  # only when asked
    # The errored question misses although its ranking held the relevant document; the
    # no-answer question returned something, so its hit@1 is 0 and the rest undefined.
    assert values["hit@1"].tolist() == [1.0, 0.0, 0.0]
    assert values["rr"][:2].tolist() == [1.0, 0.0] and np.isnan(values["rr"][2])


def test_no_answer_questions_and_empty_rankings_raise_no_numpy_warning() -> None:
    # nDCG and judged@k divide by zero for a no-answer question or an empty top k; the
    # value is undefined (NaN), and nothing may be printed about it.
    import warnings

    judged = judge_rankings(
        [["a"], [], ["x", "y"], []],
        [{"a": 1}, {"b": 0}, {}, {}],
        depth=3,
        errored=[False, False, False, True],
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        values = compute_metrics(judged, (1, 3), with_judged=True)
    assert values["ndcg@3"][0] == 1.0 and np.isnan(values["ndcg@3"][1:]).all()
    assert values["judged@3"][0] == 1.0 and np.isnan(values["judged@3"][1:]).all()
