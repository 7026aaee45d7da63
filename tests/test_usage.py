"""Token usage per question: `retrievalkit.usage`, the openai-compatible embedder reporting
what a real loopback server says it billed, each question's meter under concurrency, and
the tokens column through the stores (and records stored before it read back).

The server bills each embeddings request one token a word of its input, so that what each
question must have spent is known from its text alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import retrievalkit as rk
from retrievalkit.embedders import create_embedder
from retrievalkit.model.outcomes import Outcomes
from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet
from retrievalkit.pipeline.engine.evaluator import shared_usage
from retrievalkit.stores.columns import columns_header, decode_columns, encode_columns
from retrievalkit.usage import Meter, current_meter, metered, record_usage, usage_of

MODEL = "tiny-embed"
QUESTIONS = [
    GoldenQuestion(
        id=f"q{i:02d}",
        question=" ".join(f"word{j}" for j in range(1 + i % 9)),
        expected=[f"d{i % 5}"],
    )
    for i in range(40)
]
GOLDEN = GoldenQuestionSet(name="metered", questions=QUESTIONS)


def words(text: str) -> int:
    return len(text.split())


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        texts = body["input"]
        data = []
        for index, text in enumerate(texts):
            digest = hashlib.sha256(text.encode()).digest()
            data.append({"index": index, "embedding": [b / 255.0 + 0.01 for b in digest[:8]]})
        billed = sum(map(words, texts))
        reply = json.dumps(
            {"data": data, "usage": {"prompt_tokens": billed, "total_tokens": billed}}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


class EmbeddingRetriever:
    """Embeds each question through the openai-compatible embedder, ranks five documents."""

    identifier = "embedding-retriever"

    def __init__(self, url: str) -> None:
        self.embedder = create_embedder(
            "openai-compatible", {"url": url, "model": MODEL, "dimensions": 8, "backoff": 0.0}
        )

    def retrieve(self, question: str, limit: int) -> list[str]:
        vector = self.embedder.embed_queries([question])[0]
        return [f"d{int(vector[0] * 1000) % 5}", *(f"d{i}" for i in range(5))][:limit]


def expected_tokens() -> np.ndarray:
    return np.array([words(q.question) for q in QUESTIONS], dtype=np.int64)


@pytest.mark.parametrize("concurrency", [1, 4])
def test_each_question_gets_the_tokens_its_embedding_call_was_billed(
    server: str, concurrency: int
) -> None:
    """1 to 9 words a question: a meter shared between questions (or threads) would give
    some question another's count, and the sums would still agree, so each is checked."""
    retriever = EmbeddingRetriever(server)
    assert current_meter() is None  # the dimensions probe of the constructor is nobody's
    run = rk.evaluate(GOLDEN, retriever, k=[1], resamples=50, concurrency=concurrency)
    tokens = run.record.outcomes.tokens
    assert list(tokens) == [MODEL]
    np.testing.assert_array_equal(tokens[MODEL].input, expected_tokens())
    np.testing.assert_array_equal(tokens[MODEL].output, np.zeros(len(QUESTIONS)))


def test_a_timeout_asks_in_another_thread_and_still_meters_the_question(server: str) -> None:
    run = rk.evaluate(GOLDEN, EmbeddingRetriever(server), k=[1], resamples=50, timeout=30)
    np.testing.assert_array_equal(run.record.outcomes.tokens[MODEL].input, expected_tokens())


class BatchRetriever:
    """``retrieve_many``: one call for a batch, billed ``7 x questions + 3`` tokens."""

    def retrieve(self, question: str, limit: int) -> list[str]:
        raise AssertionError("retrieve_many is used")

    def retrieve_many(self, questions: list[str], limit: int) -> list[list[str]]:
        record_usage("batch-model", 7 * len(questions) + 3, 2)
        return [["d0"] for _ in questions]


def test_a_batch_call_is_shared_evenly_and_adds_up() -> None:
    run = rk.evaluate(GOLDEN, BatchRetriever(), k=[1], resamples=50)
    counts = run.record.outcomes.tokens["batch-model"]
    # 40 questions in one batch: 283 tokens are 7 each and 3 left, the first 3 take one.
    assert counts.input.tolist() == [8] * 3 + [7] * 37
    assert counts.output.tolist() == [1, 1] + [0] * 38
    assert int(counts.input.sum()) == 283


def test_shared_usage_of_a_meter_is_none_without_tokens() -> None:
    assert shared_usage(Meter(), 3) is None


def test_record_usage_outside_a_question_records_nothing_and_checks_its_arguments() -> None:
    record_usage("m", 5)  # no meter: nothing to record into, no error
    meter = Meter()
    metered(meter, lambda: (record_usage("m", 2, 1), record_usage("m", 3)))()
    assert meter.tokens() == {"m": (5, 1)}
    assert current_meter() is None  # the meter was set in a copy of the context only
    with pytest.raises(ValueError, match="input_tokens must be a whole number"):
        record_usage("m", -1)
    with pytest.raises(ValueError, match="output_tokens must be a whole number"):
        record_usage("m", 1, True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="model must be a non-empty name"):
        record_usage(" ", 1)


@pytest.mark.parametrize(
    "answer, expected",
    [
        ({"usage": {"prompt_tokens": 12, "total_tokens": 12}}, (12, 0)),
        ({"usage": {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16}}, (12, 4)),
        ({"usage": {"total_tokens": 9}}, (9, 0)),
        ({"usage": {"input_tokens": 3, "output_tokens": 8}}, (3, 8)),
        ({"meta": {"billed_units": {"search_units": 1}}}, (1, 0)),
        ({"meta": {"billed_units": {"input_tokens": 40, "output_tokens": 2}}}, (40, 2)),
        ({"data": []}, None),
        ({"usage": {"prompt_tokens": "many"}}, None),
        ([1, 2], None),
    ],
)
def test_usage_of_reads_the_common_answers(answer: Any, expected: Any) -> None:
    assert usage_of(answer) == expected


def test_tokens_round_trip_through_the_stored_columns(server: str, tmp_path: Path) -> None:
    run = rk.evaluate(GOLDEN, EmbeddingRetriever(server), k=[1], resamples=50)
    outcomes = run.record.outcomes
    columns = encode_columns(outcomes)
    back = decode_columns(columns_header(outcomes), columns.__getitem__)
    assert back == outcomes
    np.testing.assert_array_equal(back.tokens[MODEL].input, expected_tokens())
    store = rk.open_store(f"sqlite:///{tmp_path / 'runs.db'}")
    store.save(run.record)
    stored = store.get(run.record.run_id)
    assert stored is not None
    np.testing.assert_array_equal(stored.outcomes.tokens[MODEL].input, expected_tokens())
    picked = outcomes.take([3, 1])
    assert picked.tokens[MODEL].input.tolist() == [4, 2]  # 1 + i % 9 words


def test_outcomes_without_tokens_store_no_column_and_read_back_empty() -> None:
    outcomes = Outcomes.from_arrays(["a", "b"], {"hit@1": [1.0, 0.0]})
    assert dict(outcomes.tokens) == {}
    header = columns_header(outcomes)
    assert "tokens" not in header["columns"]
    back = decode_columns(header, encode_columns(outcomes).__getitem__)
    assert dict(back.tokens) == {}
    # A header of before the column list was kept reads no tokens either.
    old = {key: value for key, value in header.items() if key != "columns"}
    assert dict(decode_columns(old, encode_columns(outcomes).__getitem__).tokens) == {}


def test_records_of_schema_2_read_back_without_tokens() -> None:
    from retrievalkit.stores.serialization import load_record

    fixture = Path(__file__).parent / "fixtures" / "schema_v2_runs.jsonl"
    for number, line in enumerate(fixture.read_text("utf-8").splitlines(), 1):
        record = load_record(line, where=f"{fixture.name}:{number}")
        assert dict(record.outcomes.tokens) == {}


def test_bad_token_columns_are_refused() -> None:
    with pytest.raises(ValueError, match="must be 2 counts"):
        Outcomes.from_arrays(["a", "b"], {}, tokens={"m": ([1], [0])})
    with pytest.raises(ValueError, match="must not be negative"):
        Outcomes.from_arrays(["a", "b"], {}, tokens={"m": ([1, -1], [0, 0])})


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    return subprocess.run(
        [sys.executable, "-m", "retrievalkit", *args],
        cwd=cwd,
        env={**clean, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def test_eval_prices_a_dense_retrievers_tokens_and_gates_their_cost(
    server: str, tmp_path: Path
) -> None:
    """The real command line: a dense retriever embeds each question through the loopback
    server (one token a word). At 0.5 per 1,000 tokens the run costs 0.0005 a word; the
    second run asks the same, its ratio is 1 and it passes ``--max-cost-increase 0.1``;
    a query prefix of 10 more words a question (4.75 words on average before) raises the
    cost per question from 0.002375 to 0.007375, ratio 3.105, past it: exit 1."""
    (tmp_path / "corpus.jsonl").write_text(
        "".join(
            json.dumps({"_id": f"d{i}", "title": f"doc {i}", "text": f"text of document {i}"})
            + "\n"
            for i in range(5)
        ),
        encoding="utf-8",
    )
    (tmp_path / "golden.jsonl").write_text(
        "".join(
            json.dumps({"id": q.id, "question": q.question, "expected": list(q.expected)}) + "\n"
            for q in QUESTIONS
        ),
        encoding="utf-8",
    )
    config = (
        '[retrievers.remote]\nplugin = "dense"\ncorpus = "corpus.jsonl"\n'
        'embedder = "openai-compatible"\n'
        f'embedder_options = {{ url = "{server}", model = "{MODEL}", dimensions = 8, '
        "backoff = 0.0PREFIX }\n\n"
        f'[costs."{MODEL}"]\ninput = 0.5\n'
    )
    (tmp_path / "retrievalkit.toml").write_text(config.replace("PREFIX", ""), encoding="utf-8")
    common = ("eval", "--set", "golden.jsonl", "--retriever", "remote", "-q")
    first = _cli(*common, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    second = _cli(
        *common, "--format", "json", "--max-cost-increase", "0.1", "--junit-xml", "gate.xml",
        cwd=tmp_path,
    )  # fmt: skip
    assert second.returncode == 0, second.stderr
    document = json.loads(second.stdout)
    spent = int(expected_tokens().sum())
    assert document["cost"]["tokens"] == {MODEL: {"input": spent, "output": 0}}
    assert document["cost"]["total"] == pytest.approx(spent * 0.0005)
    assert document["cost"]["per_question"]["value"] == pytest.approx(spent * 0.0005 / 40)
    (check,) = document["regression"]["cost"]
    assert check["check"] == "cost.per_question" and check["ratio"] == pytest.approx(1.0)
    assert not check["regressed"]
    cases = [c.get("name") for c in ElementTree.parse(tmp_path / "gate.xml").iter("testcase")]
    assert "cost.per_question" in cases
    table = _cli(*common[:-1], "--no-save", cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    assert f"tokens: {MODEL} {spent:,} in, 0 out" in table.stdout
    wordy = ", query_prefix = " + json.dumps("one two three four five six seven eight nine ten ")
    (tmp_path / "retrievalkit.toml").write_text(config.replace("PREFIX", wordy), encoding="utf-8")
    dearer = _cli(
        *common, "--no-save", "--fail-on-regression", "--max-cost-increase", "0.1", cwd=tmp_path
    )
    assert dearer.returncode == 1, dearer.stdout + dearer.stderr
    assert "cost.per_question: 0.002375 -> 0.007375 (ratio 3.105x" in dearer.stdout
    bad = _cli(*common, "--no-save", "--max-cost-increase", "-1", cwd=tmp_path)
    assert bad.returncode == 2 and "--max-cost-increase" in bad.stderr


class HalfBroken:
    """Bills 3 tokens a question, then fails every odd one; records nothing on question 0."""

    def retrieve(self, question: str, limit: int) -> list[str]:
        number = int(question.split()[-1])
        if number:
            record_usage("m", 3)
        if number % 2:
            raise RuntimeError("the API failed after billing")
        return ["d0"]


@pytest.mark.parametrize("concurrency", [1, 3])
def test_an_errored_question_keeps_what_it_was_billed(concurrency: int) -> None:
    golden = GoldenQuestionSet(
        name="broken",
        questions=[
            GoldenQuestion(id=f"q{i}", question=f"ask {i}", expected=["d0"]) for i in range(6)
        ],
    )
    run = rk.evaluate(
        golden, HalfBroken(), k=[1], resamples=50, concurrency=concurrency, max_error_rate=None
    )
    assert run.record.errored == 3
    assert run.record.outcomes.tokens["m"].input.tolist() == [0, 3, 3, 3, 3, 3]


class Staged:
    """Two stages, the second a rerank billed 5 input and 1 output token a question."""

    def retrieve(self, question: str, limit: int) -> list[str]:
        return self.retrieve_stages(question, limit)["rerank"]

    def retrieve_stages(self, question: str, limit: int) -> dict[str, list[str]]:
        record_usage("reranker", 5, 1)
        return {"first": ["d1", "d0"], "rerank": ["d0", "d1"]}


@pytest.mark.parametrize("concurrency", [1, 3])
def test_a_staged_retriever_is_metered_question_by_question(concurrency: int) -> None:
    """Asked twice (``repeat=2``) after a warm-up: the tokens are those of one ask, as the
    ranking scored is the first ask's; the warm-up's are nobody's."""
    run = rk.evaluate(
        GOLDEN, Staged(), k=[1], resamples=50, concurrency=concurrency, repeat=2, warmup=3
    )
    counts = run.record.outcomes.tokens["reranker"]
    assert counts.input.tolist() == [5] * len(QUESTIONS)
    assert counts.output.tolist() == [1] * len(QUESTIONS)
    assert run.record.stages is not None
