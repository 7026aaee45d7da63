"""``retrievalkit judge``, ``eval/compare --extra-labels`` and ``judge-agreement``.

The ``openai-compatible`` judge runs against a local stand-in server (no real model).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from chat_stand_in import Received, Reply, chat_stand_in
from conftest import RunCli

from retrievalkit.formats.labels import Label, merge_labels, read_labels, write_labels
from retrievalkit.judges.openai_compatible import parse_grade
from retrievalkit.model.values import GoldenQuestion
from retrievalkit.pipeline.authoring.judging import (
    JudgeFailed,
    agreement,
    cohen_kappa,
    relevance_agreement,
)

DEMO_CORPUS = Path(__file__).resolve().parents[1] / "retrievalkit" / "demo" / "corpus.jsonl"
STORE = "sqlite:///runs.sqlite3"


# --- kappa, grades and label files -----------------------------------------------------------


def test_kappa_of_known_confusion_matrices() -> None:
    # p_o = 35/50 = 0.7, p_e = (25*30 + 25*20) / 50**2 = 0.5, kappa = 0.2 / 0.5 = 0.4
    assert cohen_kappa([[20, 5], [10, 15]]) == pytest.approx(0.4)
    # p_o = 22/30, p_e = (12*13 + 12*12 + 6*5) / 30**2 = 11/30, kappa = (11/30) / (19/30)
    assert cohen_kappa([[10, 2, 0], [3, 8, 1], [0, 2, 4]]) == pytest.approx(11 / 19)
    assert cohen_kappa([[7, 0], [0, 3]]) == pytest.approx(1.0)
    assert cohen_kappa([[9]]) is None  # one category: chance agreement is 1, kappa undefined
    assert cohen_kappa([[0, 0], [0, 0]]) is None


def test_agreement_builds_the_matrix_over_the_grades_seen() -> None:
    pairs = [(0, 0)] * 20 + [(0, 2)] * 5 + [(1, 0)] * 10 + [(1, 3)] * 15
    graded = agreement(pairs)
    assert graded.categories == (0, 1, 2, 3)
    assert graded.matrix == ((20, 0, 5, 0), (10, 0, 0, 15), (0, 0, 0, 0), (0, 0, 0, 0))
    assert graded.observed == pytest.approx(20 / 50)
    binary = relevance_agreement(pairs)
    assert binary.matrix == ((20, 5), (10, 15))
    assert binary.kappa == pytest.approx(0.4)


def test_parse_grade() -> None:
    assert parse_grade("2") == 2
    assert parse_grade('{"grade": 3}') == 3
    assert parse_grade("Grade: 0.") == 0
    for reply in ("4", "relevant", "2.5", "10"):
        with pytest.raises(JudgeFailed, match="no grade"):
            parse_grade(reply)


def test_labels_round_trip_and_merge_keeps_the_sets_labels(tmp_path: Path) -> None:
    labels = [
        Label("q1", "d1", 0, "local", "m", "judge-v1", "2026-01-01T00:00:00Z"),  # set says 1
        Label("q1", "d9", 2, "local", "m", "judge-v1", "2026-01-01T00:00:00Z"),
        Label("q2", "d3", 3),  # q2 is a no-answer question
        Label("q7", "d1", 1),  # not in the set
    ]
    write_labels(labels, tmp_path / "labels.tsv")
    assert read_labels(tmp_path / "labels.tsv") == labels
    questions = [
        GoldenQuestion(id="q1", question="a?", expected=["d1"]),
        GoldenQuestion(id="q2", question="b?", expected=[]),
    ]
    merged = merge_labels(questions, labels)
    assert merged.questions[0].judgments() == {"d1": 1, "d9": 2}
    assert merged.questions[1].judgments() == {}
    assert (merged.added, merged.already_judged, merged.no_answer, merged.unknown_question) == (
        1,
        1,
        1,
        1,
    )


def test_a_bad_labels_file_names_file_line_and_column(cli: RunCli, tmp_path: Path) -> None:
    (tmp_path / "bad.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq01\tdoc-a\t1\nq02\tdoc-b\thigh\n", encoding="utf-8"
    )
    result = cli("eval", "--set", "demo", "--retriever", "bm25-demo", "--no-save",
                 "--extra-labels", "bad.tsv")  # fmt: skip
    assert result.returncode == 2
    assert "bad.tsv, line 3, field 'score'" in result.stderr


# --- judging a stored run ----------------------------------------------------------------------


def demo_grade(request: Received, earlier: int) -> Reply:
    """A deterministic stand-in judge: some documents relevant, some not."""
    return Reply(str(len(request.prompt) % 4))


def write_judge_config(directory: Path, url: str, **options: Any) -> None:
    settings = {
        "plugin": "openai-compatible",
        "base_url": url,
        "model": "stand-in-judge",
        "retries": 0,
        "timeout": 10,
        "concurrency": 3,
        **options,
    }
    lines = ["[judges.local]"] + [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
    (directory / "retrievalkit.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")


def eval_demo(cli: RunCli, *extra: str) -> dict[str, Any]:
    result = cli("eval", "--set", "demo", "--retriever", "bm25-demo", "--k", "1,3,5",
                 "--store", STORE, "--format", "json", *extra)  # fmt: skip
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def test_judge_adds_labels_and_eval_shows_the_judged_share_rise(
    cli: RunCli, tmp_path: Path
) -> None:
    run_id = eval_demo(cli, "--output-dir", "out")["run_id"]
    outcomes = [
        json.loads(line)
        for line in (tmp_path / "out" / "per_question.jsonl").read_text().splitlines()
    ]
    answerable = [o for o in outcomes if o["error"] is None and o["expected"]]
    unlabelled = {
        (o["question_id"], doc)
        for o in answerable
        for doc in o["ranking"][:5]
        if doc not in o["judgments"]
    }
    assert unlabelled, "the demo run should leave some top-5 documents unjudged"

    with chat_stand_in(demo_grade) as server:
        write_judge_config(tmp_path, server.url)
        judged = cli("judge", run_id, "--judge", "local", "--corpus", str(DEMO_CORPUS),
                     "--k", "5", "--store", STORE, "--output", "labels.tsv")  # fmt: skip
        assert judged.returncode == 0, judged.stderr
        assert f"{len(unlabelled)} judged, 0 failed" in judged.stdout
        assert len(server.received) == len(unlabelled)
        first_prompts = [request.prompt for request in server.received]

        server.clear()
        again = cli("judge", run_id, "--judge", "local", "--corpus", str(DEMO_CORPUS),
                    "--k", "5", "--store", STORE, "--output", "labels.tsv")  # fmt: skip
        assert again.returncode == 0, again.stderr
        assert "0 unlabelled documents" in again.stdout and server.received == []

    labels = read_labels(tmp_path / "labels.tsv")
    assert {(label.question_id, label.document_id) for label in labels} == unlabelled
    expected_grades = sorted(len(prompt) % 4 for prompt in first_prompts)
    assert sorted(label.grade for label in labels) == expected_grades
    for label in labels:
        assert (label.judge, label.model, label.prompt_version) == (
            "local",
            "stand-in-judge",
            "judge-v1",
        )
        moment = dt.datetime.fromisoformat(label.judged_at.replace("Z", "+00:00"))
        assert moment.tzinfo is not None

    merged = eval_demo(cli, "--no-save", "--extra-labels", "labels.tsv")["extra_labels"]
    by_question = {o["question_id"]: o for o in answerable}
    before = [
        sum(doc in o["judgments"] for doc in o["ranking"][:5]) / 5 for o in by_question.values()
    ]
    after = [len(o["ranking"][:5]) / 5 for o in by_question.values()]
    assert merged["before"]["judged@5"] == pytest.approx(sum(before) / len(before))
    assert merged["after"]["judged@5"] == pytest.approx(sum(after) / len(after))
    assert merged["after"]["judged@5"] > merged["before"]["judged@5"]
    assert merged["after"]["hit@3"] >= merged["before"]["hit@3"]
    assert merged["added"] == len(unlabelled)

    markdown = cli("eval", "--set", "demo", "--retriever", "bm25-demo", "--no-save",
                   "--format", "markdown", "--extra-labels", "labels.tsv")  # fmt: skip
    assert markdown.returncode == 0, markdown.stderr
    assert "## With extra labels" in markdown.stdout
    assert f"{len(unlabelled)} extra labels merged from labels.tsv" in markdown.stdout

    second_run = eval_demo(cli)["run_id"]
    compared = cli("compare", "--run", run_id, "--run", second_run, "--store", STORE,
                   "--format", "json", "--extra-labels", "labels.tsv")  # fmt: skip
    assert compared.returncode == 0, compared.stderr
    effects = json.loads(compared.stdout)["extra_labels"]
    assert len(effects) == 2
    for effect in effects.values():
        assert effect["after"]["judged@5"] == pytest.approx(merged["after"]["judged@5"])


LIBRARY_CORPUS = [
    {"_id": "d1", "title": "Hours", "text": "The library opens at nine. MARKER-OK"},
    {"_id": "d2", "title": "Desks", "text": "The library has forty desks. MARKER-BROKEN"},
    {"_id": "d3", "title": "Cards", "text": "The library replaces lost cards. MARKER-GARBLED"},
    {"_id": "d4", "title": "Kids", "text": "The library has story time. MARKER-VAGUE"},
]


def failing_judge(request: Received, earlier: int) -> Reply:
    if "MARKER-BROKEN" in request.prompt:
        return Reply("overloaded", status=500)
    if "MARKER-GARBLED" in request.prompt:
        return Reply(raw=b"<html>gateway</html>")
    if "MARKER-VAGUE" in request.prompt:
        return Reply("It seems somewhat relevant.")
    return Reply("3")


def test_judge_failures_are_counted_and_all_failing_exits_3(cli: RunCli, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(doc) + "\n" for doc in LIBRARY_CORPUS), encoding="utf-8")
    (tmp_path / "set.jsonl").write_text(
        json.dumps({"id": "q1", "question": "library hours?", "expected": ["d9"]}) + "\n",
        encoding="utf-8",
    )
    with chat_stand_in(failing_judge) as server:
        write_judge_config(tmp_path, server.url, retries=1, backoff=0.01)
        config = (tmp_path / "retrievalkit.toml").read_text(encoding="utf-8")
        config += f'[retrievers.lib]\nplugin = "bm25"\ncorpus = "{corpus}"\n'
        (tmp_path / "retrievalkit.toml").write_text(config, encoding="utf-8")
        evaluated = cli("eval", "--set", "set.jsonl", "--retriever", "lib", "--store", STORE,
                        "--format", "json")  # fmt: skip
        assert evaluated.returncode == 0, evaluated.stderr
        run_id = json.loads(evaluated.stdout)["run_id"]
        judged = cli("judge", run_id, "--judge", "local", "--corpus", str(corpus),
                     "--set", "set.jsonl", "--store", STORE, "--output", "labels.tsv")  # fmt: skip
        assert judged.returncode == 0, judged.stderr
        assert "1 judged, 3 failed" in judged.stdout
        assert "HTTP 500" in judged.stderr and "not valid JSON" in judged.stderr
        assert "no grade from 0 to 3" in judged.stderr
        assert server.count("MARKER-BROKEN") == 2  # retried once
        assert server.count("MARKER-GARBLED") == 1
    assert [(label.document_id, label.grade) for label in read_labels(tmp_path / "labels.tsv")] == [
        ("d1", 3)
    ]
    before = (tmp_path / "labels.tsv").read_bytes()

    with chat_stand_in(lambda request, earlier: Reply("down", status=503)) as server:
        write_judge_config(tmp_path, server.url)
        down = cli("judge", run_id, "--judge", "local", "--corpus", str(corpus), "--set",
                   "set.jsonl", "--store", STORE, "--output", "labels.tsv")  # fmt: skip
    assert down.returncode == 3
    assert "0 judged, 3 failed" in down.stderr
    assert (tmp_path / "labels.tsv").read_bytes() == before


# --- judge agreement ---------------------------------------------------------------------------


def test_judge_agreement_reports_the_hand_computed_kappa(cli: RunCli, tmp_path: Path) -> None:
    # 50 labelled documents; the stand-in judge answers the grade written in each document.
    # Human 0 / judge 0: 20, human 0 / judge 1: 5, human 1 / judge 0: 10, human 1 / judge 1: 15.
    cells = [(0, 0)] * 20 + [(0, 1)] * 5 + [(1, 0)] * 10 + [(1, 1)] * 15
    documents = [
        {"_id": f"d{index}", "text": f"Document {index}. JUDGE-SAYS-{judge}"}
        for index, (_, judge) in enumerate(cells)
    ]
    (tmp_path / "corpus.jsonl").write_text(
        "".join(json.dumps(doc) + "\n" for doc in documents), encoding="utf-8"
    )
    (tmp_path / "human.tsv").write_text(
        "query-id\tcorpus-id\tscore\n"
        + "".join(f"q1\td{index}\t{human}\n" for index, (human, _) in enumerate(cells)),
        encoding="utf-8",
    )
    (tmp_path / "set.jsonl").write_text(
        json.dumps({"id": "q1", "question": "Which document?", "expected": ["d0"]}) + "\n",
        encoding="utf-8",
    )

    def reply(request: Received, earlier: int) -> Reply:
        return Reply("1" if "JUDGE-SAYS-1" in request.prompt else "0")

    command = ("judge-agreement", "--labels", "human.tsv", "--judge", "local",
               "--corpus", "corpus.jsonl", "--set", "set.jsonl")  # fmt: skip
    with chat_stand_in(reply) as server:
        write_judge_config(tmp_path, server.url)
        result = cli(*command, "--format", "json")
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout)
        assert report["sampled"] == report["judged"] == 50 and report["failed"] == 0
        assert report["grades"]["matrix"] == [[20, 5], [10, 15]]
        assert report["grades"]["kappa"] == pytest.approx(0.4)
        assert report["relevance"]["kappa"] == pytest.approx(0.4)
        # By hand: w = cov / var(J) = 0.1 / 0.24; (1.96 / 0.05)^2 x var(Y - wJ) = 326.7
        # labels with the judge, x var(Y) = 392.0 without it.
        assert report["ppi"]["weight"] == pytest.approx(0.1 / 0.24)
        assert report["ppi"]["human_labels_needed"] == 327
        assert report["ppi"]["human_labels_without_judge"] == 392

        text = cli(*command, "--sample", "10")
        assert text.returncode == 0, text.stderr
        assert "10 sampled of 50 labels" in text.stdout and "Cohen's kappa" in text.stdout


def test_judge_agreement_needs_labels_for_the_set(cli: RunCli, tmp_path: Path) -> None:
    (tmp_path / "human.tsv").write_text("zz\td1\t1\n", encoding="utf-8")
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "text": "x"}\n', encoding="utf-8")
    write_judge_config(tmp_path, "http://127.0.0.1:9/v1")
    result = cli("judge-agreement", "--labels", "human.tsv", "--judge", "local", "--corpus",
                 "corpus.jsonl", "--set", "demo")  # fmt: skip
    assert result.returncode == 2
    assert "human.tsv" in result.stderr and "demo" in result.stderr
