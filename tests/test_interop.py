"""TREC runs and qrels in and out: exported runs re-score identically in pytrec_eval and replay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import pytrec_eval
from conftest import RunCli

from retrievalkit.demo import DEMO_SET
from retrievalkit.errors import InputError
from retrievalkit.formats.golden_sets import load_beir
from retrievalkit.formats.trec import (
    format_qrels,
    format_run,
    rankings_from_run,
    read_qrels,
    read_run,
)
from retrievalkit.model.records import ResultRecord
from retrievalkit.retrievers.run import create_run
from retrievalkit.stores import open_store

#: retrievalkit metric -> trec_eval measure (pytrec_eval's key).
TREC_EVAL = {
    "ndcg@10": "ndcg_cut_10",
    "precision@10": "P_10",
    "recall@10": "recall_10",
    "rr": "recip_rank",
}

# --- the TREC formats ---------------------------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_ties_are_ordered_as_trec_eval_orders_them(tmp_path: Path) -> None:
    run = write(tmp_path / "run", "q1 Q0 d1 1 1.0 t\nq1 Q0 d3 2 1.0 t\nq1 Q0 d2 3 2.0 t\n")
    rankings = rankings_from_run(read_run(run))
    # Score first, then document id DESCENDING; the rank column is ignored, as in trec_eval.
    assert rankings == {"q1": ["d2", "d3", "d1"]}
    oracle = pytrec_eval.RelevanceEvaluator({"q1": {"d3": 1}}, {"recip_rank"})
    with run.open() as handle:
        assert oracle.evaluate(pytrec_eval.parse_run(handle))["q1"]["recip_rank"] == 0.5


def test_written_runs_and_qrels_read_back(tmp_path: Path) -> None:
    rankings = {"q1": ["d9", "d2", "d10"], "q2": [], "q3": ["d1"]}
    text = format_run(rankings, "bm25")
    assert text.splitlines()[0] == "q1 Q0 d9 1 3 bm25"
    back = rankings_from_run(read_run(write(tmp_path / "run", text)))
    assert back == {"q1": ["d9", "d2", "d10"], "q3": ["d1"]}, "q2 retrieved nothing: no lines"
    judgments = {"q1": {"d2": 2, "d7": 0}, "q3": {"d1": 1}}
    assert format_qrels(judgments).splitlines()[1] == "q1 0 d7 0"
    assert read_qrels(write(tmp_path / "qrels", format_qrels(judgments))) == judgments


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("q1 Q0 d1 1 2.0\n", "expected 6 columns"),
        ("q1 Q0 d1 one 2.0 t\n", "rank 'one'"),
        ("q1 Q0 d1 1 high t\n", "score 'high'"),
        ("q1 Q0 d1 1 nan t\n", "score 'nan'"),
        ("q1 Q0 d1 1 2.0 t\nq1 Q0 d1 2 1.0 t\n", "listed twice"),
    ],
)
def test_a_bad_run_line_is_named(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path / "bad.trec", "# a comment line\n" + text)
    with pytest.raises(InputError, match=message) as caught:
        read_run(path)
    assert caught.value.line == text.count("\n") + 1
    assert caught.value.source == str(path)


def test_ids_with_spaces_cannot_be_written() -> None:
    with pytest.raises(InputError, match="'doc 7'"):
        format_run({"q1": ["doc 7"]}, "tag")
    with pytest.raises(InputError, match="run tag"):
        format_run({"q1": ["d"]}, "my run")


# --- the run retriever ----------------------------------------------------------------------------

DEMO_TEXT = {
    "q01": "How do I get a library card?",
    "q05": "Can a child under 16 have their own library card?",
}


def test_the_run_retriever_answers_by_question_id(tmp_path: Path) -> None:
    run = write(
        tmp_path / "run",
        "q01 Q0 doc-a 1 3 sys\nq01 Q0 doc-b#2 2 2 sys\nq01 Q0 doc-b#1 3 1 sys\n",
    )
    retriever = create_run(str(run), queries=str(DEMO_SET), doc_id_separator="#")
    assert retriever.identifier == "run:sys"
    assert retriever.retrieve(DEMO_TEXT["q01"], 10) == ["doc-a", "doc-b", "doc-b"]
    assert retriever.retrieve(DEMO_TEXT["q01"], 1) == ["doc-a"]
    assert retriever.retrieve("  How do I get a\nlibrary card? ", 1) == ["doc-a"], "spaces"
    assert retriever.retrieve(DEMO_TEXT["q05"], 10) == [], "in the set, but not in the run"
    with pytest.raises(LookupError, match="not in"):
        retriever.retrieve("Which bus goes to the library?", 10)


@pytest.mark.parametrize("kind", ["tsv", "beir", "golden"])
def test_queries_come_from_tsv_beir_or_a_golden_set(tmp_path: Path, kind: str) -> None:
    run = write(tmp_path / "run", "7 Q0 doc-x 1 1 sys\n")
    text = "where is the bike shed?"
    queries = {
        "tsv": lambda: write(tmp_path / "queries.tsv", f"7\t{text}\n"),
        "beir": lambda: write(tmp_path / "queries.jsonl", json.dumps({"_id": 7, "text": text})),
        "golden": lambda: write(
            tmp_path / "set.jsonl",
            json.dumps({"id": "7", "question": text, "expected": ["doc-x"]}) + "\n",
        ),
    }[kind]()
    assert create_run(str(run), queries=str(queries)).retrieve(text, 5) == ["doc-x"]


@pytest.mark.parametrize(
    ("lines", "line", "field", "message"),
    [
        ([{"_id": "7", "text": "a?"}, {"_id": "7", "text": "b?"}], 2, "_id", "appears again"),
        ([{"_id": "7 8", "text": "a?"}], 1, "_id", "without spaces"),
        ([{"_id": "7", "text": " "}], 1, "text", "non-empty string"),
        ([{"_id": "7", "text": "a?"}, {"_id": None, "text": "b?"}], 2, "_id", "got None"),
        ([{"_id": 7.5, "text": "a?"}], 1, "_id", "got 7.5"),
    ],
    ids=["twice", "spaces", "blank-text", "null-id", "fraction-id"],
)
def test_beir_queries_of_a_run_are_checked_as_a_beir_set_checks_them(
    tmp_path: Path, lines: list[dict[str, object]], line: int, field: str, message: str
) -> None:
    """The run retriever reads BEIR queries with the BEIR set's reader: what one refuses,
    the other refuses with the same line and key (a whole-number id is a TREC query id)."""
    run = write(tmp_path / "run", "7 Q0 doc-x 1 1 sys\n")
    queries = write(tmp_path / "queries.jsonl", "".join(json.dumps(x) + "\n" for x in lines))
    with pytest.raises(InputError, match=message) as caught:
        create_run(str(run), queries=str(queries))
    assert (caught.value.source, caught.value.line, caught.value.field) == (
        str(queries),
        line,
        field,
    )
    (tmp_path / "qrels").mkdir()
    write(tmp_path / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\n7\tdoc-x\t1\n")
    with pytest.raises(InputError, match=message) as from_set:
        load_beir(tmp_path)
    assert (from_set.value.line, from_set.value.field) == (line, field)


def test_several_runs_in_one_file_need_a_tag(tmp_path: Path) -> None:
    run = write(tmp_path / "run", "q01 Q0 doc-a 1 1 bm25\nq01 Q0 doc-b 1 1 dense\n")
    with pytest.raises(InputError, match=r"2 runs \(bm25, dense\)") as caught:
        create_run(str(run), queries=str(DEMO_SET))
    assert caught.value.field == "tag"
    dense = create_run(str(run), queries=str(DEMO_SET), tag="dense")
    assert dense.retrieve(DEMO_TEXT["q01"], 5) == ["doc-b"]
    with pytest.raises(InputError, match="no run tagged 'sparse'"):
        create_run(str(run), queries=str(DEMO_SET), tag="sparse")


def test_the_run_retriever_refuses_what_it_cannot_answer_honestly(tmp_path: Path) -> None:
    run = write(tmp_path / "run", "q01 Q0 doc-a 1 1 sys\n")
    with pytest.raises(InputError, match="needs the option 'queries'"):
        create_run(str(run))
    twins = write(tmp_path / "twins.tsv", "a\tSame text?\nb\tSame  text?\n")
    with pytest.raises(InputError, match="'a' and 'b' have the same text"):
        create_run(str(run), queries=str(twins))
    strangers = write(tmp_path / "strangers.tsv", "x1\tAnything?\n")
    with pytest.raises(InputError, match="none of the 1 question ids"):
        create_run(str(run), queries=str(strangers))


# --- export and round trips through the command line -------------------------------------------


def evaluate(cli: RunCli, cwd: Path, *args: str) -> dict[str, Any]:
    result = cli("eval", *args, "--format", "json", cwd=cwd)
    assert result.returncode == 0, result.stderr
    summary: dict[str, Any] = json.loads(result.stdout)
    return summary


def export(cli: RunCli, cwd: Path, run_id: str, store: str, fmt: str, output: Path) -> str:
    result = cli(
        "export", run_id, "--store", store, "--format", fmt, "--output", str(output), cwd=cwd
    )
    assert result.returncode == 0, result.stderr
    return result.stderr


def pytrec_means(run_file: Path, qrels_file: Path) -> dict[str, dict[str, float]]:
    """Per-question values and ``trec_eval -c`` means (a judged question with no run lines is 0)."""
    with qrels_file.open() as handle:
        qrels = pytrec_eval.parse_qrel(handle)
    with run_file.open() as handle:
        run = pytrec_eval.parse_run(handle)
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels, {"ndcg_cut.10", "P.10", "recall.10", "recip_rank"}
    )
    values = evaluator.evaluate(run)
    return {
        measure: {qid: values.get(qid, {}).get(measure, 0.0) for qid in qrels}
        for measure in TREC_EVAL.values()
    }


@pytest.fixture
def cranfield_config(tmp_path: Path, data_dir: Path) -> Path:
    collection = data_dir / "cranfield"
    (tmp_path / "retrievalkit.toml").write_text(
        f'[retrievers.cran-bm25]\nplugin = "bm25"\ncorpus = "{collection / "corpus.jsonl"}"\n',
        encoding="utf-8",
    )
    return collection


@pytest.mark.parametrize("collection", ["demo", "cranfield"])
def test_an_exported_run_gives_the_same_numbers_in_pytrec_eval(
    cli: RunCli, tmp_path: Path, cranfield_config: Path, collection: str
) -> None:
    set_name, retriever = (
        ("demo", "bm25-demo") if collection == "demo" else (str(cranfield_config), "cran-bm25")
    )
    store = f"jsonl:///{tmp_path}/runs.jsonl"
    summary = evaluate(cli, tmp_path, "--set", set_name, "--retriever", retriever, "--store", store)
    record = open_store(store).get(summary["run_id"])
    assert isinstance(record, ResultRecord)
    export(cli, tmp_path, record.run_id, store, "trec-run", tmp_path / "run.trec")
    notes = export(cli, tmp_path, record.run_id, store, "qrels", tmp_path / "qrels.txt")
    reference = pytrec_means(tmp_path / "run.trec", tmp_path / "qrels.txt")

    answerable = [outcome for outcome in record.outcomes if outcome.expected]
    assert sorted(reference["P_10"]) == sorted(outcome.question_id for outcome in answerable)
    for ours, measure in TREC_EVAL.items():
        for outcome in answerable:
            assert outcome.scores[ours] == pytest.approx(
                reference[measure][outcome.question_id], abs=1e-12
            ), f"{ours} of {outcome.question_id}"
        mean = sum(reference[measure].values()) / len(reference[measure])
        assert record.metrics[ours].mean == pytest.approx(mean, abs=1e-12), ours
    no_answer = len(record.outcomes) - len(answerable)
    assert (f"{no_answer} no-answer questions left out" in notes) == (no_answer > 0)
    if collection == "demo":
        assert no_answer > 0, "the demo has no-answer questions: the qrels must leave them out"


def test_a_replayed_export_reproduces_the_run(
    cli: RunCli, tmp_path: Path, cranfield_config: Path
) -> None:
    store = f"jsonl:///{tmp_path}/runs.jsonl"
    args = ("--set", str(cranfield_config), "--store", store)
    original = evaluate(cli, tmp_path, *args, "--retriever", "cran-bm25")
    export(cli, tmp_path, original["run_id"], store, "trec-run", tmp_path / "run.trec")
    with (tmp_path / "retrievalkit.toml").open("a", encoding="utf-8") as config:
        config.write(
            f'\n[retrievers.replay]\nplugin = "run"\npath = "{tmp_path / "run.trec"}"\n'
            f'queries = "{cranfield_config}"\n'
        )
    replayed = evaluate(cli, tmp_path, *args, "--retriever", "replay")
    assert replayed["errored"] == 0
    assert replayed["metrics"] == original["metrics"]
    assert replayed["slices"] == original["slices"]


def test_ranx_json_holds_the_run_and_the_judgments(cli: RunCli, tmp_path: Path) -> None:
    store = f"jsonl:///{tmp_path}/runs.jsonl"
    summary = evaluate(cli, tmp_path, "--set", "demo", "--retriever", "bm25-demo", "--store", store)
    notes = export(cli, tmp_path, summary["run_id"], store, "ranx-json", tmp_path / "ranx.json")
    document = json.loads((tmp_path / "ranx.json").read_text(encoding="utf-8"))
    record = open_store(store).get(summary["run_id"])
    assert record is not None
    assert document["name"] == "bm25-demo"
    assert document["metadata"]["run_id"] == record.run_id
    for outcome in record.outcomes:
        scored = document["run"].get(outcome.question_id, {})
        assert sorted(scored, key=scored.__getitem__, reverse=True) == list(outcome.ranking)
        if outcome.expected:
            assert document["qrels"][outcome.question_id] == dict(outcome.judgments)
        else:
            assert outcome.question_id not in document["qrels"]
    assert "no-answer questions left out of the qrels" in notes


def test_export_of_an_unknown_run_is_a_usage_error(cli: RunCli, tmp_path: Path) -> None:
    result = cli("export", "20990101T000000Z-nothing", "--store", f"jsonl:///{tmp_path}/r.jsonl")
    assert result.returncode == 2
    assert "no run 20990101T000000Z-nothing" in result.stderr


def test_export_writes_to_stdout_by_default(cli: RunCli, tmp_path: Path) -> None:
    store = f"jsonl:///{tmp_path}/runs.jsonl"
    summary = evaluate(cli, tmp_path, "--set", "demo", "--retriever", "bm25-demo", "--store", store)
    result = cli("export", summary["run_id"], "--store", store, "--tag", "mine")
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[0].split()
    assert first[1] == "Q0" and first[3] == "1" and first[5] == "mine"


def test_questions_missing_from_the_queries_are_error_outcomes(cli: RunCli, tmp_path: Path) -> None:
    write(tmp_path / "run.trec", "q01 Q0 doc-membership-card 1 1 sys\n")
    write(tmp_path / "some.tsv", f"q01\t{DEMO_TEXT['q01']}\n")
    write(
        tmp_path / "retrievalkit.toml",
        '[retrievers.replay]\nplugin = "run"\npath = "run.trec"\nqueries = "some.tsv"\n',
    )
    result = cli("eval", "--set", "demo", "--retriever", "replay", "--store", "memory:")
    assert result.returncode == 3, "nearly every question errored: the run is refused"
    assert "is not in some.tsv" in result.stdout + result.stderr
