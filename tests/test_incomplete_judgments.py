"""bpref, infap and the condensed metrics equal trec_eval's (through pytrec_eval) on real
collections whose judgments were subsampled, as an incompletely judged set is."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pytest
import pytrec_eval

from retrievalkit.formats.golden_sets import load_beir
from retrievalkit.metrics.definitions import (
    canonical_metric_name,
    compute_metrics,
    judge_rankings,
    metric_names,
    parse_metric,
    requested_metrics,
)
from retrievalkit.metrics.names import split_stage_metric
from retrievalkit.retrievers.bm25 import BM25Retriever

KS = (1, 3, 5, 10, 20)
DEPTH = max(KS)
#: our plain family -> trec_eval's measure (with _k for the cut-off)
CONDENSED_TREC = {
    "hit": "success_k",
    "precision": "P_k",
    "recall": "recall_k",
    "ndcg": "ndcg_cut_k",
    "ap": "map_cut_k",
}

Collection = tuple[dict[str, list[str]], dict[str, dict[str, int]]]


def trec_run(rankings: Mapping[str, Sequence[str]]) -> dict[str, dict[str, float]]:
    return {
        qid: {doc: float(len(ranking) - rank) for rank, doc in enumerate(ranking)}
        for qid, ranking in rankings.items()
        if ranking
    }


def subsampled(
    rankings: Mapping[str, list[str]],
    full: Mapping[str, Mapping[str, int]],
    seed: int,
    keep: float,
) -> dict[str, dict[str, int]]:
    """A pooled, then sampled, judgment of each question: the documents of the depth-20
    pool get their grade in the full judgments (0 if they have none there), and of them
    and of the full judgments only a random share ``keep`` stays labelled."""
    rng = random.Random(seed)
    labels: dict[str, dict[str, int]] = {}
    for qid, ranking in rankings.items():
        pooled = {doc: full[qid].get(doc, 0) for doc in ranking[:DEPTH]}
        pooled.update(full[qid])
        labels[qid] = {doc: grade for doc, grade in sorted(pooled.items()) if rng.random() < keep}
    return labels


def ours(
    rankings: Mapping[str, list[str]],
    labels: Mapping[str, Mapping[str, int]],
    ids: Sequence[str],
) -> dict[str, np.ndarray]:
    judged = judge_rankings([rankings[i][:DEPTH] for i in ids], [labels[i] for i in ids], DEPTH)
    return compute_metrics(judged, KS, incomplete=True)


def assert_incomplete_parity(
    rankings: Mapping[str, list[str]], labels: Mapping[str, dict[str, int]]
) -> int:
    """Every answerable question's bpref, infap and condensed metrics against trec_eval's;
    the number of questions compared."""
    ids = [qid for qid in rankings if any(grade >= 1 for grade in labels[qid].values())]
    values = ours(rankings, labels, ids)
    cut = {qid: rankings[qid][:DEPTH] for qid in ids}
    bpref = pytrec_eval.RelevanceEvaluator({q: labels[q] for q in ids}, {"bpref"}).evaluate(
        trec_run(cut)
    )
    # trec_eval's "pooled but unjudged" is -1 in qrels: a returned document without a label.
    pooled = {
        qid: {**labels[qid], **{doc: -1 for doc in cut[qid] if doc not in labels[qid]}}
        for qid in ids
    }
    infap = pytrec_eval.RelevanceEvaluator(pooled, {"infAP"}).evaluate(trec_run(cut))
    # Sakai's condensed list: the same ranking without its unjudged documents.
    condensed_rankings = {qid: [d for d in cut[qid] if d in labels[qid]] for qid in ids}
    cuts = ",".join(map(str, KS))
    measures = {f"{m.removesuffix('_k')}.{cuts}" for m in CONDENSED_TREC.values()} | {"recip_rank"}
    condensed = pytrec_eval.RelevanceEvaluator({q: labels[q] for q in ids}, measures).evaluate(
        trec_run(condensed_rankings)
    )
    compared = 0
    for row, qid in enumerate(ids):
        if not cut[qid]:
            continue
        assert values["bpref"][row] == pytest.approx(bpref[qid]["bpref"], abs=1e-12), qid
        assert values["infap"][row] == pytest.approx(infap[qid]["infAP"], abs=1e-12), qid
        if condensed_rankings[qid]:
            expected = condensed[qid]
            for k in KS:
                for family, measure in CONDENSED_TREC.items():
                    assert values[f"{family}@{k}:condensed"][row] == pytest.approx(
                        expected[measure.replace("_k", f"_{k}")], abs=1e-12
                    ), (qid, family, k)
            assert values["rr:condensed"][row] == pytest.approx(expected["recip_rank"], abs=1e-12)
        else:
            assert values["rr:condensed"][row] == 0.0 and values["ndcg@20:condensed"][row] == 0.0
        compared += 1
    return compared


@pytest.fixture(scope="module")
def cranfield(data_dir: Path) -> Collection:
    directory = data_dir / "cranfield"
    golden = load_beir(directory, qrels=directory / "qrels" / "test_readme_gain.tsv")
    retriever = BM25Retriever(directory / "corpus.jsonl", k1=1.2, b=0.75)
    rankings = {q.id: retriever.retrieve(q.question, 40) for q in golden.questions}
    return rankings, {q.id: q.judgments() for q in golden.questions}


@pytest.fixture(scope="module")
def vaswani(data_dir: Path) -> Collection:
    directory = data_dir / "vaswani"
    golden = load_beir(directory)
    retriever = BM25Retriever(directory / "corpus.jsonl", k1=1.2, b=0.75)
    rankings = {q.id: retriever.retrieve(q.question, 40) for q in golden.questions}
    return rankings, {q.id: q.judgments() for q in golden.questions}


@pytest.mark.parametrize(("seed", "keep"), [(1, 0.5), (2, 0.8), (3, 1.0)])
def test_cranfield_subsampled_graded_judgments_match_trec_eval(
    cranfield: Collection, seed: int, keep: float
) -> None:
    rankings, full = cranfield
    labels = subsampled(rankings, full, seed, keep)
    assert any(grade > 1 for qrels in labels.values() for grade in qrels.values())
    assert assert_incomplete_parity(rankings, labels) >= 150


@pytest.mark.parametrize(("seed", "keep"), [(4, 0.3), (5, 0.6)])
def test_vaswani_subsampled_judgments_match_trec_eval(
    vaswani: Collection, seed: int, keep: float
) -> None:
    rankings, full = vaswani
    labels = subsampled(rankings, full, seed, keep)
    assert assert_incomplete_parity(rankings, labels) >= 70


def test_condensed_metrics_recover_what_removing_labels_hides(cranfield: Collection) -> None:
    """Removing half the labels at random pulls ndcg@10 down (unjudged counts as not
    relevant) far more than it moves ndcg@10:condensed or bpref, the point of both."""
    rankings, full = cranfield
    complete = subsampled(rankings, full, 7, 1.0)
    sampled = subsampled(rankings, full, 7, 0.5)
    ids = [qid for qid in rankings if any(g >= 1 for g in sampled[qid].values())]
    before, after = ours(rankings, complete, ids), ours(rankings, sampled, ids)

    def drop(name: str) -> float:
        return float(np.nanmean(before[name]) - np.nanmean(after[name]))

    assert drop("ndcg@10") > 0.05
    assert abs(drop("ndcg@10:condensed")) < drop("ndcg@10") / 2
    assert abs(drop("bpref")) < drop("ap@20")


def test_bpref_worked_example() -> None:
    """Ranking x(unjudged) n1 r1 n2 r2, judged non-relevant n1 n2 n3, relevant r1 r2 r3:
    R = 3, N = 3; r1 has one judged non-relevant above (1 - 1/3), r2 two (1 - 2/3), r3
    was not returned: bpref = (2/3 + 1/3) / 3 = 1/3. infAP: r1 at rank 3 (j = 2) with
    one judged non-relevant and one unjudged above: 1/3 + 2/3 * (2/2) * (e / (1 + 2e));
    r2 at j = 4 with r1, n1, n2, x above: 1/5 + 4/5 * (1 + e) / (3 + 2e); divided by 3."""
    labels = {"n1": 0, "n2": 0, "n3": 0, "r1": 1, "r2": 2, "r3": 1}
    values = compute_metrics(
        judge_rankings([["x", "n1", "r1", "n2", "r2"]], [labels], 5), (1, 5), incomplete=True
    )
    e = 0.00001
    assert values["bpref"][0] == pytest.approx(1 / 3, abs=1e-12)
    first = 1 / 3 + 2 / 3 * (e / (1 + 2 * e))
    second = 1 / 5 + 4 / 5 * ((1 + e) / (3 + 2 * e))
    assert values["infap"][0] == pytest.approx((first + second) / 3, abs=1e-12)
    # Condensed: n1 r1 n2 r2, so rr = 1/2 and precision@5 = 2/5 (r1, r2 of 5).
    assert values["rr:condensed"][0] == 0.5 and values["rr"][0] == pytest.approx(1 / 3)
    assert values["precision@5:condensed"][0] == pytest.approx(2 / 5)


def test_no_answer_and_errored_questions() -> None:
    judged = judge_rankings(
        [["a", "x"], ["x"], ["a"]],
        [{"b": 0}, {"x": 0}, {"a": 1}],
        depth=2,
        errored=[False, False, True],
    )
    values = compute_metrics(judged, (1, 2), incomplete=True)
    for name in ("bpref", "infap", "rr:condensed", "ndcg@2:condensed"):
        assert np.isnan(values[name][:2]).all(), name  # undefined without a relevant label
        assert values[name][2] == 0.0, name  # an errored question misses
    # A no-answer question that returned only unjudged documents still returned something.
    assert values["hit@1:condensed"][:2].tolist() == [0.0, 0.0]


def test_names_of_the_incomplete_metrics() -> None:
    assert canonical_metric_name(" NDCG@10:Condensed") == "ndcg@10:condensed"
    assert canonical_metric_name("stage.rerank:RR:condensed") == "stage.rerank:rr:condensed"
    assert split_stage_metric("stage.a:b:ndcg@3:condensed") == ("a:b", "ndcg@3:condensed")
    assert parse_metric("ndcg@10:condensed").plain.name == "ndcg@10"
    assert parse_metric("bpref").trec_eval == "bpref"
    assert parse_metric("infap").trec_eval == "infAP"
    assert parse_metric("ap@10:condensed").trec_eval is None
    for refused in ("judged@10:condensed", "bpref:condensed", "chunk_rr:condensed", "bpref@3"):
        with pytest.raises(ValueError, match="unknown metric"):
            parse_metric(refused)
    assert requested_metrics(["hit@1", "bpref", "rr:condensed", "ndcg_exp@3"]) == (
        "ndcg_exp@3",
        "bpref",
        "rr:condensed",
    )
    plain = metric_names((1, 3))
    assert not [name for name in plain if name in ("bpref", "infap") or ":" in name]
    full = metric_names((1, 3), incomplete=True)
    assert full[: len(plain)] == plain and full[len(plain) : len(plain) + 2] == ["bpref", "infap"]
    assert full[len(plain) + 2 :] == [f"{name}:condensed" for name in plain]
    assert metric_names((1, 3), extra=["bpref", "hit@3:condensed"]) == [
        *plain,
        "bpref",
        "hit@3:condensed",
    ]


def test_bpref_and_infap_warn_of_nothing_where_they_are_defined(
    recwarn: pytest.WarningsRecorder,
) -> None:
    """A question with no judged non-relevant document (bpref's min(N, R) is 0) and a
    relevant document at rank 1 (infAP's j = 0): both are defined there, and computing
    them prints no numpy warning to the user's terminal. Ranking r1 x r2, R = 2: bpref
    (1 + 1) / 2 = 1, nothing judged non-relevant above either; infAP: r1 at rank 1 is 1,
    r2 at j = 2 with r1 and the unjudged x above 1/3 + 2/3 * (2/2) * (1 + e) / (1 + 2e),
    the two divided by 2."""
    labels = {"r1": 1, "r2": 1}
    values = compute_metrics(
        judge_rankings([["r1", "x", "r2"]], [labels], 3), (1, 3), incomplete=True
    )
    e = 0.00001
    assert values["bpref"][0] == 1.0
    second = 1 / 3 + 2 / 3 * (2 / 2) * ((1 + e) / (1 + 2 * e))
    assert values["infap"][0] == pytest.approx((1.0 + second) / 2, abs=1e-12)
    assert [str(warning.message) for warning in recwarn] == []
