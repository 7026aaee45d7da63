"""Composed engines: fusion, reranking, and label-free index fidelity."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from retrievalkit.errors import InputError
from retrievalkit.pipeline.gating.fidelity import overlap_at, rank_biased_overlap
from retrievalkit.plugins.resolution import ResolvedRetriever
from retrievalkit.retrievers.fusion import FusionRetriever, create_fusion
from retrievalkit.retrievers.rerank import RerankRetriever

DEMO_CORPUS = Path(__file__).resolve().parents[1] / "retrievalkit" / "demo" / "corpus.jsonl"


class FixedRetriever:
    """Returns the same scored ranking for every question."""

    def __init__(self, scored: Sequence[tuple[str, float]]) -> None:
        self.identifier = "fixed"
        self._scored = list(scored)

    def retrieve(self, question: str, limit: int) -> list[str]:
        return [doc for doc, _ in self._scored[:limit]]

    def retrieve_scored(self, question: str, limit: int) -> list[tuple[str, float]]:
        return self._scored[:limit]


def part(name: str, scored: Sequence[tuple[str, float]]) -> ResolvedRetriever:
    return ResolvedRetriever(name, "fixed", {}, FixedRetriever(scored))


def test_rrf_adds_reciprocal_ranks() -> None:
    a = part("a", [("x", 9.0), ("y", 8.0), ("z", 7.0)])
    b = part("b", [("z", 5.0), ("x", 4.0)])
    fused = FusionRetriever([a, b], method="rrf", k=60).retrieve_scored("q", 3)
    expected = {"x": 1 / 61 + 1 / 62, "y": 1 / 62, "z": 1 / 63 + 1 / 61}
    assert [doc for doc, _ in fused] == ["x", "z", "y"]
    for doc, score in fused:
        assert score == pytest.approx(expected[doc])


def test_combsum_and_combmnz_use_min_max_normalised_scores() -> None:
    a = part("a", [("x", 10.0), ("y", 5.0), ("z", 0.0)])
    b = part("b", [("y", 3.0), ("w", 1.0)])
    combsum = dict(FusionRetriever([a, b], method="combsum").retrieve_scored("q", 4))
    assert combsum == pytest.approx({"x": 1.0, "y": 1.5, "z": 0.0, "w": 0.0})
    combmnz = dict(FusionRetriever([a, b], method="combmnz").retrieve_scored("q", 4))
    assert combmnz == pytest.approx({"x": 1.0, "y": 3.0, "z": 0.0, "w": 0.0})


def test_fusion_rejects_bad_options() -> None:
    with pytest.raises(InputError, match="at least two"):
        create_fusion(["only-one"])
    with pytest.raises(InputError, match="unknown method"):
        create_fusion(["a", "b"], method="borda")


class ReverseReranker:
    def rerank(self, question: str, candidates: Sequence[str]) -> list[tuple[str, float]]:
        # Scores only the first three candidates, in reverse order.
        return [(doc, float(index)) for index, doc in enumerate(candidates[:3])]


def test_rerank_reorders_candidates_and_keeps_the_rest_after() -> None:
    first = part("first", [(d, 0.0) for d in ["a", "b", "a", "c", "d", "e"]])
    reranked = RerankRetriever(first, ReverseReranker(), candidates=4).retrieve("q", 10)
    # Past the reranked candidates, the first stage fills the rest in its own order.
    assert reranked == ["c", "b", "a", "d", "e"]


def test_overlap_and_rbo() -> None:
    assert overlap_at(["a", "b", "c"], ["c", "b", "a"], 3) == 1.0
    assert overlap_at(["a", "b"], ["c", "d"], 2) == 0.0
    assert overlap_at(["a", "x", "y"], ["a", "b"], 3) == 0.5
    assert rank_biased_overlap(list("abcdef"), list("abcdef"), 6) == pytest.approx(1.0)
    assert rank_biased_overlap(list("abc"), list("xyz"), 3) == 0.0
    # Hand-computed RBO_ext, p = 0.5: X1 = 0, X2 = 2 -> 0.5 * 2/2 * 0.25 + (1/2)/(1/2) * ...
    value = rank_biased_overlap(["a", "b"], ["b", "a"], 2, p=0.5)
    assert value == pytest.approx(1.0 * 0.25 + 1.0 * (0 + 1.0 * 0.25))
    assert overlap_at(["a"], [], 3) != overlap_at(["a"], [], 3)  # NaN: undefined


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "retrievalkit", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture()
def composed_config(tmp_path: Path) -> Path:
    (tmp_path / "retrievalkit.toml").write_text(
        f"""
[retrievers.truncated]
plugin = "bm25"
corpus = "{DEMO_CORPUS}"
doc_id_separator = "#"
max_doc_words = 15

[retrievers.hybrid]
plugin = "fusion"
retrievers = ["bm25-demo", "truncated"]

[retrievers.reranked]
plugin = "rerank"
first_stage = "bm25-demo"
reranker = "tfidf-cosine"
candidates = 20
reranker_options = {{ corpus = "{DEMO_CORPUS}", doc_id_separator = "#" }}
""",
        encoding="utf-8",
    )
    return tmp_path


def test_fidelity_of_a_retriever_against_itself_is_one(composed_config: Path) -> None:
    done = run_cli(
        "fidelity",
        "--set",
        "demo",
        "--retriever",
        "bm25-demo",
        "--reference",
        "bm25-demo",
        "--format",
        "json",
        cwd=composed_config,
    )
    assert done.returncode == 0, done.stderr
    overall = json.loads(done.stdout)["overall"]
    # Every question agrees: the means are 1, and the intervals are the exact (Clopper-Pearson)
    # bounds for 75 successes in 75, whose lower end solves p**75 = 0.025: no zero-width [1, 1].
    for name in ("overlap@10", "rbo@10"):
        assert overall[name]["mean"] == 1.0
        assert overall[name]["n"] == 75
        assert overall[name]["low"] == pytest.approx(0.025 ** (1 / 75))
        assert overall[name]["high"] == 1.0


def test_fidelity_sees_a_truncated_index(composed_config: Path) -> None:
    done = run_cli(
        "fidelity",
        "--set",
        "demo",
        "--retriever",
        "truncated",
        "--reference",
        "bm25-demo",
        "--format",
        "json",
        cwd=composed_config,
    )
    assert done.returncode == 0, done.stderr
    overlap = json.loads(done.stdout)["overall"]["overlap@10"]
    assert overlap["high"] < 0.9


@pytest.mark.parametrize("name", ["hybrid", "reranked"])
def test_composed_retrievers_evaluate_and_name_their_parts(
    composed_config: Path, name: str
) -> None:
    done = run_cli(
        "eval",
        "--set",
        "demo",
        "--retriever",
        name,
        "--no-save",
        "--format",
        "json",
        cwd=composed_config,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["errored"] == 0
    assert "bm25-demo" in json.dumps(summary["manifest"]["extra"])
    assert 0.3 < summary["metrics"]["hit@3"]["mean"] <= 1.0


# --- the explicit resolver a composite's factory is handed -------------------------------------


def test_a_composite_gets_its_parts_from_the_resolver_it_is_handed(composed_config: Path) -> None:
    from retrievalkit.api import load_config
    from retrievalkit.plugins.resolution import Resolver

    config = load_config(composed_config / "retrievalkit.toml")
    fused = create_fusion(["bm25-demo", "truncated"], resolver=Resolver(config))
    assert [part.name for part in fused._parts] == ["bm25-demo", "truncated"]
    assert [part.options.get("max_doc_words") for part in fused._parts] == [None, 15]
    # without the configuration, the configured name means nothing
    with pytest.raises(Exception, match="unknown retriever 'truncated'"):
        create_fusion(["bm25-demo", "truncated"])


def test_a_sweep_builder_passed_to_the_resolver_builds_every_part(composed_config: Path) -> None:
    from retrievalkit.api import load_config
    from retrievalkit.plugins.resolution import resolve_retriever

    config = load_config(composed_config / "retrievalkit.toml")
    asked: list[str] = []

    def share(name, within, build):  # type: ignore[no-untyped-def]
        asked.append(name)
        return build(name, within)

    resolve_retriever("hybrid", config, share=share)
    assert asked == ["hybrid", "bm25-demo", "truncated"]


def test_resolver_is_not_an_option_a_user_can_set(composed_config: Path) -> None:
    import retrievalkit as rk

    with pytest.raises(InputError) as caught:
        rk.evaluate(
            "demo",
            "fusion",
            options={"retrievers": ["bm25-demo", "bm25-demo"], "resolver": "x"},
        )
    assert "'resolver' is not an option" in str(caught.value)
    with pytest.raises(InputError) as hinted:
        rk.evaluate("demo", "fusion", options={"retriever": ["bm25-demo"]})
    assert "it accepts:" in str(hinted.value) and "resolver" not in str(hinted.value)
