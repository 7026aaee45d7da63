"""One metric registry: a name is parsed once into a Metric that every part reads."""

from __future__ import annotations

import random

import pytest

import retrievalkit as rk
from retrievalkit.metrics.definitions import HEADLINE, METRICS, metric_names, metric_order


@pytest.mark.parametrize(
    ("name", "family", "k", "trec_eval", "ir_measures"),
    [
        ("hit@3", "hit", 3, "success_3", "Success@3"),
        ("recall@100", "recall", 100, "recall_100", "R@100"),
        ("precision@5", "precision", 5, "P_5", "P@5"),
        ("ndcg@10", "ndcg", 10, "ndcg_cut_10", "nDCG@10"),
        ("ap@20", "ap", 20, "map_cut_20", "AP@20"),
        ("rr", "rr", None, "recip_rank", "RR"),
        ("judged@10", "judged", 10, None, "Judged@10"),
    ],
)
def test_a_name_parses_into_its_metric(
    name: str, family: str, k: int | None, trec_eval: str | None, ir_measures: str
) -> None:
    metric = rk.parse_metric(name)
    assert (metric.family.family, metric.k, metric.name, str(metric)) == (family, k, name, name)
    assert (metric.trec_eval, metric.ir_measures) == (trec_eval, ir_measures)
    assert metric.family.defined_for_no_answer == (family == "hit")


@pytest.mark.parametrize("name", ["hit", "rr@3", "hit@0", "hit@x", "ndgc@10", "", "@3", "hit@-1"])
def test_a_bad_name_is_refused_naming_the_known_ones(name: str) -> None:
    with pytest.raises(ValueError, match=r"unknown metric .*known: hit@K, recall@K.*rr"):
        rk.parse_metric(name)


def test_report_order_and_headline_come_from_the_registry() -> None:
    ordered = metric_names((1, 3, 10), judged=True)
    shuffled = ordered[:]
    random.Random(7).shuffle(shuffled)
    assert sorted(shuffled, key=metric_order) == ordered
    assert ordered[:3] == ["hit@1", "hit@3", "hit@10"] and ordered[-4:] == [
        "rr",
        "judged@1",
        "judged@3",
        "judged@10",
    ]
    assert [name for name in ordered if rk.parse_metric(name).headline] == [
        "hit@1",
        "hit@3",
        "ndcg@10",
        "rr",
    ]
    assert all(rk.parse_metric(name).headline for name in HEADLINE)
    assert metric_order("not-a-metric") > metric_order("judged@100")
    assert list(METRICS) == [
        "hit",
        "recall",
        "precision",
        "ndcg",
        "ndcg_exp",
        "ap",
        "rr",
        "bpref",
        "infap",
        "chunk_recall",
        "chunk_rr",
        "chunk_ndcg",
        "judged",
    ]


def test_the_configuration_refuses_what_the_parser_refuses(tmp_path: object) -> None:
    from pathlib import Path

    from retrievalkit.errors import InputError
    from retrievalkit.formats.config import parse_config

    path = Path(str(tmp_path)) / "retrievalkit.toml"
    path.write_text('[regression.metrics]\n"ndgc@10" = 0.1\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"unknown metric 'ndgc@10'"):
        parse_config({"regression": {"metrics": {"ndgc@10": 0.1}}}, path)
    config = parse_config({"regression": {"metrics": {"ndcg@20": 0.1}}}, path)
    assert config.regression.thresholds == {"ndcg@20": 0.1}


def test_names_are_read_case_blind_and_trimmed_and_k_is_bounded() -> None:
    from retrievalkit.formats.limits import MAX_K

    assert rk.parse_metric(" NDCG@10 ").name == "ndcg@10"
    assert rk.parse_metric("RR").name == "rr"
    assert rk.parse_metric(f"recall@{MAX_K}").k == MAX_K
    assert rk.parse_metric("hit@1").k == 1
    for name in (f"recall@{MAX_K + 1}", "hit@\u0663", "hit@3.0", "hit@ 3"):
        with pytest.raises(ValueError, match="unknown metric"):
            rk.parse_metric(name)


def test_the_cut_offs_always_hold_one_and_three_sorted_once() -> None:
    from retrievalkit.metrics.definitions import normalise_ks

    assert normalise_ks((10, 5, 5)) == (1, 3, 5, 10)
    assert normalise_ks(()) == (1, 3)
    assert normalise_ks((3, 1, 2)) == (1, 2, 3)


def test_headline_keeps_the_report_order_of_the_names_present() -> None:
    from retrievalkit.metrics.definitions import headline

    assert headline(["rr", "recall@3", "ndcg@10", "hit@1"]) == ["hit@1", "rr", "ndcg@10"]
    assert headline(iter(["hit@3", "hit@3"])) == ["hit@3"]
    assert headline([]) == []


def test_judged_at_k_is_named_only_when_asked_for() -> None:
    assert metric_names((1, 3)) == [
        "hit@1",
        "hit@3",
        "recall@1",
        "recall@3",
        "precision@1",
        "precision@3",
        "ndcg@1",
        "ndcg@3",
        "ap@1",
        "ap@3",
        "rr",
    ]
    assert metric_names((5,), judged=True)[-2:] == ["rr", "judged@5"]
