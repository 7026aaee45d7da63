"""``retrievalkit compare``: paired differences, intervals, p-values, Holm, win/tie/loss.

The command line runs as a subprocess in tmp_path with a ``retrievalkit.toml`` defining
real BM25 retrievers over the demo corpus: the demo retriever under another name (must
compare as identical), BM25 over titles only (clearly worse) and BM25 with other k1/b
and no stemming (a reshuffle). Unit tests build records from chosen rankings through
the same scoring as ``eval``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import by_hand
import pytest
from conftest import REPO, RunCli

from retrievalkit.demo import DEMO_CORPUS, DemoSetProvider
from retrievalkit.errors import InputError
from retrievalkit.metrics.scoring import ScoringOptions, score_run
from retrievalkit.model.records import ResultRecord
from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet, QuestionForm
from retrievalkit.pipeline.engine.evaluator import Retrieval
from retrievalkit.pipeline.engine.record import build_record
from retrievalkit.pipeline.gating.comparison import Side, compare_records, first_relevant_rank, holm

STATS: dict[str, Any] = {"resamples": 1000, "confidence": 0.95, "seed": 11}


@pytest.fixture
def systems(tmp_path: Path) -> Path:
    titles = tmp_path / "titles.jsonl"
    with titles.open("w", encoding="utf-8") as handle:
        for line in DEMO_CORPUS.read_text(encoding="utf-8").splitlines():
            document = json.loads(line)
            document["text"] = ""
            handle.write(json.dumps(document) + "\n")
    (tmp_path / "retrievalkit.toml").write_text(
        f"""
[retrievers.titles-only]
plugin = "bm25"
corpus = "{titles}"
doc_id_separator = "#"

[retrievers.loose-bm25]
plugin = "bm25"
corpus = "{DEMO_CORPUS}"
doc_id_separator = "#"
k1 = 3.0
b = 1.0
stemmer = ""

[retrievers.same-as-demo]
plugin = "bm25-demo"
""",
        encoding="utf-8",
    )
    return tmp_path


def compare_json(cli: RunCli, *args: str) -> dict[str, Any]:
    result = cli("compare", *args, "--format", "json")
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def by_metric(pair: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {delta["metric"]: delta for delta in pair["metrics"]}


def textbook_holm(p_values: Sequence[float]) -> list[float]:
    """Holm (1979) step-down, written out independently of retrievalkit's holm()."""
    order = sorted(range(len(p_values)), key=lambda index: p_values[index])
    adjusted = [0.0] * len(p_values)
    running = 0.0
    for step, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - step) * p_values[index]))
        adjusted[index] = running
    return adjusted


def test_a_weakened_retriever_is_significantly_worse(cli: RunCli, systems: Path) -> None:
    result = compare_json(
        cli, "--set", "demo", "--retriever", "bm25-demo", "--retriever", "titles-only"
    )
    assert result["shared_questions"] == 75 and result["same_set"] is True
    assert result["correction"] is None
    (pair,) = result["pairs"]
    assert (pair["baseline"], pair["candidate"]) == ("bm25-demo", "titles-only")
    hit3 = by_metric(pair)["hit@3"]
    assert hit3["baseline"] == pytest.approx(by_hand.hit_rate(by_hand.demo_rankings(), 3))
    assert hit3["difference"] == pytest.approx(hit3["candidate"] - hit3["baseline"])
    assert hit3["difference"] < -0.2
    low, high = hit3["ci"]
    assert low <= hit3["difference"] <= high < 0
    assert hit3["p_value"] < 0.01 and hit3["significant"] is True and hit3["p_holm"] is None
    assert hit3["verdict"] == "significant" and hit3["p_method"] == "exact"
    assert hit3["discordant"] == hit3["wins"] + hit3["losses"]
    assert hit3["p_floor"] == 2.0 ** (1 - hit3["discordant"])
    assert hit3["wins"] + hit3["ties"] + hit3["losses"] == hit3["n"] == 75
    assert hit3["losses"] - hit3["wins"] == round(-hit3["difference"] * 75)
    rr = by_metric(pair)["rr"]
    answerable = [q for q in DemoSetProvider().load("demo").questions if q.expected]
    assert rr["n"] == len(answerable) < 75  # no-answer questions have no rr

    changed = pair["changed"]
    assert pair["changed_by"] == "rr" and len(changed) == 10
    moves = [abs(change["difference"]) for change in changed]
    assert moves == sorted(moves, reverse=True)
    assert all(change["question"] for change in changed)  # the texts, from the set
    for change in changed:  # rr is 1 / the rank shown, or 0 with no relevant document
        for value, rank in (
            (change["baseline"], change["baseline_rank"]),
            (change["candidate"], change["candidate_rank"]),
        ):
            assert value == (0.0 if rank is None else pytest.approx(1 / rank))

    judged = {system["label"]: system["judged"] for system in result["systems"]}
    assert set(judged["bm25-demo"]) == {"judged@1", "judged@3", "judged@5", "judged@10"}
    assert judged["titles-only"]["judged@3"] < judged["bm25-demo"]["judged@3"] < 0.8
    warned = [w for w in result["warnings"] if "pooling bias" in w]
    assert [w.split(":")[0] for w in warned] == ["bm25-demo", "titles-only"]


def test_two_identical_retrievers_are_unresolvable_not_proven_equal(
    cli: RunCli, systems: Path
) -> None:
    result = compare_json(
        cli, "--set", "demo", "--retriever", "bm25-demo", "--retriever", "same-as-demo"
    )
    (pair,) = result["pairs"]
    # The 21 ranked metrics and judged@k at 4 cut-offs; the demo set has grade-0 labels, so
    # also bpref, infap and the condensed variant of each ranked metric.
    assert len(pair["metrics"]) == 25 + 2 + 21
    for delta in pair["metrics"]:
        # No question differs: nothing could be significant, and a zero difference on a
        # sample does not prove a zero difference in the population ([0, 0] would).
        share = 1 - 0.025 ** (1 / delta["n"])
        assert delta["difference"] == 0.0, delta
        assert delta["ci"] == pytest.approx([-share, share]) and delta["ci_method"] == "constant"
        assert delta["p_value"] == 1.0 and delta["significant"] is False, delta
        assert delta["discordant"] == 0 and delta["p_floor"] == 1.0
        assert delta["verdict"] == "unresolvable"
        assert delta["wins"] == delta["losses"] == 0 and delta["ties"] == delta["n"]
    assert pair["changed"] == []


def test_three_systems_get_holm_corrected_p_values(cli: RunCli, systems: Path) -> None:
    result = compare_json(
        cli,
        "--set",
        "demo",
        "--retriever",
        "bm25-demo",
        "--retriever",
        "titles-only",
        "--retriever",
        "loose-bm25",
        "--no-save",
    )
    assert result["correction"] == "holm"
    weak, loose = result["pairs"]
    assert weak["candidate"] == "titles-only" and loose["candidate"] == "loose-bm25"
    for metric in ("hit@1", "hit@3", "rr", "ndcg@10"):
        family = [by_metric(pair)[metric]["p_value"] for pair in (weak, loose)]
        adjusted = [by_metric(pair)[metric]["p_holm"] for pair in (weak, loose)]
        assert adjusted == pytest.approx(textbook_holm(family))
        assert all(a >= p for a, p in zip(adjusted, family, strict=True))
    assert by_metric(weak)["hit@3"]["significant"] is True
    assert by_metric(loose)["ndcg@10"]["significant"] is False
    assert (
        cli(
            "history", "--set", "demo", "--retriever", "loose-bm25", "--format", "json"
        ).stdout.strip()
        == "[]"
    )  # --no-save kept nothing


def test_stored_runs_compare_exactly_like_fresh_ones(cli: RunCli, systems: Path) -> None:
    fresh = compare_json(
        cli, "--set", "demo", "--retriever", "bm25-demo", "--retriever", "titles-only"
    )
    run_ids = [system["run_id"] for system in fresh["systems"]]
    stored = compare_json(cli, "--run", run_ids[0], "--run", run_ids[1])
    assert [s["run_id"] for s in stored["systems"]] == run_ids
    assert stored["pairs"][0]["metrics"] == fresh["pairs"][0]["metrics"]
    assert all(system["saved_to"] is None for system in stored["systems"])
    assert all(system["saved_to"] for system in fresh["systems"])

    # Mixed, in the order given: the stored titles-only run is now the baseline.
    mixed = compare_json(
        cli, "--run", run_ids[1], "--set", "demo", "--retriever", "bm25-demo", "--no-save"
    )
    assert [s["label"] for s in mixed["systems"]] == ["titles-only", "bm25-demo"]
    flipped = by_metric(mixed["pairs"][0])["hit@3"]
    original = by_metric(fresh["pairs"][0])["hit@3"]
    assert flipped["difference"] == pytest.approx(-original["difference"])
    assert (flipped["wins"], flipped["losses"]) == (original["losses"], original["wins"])


def test_runs_on_different_set_versions_need_allow_different_sets(
    cli: RunCli, systems: Path
) -> None:
    lines = (REPO / "retrievalkit" / "demo" / "golden.jsonl").read_text().splitlines()
    (systems / "part.jsonl").write_text("\n".join(lines[5:25]) + "\n", encoding="utf-8")
    whole = compare_json(
        cli, "--set", "demo", "--retriever", "bm25-demo", "--retriever", "same-as-demo"
    )
    part = cli("eval", "--set", "part.jsonl", "--retriever", "bm25-demo", "--format", "json")
    assert part.returncode == 0, part.stderr
    ids = [whole["systems"][0]["run_id"], json.loads(part.stdout)["run_id"]]

    refused = cli("compare", "--run", ids[0], "--run", ids[1])
    assert refused.returncode == 2
    assert "--allow-different-sets" in refused.stderr and "share 20 question ids" in refused.stderr

    allowed = compare_json(cli, "--run", ids[0], "--run", ids[1], "--allow-different-sets")
    assert allowed["same_set"] is False and allowed["shared_questions"] == 20
    assert "compared on the 20 question ids they share" in allowed["warnings"][0]
    hit1 = by_metric(allowed["pairs"][0])["hit@1"]
    assert hit1["n"] == 20 and hit1["difference"] == 0.0  # same retriever, same questions


def test_markdown_and_table_show_the_comparison_and_the_warnings(
    cli: RunCli, systems: Path
) -> None:
    args = (
        "compare",
        "--set",
        "demo",
        "--retriever",
        "bm25-demo",
        "--retriever",
        "titles-only",
        "--retriever",
        "loose-bm25",
        "--no-save",
        "--changed",
        "2",
    )
    markdown = cli(*args, "--format", "markdown")
    assert markdown.returncode == 0, markdown.stderr
    text = markdown.stdout
    # The row shows what the JSON of the same comparison holds, to three places.
    hit3 = by_metric(compare_json(cli, *args[1:])["pairs"][0])["hit@3"]
    assert hit3["significant"] is True
    assert "## titles-only against bm25-demo" in text and "## loose-bm25 against bm25-demo" in text
    assert "| metric | bm25-demo | titles-only | difference | CI | p | p (Holm) | W/T/L |" in text
    before, after, change = hit3["baseline"], hit3["candidate"], hit3["difference"]
    assert f"| hit@3 | {before:.3f} | {after:.3f} | {change:+.3f} * |" in text
    assert "## Warnings" in text and "pooling bias" in text
    assert "### Questions that changed most (rr)" in text

    table = cli(*args)
    assert table.returncode == 0, table.stderr
    assert "titles-only against bm25-demo" in table.stdout
    assert "judged @1 @3 @5 @10" in table.stdout
    assert "warning: titles-only: judged@1" in table.stdout
    assert "Holm-adjusted p < 0.05" in table.stdout


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--set", "demo", "--retriever", "bm25-demo"), "--retriever/--run"),
        ((), "--retriever/--run"),
        (("--retriever", "bm25-demo", "--retriever", "same-as-demo"), "--set"),
        (("--run", "20000101T000000Z-00000000", "--run", "x"), "--run"),
        (
            (
                "--set",
                "demo",
                "--retriever",
                "bm25-demo",
                "--retriever",
                "same-as-demo",
                "--changed-by",
                "hits@3",
                "--no-save",
            ),
            "--changed-by",
        ),
        (
            (
                "--set",
                "demo",
                "--retriever",
                "bm25-demo",
                "--retriever",
                "same-as-demo",
                "--changed",
                "-1",
            ),
            "--changed",
        ),
        (("--set", "demo", "--retriever", "bm25-demo", "--retriever", "nobody"), "nobody"),
        (
            (
                "--set",
                "demo",
                "--retriever",
                "bm25-demo",
                "--retriever",
                "same-as-demo",
                "--confidence",
                "1",
            ),
            "--confidence",
        ),
    ],
)
def test_bad_compare_usage_exits_2_and_names_the_option(
    cli: RunCli, systems: Path, args: tuple[str, ...], named: str
) -> None:
    result = cli("compare", *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert named in result.stderr
    assert result.stdout == ""


# --- the computation, on chosen rankings ------------------------------------------------------

QUESTIONS = (
    GoldenQuestion(id="a", question="alpha", form=QuestionForm.MATCH, expected=["d1"]),
    GoldenQuestion(
        id="b", question="beta", form=QuestionForm.GAP, expected=["d2"], grades={"d2": 2, "d9": 0}
    ),
    GoldenQuestion(id="c", question="gamma", expected=["d3"]),
    GoldenQuestion(id="d", question="delta", expected=[]),
)
GOLDEN = GoldenQuestionSet(name="tiny", questions=QUESTIONS)
SCORING = ScoringOptions(ks=(1, 3), resamples=200)


def record(rankings: Sequence[Sequence[str]], model: str = "sys") -> ResultRecord:
    retrievals = [Retrieval(tuple(ranking), 1.0) for ranking in rankings]
    scores = score_run(GOLDEN.questions, retrievals, SCORING)
    return build_record(GOLDEN, model, "test", {}, scores, SCORING, overfetch=1, git_commit=None)


def test_win_tie_loss_and_changes_follow_the_rankings() -> None:
    baseline = record([["d1"], ["x", "d2"], ["x", "y", "d3"], []], "base")
    candidate = record([["x", "d1"], ["d2"], ["x", "y", "d3"], ["x"]], "cand")
    comparison = compare_records(
        [Side("base", baseline), Side("cand", candidate)], **STATS, question_texts={"a": "alpha"}
    )
    (pair,) = comparison.pairs
    deltas = {delta.metric: delta for delta in pair.metrics}
    rr = deltas["rr"]
    assert (rr.wins, rr.ties, rr.losses, rr.n) == (1, 1, 1, 3)
    assert rr.difference == pytest.approx(((0.5 - 1) + (1 - 0.5) + 0) / 3)
    hit1 = deltas["hit@1"]  # the no-answer question counts: it got an answer now, a miss
    assert (hit1.wins, hit1.ties, hit1.losses, hit1.n) == (1, 1, 2, 4)
    assert [change.question_id for change in pair.changed] == ["a", "b"]
    first = pair.changed[0]
    assert (first.baseline_rank, first.candidate_rank, first.question) == (1, 2, "alpha")
    assert pair.changed[1].question == "beta"  # not given: the text the run stored
    assert [name for name in comparison.systems[0].judged] == ["judged@1", "judged@3"]


def test_a_single_system_or_a_missing_metric_is_refused() -> None:
    only = record([["d1"], ["d2"], ["d3"], []])
    with pytest.raises(InputError) as caught:
        compare_records([Side("only", only)], **STATS)
    assert caught.value.field == "--retriever/--run"
    with pytest.raises(InputError) as missing:
        compare_records([Side("a", only), Side("b", only)], changed_by="ndcg@10", **STATS)
    assert missing.value.field == "--changed-by"


def test_holm_matches_the_textbook_procedure() -> None:
    # m = 3: 0.01 * 3 = 0.03; 0.03 * 2 = 0.06; 0.04 * 1 = 0.04, raised to the running max 0.06.
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, None, 0.2]) == [0.5, None, 0.4]
    assert holm([0.9, 0.8]) == [1.0, 1.0]
    assert holm([]) == []


def test_first_relevant_rank_uses_grades_not_just_presence() -> None:
    outcome = record([["d1"], ["d9", "x", "d2"], [], []]).outcomes[1]
    assert first_relevant_rank(outcome) == 3  # d9 is judged, but grade 0
    assert first_relevant_rank(record([[], [], [], []]).outcomes[0]) is None


def test_the_columns_give_each_first_relevant_rank_without_decoding_ids(tmp_path: Path) -> None:
    import retrievalkit as rk
    from retrievalkit.metrics.scoring import as_columns

    made = record([["d1"], ["d9", "x", "d2"], ["y", "d3", "d3b"], ["x"]])
    store = rk.open_store(f"sqlite:///{tmp_path / 'runs.sqlite3'}")
    store.save(made)
    stored = store.get(made.run_id)
    assert stored is not None
    for outcomes in (made.outcomes, stored.outcomes):
        columns = as_columns(outcomes)
        ranks = [columns.first_relevant_rank(i) for i in range(len(columns))]
        assert ranks == [first_relevant_rank(outcome) for outcome in outcomes]
        assert ranks[1] == 3


def test_all_pairs_and_control_on_the_command_line(cli: RunCli, systems: Path) -> None:
    fresh = compare_json(
        cli,
        "--set", "demo", "--retriever", "bm25-demo", "--retriever", "titles-only",
        "--retriever", "loose-bm25",
    )  # fmt: skip
    ids = [system["run_id"] for system in fresh["systems"]]
    every = compare_json(cli, "--all-pairs", "--run", ids[0], "--run", ids[1], "--run", ids[2])
    assert len(every["pairs"]) == 3 and every["family"] == "pairs and metrics"
    hit1 = by_metric(every["pairs"][2])["hit@1"]
    assert hit1["p_adjusted"] is None or hit1["p_adjusted"] >= hit1["p_value"]
    control = compare_json(
        cli, "--control", "titles-only", *[part for i in ids for part in ("--run", i)]
    )
    assert [pair["baseline"] for pair in control["pairs"]] == ["titles-only", "titles-only"]
    lines = (REPO / "retrievalkit" / "demo" / "golden.jsonl").read_text().splitlines()
    (systems / "part.jsonl").write_text("\n".join(lines[5:25]) + "\n", encoding="utf-8")
    part = cli("eval", "--set", "part.jsonl", "--retriever", "bm25-demo", "--format", "json")
    part_id = json.loads(part.stdout)["run_id"]
    refused = cli(
        "compare", "--all-pairs", "--allow-different-sets", "--run", ids[0], "--run", part_id
    )
    assert refused.returncode == 2 and f"run {part_id}" in refused.stderr
    both = cli("compare", "--all-pairs", "--control", "x", "--run", ids[0], "--run", ids[1])
    assert both.returncode == 2
