"""``retrievalkit pool`` and ``rk.pool``: which unjudged (question, document) pairs to label
next, on real runs saved to a SQLite store on disk."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from conftest import RunCli

import retrievalkit as rk
from retrievalkit.errors import InputError
from retrievalkit.formats.labels import Label, write_labels
from retrievalkit.model.records import ResultRecord
from retrievalkit.model.values import GoldenQuestion
from retrievalkit.pipeline.authoring.pool import build_pool, check_depth, check_runs, pair_weight

DEMO_CORPUS = Path(rk.__file__).parent / "demo" / "corpus.jsonl"
STORE = "sqlite:///runs.sqlite3"


class Fixed:
    """A retriever that answers each question with a ranking given by hand."""

    def __init__(self, name: str, rankings: dict[str, list[str]]) -> None:
        self.identifier = name
        self.rankings = rankings

    def retrieve(self, question: str, limit: int) -> list[str]:
        return self.rankings[question][:limit]


def write_set(path: Path, questions: Sequence[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(q) + "\n" for q in questions), encoding="utf-8")
    return path


def save_runs(
    tmp_path: Path, set_path: Path, rankings: dict[str, dict[str, list[str]]], k: tuple[int, ...]
) -> list[ResultRecord]:
    """Evaluate each named retriever on the set and save its run to the store on disk."""
    golden = rk.load_set(set_path)
    store = rk.open_store(f"sqlite:///{tmp_path / 'runs.sqlite3'}")
    records = []
    for name, answers in rankings.items():
        run = rk.evaluate(golden, Fixed(name, answers), k=k, git_commit=None, resamples=20)
        store.save(run.record)
        records.append(run.record)
    return records


def pool_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# --- the worked examples ------------------------------------------------------------------


@pytest.fixture
def two_runs(tmp_path: Path) -> tuple[Path, list[ResultRecord]]:
    """One question, depth 3: run A ranks d1, d2, d3 and run B ranks d3, d1, d4; the only
    labelled document (d9) is ranked by neither."""
    path = write_set(
        tmp_path / "example.jsonl", [{"id": "q1", "question": "what?", "expected": ["d9"]}]
    )
    records = save_runs(
        tmp_path,
        path,
        {"A": {"what?": ["d1", "d2", "d3"]}, "B": {"what?": ["d3", "d1", "d4"]}},
        k=(1, 3),
    )
    return path, records


def test_the_worked_example_of_the_dcg_priority(two_runs: tuple[Path, list[ResultRecord]]) -> None:
    """disc(r) = 1 / log2(1 + r): disc(1) = 1, disc(2) = 1 / log2 3 = 0.630930, disc(3) = 0.5.

    d1: A rank 1, B rank 2: |1 - 0.630930| = 0.369070
    d2: A rank 2, B none:   |0.630930 - 0| = 0.630930
    d3: A rank 3, B rank 1: |0.5 - 1|      = 0.5
    d4: A none,   B rank 3: |0 - 0.5|      = 0.5
    Order: d2, then d3 and d4 (tied: d3's best rank 1 before d4's 3), then d1.
    """
    path, records = two_runs
    pool = rk.pool(path, [r.run_id for r in records], depth=3, store=records_store(path))
    assert [pair.document for pair in pool.pairs] == ["d2", "d3", "d4", "d1"]
    assert [pair.priority for pair in pool.pairs] == pytest.approx(
        [0.630930, 0.5, 0.5, 0.369070], abs=1e-6
    )
    a, b = (r.run_id for r in records)
    assert [(rank.run, rank.rank) for rank in pool.pairs[3].runs] == [(a, 1), (b, 2)]
    assert [(rank.run, rank.rank) for rank in pool.pairs[0].runs] == [(a, 2)]
    assert (pool.unjudged, pool.judged, pool.questions) == (4, 0, 1)


def records_store(set_path: Path) -> str:
    return f"sqlite:///{set_path.parent / 'runs.sqlite3'}"


def test_the_worked_example_of_the_precision_and_depth_priorities(
    two_runs: tuple[Path, list[ResultRecord]],
) -> None:
    """precision@3: 1/3 for a document in one top 3 only (d2, d4), 0 for one in both (d1,
    d3); ties by best rank: d2 (2) before d4 (3), d1 and d3 (both 1, both runs) by id.
    depth: 1 / best rank: d1 and d3 1.0 (by id), d2 0.5, d4 1/3."""
    path, records = two_runs
    ids = [r.run_id for r in records]
    by_precision = rk.pool(path, ids, depth=3, priority="precision", store=records_store(path))
    assert [(p.document, p.priority) for p in by_precision.pairs] == [
        ("d2", pytest.approx(1 / 3)),
        ("d4", pytest.approx(1 / 3)),
        ("d1", 0.0),
        ("d3", 0.0),
    ]
    by_depth = rk.pool(path, ids, depth=3, priority="depth", store=records_store(path))
    assert [(p.document, p.priority) for p in by_depth.pairs] == [
        ("d1", 1.0),
        ("d3", 1.0),
        ("d2", 0.5),
        ("d4", pytest.approx(1 / 3)),
    ]


def test_three_runs_sum_the_weights_over_every_pair_of_runs(tmp_path: Path) -> None:
    """A ranks z, b, c; B ranks c, z, d; C ranks b, e, z (depth 3).

    dcg, summed over the pairs (A, B), (A, C), (B, C):
    z: gains 1, 0.630930, 0.5  -> 0.369070 + 0.5 + 0.130930 = 1.0
    b: gains 0.630930, 0, 1    -> 0.630930 + 0.369070 + 1   = 2.0
    c: gains 0.5, 1, 0         -> 0.5 + 0.5 + 1             = 2.0
    d: gains 0, 0.5, 0         -> 0.5 + 0 + 0.5             = 1.0
    e: gains 0, 0, 0.630930    -> 0 + 0.630930 + 0.630930   = 1.261860
    Order: b, c (2.0, best rank 1, two runs: by id), e, z (1.0, best rank 1) before d.
    depth: z (best rank 1, three runs) before b and c (best rank 1, two runs), then e, d.
    """
    path = write_set(tmp_path / "three.jsonl", [{"id": "q1", "question": "x?", "expected": ["y"]}])
    records = save_runs(
        tmp_path,
        path,
        {
            "A": {"x?": ["z", "b", "c"]},
            "B": {"x?": ["c", "z", "d"]},
            "C": {"x?": ["b", "e", "z"]},
        },
        k=(3,),
    )
    ids = [r.run_id for r in records]
    pool = rk.pool(path, ids, depth=3, store=records_store(path))
    assert [p.document for p in pool.pairs] == ["b", "c", "e", "z", "d"]
    assert [p.priority for p in pool.pairs] == pytest.approx([2.0, 2.0, 1.261860, 1.0, 1.0])
    by_depth = rk.pool(path, ids, depth=3, priority="depth", store=records_store(path))
    assert [p.document for p in by_depth.pairs] == ["z", "b", "c", "e", "d"]
    assert len(by_depth.pairs[0].runs) == 3


def test_a_document_at_the_same_rank_in_both_runs_changes_nothing() -> None:
    assert pair_weight([1, 1], 10, "dcg") == 0.0
    assert pair_weight([4, 4], 10, "precision") == 0.0
    assert pair_weight([4, 9], 10, "precision") == 0.0  # in both top 10s
    # One only in A's top ranks matters most: rank 1 in A, absent from B.
    assert pair_weight([1, None], 10, "dcg") == max(
        pair_weight(ranks, 10, "dcg") for ranks in itertools.product([1, 2, 5, None], repeat=2)
    )
    # Below the depth counts as absent.
    assert pair_weight([3, 12], 10, "dcg") == pytest.approx(0.5)


def test_the_worked_example_as_the_pool_file_and_its_counts(
    two_runs: tuple[Path, list[ResultRecord]],
) -> None:
    """The dcg pool d2, d3, d4, d1 of the worked example, line by line, and its counts:
    each run ranks three of the four (A: d1, d2, d3; B: d3, d1, d4), d2 is A's alone and
    d4 B's alone."""
    path, records = two_runs
    a, b = (r.run_id for r in records)
    pool = rk.pool(path, [a, b], depth=3, store=records_store(path))
    second = 1 / math.log2(3)
    expected = [
        {"document": "d2", "priority": second, "runs": [{"run": a, "rank": 2}]},
        {
            "document": "d3",
            "priority": 0.5,
            "runs": [{"run": a, "rank": 3}, {"run": b, "rank": 1}],
        },
        {"document": "d4", "priority": 0.5, "runs": [{"run": b, "rank": 3}]},
        {
            "document": "d1",
            "priority": 1 - second,
            "runs": [{"run": a, "rank": 1}, {"run": b, "rank": 2}],
        },
    ]
    lines = [json.loads(line) for line in pool.to_jsonl().splitlines(keepends=True)]
    assert pool.to_jsonl().endswith("\n") and len(pool.to_jsonl().splitlines()) == 4
    assert [pair.to_json() for pair in pool.pairs] == lines
    for line, want in zip(lines, expected, strict=True):
        assert set(line) == {"question_id", "question", "document", "priority", "runs"}
        assert (line["question_id"], line["question"]) == ("q1", "what?")
        assert line["document"] == want["document"] and line["runs"] == want["runs"]
        assert line["priority"] == pytest.approx(want["priority"], abs=1e-12)
    assert pool.per_question() == {"q1": 4}
    assert pool.by_run() == {a: 3, b: 3}
    assert pool.only_in() == {a: 1, b: 1}
    # Cut at 2: d2 (A's alone) and d3 (both).
    cut = rk.pool(path, [a, b], depth=3, budget=2, store=records_store(path))
    assert (cut.by_run(), cut.only_in(), cut.per_question()) == (
        {a: 2, b: 1},
        {a: 1, b: 0},
        {"q1": 2},
    )
    assert (cut.budget, cut.unjudged, len(cut.pairs)) == (2, 4, 2)


def test_a_question_text_outside_ascii_stays_as_written_in_the_pool_file(tmp_path: Path) -> None:
    path = write_set(
        tmp_path / "accents.jsonl", [{"id": "q1", "question": "où?", "expected": ["z"]}]
    )
    records = save_runs(
        tmp_path, path, {"A": {"où?": ["d1", "d2"]}, "B": {"où?": ["d2", "d3"]}}, k=(2,)
    )
    pool = rk.pool(path, [r.run_id for r in records], depth=2, store=records_store(path))
    assert '"question": "où?"' in pool.to_jsonl()


def test_runs_are_checked_against_the_set_and_each_other(
    two_runs: tuple[Path, list[ResultRecord]], tmp_path: Path
) -> None:
    path, (first, second) = two_runs
    golden = rk.load_set(path)
    assert check_runs(golden, [first, second]) == []
    with pytest.raises(InputError, match="given twice"):
        check_runs(golden, [first, second, first])
    # A run of the same set's name on other questions.
    (tmp_path / "other").mkdir()
    other_path = write_set(
        tmp_path / "other" / "example.jsonl",
        [
            {"id": "q1", "question": "what?", "expected": ["d9"]},
            {"id": "q2", "question": "who?", "expected": ["d8"]},
        ],
    )
    (wider,) = save_runs(
        tmp_path / "other", other_path, {"C": {"what?": ["d1"], "who?": ["d2"]}}, k=(1,)
    )
    assert wider.set == first.set
    with pytest.raises(InputError, match="1 of its questions missing, 0 others"):
        check_runs(golden, [wider, first])
    with pytest.raises(InputError, match="0 of its questions missing, 1 others"):
        check_runs(golden, [first, wider])
    with pytest.raises(InputError, match=r"1 question\(s\) of run .* are not in set"):
        check_runs(golden, [wider])
    # The set changed since a run, and a run of chunk ids: warnings, each naming its runs.
    changed = attrs.evolve(second, manifest=attrs.evolve(second.manifest, set_hash="0" * 64))
    chunked = attrs.evolve(
        first, manifest=attrs.evolve(first.manifest, extra={"chunk_separator": "#"})
    )
    warnings = check_runs(golden, [chunked, changed])
    assert warnings == [
        f"set {golden.name} changed since run(s) {second.run_id}: pooled against its current "
        "labels and question texts",
        f"run(s) {first.run_id} returned chunk ids: pooled by their documents, the ids the "
        "set's labels judge (chunk-level labels are not pooled)",
    ]
    both = attrs.evolve(
        changed, manifest=attrs.evolve(changed.manifest, extra={"chunk_separator": "#"})
    )
    again = attrs.evolve(chunked, manifest=attrs.evolve(chunked.manifest, set_hash="1" * 64))
    named = f"{first.run_id}, {second.run_id}"
    assert [line.split(":")[0] for line in check_runs(golden, [again, both])] == [
        f"set {golden.name} changed since run(s) {named}",
        f"run(s) {named} returned chunk ids",
    ]


def test_a_pool_deeper_than_a_runs_deepest_cut_off_is_refused(
    two_runs: tuple[Path, list[ResultRecord]],
) -> None:
    _, records = two_runs  # scored at k 1 and 3
    check_depth(records, 3)
    check_depth(records, 1)
    with pytest.raises(InputError, match="keeps its top 3 only"):
        check_depth(records, 4)
    shallow = attrs.evolve(records[1], manifest=attrs.evolve(records[1].manifest, ks=(1, 2)))
    with pytest.raises(InputError, match="keeps its top 2 only"):
        check_depth([records[0], shallow], 3)


# --- judged pairs and no-answer questions -------------------------------------------------


def test_judged_pairs_never_appear(tmp_path: Path) -> None:
    """Expected documents, graded documents (grade 0 included) and the pairs of an extra
    labels file are judged; a no-answer question is not pooled at all."""
    path = write_set(
        tmp_path / "judged.jsonl",
        [
            {"id": "q1", "question": "one?", "expected": ["a"], "grades": {"b": 0, "c": 2}},
            {"id": "q2", "question": "two?", "expected": []},
        ],
    )
    ranking = ["a", "b", "c", "d", "e", "f"]
    records = save_runs(
        tmp_path,
        path,
        {
            "A": {"one?": ranking, "two?": ["a", "b", "c"]},
            "B": {"one?": ranking[::-1], "two?": ["c", "b", "a"]},
        },
        k=(1, 6),
    )
    ids = [r.run_id for r in records]
    store = records_store(path)
    without = rk.pool(path, ids, depth=6, store=store)
    assert sorted(p.document for p in without.pairs) == ["d", "e", "f"]
    assert {p.question_id for p in without.pairs} == {"q1"}
    assert (without.judged, without.no_answer, without.questions) == (3, 1, 1)
    write_labels([Label("q1", "e", 0, "human", "ann")], tmp_path / "extra.tsv")
    extra = rk.pool(path, ids, depth=6, store=store, extra_labels=[tmp_path / "extra.tsv"])
    assert sorted(p.document for p in extra.pairs) == ["d", "f"]
    assert extra.judged == 4


def test_questions_are_counted_past_no_answer_ones(tmp_path: Path) -> None:
    """Two no-answer questions first, then two answerable ones: both no-answer ones are
    counted and left out, both answerable ones pooled. One run is enough for the depth
    priority."""
    path = write_set(
        tmp_path / "mixed.jsonl",
        [
            {"id": "n1", "question": "none?", "expected": []},
            {"id": "n2", "question": "nothing?", "expected": []},
            {"id": "q1", "question": "one?", "expected": ["a"]},
            {"id": "q2", "question": "two?", "expected": ["b"]},
        ],
    )
    answers = {"none?": ["x"], "nothing?": ["y"], "one?": ["a", "c"], "two?": ["d", "b"]}
    (run,) = save_runs(tmp_path, path, {"A": answers}, k=(2,))
    pool = rk.pool(path, [run.run_id], depth=2, priority="depth", store=records_store(path))
    assert (pool.no_answer, pool.questions, pool.judged, pool.unjudged) == (2, 2, 2, 2)
    # d at rank 1 (1.0) before c at rank 2 (0.5).
    assert [(p.question_id, p.document, p.priority) for p in pool.pairs] == [
        ("q2", "d", 1.0),
        ("q1", "c", 0.5),
    ]
    assert pool.only_in() == {run.run_id: 2} and pool.by_run() == {run.run_id: 2}
    assert pool.per_question() == {"q2": 1, "q1": 1}


def test_the_pool_names_its_set_depth_priority_and_warnings(
    two_runs: tuple[Path, list[ResultRecord]],
) -> None:
    """A question the runs were not asked (added to the set since, here before theirs)
    is skipped, not the end of the pool; the pool keeps what it was built from."""
    path, records = two_runs
    golden = rk.load_set(path)
    added = GoldenQuestion(id="q0", question="new?", expected=["d1"])
    grown = attrs.evolve(golden, questions=[added, *golden.questions])
    pool = build_pool(grown, records, depth=3, priority="precision", warnings=["set changed"])
    assert (pool.set_name, pool.depth, pool.priority) == (golden.name, 3, "precision")
    assert pool.warnings == ("set changed",)
    assert pool.runs == tuple(r.run_id for r in records)
    assert (pool.questions, len(pool.pairs)) == (1, 4)
    assert build_pool(golden, records, depth=3).warnings == ()


def test_a_document_no_run_ranks_within_the_depth_weighs_nothing() -> None:
    for priority in ("dcg", "precision", "depth"):
        assert pair_weight([None, None], 10, priority) == 0.0
        assert pair_weight([11, None], 10, priority) == 0.0
    assert pair_weight([11, 4], 10, "depth") == pytest.approx(0.25)


# --- the command line on real demo runs ---------------------------------------------------


@pytest.fixture
def demo_runs(tmp_path: Path) -> list[ResultRecord]:
    """Two BM25 runs of the demo set (different k1 and b) saved to runs.sqlite3."""
    store = rk.open_store(f"sqlite:///{tmp_path / 'runs.sqlite3'}")
    first = rk.evaluate("demo", "bm25-demo", git_commit=None, resamples=20)
    other = rk.evaluate(
        "demo",
        "bm25",
        options={"corpus": str(DEMO_CORPUS), "k1": 2.0, "b": 0.2},
        name="other",
        git_commit=None,
        resamples=20,
    )
    for run in (first, other):
        store.save(run.record)
    return [first.record, other.record]


def dcg_weight(ranks: Sequence[int | None], depth: int) -> float:
    """The dcg priority recomputed here from the ranks a pool line lists."""
    gains = [0.0 if r is None or r > depth else 1 / math.log2(1 + r) for r in ranks]
    return sum(abs(x - y) for x, y in itertools.combinations(gains, 2))


def test_the_pool_file_holds_every_unjudged_pair_best_first(
    cli: RunCli, tmp_path: Path, demo_runs: list[ResultRecord]
) -> None:
    a, b = (r.run_id for r in demo_runs)
    result = cli("pool", "--set", "demo", "--run", a, "--run", b, "--depth", "10",
                 "--store", STORE, "--output", "pool.jsonl")  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = pool_lines(tmp_path / "pool.jsonl")
    golden = rk.load_set("demo")
    texts = {q.id: q.question for q in golden.questions}
    judged = {q.id: q.judgments() for q in golden.questions}
    answerable = {q.id for q in golden.questions if q.answerable}
    # Every unjudged pair of both top 10s, found here from the stored rankings.
    expected: set[tuple[str, str]] = set()
    ranks: dict[tuple[str, str], dict[str, int]] = {}
    for record in demo_runs:
        for outcome in record.outcomes:
            for rank, document in enumerate(outcome.ranking[:10], start=1):
                pair = (outcome.question_id, document)
                ranks.setdefault(pair, {})[record.run_id] = rank
                if outcome.question_id in answerable and document not in judged[pair[0]]:
                    expected.add(pair)
    assert {(line["question_id"], line["document"]) for line in lines} == expected
    assert len(lines) == len(expected)
    for line in lines:
        assert set(line) == {"question_id", "question", "document", "priority", "runs"}
        assert line["question"] == texts[line["question_id"]]
        pair = (line["question_id"], line["document"])
        assert {entry["run"]: entry["rank"] for entry in line["runs"]} == ranks[pair]
        assert [entry["run"] for entry in line["runs"]] == [
            run for run in (a, b) if run in ranks[pair]
        ]
        given = [ranks[pair].get(a), ranks[pair].get(b)]
        assert line["priority"] == pytest.approx(dcg_weight(given, 10), abs=1e-9)
    priorities = [line["priority"] for line in lines]
    assert priorities == sorted(priorities, reverse=True)
    assert priorities[0] > priorities[-1] == 0.0  # the runs agree on some, not on all
    assert f"pool: {len(lines)} pairs to label" in result.stdout
    assert f"pool: {len(answerable)} questions pooled" in result.stdout
    assert f"from runs: {a} " in result.stdout and f", {b} " in result.stdout


def test_the_budget_cuts_the_best_first_order(
    cli: RunCli, tmp_path: Path, demo_runs: list[ResultRecord]
) -> None:
    a, b = (r.run_id for r in demo_runs)
    for priority in ("dcg", "depth"):
        whole = cli("pool", "--set", "demo", "--run", a, "--run", b, "--store", STORE,
                    "--priority", priority, "--output", "all.jsonl")  # fmt: skip
        cut = cli("pool", "--set", "demo", "--run", a, "--run", b, "--store", STORE,
                  "--priority", priority, "--budget", "25", "--output", "cut.jsonl")  # fmt: skip
        assert whole.returncode == cut.returncode == 0, whole.stderr + cut.stderr
        everything = pool_lines(tmp_path / "all.jsonl")
        assert len(everything) > 25
        assert pool_lines(tmp_path / "cut.jsonl") == everything[:25]
        assert f"cut at --budget 25 of {len(everything)} unjudged" in cut.stdout
    # Depth pooling: best ranks never get worse down the file, ties by more runs first.
    keys = [
        (min(e["rank"] for e in line["runs"]), -len(line["runs"]))
        for line in pool_lines(tmp_path / "all.jsonl")
    ]
    assert keys == sorted(keys)
    assert keys[0] == (1, -2)


def test_the_api_and_the_command_agree(
    cli: RunCli, tmp_path: Path, demo_runs: list[ResultRecord]
) -> None:
    a, b = (r.run_id for r in demo_runs)
    result = cli("pool", "--set", "demo", "--run", a, "--run", b, "--store", STORE,
                 "--budget", "40", "--depth", "5", "--output", "pool.jsonl")  # fmt: skip
    assert result.returncode == 0, result.stderr
    pool = rk.pool("demo", demo_runs, depth=5, budget=40)
    assert [pair.to_json() for pair in pool.pairs] == pool_lines(tmp_path / "pool.jsonl")
    assert all(rank.rank <= 5 for pair in pool.pairs for rank in pair.runs)


# --- errors -------------------------------------------------------------------------------


def assert_refused(result: Any, *words: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    for word in words:
        assert word in result.stderr, (word, result.stderr)


def test_bad_options_are_refused_naming_the_option(
    cli: RunCli, tmp_path: Path, demo_runs: list[ResultRecord]
) -> None:
    a, b = (r.run_id for r in demo_runs)
    base = ("pool", "--set", "demo", "--store", STORE)
    assert_refused(
        cli(*base, "--run", a, "--run", "20990101T000000Z-deadbeef", "--output", "p.jsonl"),
        "field '--run'", "no run 20990101T000000Z-deadbeef",
    )  # fmt: skip
    assert_refused(
        cli(*base, "--run", a, "--run", b, "--depth", "0", "--output", "p.jsonl"),
        "--depth", "expected a whole number >= 1",
    )  # fmt: skip
    assert_refused(
        cli(*base, "--run", a, "--run", b, "--budget", "0", "--output", "p.jsonl"),
        "--budget", "expected a whole number >= 1",
    )  # fmt: skip
    assert_refused(
        cli(*base, "--run", a, "--run", b, "--output", "missing/p.jsonl"),
        "field '--output'", "does not exist",
    )  # fmt: skip
    # The demo runs keep their top 10 only (k up to 10): a deeper pool would miss documents.
    assert_refused(
        cli(*base, "--run", a, "--run", b, "--depth", "20", "--output", "p.jsonl"),
        "field '--depth'", "keeps its top 10 only",
    )  # fmt: skip
    assert_refused(
        cli(*base, "--run", a, "--run", a, "--output", "p.jsonl"), "field '--run'", "given twice"
    )
    assert_refused(
        cli(*base, "--run", a, "--run", b, "--priority", "bpref", "--output", "p.jsonl"),
        "field '--priority'", "one of dcg, precision, depth",
    )  # fmt: skip
    assert_refused(
        cli(*base, "--run", a, "--output", "p.jsonl"), "field '--run'", "needs two runs or more"
    )
    assert not (tmp_path / "p.jsonl").exists()
    assert not (tmp_path / "missing").exists()


def test_runs_of_another_set_or_other_questions_are_refused(
    cli: RunCli, tmp_path: Path, demo_runs: list[ResultRecord]
) -> None:
    a, _ = (r.run_id for r in demo_runs)
    questions = [{"id": f"q{i}", "question": f"q {i}?", "expected": ["d1"]} for i in range(3)]
    (tmp_path / "small").mkdir()
    (tmp_path / "fewer").mkdir()
    path = write_set(tmp_path / "small" / "demo.jsonl", questions)
    save_runs(tmp_path, path, {"X": {f"q {i}?": ["d1", "d2"] for i in range(3)}}, k=(1, 3))
    # A set of the same name with other questions: its run is of "demo" but not comparable.
    fewer = write_set(tmp_path / "fewer" / "demo.jsonl", questions[:2])
    other = save_runs(tmp_path, fewer, {"Y": {f"q {i}?": ["d2"] for i in range(2)}}, k=(1, 3))
    x = rk.open_store(f"sqlite:///{tmp_path / 'runs.sqlite3'}").runs("demo", "X")[0].run_id
    result = cli("pool", "--set", "small/demo.jsonl", "--run", x, "--run", other[0].run_id,
                 "--depth", "3", "--store", STORE, "--output", "p.jsonl")  # fmt: skip
    assert_refused(result, "field '--run'", "not scored on the same questions", "1 of its")
    # The demo runs hold 75 questions the small set does not have.
    result = cli("pool", "--set", "small/demo.jsonl", "--run", a, "--run", x,
                 "--depth", "3", "--store", STORE, "--output", "p.jsonl")  # fmt: skip
    assert_refused(result, "field '--run'", "not scored on the same questions")
    named = write_set(tmp_path / "named.jsonl", questions)
    result = cli("pool", "--set", str(named), "--run", x, "--run", a,
                 "--store", STORE, "--output", "p.jsonl")  # fmt: skip
    assert_refused(result, "field '--run'", "is a run of the set 'demo', not of 'named'")
    assert not (tmp_path / "p.jsonl").exists()


def test_the_python_api_refuses_as_the_command_line_does(
    demo_runs: list[ResultRecord],
) -> None:
    with pytest.raises(InputError, match="field '--depth'"):
        rk.pool("demo", demo_runs, depth=0)
    with pytest.raises(InputError, match="field '--priority'"):
        rk.pool("demo", demo_runs, priority="bpref")
    with pytest.raises(InputError, match="field '--budget'"):
        rk.pool("demo", demo_runs, budget=0)
    with pytest.raises(InputError, match=r"field '--run'.*not of 'demo'"):
        rk.pool("demo", [demo_runs[0], attrs.evolve(demo_runs[1], set="other")])


# --- judge --pool -------------------------------------------------------------------------


def test_judge_grades_the_queued_pairs_into_the_labels_file(
    cli: RunCli, tmp_path: Path, demo_runs: list[ResultRecord]
) -> None:
    """The stand-in judge grades len(prompt) % 4; the pairs already in the labels file are
    not asked again, and a second pass asks nothing."""
    from chat_stand_in import Received, Reply, chat_stand_in
    from test_judge import write_judge_config

    from retrievalkit.formats.labels import read_labels

    def grade(request: Received, earlier: int) -> Reply:
        return Reply(str(len(request.prompt) % 4))

    a, b = (r.run_id for r in demo_runs)
    made = cli("pool", "--set", "demo", "--run", a, "--run", b, "--store", STORE,
               "--budget", "8", "--output", "pool.jsonl")  # fmt: skip
    assert made.returncode == 0, made.stderr
    queued = [
        (line["question_id"], line["document"]) for line in pool_lines(tmp_path / "pool.jsonl")
    ]
    assert len(queued) == 8
    write_labels([Label(*queued[0], 2, "human", "ann")], tmp_path / "labels.tsv")
    with chat_stand_in(grade) as server:
        write_judge_config(tmp_path, server.url)
        judged = cli("judge", "--pool", "pool.jsonl", "--judge", "local", "--corpus",
                     str(DEMO_CORPUS), "--output", "labels.tsv")  # fmt: skip
        assert judged.returncode == 0, judged.stderr
        assert "7 unlabelled pairs to grade" in judged.stdout and "1 already labelled" in (
            judged.stdout
        )
        assert len(server.received) == 7
        prompts = [request.prompt for request in server.received]
        server.clear()
        again = cli("judge", "--pool", "pool.jsonl", "--judge", "local", "--corpus",
                    str(DEMO_CORPUS), "--output", "labels.tsv")  # fmt: skip
        assert again.returncode == 0, again.stderr
        assert "0 unlabelled pairs" in again.stdout and server.received == []
    labels = read_labels(tmp_path / "labels.tsv")
    assert [label.pair for label in labels] == queued  # the human label first, then in order
    assert labels[0].grade == 2 and labels[0].is_human
    assert sorted(label.grade for label in labels[1:]) == sorted(len(p) % 4 for p in prompts)
    # Pooled again with these labels, none of the judged pairs is queued.
    again_pooled = rk.pool("demo", demo_runs, extra_labels=[tmp_path / "labels.tsv"])
    pooled = {(q.question_id, q.document) for q in again_pooled.pairs}
    assert not {label.pair for label in labels} & pooled


def test_judge_refuses_a_bad_pool_line_and_a_run_with_a_pool(cli: RunCli, tmp_path: Path) -> None:
    (tmp_path / "pool.jsonl").write_text(
        '{"question_id": "q01", "question": "How?", "document": "doc-a"}\n'
        '{"question_id": "q02", "question": "Why?"}\n',
        encoding="utf-8",
    )
    common = ("--judge", "local", "--corpus", str(DEMO_CORPUS), "--output", "labels.tsv")
    (tmp_path / "retrievalkit.toml").write_text(
        '[judges.local]\nplugin = "openai-compatible"\nbase_url = "http://127.0.0.1:9"\n'
        'model = "m"\n',
        encoding="utf-8",
    )
    assert_refused(
        cli("judge", "--pool", "pool.jsonl", *common),
        "pool.jsonl, line 2, field 'document'",
        "must be a non-empty string",
    )
    assert_refused(cli("judge", "RUN", "--pool", "pool.jsonl", *common),
                   "field 'RUN_ID/--pool'", "one of the two")  # fmt: skip
    assert_refused(cli("judge", *common), "field 'RUN_ID/--pool'")
    assert not (tmp_path / "labels.tsv").exists()
