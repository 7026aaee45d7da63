"""The ``command`` retriever with a real child in Node (tests/fixtures/ranking_child/).

The child answers from rankings the built-in BM25 computed, and misbehaves on demand:
it dies at start, crashes mid-run, hangs, writes garbage or a wrong id. Each fault must
end as error outcomes with a clear message (stderr quoted), and the child must always
be reaped: no process of it may be left once the retriever is closed.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from retrievalkit.demo import DEMO_CORPUS, DEMO_SET
from retrievalkit.errors import InputError
from retrievalkit.formats.golden_sets import load_jsonl
from retrievalkit.pipeline.engine.evaluator import evaluate_questions
from retrievalkit.retrievers.bm25 import BM25Retriever
from retrievalkit.retrievers.command import ChildError, CommandRetriever, create_command

CHILD = Path(__file__).parent / "fixtures" / "ranking_child" / "ranking_child.mjs"
CARD = "How do I get a library card?"
OTHER = "I forgot my PIN. How do I reset it?"


def node() -> str:
    found = shutil.which("node")
    assert found, "these tests need Node.js (node) on PATH"
    return found


def write_rankings(path: Path) -> Path:
    """Question text -> BM25's (chunk id, score) ranking, for every demo question."""
    bm25 = BM25Retriever(DEMO_CORPUS)
    golden = load_jsonl(DEMO_SET, name="demo")
    rankings = {q.question: bm25.retrieve_scored(q.question, 100) for q in golden.questions}
    path.write_text(json.dumps(rankings), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def rankings(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_rankings(tmp_path_factory.mktemp("child") / "rankings.json")


def child(rankings: Path, *switches: str, **options: object) -> CommandRetriever:
    return create_command(
        [node(), str(CHILD), "--rankings", str(rankings), *switches],
        doc_id_separator="#",
        **options,  # type: ignore[arg-type]
    )


def gone(pid: int) -> bool:
    """True when no process has this id any more (reaped, not a zombie)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def pid_of(retriever: CommandRetriever) -> int:
    running = retriever._holder[0]
    assert running is not None
    return running.process.pid


def test_the_child_serves_bm25s_ranking_with_scores(rankings: Path) -> None:
    bm25 = BM25Retriever(DEMO_CORPUS, doc_id_separator="#")
    retriever = child(rankings, scored=True)
    try:
        assert retriever.retrieve(CARD, 30) == bm25.retrieve(CARD, 30)
        assert retriever.retrieve_scored(CARD, 7) == bm25.retrieve_scored(CARD, 7)
    finally:
        retriever.close()


def test_answers_out_of_order_are_matched_by_id(rankings: Path) -> None:
    golden = load_jsonl(DEMO_SET, name="demo")
    questions = golden.questions[:12]
    bm25 = BM25Retriever(DEMO_CORPUS, doc_id_separator="#")
    retriever = child(rankings, "--shuffle")
    try:
        retrievals = evaluate_questions(retriever, questions, depth=10, concurrency=4)
    finally:
        retriever.close()
    for question, retrieval in zip(questions, retrievals, strict=True):
        assert retrieval.error is None
        assert (
            list(retrieval.ranking)
            == list(dict.fromkeys(bm25.retrieve(question.question, 30)))[:10]
        )


def test_a_child_that_dies_at_start_gives_its_stderr(rankings: Path) -> None:
    retriever = child(rankings, "--die-at-start", restarts=1)
    pids = {pid_of(retriever)}
    messages = []
    for _ in range(3):
        with pytest.raises(ChildError) as caught:
            retriever.retrieve(CARD, 10)
        messages.append(str(caught.value))
        pids.add(pid_of(retriever))
    assert messages[0] == (
        "the child exited with code 1; stderr: ranking_child: cannot open the index: no such file"
    )
    # The second question meets the one restart, or (had the first child died before its
    # request was written) already the refusal; the third always meets the refusal.
    assert messages[2] == (
        "the child has stopped 2 times (last: the child exited with code 1); "
        "it is not restarted again (restarts = 1)"
    )
    retriever.close()
    assert len(pids) == 2 and all(gone(pid) for pid in pids)


def test_a_crash_mid_run_fails_that_question_and_the_next_gets_a_new_child(
    rankings: Path,
) -> None:
    retriever = child(rankings, "--crash-on", "library card")
    first = pid_of(retriever)
    assert retriever.retrieve(OTHER, 10)
    with pytest.raises(ChildError) as crash:
        retriever.retrieve(CARD, 10)
    message = str(crash.value)
    assert message.startswith("the child exited with code 3; stderr: ")
    assert "segfault in scorer on request 2" in message
    assert retriever.retrieve(OTHER, 10)
    assert pid_of(retriever) != first and gone(first)
    retriever.close()


def test_a_hung_child_is_stopped_and_reaped(rankings: Path) -> None:
    retriever = child(rankings, "--hang-on", "library card", timeout=2)
    hung = pid_of(retriever)
    with pytest.raises(ChildError, match=r"no answer to request 1 within 2 s, so it was stopped"):
        retriever.retrieve(CARD, 10)
    assert gone(hung)
    assert retriever.retrieve(OTHER, 10)
    second = pid_of(retriever)
    retriever.close()
    assert gone(second)


@pytest.mark.parametrize(
    ("switch", "message"),
    [
        ("--garbage-on", "a line that is not a JSON response with an id: 'Loaded 55 documents"),
        ("--wrong-id-on", "the child answered id 1001, which no request in flight has"),
        ("--error-on", "the child answered an error: scorer has no field 'title'"),
    ],
)
def test_protocol_violations_are_error_outcomes(rankings: Path, switch: str, message: str) -> None:
    golden = load_jsonl(DEMO_SET, name="demo")
    retriever = child(rankings, switch, "library card")
    try:
        retrievals = evaluate_questions(retriever, golden.questions[:3], depth=10)
    finally:
        retriever.close()
    errors = [retrieval.error for retrieval in retrievals]
    assert errors[0] is not None and message in errors[0], errors
    assert errors[1] is None and errors[2] is None, errors  # the run goes on


def test_secret_arguments_come_from_the_environment(
    rankings: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANKING_TOKEN", "tok-123456")
    argv = [node(), str(CHILD), "--rankings", str(rankings), "--token", "${RANKING_TOKEN}"]
    retriever = create_command(argv)
    try:
        assert retriever.retrieve(CARD, 5)
        assert "tok-123456" not in json.dumps(retriever.describe())
        assert "--token '${RANKING_TOKEN}'" in retriever.describe()["command"]
    finally:
        retriever.close()
    with pytest.raises(InputError, match="the argument --token carries a secret"):
        create_command([*argv[:-1], "tok-123456"])
    with pytest.raises(InputError, match=r"refers to \$\{NOT_SET_ANYWHERE\}, which is not set"):
        create_command([*argv[:-1], "${NOT_SET_ANYWHERE}"])


def test_a_missing_program_is_a_usage_error() -> None:
    with pytest.raises(InputError, match="no such program: 'no-such-ranker'"):
        create_command(["no-such-ranker", "--index", "kb"])
    with pytest.raises(InputError, match="needs the program to start"):
        create_command([])


def test_requests_carry_the_question_id_and_meta_with_questions(
    rankings: Path, tmp_path: Path
) -> None:
    record = tmp_path / "requests.jsonl"
    retriever = child(rankings, "--record", str(record), questions=str(DEMO_SET))
    try:
        retriever.retrieve(CARD, 12)
    finally:
        retriever.close()
    (sent,) = [json.loads(line) for line in record.read_text().splitlines()]
    assert sent == {
        "id": 1,
        "question": CARD,
        "limit": 12,
        "question_id": "q01",
        "meta": {"topic": "membership"},
    }


def test_the_child_is_reaped_when_the_run_ends(rankings: Path, tmp_path: Path) -> None:
    """A whole ``retrievalkit eval`` process: once it has exited, so has its child."""
    import subprocess
    import sys

    pid_file = tmp_path / "child.pid"
    argv = [node(), str(CHILD), "--rankings", str(rankings), "--pid-file", str(pid_file)]
    (tmp_path / "retrievalkit.toml").write_text(
        f'[retrievers.ranker]\nplugin = "command"\ncommand = {json.dumps(argv)}\n'
        'doc_id_separator = "#"\n',
        encoding="utf-8",
    )
    completed = subprocess.run(
        [sys.executable, "-m", "retrievalkit", "eval", "--set", "demo", "--retriever", "ranker",
         "--no-save", "--format", "json"],
        cwd=tmp_path, capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)["errored"] == 0
    assert gone(int(pid_file.read_text()))
