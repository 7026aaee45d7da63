"""nDCG with exponential gain (``ndcg_exp@k``, ranx's ``ndcg_burges@k``): ranx's values on
real graded judgments, a worked example by hand, and the name accepted wherever a metric
name is, while the default table and trec_eval's linear ``ndcg@k`` stay as they were."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import RunCli

import retrievalkit as rk
from retrievalkit.formats.golden_sets import load_beir
from retrievalkit.metrics.definitions import (
    DEFAULT_KS,
    compute_metrics,
    judge_rankings,
    metric_names,
    parse_metric,
    requested_metrics,
)
from retrievalkit.retrievers.bm25 import BM25Retriever

EXTRA = ("ndcg_exp@5", "ndcg_exp@10", "ndcg_exp@20")


def test_the_name_and_its_ranx_alias_are_one_metric_outside_the_default_table() -> None:
    assert parse_metric("ndcg_burges@10") == parse_metric(" NDCG_EXP@10 ")
    assert parse_metric("ndcg_burges@10").name == "ndcg_exp@10"
    assert parse_metric("ndcg@10").name == "ndcg@10"
    # The default table is what it was: the exponential gain is there only when named.
    assert not any(name.startswith("ndcg_exp") for name in metric_names(DEFAULT_KS, judged=True))
    assert "ndcg_exp@10" in metric_names(DEFAULT_KS, extra=("ndcg_exp@10",))
    assert requested_metrics(["hit@1", "ndcg_burges@10", "stage.rerank:ndcg_exp@5"]) == (
        "ndcg_exp@5",
        "ndcg_exp@10",
    )
    with pytest.raises(ValueError, match="ndcg_burges@K"):
        parse_metric("ndcg_bruges@10")


def test_a_worked_example_by_hand() -> None:
    # Ranked: d1 (grade 1), d2 (grade 3), d3 (unjudged), d4 (grade 2); also judged: d5
    # (grade 3), never returned. Ideal order: 3, 3, 2, 1.
    judgments = {"d1": 1, "d2": 3, "d4": 2, "d5": 3}
    discount = [1 / math.log2(rank + 1) for rank in range(1, 5)]

    def ndcg(gains: list[float], ideal: list[float]) -> float:
        return sum(g * d for g, d in zip(gains, discount, strict=False)) / sum(
            g * d for g, d in zip(ideal, discount, strict=False)
        )

    linear = ndcg([1, 3, 0, 2], [3, 3, 2, 1])
    exponential = ndcg([1, 7, 0, 3], [7, 7, 3, 1])
    best_first = ndcg([3, 1, 0, 2], [3, 3, 2, 1]), ndcg([7, 1, 0, 3], [7, 7, 3, 1])
    table = compute_metrics(
        judge_rankings(
            [["d1", "d2", "d3", "d4"], ["d2", "d1", "d3", "d4"]], [judgments, judgments], 10
        ),
        (1, 3, 10),
        extra=("ndcg_exp@10",),
    )
    assert table["ndcg@10"].tolist() == pytest.approx([linear, best_first[0]], abs=1e-12)
    assert table["ndcg_exp@10"].tolist() == pytest.approx([exponential, best_first[1]], abs=1e-12)
    # The numbers the docs print (docs/metrics.md, "Exponential gain").
    assert [round(value, 3) for value in table["ndcg@10"]] == [0.594, 0.710]
    assert [round(value, 3) for value in table["ndcg_exp@10"]] == [0.503, 0.669]


def test_binary_grades_give_the_linear_value() -> None:
    rng = np.random.default_rng(3)
    pool = [f"d{i}" for i in range(40)]
    rankings = [list(rng.permutation(pool)[: rng.integers(0, 15)]) for _ in range(200)]
    judgments = [
        {doc: int(rng.integers(0, 2)) for doc in rng.choice(pool, 6, replace=False)}
        for _ in range(200)
    ]
    table = compute_metrics(
        judge_rankings(rankings, judgments, 10), (1, 3, 10), extra=("ndcg_exp@10",)
    )
    np.testing.assert_array_equal(table["ndcg_exp@10"], table["ndcg@10"])


def ranx_values(
    rankings: dict[str, list[str]], judgments: dict[str, dict[str, int]], metric: str
) -> dict[str, float]:
    from ranx import Qrels, Run, evaluate

    # ranx reads only positive grades as relevant gains, as grade >= 1 is relevant here.
    positive = {
        qid: {doc: grade for doc, grade in labels.items() if grade >= 1}
        for qid, labels in judgments.items()
    }
    qrels = Qrels.from_dict(positive)
    run = Run.from_dict(
        {
            qid: {doc: float(len(ranking) - rank) for rank, doc in enumerate(ranking)}
            for qid, ranking in rankings.items()
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        evaluate(qrels, run, metric, return_mean=False)
    return {qid: float(value) for qid, value in run.scores[metric].items()}


@pytest.fixture(scope="module")
def cranfield_rankings(data_dir: Path) -> dict[str, list[str]]:
    directory = data_dir / "cranfield"
    golden = load_beir(directory)
    retriever = BM25Retriever(directory / "corpus.jsonl", k1=1.2, b=0.75)
    return {q.id: retriever.retrieve(q.question, 20) for q in golden.questions}


@pytest.mark.parametrize("qrels", ["test.tsv", "test_readme_gain.tsv"])
def test_cranfield_graded_judgments_match_ranx_ndcg_burges(
    data_dir: Path, cranfield_rankings: dict[str, list[str]], qrels: str
) -> None:
    directory = data_dir / "cranfield"
    golden = load_beir(directory, qrels=directory / "qrels" / qrels)
    questions = [q for q in golden.questions if q.answerable]
    rankings = {q.id: cranfield_rankings[q.id] for q in questions}
    judgments = {q.id: q.judgments() for q in questions}
    assert any(grade >= 3 for labels in judgments.values() for grade in labels.values())
    ids = list(rankings)
    ours = compute_metrics(
        judge_rankings([rankings[i] for i in ids], [judgments[i] for i in ids], 20),
        (1, 3, 5, 10, 20),
        extra=EXTRA,
    )
    differ = 0
    for name in EXTRA:
        k = name.partition("@")[2]
        reference = ranx_values(rankings, judgments, f"ndcg_burges@{k}")
        for row, qid in enumerate(ids):
            assert ours[name][row] == pytest.approx(reference[qid], abs=1e-6), (name, qid)
        differ += int(np.sum(np.abs(ours[name] - ours[f"ndcg@{k}"]) > 1e-6))
    # Graded judgments: the two gains really differ, so the comparison is not trivial.
    assert differ > 100


def eval_json(cli: RunCli, *args: str) -> dict[str, object]:
    done = cli("eval", "--set", "demo", "--retriever", "bm25-demo", "--no-save",
               "--format", "json", "--resamples", "200", *args)  # fmt: skip
    assert done.returncode == 0, done.stderr
    document: dict[str, object] = json.loads(done.stdout)
    return document


def test_the_command_line_the_configuration_and_the_api_give_the_same_values(
    cli: RunCli, tmp_path: Path
) -> None:
    plain = eval_json(cli)
    metrics = plain["metrics"]
    assert isinstance(metrics, dict) and not any(name.startswith("ndcg_exp") for name in metrics)
    asked = eval_json(cli, "--metric", "ndcg_burges@10", "--metric", "ndcg_exp@20")
    asked_metrics = asked["metrics"]
    assert isinstance(asked_metrics, dict)
    assert {"ndcg_exp@10", "ndcg_exp@20", "ndcg@20"} <= set(asked_metrics)
    # Asking for more leaves the linear values alone (the interval's bounds to float32
    # rounding of the shared resamples, 1e-7).
    before, after = metrics["ndcg@10"], asked_metrics["ndcg@10"]
    assert isinstance(before, dict) and isinstance(after, dict)
    assert after["mean"] == before["mean"]
    assert after["ci"] == pytest.approx(before["ci"], abs=1e-7)
    config = tmp_path / "retrievalkit.toml"
    config.write_text('[eval]\nmetrics = ["NDCG_BURGES@10"]\n', encoding="utf-8")
    configured = eval_json(cli, "--config", str(config))
    configured_metrics = configured["metrics"]
    assert isinstance(configured_metrics, dict)
    assert configured_metrics["ndcg_exp@10"]["mean"] == asked_metrics["ndcg_exp@10"]["mean"]  # type: ignore[index]
    # A threshold on it computes it for the gate.
    thresholds = tmp_path / "gated.toml"
    thresholds.write_text('[regression.metrics]\n"ndcg_burges@20" = 0.05\n', encoding="utf-8")
    gated = eval_json(cli, "--config", str(thresholds))
    gated_metrics = gated["metrics"]
    assert isinstance(gated_metrics, dict) and "ndcg_exp@20" in gated_metrics
    run = rk.evaluate("demo", "bm25-demo", metrics=["ndcg_burges@10"], resamples=200,
                      git_commit=None)  # fmt: skip
    value = asked_metrics["ndcg_exp@10"]
    assert isinstance(value, dict)
    assert run.metrics["ndcg_exp@10"].mean == pytest.approx(value["mean"], abs=1e-12)
    assert run.metrics["ndcg_exp@10"].mean != run.metrics["ndcg@10"].mean


def test_a_misspelt_metric_is_refused_with_the_names_known(cli: RunCli, tmp_path: Path) -> None:
    done = cli("eval", "--set", "demo", "--retriever", "bm25-demo", "--metric", "ndcg_exq@10")
    assert done.returncode == 2 and "ndcg_exp@K" in done.stderr
    config = tmp_path / "retrievalkit.toml"
    config.write_text('[eval]\nmetrics = ["ndcg_exq@10"]\n', encoding="utf-8")
    done = cli("eval", "--set", "demo", "--retriever", "bm25-demo", "--config", str(config))
    assert done.returncode == 2 and "eval.metrics" in done.stderr


def test_extra_labels_rescore_a_requested_ndcg_exp_too() -> None:
    from retrievalkit.formats.labels import Label, label_effect

    run = rk.evaluate("demo", "bm25-demo", metrics=["ndcg_exp@10"], resamples=1, git_commit=None)
    outcomes = run.record.outcomes
    # Every unjudged document a question ranked first is graded 3: gains only rise.
    labels = [
        Label(o.question_id, o.ranking[0], 3, judge="local")
        for o in outcomes
        if o.ranking and o.ranking[0] not in o.judgments and o.judgments
    ]
    assert labels
    effect = label_effect(outcomes, run.record.manifest.ks, labels, sources=["labels.tsv"])
    assert effect.before["ndcg_exp@10"] == pytest.approx(run.metrics["ndcg_exp@10"].mean)
    after = effect.after["ndcg_exp@10"]
    before = effect.before["ndcg_exp@10"]
    assert after is not None and before is not None and after > before
    assert "ndcg_exp@10" not in label_effect(
        rk.evaluate("demo", "bm25-demo", resamples=1, git_commit=None).record.outcomes,
        run.record.manifest.ks, labels, sources=["labels.tsv"],
    ).after  # fmt: skip
