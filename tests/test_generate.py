"""``retrievalkit generate``: corpora, the offline generator, the cache, and the chat client.

The ``openai-compatible`` paths run against a local stand-in server (no real model):
error responses, slow responses and malformed JSON included.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from chat_stand_in import Received, Reply, chat_stand_in
from conftest import RunCli, shared_data

from retrievalkit.cli.main import main
from retrievalkit.corpora.providers import Chunk, FolderCorpus
from retrievalkit.errors import InputError
from retrievalkit.formats.golden_sets import load_jsonl
from retrievalkit.generators.chat import ChatClient, ChatError
from retrievalkit.generators.offline import OfflineGenerator
from retrievalkit.generators.openai_compatible import parse_question_reply
from retrievalkit.model.values import QuestionForm
from retrievalkit.pipeline.authoring.generation import (
    GenerationCache,
    lexical_overlap,
    overlap_band,
)

SCIFACT = shared_data() / "scifact"
SECRET = "sk-test-DO-NOT-LEAK-4f1c"


# --- corpora -------------------------------------------------------------------------------


def test_folder_corpus_chunks_with_overlap_and_doc_ids(tmp_path: Path) -> None:
    (tmp_path / "guides").mkdir()
    (tmp_path / "guides" / "my passport.md").write_text(
        "# Passports\none two three four five six seven eight\n", encoding="utf-8"
    )
    (tmp_path / "short.txt").write_text("alpha beta", encoding="utf-8")
    (tmp_path / "ignored.pdf").write_text("not text", encoding="utf-8")
    (tmp_path / ".hidden.md").write_text("secret notes", encoding="utf-8")
    corpus = FolderCorpus(tmp_path, chunk_size=4, chunk_overlap=1)
    chunks = list(corpus.chunks())
    assert [chunk.id for chunk in chunks] == [
        "guides/my_passport.md#0",
        "guides/my_passport.md#1",
        "guides/my_passport.md#2",
        "short.txt#0",
    ]
    # Windows of 4 words starting 3 apart, with the text's own line break kept.
    assert chunks[0].text == "# Passports\none two"
    assert chunks[1].text == "two three four five"
    assert chunks[2].text == "five six seven eight"
    assert {chunk.document_id for chunk in chunks} == {"guides/my_passport.md", "short.txt"}
    assert chunks[0].title == "Passports"


def test_folder_corpus_rejects_overlap_not_below_size(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="chunk_overlap"):
        FolderCorpus(tmp_path, chunk_size=3, chunk_overlap=3)


def test_cache_key_changes_with_content_model_and_prompt() -> None:
    generator = OfflineGenerator()
    chunk = Chunk("d1", "d1", "Some text about widgets.")
    key = GenerationCache.key(chunk, generator, QuestionForm.MATCH)
    assert key == GenerationCache.key(Chunk("d9", "d9", chunk.text), generator, QuestionForm.MATCH)
    assert key != GenerationCache.key(
        Chunk("d1", "d1", "Other text."), generator, QuestionForm.MATCH
    )
    other = OfflineGenerator()
    other.prompt_version = "offline-key-sentence-v2"
    assert key != GenerationCache.key(chunk, other, QuestionForm.MATCH)
    other = OfflineGenerator()
    other.model = "another"
    assert key != GenerationCache.key(chunk, other, QuestionForm.MATCH)


def test_lexical_overlap_counts_stemmed_content_words() -> None:
    chunk = "The library lends laptops to members for two weeks."
    assert lexical_overlap("Does the library lend laptops?", chunk) == 1.0
    assert lexical_overlap("Can I borrow a computer?", chunk) == 0.0
    assert lexical_overlap("How long can members borrow a laptop?", chunk) == pytest.approx(2 / 4)
    assert lexical_overlap("Is it?", chunk) is None
    assert overlap_band(0.9) == "high" and overlap_band(0.5) == "medium"
    assert overlap_band(0.1) == "low"


def test_parse_question_reply() -> None:
    assert parse_question_reply('\n"Question: How old is the library?"\n') == (
        "How old is the library?"
    )
    assert parse_question_reply("1. 2024 budget: who approved it?") == (
        "2024 budget: who approved it?"
    )


# --- offline generation on SciFact ----------------------------------------------------------


def test_offline_generation_on_scifact_writes_a_valid_set_and_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[str] = []
    original = OfflineGenerator.generate

    def counting(self: OfflineGenerator, chunk: Chunk, form: QuestionForm) -> str:
        calls.append(chunk.id)
        return original(self, chunk, form)

    monkeypatch.setattr(OfflineGenerator, "generate", counting)
    monkeypatch.chdir(tmp_path)
    arguments = [
        "generate",
        "--corpus",
        str(SCIFACT),
        "--generator",
        "offline",
        "--limit",
        "50",
        "--seed",
        "7",
        "--output",
        "golden.jsonl",
        "--cache",
        "cache",
    ]
    assert main(arguments) == 0
    first = capsys.readouterr()
    assert len(calls) == 50
    assert "50 generated, 0 failed (0 replayed from the cache, 50 generator calls)" in first.out
    assert "near-quotes" in first.err  # offline questions reuse the chunk's words
    text = (tmp_path / "golden.jsonl").read_text(encoding="utf-8")

    golden = load_jsonl(tmp_path / "golden.jsonl")
    corpus_ids = {
        json.loads(line)["_id"]
        for line in (SCIFACT / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    }
    assert len(golden.questions) == 50
    for question in golden.questions:
        assert question.form is QuestionForm.MATCH
        assert len(question.expected) == 1 and question.expected[0] in corpus_ids
        assert question.meta["generator"] == "offline"
        assert question.meta["chunk"] == question.expected[0]
        assert 0.0 <= float(question.meta["lexical_overlap"]) <= 1.0
    assert main(["validate", "--set", "golden.jsonl"]) == 0

    calls.clear()
    capsys.readouterr()
    assert main(arguments) == 0
    second = capsys.readouterr()
    assert calls == []
    assert "50 generated, 0 failed (50 replayed from the cache, 0 generator calls)" in second.out
    assert (tmp_path / "golden.jsonl").read_text(encoding="utf-8") == text

    assert main([*arguments, "--regenerate"]) == 0
    assert len(calls) == 50

    calls.clear()
    assert (
        main([*arguments[:-4], "--seed", "8", "--output", "other.jsonl", "--cache", "cache"]) == 0
    )
    other = load_jsonl(tmp_path / "other.jsonl")
    assert {q.id for q in other.questions} != {q.id for q in golden.questions}
    assert 0 < len(calls) <= 50  # chunks sampled by both seeds came from the cache


@pytest.mark.parametrize(
    ("extra", "mentions"),
    [
        (("--generator", "offline", "--form", "GAP"), "--form"),
        (("--generator", "no-such-generator"), "no-such-generator"),
        (("--generator", "offline", "--option", "novalue"), "--option"),
        (("--generator", "offline", "--option", "colour=blue"), "colour"),
        (("--generator", "openai-compatible"), "base_url"),
        (
            (
                "--generator",
                "openai-compatible",
                "--option",
                "base_url=http://127.0.0.1:9/v1",
                "--option",
                "model=m",
                "--option",
                "api_key_env=RK_TEST_UNSET_VARIABLE",
            ),
            "RK_TEST_UNSET_VARIABLE",
        ),
    ],
)
def test_bad_generator_usage_exits_2(
    cli: RunCli, tmp_path: Path, extra: tuple[str, ...], mentions: str
) -> None:
    corpus = tmp_path / "docs"
    corpus.mkdir()
    (corpus / "a.md").write_text("The library opens at nine every weekday.", encoding="utf-8")
    result = cli("generate", "--corpus", str(corpus), "--output", "g.jsonl", *extra)
    assert result.returncode == 2, result.stderr
    assert mentions in result.stderr
    assert not (tmp_path / "g.jsonl").exists()


def test_a_missing_corpus_and_a_bad_config_exit_2(cli: RunCli, tmp_path: Path) -> None:
    result = cli("generate", "--corpus", "nowhere", "--generator", "offline", "--output", "g.jsonl")
    assert result.returncode == 2 and "nowhere" in result.stderr
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("Opening hours are nine to five.", encoding="utf-8")
    (tmp_path / "cfg.toml").write_text('[generators.llm]\nmodel = "x"\n', encoding="utf-8")
    result = cli(
        "generate", "--corpus", "docs", "--generator", "llm", "--output", "g.jsonl",
        "--config", "cfg.toml",
    )  # fmt: skip
    assert result.returncode == 2
    assert "cfg.toml" in result.stderr and "generators.llm.plugin" in result.stderr


# --- the openai-compatible generator against the stand-in server -----------------------------

DOCUMENTS = {
    "ok-one.md": "MARKER-OK1. The central library opens at nine on weekdays and ten on Sundays.",
    "ok-two.txt": "MARKER-OK2. Members may borrow up to twenty books at a time for three weeks.",
    "flaky.md": "MARKER-FLAKY. Laptops can be booked at the help desk for two hours a day.",
    "broken.md": "MARKER-BROKEN. The reading room is silent and has forty desks with lamps.",
    "garbled.md": "MARKER-GARBLED. Lost cards are replaced for a fee of two euros at any branch.",
    "slow.md": "MARKER-SLOW. Children's story time is held every Saturday morning at eleven.",
}


def generation_reply(request: Received, earlier: int) -> Reply:
    prompt = request.prompt
    if "MARKER-FLAKY" in prompt and earlier == 0:
        return Reply("slow down", status=429, headers={"Retry-After": "0"})
    if "MARKER-BROKEN" in prompt:
        # A server that echoes the request's credentials in its error must not leak them.
        return Reply(f"internal error for {request.authorization}", status=500)
    if "MARKER-GARBLED" in prompt:
        return Reply(raw=b'{"choices": [{"message": {"content": "How')
    if "MARKER-SLOW" in prompt:
        return Reply("When is story time?", delay=30.0)
    marker = next(word for word in ("OK1", "OK2", "FLAKY") if f"MARKER-{word}" in prompt)
    return Reply(f"Question: what should a visitor know about {marker.lower()}?")


def write_llm_config(directory: Path, url: str, **options: Any) -> Path:
    settings = {
        "plugin": "openai-compatible",
        "base_url": url,
        "model": "stand-in",
        "api_key_env": "RK_TEST_API_KEY",
        "retries": 2,
        "backoff": 0.01,
        "timeout": 0.5,
        "concurrency": 2,
        **options,
    }
    lines = ["[generators.local]"] + [
        f"{key} = {json.dumps(value)}" for key, value in settings.items()
    ]
    path = directory / "retrievalkit.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_openai_generator_counts_failures_retries_and_replays(
    cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RK_TEST_API_KEY", SECRET)
    corpus = tmp_path / "docs"
    corpus.mkdir()
    for name, text in DOCUMENTS.items():
        (corpus / name).write_text(text, encoding="utf-8")
    command = ("generate", "--corpus", "docs", "--generator", "local", "--output", "g.jsonl")

    with chat_stand_in(generation_reply) as server:
        write_llm_config(tmp_path, server.url)
        first = cli(*command)
        assert first.returncode == 0, first.stderr
        assert (
            "3 generated, 3 failed (0 replayed from the cache, 6 generator calls)" in first.stdout
        )
        for chunk in ("broken.md#0", "garbled.md#0", "slow.md#0"):
            assert f"failed: chunk {chunk}" in first.stderr
        assert "HTTP 500" in first.stderr and "gave up after 3 attempts" in first.stderr
        assert "not valid JSON" in first.stderr and "timeout" in first.stderr
        # Retries: a 429 and a 500 are retried, a slow server times out and is retried,
        # a malformed reply is not.
        assert server.count("MARKER-FLAKY") == 2
        assert server.count("MARKER-BROKEN") == 3
        assert server.count("MARKER-SLOW") == 3
        assert server.count("MARKER-GARBLED") == 1
        assert server.count("MARKER-OK1") == server.count("MARKER-OK2") == 1
        request = server.received[0]
        assert request.body["model"] == "stand-in" and request.body["temperature"] == 0
        assert request.authorization == f"Bearer {SECRET}"
        assert "Form: GAP" in request.prompt  # the default form of a model generator

        golden = load_jsonl(tmp_path / "g.jsonl")
        assert {q.expected[0] for q in golden.questions} == {"ok-one.md", "ok-two.txt", "flaky.md"}
        assert all(q.form is QuestionForm.GAP for q in golden.questions)
        assert golden.questions[0].question.startswith("what should a visitor")  # label dropped
        assert {q.meta["model"] for q in golden.questions} == {"stand-in"}
        assert {q.meta["prompt_version"] for q in golden.questions} == {"generate-v1"}

        server.clear()
        second = cli(*command)
        assert second.returncode == 0, second.stderr
        assert "3 generated, 3 failed (3 replayed from the cache, 3 generator calls)" in (
            second.stdout
        )
        for marker in ("MARKER-OK1", "MARKER-OK2", "MARKER-FLAKY"):
            assert server.count(marker) == 0  # replayed: not a single request
        assert server.count("MARKER-BROKEN") == 3  # failures are not cached: asked again

        server.clear()
        third = cli(*command, "--regenerate")
        assert third.returncode == 0, third.stderr
        assert server.count("MARKER-OK1") == 1

    written = [tmp_path / "g.jsonl", *sorted((tmp_path / ".retrievalkit").rglob("*.json"))]
    assert len(written) == 4  # the set and three cache entries
    for output in (first, second, third):
        assert SECRET not in output.stdout + output.stderr
    for path in written:
        assert SECRET not in path.read_text(encoding="utf-8")


def test_when_every_generation_fails_nothing_is_written_and_exit_3(
    cli: RunCli, tmp_path: Path
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("MARKER-BROKEN. Some words here.", encoding="utf-8")
    with chat_stand_in(lambda request, earlier: Reply("down", status=503)) as server:
        write_llm_config(tmp_path, server.url, api_key_env="", retries=0)
        result = cli("generate", "--corpus", "docs", "--generator", "local", "--output", "g.jsonl")
    assert result.returncode == 3
    assert "0 generated, 1 failed" in result.stderr and "HTTP 503" in result.stderr
    assert not (tmp_path / "g.jsonl").exists()


def test_chat_client_backs_off_exponentially_and_honours_retry_after() -> None:
    def reply(request: Received, earlier: int) -> Reply:
        if "retry-after" in request.prompt:
            return Reply("busy", status=429, headers={"Retry-After": "0.5"})
        return Reply("busy", status=503)

    waits: list[float] = []
    with chat_stand_in(reply) as server:
        client = ChatClient(
            base_url=server.url, model="m", retries=3, backoff=0.01, sleep=waits.append
        )
        with pytest.raises(ChatError, match="gave up after 4 attempts") as failure:
            client.complete([{"role": "user", "content": "hello"}])
        assert failure.value.attempts == 4
        assert waits == [0.01, 0.02, 0.04]
        waits.clear()
        with pytest.raises(ChatError):
            client.complete([{"role": "user", "content": "retry-after"}])
        assert waits == [0.5, 0.5, 0.5]
        assert server.count("hello") == 4


def test_chat_client_does_not_retry_client_errors_and_scrubs_the_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RK_TEST_API_KEY", SECRET)
    waits: list[float] = []
    with chat_stand_in(lambda request, _: Reply(f"bad key {request.authorization}", 401)) as server:
        client = ChatClient(
            base_url=server.url, model="m", api_key_env="RK_TEST_API_KEY", sleep=waits.append
        )
        with pytest.raises(ChatError) as failure:
            client.complete([{"role": "user", "content": "hi"}])
        assert "HTTP 401" in str(failure.value) and SECRET not in str(failure.value)
        assert waits == [] and server.count("hi") == 1


def test_chat_client_checks_its_options() -> None:
    with pytest.raises(InputError, match="base_url"):
        ChatClient(base_url="127.0.0.1:8000", model="m")
    with pytest.raises(InputError, match="retries"):
        ChatClient(base_url="http://127.0.0.1:1/v1", model="m", retries=-1)
