"""Stages in one run: every stage of a composed retriever scored, misses put down to a stage."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

import retrievalkit as rk
from retrievalkit.metrics.definitions import canonical_metric_name as check_metric_name
from retrievalkit.metrics.names import split_stage_metric
from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet
from retrievalkit.pipeline.engine.stages import (
    BELOW_K,
    NOT_RETRIEVED,
    attribute,
    record_mean,
)
from retrievalkit.plugins.resolution import ResolvedRetriever
from retrievalkit.render.markdown import render_markdown
from retrievalkit.render.summary import EvalReport, summary
from retrievalkit.retrievers.fusion import FusionRetriever
from retrievalkit.retrievers.rerank import RerankRetriever

DEMO_CORPUS = Path(__file__).resolve().parents[1] / "retrievalkit" / "demo" / "corpus.jsonl"
ORDER = ("engine.bm25", "engine.dense", "engine.fusion", "rerank")


def test_a_miss_goes_to_the_first_stage_that_lost_it() -> None:
    # bm25 had it in its top k; the fusion did not keep it.
    assert attribute(ORDER, [True, False, False, False], [True] * 4, True) == (
        "lost in fusion (engine.fusion)"
    )
    # The fusion kept it; the reranker pushed it out.
    assert attribute(ORDER, [False, True, True, False], [True] * 4, True) == "demoted by reranker"
    assert attribute(ORDER, [False] * 4, [False] * 4, True) == NOT_RETRIEVED
    assert attribute(ORDER, [False] * 4, [False, True, False, False], True) == BELOW_K
    # No stage had it in its top k but the reranker: rescued.
    assert attribute(ORDER, [False, False, False, True], [True] * 4, True) == "rescued by reranker"
    assert attribute(ORDER, [False, False, True, True], [True] * 4, True) == (
        "rescued by fusion (engine.fusion)"
    )
    # Kept all the way, errored or unanswerable: nothing to say.
    assert attribute(ORDER, [True] * 4, [True] * 4, True) is None
    assert attribute(ORDER, [False] * 4, [False] * 4, False) is None


def test_a_reranker_consumes_only_the_answer_of_its_first_stage() -> None:
    # The lexical leg had it, the fusion lost it, the reranker brought it back: a rescue.
    assert attribute(ORDER, [True, False, False, True], [True] * 4, True) == "rescued by reranker"


def test_stage_metric_names() -> None:
    assert split_stage_metric("stage.engine.fusion:ndcg@10") == ("engine.fusion", "ndcg@10")
    assert split_stage_metric("ndcg@10") is None
    assert check_metric_name("stage.rerank:NDCG@10") == "stage.rerank:ndcg@10"
    with pytest.raises(ValueError, match=r"stage\.STAGE:METRIC"):
        split_stage_metric("stage.rerank")
    with pytest.raises(ValueError, match="unknown metric"):
        check_metric_name("stage.rerank:bogus@3")


class Fixed:
    """The same ranking for every question."""

    def __init__(self, ranking: Sequence[str]) -> None:
        self.identifier = "fixed"
        self.ranking = list(ranking)

    def retrieve(self, question: str, limit: int) -> list[str]:
        return self.ranking[:limit]


class Reverse:
    def rerank(self, question: str, candidates: Sequence[str]) -> list[tuple[str, float]]:
        return [(doc, float(index)) for index, doc in enumerate(candidates)]


def composed(candidates: int = 3) -> RerankRetriever:
    legs = [
        ResolvedRetriever("a", "fixed", {}, Fixed(["x", "y", "z", "w"])),
        ResolvedRetriever("b", "fixed", {}, Fixed(["y", "x", "v"])),
    ]
    fusion = FusionRetriever(legs, k=60, identifier="engine")
    first = ResolvedRetriever("engine", "fusion", {}, fusion)
    return RerankRetriever(first, Reverse(), candidates=candidates)


def test_composites_nest_their_parts_stages_and_answer_with_the_last() -> None:
    retriever = composed()
    stages = retriever.retrieve_stages("q", 5)
    assert list(stages) == ["engine.a", "engine.b", "engine.fusion", "rerank"]
    assert stages["engine.fusion"] == FusionRetriever(
        [
            ResolvedRetriever("a", "fixed", {}, Fixed(["x", "y", "z", "w"])),
            ResolvedRetriever("b", "fixed", {}, Fixed(["y", "x", "v"])),
        ]
    ).retrieve("q", 5)
    assert stages["rerank"] == retriever.retrieve("q", 5)


def test_rerank_fills_past_its_candidates_from_the_first_stage() -> None:
    # Asked for 5 with 3 candidates: 3 reordered, then the first stage's 4th and 5th.
    answer = composed(candidates=3).retrieve("q", 5)
    fused = composed().retrieve_stages("q", 5)["engine.fusion"]
    assert len(answer) == 5
    assert answer[:3] == list(reversed(fused[:3]))
    assert answer[3:] == fused[3:5]


@pytest.fixture()
def staged_config(tmp_path: Path) -> Path:
    path = tmp_path / "retrievalkit.toml"
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

[retrievers.reranked]
plugin = "rerank"
first_stage = "hyb"
reranker = "tfidf-cosine"
candidates = 5
reranker_options = {{ corpus = "{DEMO_CORPUS}", doc_id_separator = "#" }}
""",
        encoding="utf-8",
    )
    return path


def test_every_stage_scores_as_its_own_run(staged_config: Path) -> None:
    run = rk.evaluate("demo", "reranked", config=staged_config, git_commit=None)
    stages = run.record.stages
    assert stages is not None
    assert stages.order == ("hyb.bm25-demo", "hyb.truncated", "hyb.fusion", "rerank")
    # A leg's stage is what evaluating that leg alone gives; the last stage is the answer.
    for stage, name in (("hyb.bm25-demo", "bm25-demo"), ("hyb.truncated", "truncated")):
        alone = rk.evaluate("demo", name, config=staged_config, git_commit=None)
        assert stages.metrics[stage] == alone.metrics
    fused = rk.evaluate("demo", "hyb", config=staged_config, git_commit=None)
    assert stages.metrics["hyb.fusion"] == fused.metrics
    assert stages.metrics["rerank"] == run.metrics
    # The paired difference is the difference of the two stages' means.
    delta = stages.deltas["rerank"]["rr"]
    assert delta.difference == pytest.approx(run.metrics["rr"].mean - fused.metrics["rr"].mean)
    assert delta.ci is not None and delta.ci[0] <= delta.difference <= delta.ci[1]
    assert "hyb.bm25-demo" not in stages.deltas
    # Each miss of the answer is put down to exactly one label.
    answerable = [q for q in run.set.questions if q.answerable]
    misses = [o for o in run.outcomes if o.scores.get("hit@10") == 0.0 and o.expected]
    counted = sum(n for label, n in stages.attribution.items() if not label.startswith("rescued"))
    assert counted == len(misses) <= len(answerable)
    assert record_mean(run.record, "stage.rerank:rr") == run.metrics["rr"].mean


def test_stages_are_stored_shown_and_gated(staged_config: Path, tmp_path: Path) -> None:
    store = rk.open_store(f"sqlite:///{tmp_path / 'runs.sqlite3'}")
    first = rk.evaluate("demo", "reranked", config=staged_config, git_commit=None)
    store.save(first.record)
    stored = store.get(first.run_id)
    assert stored is not None and stored.stages == first.record.stages
    second = rk.evaluate("demo", "reranked", config=staged_config, git_commit=None)
    verdict = rk.gate(second, store, {"stage.rerank:rr": 0.0, "stage.hyb.fusion:hit@10": 0.0})
    checked = {item.metric: item for item in verdict.checked}
    assert checked["stage.rerank:rr"].difference == 0.0
    assert checked["stage.hyb.fusion:hit@10"].baseline == pytest.approx(
        first.record.stages.metrics["hyb.fusion"]["hit@10"].mean  # type: ignore[union-attr]
    )
    report = EvalReport(second.record, second.set.questions, verdict, None)
    document = summary(report)["stages"]
    assert document["order"][-1] == "rerank"
    assert "rerank_delta_rr" in document["deltas"]
    assert sum(document["attribution"].values()) == len(document["questions"])
    markdown = render_markdown(report)
    assert "## Stages" in markdown and "lost in fusion" in markdown
    from retrievalkit.render.html_report import render_html_report
    from retrievalkit.render.run_report import build_run_report

    page = render_html_report(build_run_report(stored, store="memory:", history=[stored]))
    assert '<section id="stages">' in page and "hyb.fusion" in page


def test_a_run_without_stages_has_none_and_stores_no_stages_key(staged_config: Path) -> None:
    from retrievalkit.stores.serialization import dump_summary

    run = rk.evaluate("demo", "bm25-demo", config=staged_config, git_commit=None)
    assert run.record.stages is None
    assert '"stages"' not in dump_summary(run.record)
    assert not any(name.startswith("stage.") for name in run.outcomes.metric_names)


def test_a_stage_that_errors_is_an_error_outcome() -> None:
    class Broken:
        identifier = "broken"

        def retrieve(self, question: str, limit: int) -> list[str]:
            return []

        def retrieve_stages(self, question: str, limit: int) -> object:
            if question == "bad":
                return {"only": ["d1"]}
            return {"first": ["d1"], "last": ["d1", "d2"]}

    golden = GoldenQuestionSet(
        "tiny",
        (
            GoldenQuestion("q1", "good", expected=("d2",)),
            GoldenQuestion("q2", "bad", expected=("d1",)),
        ),
    )
    run = rk.evaluate(golden, Broken(), git_commit=None, max_error_rate=None)
    assert run.errored == 1
    assert "not those of the first question" in (run.outcomes[1].error or "")
    assert run.record.stages is not None
    assert run.record.stages.order == ("first", "last")
    # Neither stage consumes the other (only fusion and rerank stages do): no attribution.
    assert run.record.stages.questions == {}


def test_eval_shows_the_stage_table_and_history_a_stage_metric(
    staged_config: Path, tmp_path: Path
) -> None:
    store = f"sqlite:///{tmp_path / 'cli.sqlite3'}"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "retrievalkit", *args, "--config", str(staged_config)],
            capture_output=True,
            text=True,
            check=False,
            cwd=tmp_path,
        )

    done = cli("eval", "--set", "demo", "--retriever", "reranked", "--store", store)
    assert done.returncode == 0, done.stderr
    assert "Stages" in done.stdout and "lost in fusion" in done.stdout
    shown = cli(
        "history", "--set", "demo", "--retriever", "reranked", "--store", store,
        "--metric", "stage.hyb.fusion:rr", "--format", "json",
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    (entry,) = json.loads(shown.stdout)
    assert entry["stage.hyb.fusion:rr"] is not None
    bad = cli("history", "--set", "demo", "--retriever", "reranked", "--metric", "stage.x")
    assert bad.returncode == 2 and "stage.STAGE:METRIC" in bad.stderr


def test_a_sequential_run_scores_and_gates_every_stage(staged_config: Path, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.sqlite3'}"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "retrievalkit", "eval", "--set", "demo", "--retriever",
             "reranked", "--store", store, "--config", str(staged_config), *args],
            capture_output=True, text=True, check=False, cwd=tmp_path,
        )  # fmt: skip

    first = cli("--format", "json")
    assert first.returncode == 0, first.stderr
    whole = json.loads(first.stdout)["stages"]
    # An identical rerun with no drop allowed asks the whole set: the same stages.
    with staged_config.open("a", encoding="utf-8") as config:
        config.write('\n[regression.metrics]\n"stage.hyb.fusion:rr" = 0.0\n')
    again = cli("--sequential", "--format", "json")
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["stages"] is not None
    assert report["stages"]["order"] == whole["order"]
    assert report["stages"]["metrics"] == whole["metrics"]
    gates = {gate["metric"]: gate for gate in report["regression"]["sequential"]["gates"]}
    fused = gates["stage.hyb.fusion:rr"]
    assert fused["decision"] == "pass" and fused["population"] > 0 and fused["difference"] == 0
