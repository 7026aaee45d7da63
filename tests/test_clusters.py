"""Clustered question sets: the cluster bootstrap's coverage and the clustered gate's false
alarms, by seeded simulation, and the cluster field end to end.

Questions come in 20 clusters of 5. A cluster draws one shared value from a population;
each member takes it with chance sqrt(ICC), else a fresh draw of its own, so two members
correlate by ICC (0, 0.25, 0.64, 1). The same simulations without clusters show the
coverage the per-question intervals fall to; benchmarks are not needed for these: each
simulation intervals every replicate in one call.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from retrievalkit.model.records import GRADER, ResultRecord
from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet, Manifest, QuestionOutcome
from retrievalkit.pipeline.gating.gate import compare_runs
from retrievalkit.stats.clusters import (
    CLUSTER_BOOTSTRAP,
    cluster_bootstrap_means,
    cluster_codes,
    questions_clusters,
)
from retrievalkit.stats.intervals import bootstrap_means

CLUSTERS, SIZE = 20, 5
ICCS = (0.0, 0.25, 0.64, 1.0)
CODES = np.repeat(np.arange(CLUSTERS), SIZE)


def clustered_samples(
    population: npt.NDArray[np.float64], icc: float, replicates: int, seed: int
) -> npt.NDArray[np.float64]:
    """(questions, replicates): each column one clustered sample of 20 x 5 questions."""
    rng = np.random.default_rng(seed)
    shared = population[rng.integers(0, len(population), (CLUSTERS, replicates))]
    own = population[rng.integers(0, len(population), (CLUSTERS, SIZE, replicates))]
    take = rng.random((CLUSTERS, SIZE, replicates)) < np.sqrt(icc)
    values = np.where(take, shared[:, None, :], own)
    return values.reshape(CLUSTERS * SIZE, replicates)


def coverage(
    population: npt.NDArray[np.float64],
    icc: float,
    *,
    clustered: bool,
    replicates: int = 1500,
    confidence: float = 0.95,
) -> float:
    samples = clustered_samples(population, icc, replicates, seed=int(icc * 100) + 7)
    everyone = np.ones((1, len(samples)), dtype=bool)
    if clustered:
        estimates = cluster_bootstrap_means(
            samples, everyone, CODES, resamples=1000, confidence=confidence
        )[0]
    else:
        estimates = bootstrap_means(samples, everyone, resamples=1000, confidence=confidence)[0]
    truth = float(population.mean())
    covered = [e.low is not None and e.low <= truth <= e.high for e in estimates]  # type: ignore[operator]
    return float(np.mean(covered))


@pytest.fixture(scope="module")
def rate_population() -> npt.NDArray[np.float64]:
    return (np.random.default_rng(1).random(1000) < 0.3).astype(np.float64)


@pytest.mark.parametrize("icc", ICCS)
def test_the_cluster_bootstrap_covers_a_rate_at_every_icc(
    rate_population: npt.NDArray[np.float64], icc: float
) -> None:
    assert coverage(rate_population, icc, clustered=True) >= 0.935


@pytest.mark.parametrize("icc", ICCS)
def test_the_cluster_bootstrap_covers_reciprocal_ranks_at_every_icc(
    bm25_populations: dict[str, Any], icc: float
) -> None:
    assert coverage(bm25_populations["rr"], icc, clustered=True) >= 0.935


def test_the_simulation_has_teeth(
    bm25_populations: dict[str, Any], rate_population: npt.NDArray[np.float64]
) -> None:
    """Per-question intervals of clustered questions, and a 90 % cluster interval, fail it."""
    assert coverage(bm25_populations["rr"], 0.64, clustered=False) < 0.8
    assert coverage(rate_population, 0.25, clustered=False) < 0.9
    assert coverage(bm25_populations["rr"], 0.25, clustered=True, confidence=0.90) < 0.935


def _record(values: npt.NDArray[np.float64], name: str) -> ResultRecord:
    manifest = Manifest("t", "sim", "sim", "r", "r", {}, "", "2026-01-01T00:00:00Z", (1,),
                        3, 0.95, 100, 1)  # fmt: skip
    outcomes = tuple(
        QuestionOutcome(f"q{i}", (), {"hit@1": value}, 0.0) for i, value in enumerate(values)
    )
    return ResultRecord(name, "sim", "r", GRADER, 0.0, 0.0, {}, {}, outcomes, manifest)


def gate_false_alarms(icc: float, *, clustered: bool, replicates: int = 200) -> float:
    population = (np.random.default_rng(2).random(1000) < 0.5).astype(np.float64)
    baselines = clustered_samples(population, icc, replicates, seed=31 + int(icc * 100))
    candidates = clustered_samples(population, icc, replicates, seed=57 + int(icc * 100))
    questions = [
        GoldenQuestion(f"q{i}", "q", expected=("d",), cluster=f"c{code}")
        for i, code in enumerate(CODES.tolist())
    ]
    alarms = 0
    for replicate in range(replicates):
        verdict = compare_runs(
            _record(candidates[:, replicate], "cand").outcomes,
            "sim",
            _record(baselines[:, replicate], "base"),
            {"hit@1": 0.0},
            resamples=20,
            confidence=0.95,
            seed=replicate,
            require_significant=True,
            questions=questions,
            cluster_by="cluster" if clustered else None,
        )
        alarms += verdict.regressed
    return alarms / replicates


@pytest.mark.parametrize("icc", ICCS)
def test_the_clustered_gate_rarely_fails_an_a_a_run(icc: float) -> None:
    assert gate_false_alarms(icc, clustered=True) <= 0.05


def test_the_gate_without_clusters_fails_clustered_a_a_runs_too_often() -> None:
    assert gate_false_alarms(0.64, clustered=False) > 0.05


def test_cluster_codes_number_clusters_in_order_and_unlabelled_questions_alone() -> None:
    assert cluster_codes(["b", None, "a", "b", None]).tolist() == [0, 1, 2, 0, 3]
    questions = [
        GoldenQuestion("1", "x", expected=("d1",)),
        GoldenQuestion("2", "y", expected=("d2", "d3")),
        GoldenQuestion("3", "z", expected=("d3",)),
        GoldenQuestion("4", "w", expected=()),
    ]
    # d3 joins 2 and 3; a no-answer question is a cluster of its own.
    assert questions_clusters(questions, "expected").tolist() == [0, 1, 1, 2]


def test_a_set_without_clusters_hashes_as_before_and_a_cluster_changes_the_hash() -> None:
    plain = GoldenQuestionSet("s", [GoldenQuestion("1", "x", expected=("d",))])
    # The canonical JSON of the fields a question had before clusters existed.
    assert plain.content_hash == _hash_without_cluster(plain)
    clustered = GoldenQuestionSet("s", [GoldenQuestion("1", "x", expected=("d",), cluster="c")])
    assert clustered.content_hash != plain.content_hash


def _hash_without_cluster(golden: GoldenQuestionSet) -> str:
    import hashlib

    data = [
        {
            "expected": list(q.expected),
            "form": None,
            "gist": q.gist,
            "grades": dict(q.grades),
            "hard_class": q.hard_class,
            "id": q.id,
            "meta": dict(q.meta),
            "question": q.question,
        }
        for q in golden.questions
    ]
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_eval_and_compare_with_cluster_by_name_the_method_and_the_clusters(
    cli: Any, tmp_path: Path
) -> None:
    golden = tmp_path / "set.jsonl"
    lines = [
        {"id": f"q{i}", "question": f"apple banana {i}", "expected": [f"d{i % 4}"],
         "cluster": f"c{i % 4}"}
        for i in range(12)
    ]  # fmt: skip
    golden.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    first = cli("eval", "--set", str(golden), "--retriever", "bm25-demo", "--store", store,
                "--cluster-by", "cluster", "--format", "json")  # fmt: skip
    document = json.loads(first.stdout)
    assert document["cluster_by"] == "cluster"
    hit = document["metrics"]["hit@1"]
    assert hit["method"] == CLUSTER_BOOTSTRAP and hit["clusters"] == 4
    second = cli("eval", "--set", str(golden), "--retriever", "bm25-demo", "--store", store,
                 "--cluster-by", "cluster", "--format", "json")  # fmt: skip
    checked = json.loads(second.stdout)["regression"]
    assert checked["cluster_by"] == "cluster"
    assert all(item["clusters"] == 4 for item in checked["checked"])
    runs = [document["run_id"], json.loads(second.stdout)["run_id"]]
    compared = cli("compare", "--run", runs[0], "--run", runs[1], "--store", store,
                   "--cluster-by", "cluster", "--format", "json")  # fmt: skip
    pair = json.loads(compared.stdout)["pairs"][0]["metrics"][0]
    assert pair["p_method"].startswith("cluster-") and pair["clusters"] == 4
    table = cli("compare", "--run", runs[0], "--run", runs[1], "--store", store,
                "--cluster-by", "cluster")  # fmt: skip
    assert "4 clusters (by cluster)" in table.stdout


def test_eval_without_cluster_by_warns_about_related_questions(cli: Any, tmp_path: Path) -> None:
    result = cli("eval", "--set", "demo", "--retriever", "bm25-demo", "--store",
                 f"sqlite:///{tmp_path / 'runs.db'}", "--no-save", "--format", "json")  # fmt: skip
    assert "share expected documents with another" in result.stderr
    assert "--cluster-by expected" in result.stderr
    assert "warnings" in json.loads(result.stdout)


def test_an_unknown_cluster_field_is_refused_naming_the_accepted_ones(
    cli: Any, tmp_path: Path
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    unknown = cli("eval", "--set", "demo", "--retriever", "bm25-demo", "--store", store,
                  "--cluster-by", "colour")  # fmt: skip
    assert unknown.returncode == 2 and "meta.NAME" in unknown.stderr
    power = cli("power", "--set", "demo", "--cluster-by", "colour")
    assert power.returncode == 2 and "meta.NAME" in power.stderr


def test_every_set_format_reads_a_cluster_and_a_bad_one_is_named(tmp_path: Path) -> None:
    from retrievalkit.errors import InputError
    from retrievalkit.formats.golden_sets import load_set_file, write_jsonl

    lines = tmp_path / "set.jsonl"
    lines.write_text(
        '{"id": "a", "question": "x?", "expected": ["d"], "cluster": "fam-1"}\n'
        '{"id": "b", "question": "y?", "expected": ["d"]}\n',
        encoding="utf-8",
    )
    loaded = load_set_file(lines)
    assert [q.cluster for q in loaded.questions] == ["fam-1", None]
    again = tmp_path / "again.jsonl"
    write_jsonl(loaded.questions, again)
    assert load_set_file(again).questions == loaded.questions
    assert '"cluster"' not in again.read_text(encoding="utf-8").splitlines()[1]
    toml = tmp_path / "set.toml"
    toml.write_text(
        '[[questions]]\nid = "a"\nquestion = "x?"\nexpected = ["d"]\ncluster = "fam-1"\n',
        encoding="utf-8",
    )
    assert load_set_file(toml).questions[0].cluster == "fam-1"
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "queries.jsonl").write_text(
        '{"_id": "1", "text": "x?", "metadata": {"cluster": "fam-2"}}\n'
        '{"_id": "2", "text": "y?"}\n',
        encoding="utf-8",
    )
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n1\td\t1\n2\td\t1\n")
    assert [q.cluster for q in load_set_file(beir).questions] == ["fam-2", None]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "question": "x?", "expected": ["d"], "cluster": ""}\n')
    with pytest.raises(InputError) as caught:
        load_set_file(bad)
    assert caught.value.field == "cluster" and caught.value.line == 1


def test_a_stored_clustered_run_reads_back_with_its_clusters(tmp_path: Path) -> None:
    from retrievalkit.api import evaluate
    from retrievalkit.retrievers.bm25 import create_bm25_demo
    from retrievalkit.stores.sqlite import SQLiteStore

    golden = GoldenQuestionSet(
        "tiny",
        [
            GoldenQuestion(
                f"q{i}", f"membership fee {i}", expected=(f"d{i % 3}",), cluster=f"c{i % 3}"
            )
            for i in range(9)
        ],
    )
    run = evaluate(golden, create_bm25_demo(), name="bm25", cluster_by="cluster", git_commit=None)
    store = SQLiteStore(tmp_path / "runs.sqlite3")
    store.save(run.record)
    stored = store.get(run.record.run_id)
    assert stored is not None and stored.cluster_by == "cluster"
    assert dict(stored.clusters) == {f"q{i}": f"c{i % 3}" for i in range(9)}
    assert stored.metrics["hit@1"] == run.record.metrics["hit@1"]
    assert stored.metrics["hit@1"].clusters == 3
