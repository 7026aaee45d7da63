"""Generated returned ids that differ from a label only by what surrounds them unseen.

One rule for every path that compares a retriever's ids with labels (asked one by one,
concurrently, with a timeout, in batches, with stages, with chunk ids, sequentially,
`compare`): an id with whitespace, control or format characters around it (``"doc-a "``,
``"doc-a\\r\\n"``, ``"\\u200bdoc-a"``) is compared without them, and never silently: the
run counts them, quotes the first with its question, the JSON carries the count and the
command line says it on stderr. A label such characters surround is refused where the
set is read or built, so the rule can never turn a hit into a miss.
"""

from __future__ import annotations

import json
import random
import sys
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import retrievalkit as rk
from retrievalkit.errors import InputError
from retrievalkit.formats.ids import returned_id, trimmed

#: Every character Python calls whitespace, every control and format character of the
#: Basic Multilingual Plane: what may surround an id unseen.
UNSEEN = sorted(
    {chr(code) for code in range(0x10000) if chr(code).isspace()}
    | {
        chr(code)
        for code in range(0x10000)
        if unicodedata.category(chr(code)) in ("Cc", "Cf") and not 0xD800 <= code < 0xE000
    }
)
SEEDS = range(12)


def padding(rng: random.Random) -> str:
    return "".join(rng.choice(UNSEEN) for _ in range(rng.randint(0, 3)))


def padded(rng: random.Random, label: str) -> str:
    """``label`` with unseen characters before and/or after it (at least one)."""
    while True:
        text = padding(rng) + label + padding(rng)
        if text != label:
            return text


def labels_of(rng: random.Random, count: int) -> list[str]:
    alphabet = "abcdef-_.:0123456789éñ"
    found: list[str] = []
    while len(found) < count:
        label = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8)))
        label = unicodedata.normalize("NFC", label)
        if label not in found:
            found.append(label)
    return found


def golden_of(labels: Sequence[str], chunks: bool = False) -> rk.GoldenQuestionSet:
    questions = [
        rk.GoldenQuestion(
            id=f"q{i}",
            question=f"question {i}",
            expected=[label],
            expected_chunks=[f"{label}#{i}"] if chunks else [],
        )
        for i, label in enumerate(labels)
    ]
    return rk.GoldenQuestionSet("edges", questions)


class Answers:
    """Returns, for question ``question <i>``, ``answers[i]``."""

    identifier = "answers"

    def __init__(self, answers: list[list[str]]) -> None:
        self.answers = answers

    def retrieve(self, question: str, limit: int) -> list[str]:
        return list(self.answers[int(question.split()[-1])])


class BatchAnswers(Answers):
    def retrieve_many(self, questions: Sequence[str], limit: int) -> list[list[str]]:
        return [self.retrieve(question, limit) for question in questions]


class StagedAnswers(Answers):
    """Two stages: a first one of padded ids, and an answer of clean ones."""

    def __init__(self, first: list[list[str]], answer: list[list[str]]) -> None:
        super().__init__(answer)
        self.first = first

    def retrieve_stages(self, question: str, limit: int) -> dict[str, list[str]]:
        index = int(question.split()[-1])
        return {"first": list(self.first[index]), "answer": list(self.answers[index])}


def case(seed: int, count: int = 6) -> tuple[list[str], list[list[str]], int]:
    """Labels, answers whose first id is the label padded, and how many ids are padded."""
    rng = random.Random(seed)
    labels = labels_of(rng, count + 1)
    decoy = labels.pop()  # returned by every question, never expected
    answers = []
    changed = 0
    for label in labels:
        ranking = [padded(rng, label)]
        if rng.random() < 0.5:
            ranking.append(padded(rng, decoy))
        else:
            ranking.append(decoy)
        changed += sum(returned != returned_id(returned) for returned in ranking)
        answers.append(ranking)
    return labels, answers, changed


def check_run(run: Any, answers: list[list[str]], changed: int) -> None:
    assert run.metrics["hit@1"].mean == 1.0, [o.ranking for o in run.outcomes]
    assert run.returned_ids is not None
    assert run.returned_ids.changed == changed
    first = answers[0][0]
    assert run.returned_ids.returned == first
    assert run.returned_ids.question_id == "q0"
    warning = next(w for w in run.warnings if "returned document id" in w)
    assert f"{changed} returned" in warning and repr(first) in warning and "q0" in warning


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(
    "how",
    [
        {},
        {"concurrency": 3},
        {"timeout": 30.0},
        {"concurrency": 2, "timeout": 30.0},
    ],
    ids=["one-by-one", "concurrent", "timeout", "concurrent-timeout"],
)
def test_a_padded_id_is_its_label_and_is_counted_however_it_is_asked(
    seed: int, how: dict[str, Any]
) -> None:
    labels, answers, changed = case(seed)
    run = rk.evaluate(golden_of(labels), Answers(answers), k=(1,), git_commit=None, **how)
    check_run(run, answers, changed)
    batched = rk.evaluate(golden_of(labels), BatchAnswers(answers), k=(1,), git_commit=None, **how)
    check_run(batched, answers, changed)
    document = json.loads(json.dumps(_summary(run)))
    assert document["returned_ids"]["changed"] == changed
    assert document["returned_ids"]["example"]["returned"] == answers[0][0]


def _summary(run: Any) -> dict[str, Any]:
    from retrievalkit.render.summary import summary

    return summary(run.report())


@pytest.mark.parametrize("seed", SEEDS)
def test_every_stage_compares_padded_ids_as_the_answer_does(seed: int) -> None:
    labels, answers, changed = case(seed)
    clean = [[returned_id(each) for each in ranking] for ranking in answers]
    run = rk.evaluate(golden_of(labels), StagedAnswers(answers, clean), k=(1,), git_commit=None)
    stages = run.record.stages
    assert stages is not None
    assert stages.metrics["first"]["hit@1"].mean == 1.0
    assert stages.metrics["answer"]["hit@1"].mean == 1.0
    assert run.returned_ids is not None and run.returned_ids.changed == changed
    assert dict(stages.attribution).get("not retrieved", 0) == 0


@pytest.mark.parametrize("seed", SEEDS)
def test_padded_chunk_ids_are_their_chunk_labels_and_are_counted(seed: int) -> None:
    rng = random.Random(seed)
    labels = labels_of(rng, 5)
    answers = [[padded(rng, f"{label}#{i}")] for i, label in enumerate(labels)]
    run = rk.evaluate(
        golden_of(labels, chunks=True),
        Answers(answers),
        k=(1,),
        metrics=["hit@1", "chunk_recall@1"],
        chunk_separator="#",
        git_commit=None,
    )
    assert run.metrics["hit@1"].mean == 1.0
    assert run.metrics["chunk_recall@1"].mean == 1.0
    assert run.returned_ids is not None and run.returned_ids.changed == len(labels)


@pytest.mark.parametrize("seed", SEEDS)
def test_compare_says_which_side_returned_padded_ids(seed: int) -> None:
    labels, answers, changed = case(seed)
    clean = [[returned_id(each) for each in ranking] for ranking in answers]
    golden = golden_of(labels)
    padded_run = rk.evaluate(golden, Answers(answers), k=(1,), git_commit=None, name="padded")
    clean_run = rk.evaluate(golden, Answers(clean), k=(1,), git_commit=None, name="clean")
    assert clean_run.returned_ids is None
    comparison = rk.compare([clean_run, padded_run])
    said = [warning for warning in comparison.warnings if "returned document id" in warning]
    assert len(said) == 1 and said[0].startswith("padded: ")
    assert f"{changed} returned" in said[0]
    # Both sides score the same: the rule made every padded id its label.
    assert padded_run.metrics["hit@1"].mean == clean_run.metrics["hit@1"].mean == 1.0


@pytest.mark.parametrize("seed", SEEDS)
def test_a_set_built_in_code_is_refused_a_label_with_unseen_characters_around_it(
    seed: int,
) -> None:
    rng = random.Random(seed)
    labels = labels_of(rng, 4)
    where = rng.randrange(len(labels))
    field = rng.choice(["expected", "id", "expected_chunks"])
    questions = []
    for i, label in enumerate(labels):
        bad = padded(rng, label) if i == where else None
        questions.append(
            rk.GoldenQuestion(
                id=bad if field == "id" and bad else f"q{i}",
                question=f"question {i}",
                expected=[bad if field == "expected" and bad else label],
                expected_chunks=[bad if field == "expected_chunks" and bad else f"{label}#1"],
            )
        )
    with pytest.raises(InputError) as raised:
        rk.evaluate(rk.GoldenQuestionSet("s", questions), Answers([[x] for x in labels]))
    assert raised.value.field == field
    assert "whitespace or an invisible character" in str(raised.value)


def test_trimmed_removes_exactly_what_surrounds_an_id_unseen() -> None:
    rng = random.Random(7)
    for _ in range(500):
        inner = rng.choice(["a", "doc-7", "é", "x y", "a\u200bb", "\ue000", "1\t2"])
        before, after = padding(rng), padding(rng)
        assert trimmed(before + inner + after) == inner
    assert trimmed("\u200b \ufeff\x00") == ""


# --- the command line: stderr, JSON, and the set file's refusal --------------------------

CHILD = """\
import json, sys
answers = json.load(open(sys.argv[1], encoding="utf-8"))
for line in sys.stdin:
    request = json.loads(line)
    hits = answers[request["question"].split()[-1]]
    print(json.dumps({"id": request["id"], "hits": hits}), flush=True)
"""


def _command_setup(tmp_path: Path, seed: int) -> tuple[list[list[str]], int]:
    labels, answers, changed = case(seed, count=4)
    (tmp_path / "child.py").write_text(CHILD, encoding="utf-8")
    (tmp_path / "answers.json").write_text(
        json.dumps({str(i): ranking for i, ranking in enumerate(answers)}), encoding="utf-8"
    )
    (tmp_path / "set.jsonl").write_text(
        "".join(
            json.dumps({"id": f"q{i}", "question": f"question {i}", "expected": [label]}) + "\n"
            for i, label in enumerate(labels)
        ),
        encoding="utf-8",
    )
    (tmp_path / "retrievalkit.toml").write_text(
        '[retrievers.padded]\nplugin = "command"\n'
        f"command = {json.dumps([sys.executable, 'child.py', 'answers.json'])}\n",
        encoding="utf-8",
    )
    return answers, changed


@pytest.mark.parametrize("seed", range(3))
def test_eval_says_on_stderr_and_in_json_how_many_ids_the_rule_changed(
    cli: Any, tmp_path: Path, seed: int
) -> None:
    answers, changed = _command_setup(tmp_path, seed)
    quiet = ("--quiet",) if seed == 2 else ()  # --quiet shortens the report, never this
    done = cli("eval", "--set", "set.jsonl", "--retriever", "padded", "--no-save",
               "--format", "json", *quiet)  # fmt: skip
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["metrics"]["hit@1"]["mean"] == 1.0
    assert document["returned_ids"]["changed"] == changed
    assert document["returned_ids"]["example"]["question_id"] == "q0"
    assert "warning" in done.stderr and f"{changed} returned document id" in done.stderr
    assert repr(answers[0][0]) in done.stderr


def test_compare_says_on_stderr_which_retriever_returned_padded_ids(
    cli: Any, tmp_path: Path
) -> None:
    _, changed = _command_setup(tmp_path, 5)
    done = cli("compare", "--set", "set.jsonl", "--retriever", "padded", "--retriever",
               "padded", "--no-save", "--format", "json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "returned document id" in line]
    assert len(said) == 2 and said[0].startswith("retrievalkit: warning: padded: ")
    assert all(f"{changed} returned document id" in line for line in said)
    warnings = json.loads(done.stdout)["warnings"]
    assert sum("returned document id" in warning for warning in warnings) == 2


@pytest.mark.parametrize("seed", range(8))
def test_a_set_file_label_with_whitespace_around_it_is_refused_with_its_line(
    cli: Any, tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    labels = labels_of(rng, 5)
    bad_line = rng.randrange(len(labels))
    pad = rng.choice([" ", "\t", "\u00a0", "\u3000", "\u200b", "\ufeff", "\r"])
    lines = []
    for i, label in enumerate(labels):
        expected = (pad + label) if i == bad_line and seed % 2 else label
        expected = (label + pad) if i == bad_line and not seed % 2 else expected
        lines.append(json.dumps({"id": f"q{i}", "question": f"q {i}", "expected": [expected]}))
    (tmp_path / "set.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = cli("validate", "--set", "set.jsonl")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "set.jsonl" in done.stderr and f"line {bad_line + 1}" in done.stderr
    assert "expected" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("seed", range(4))
def test_a_reranker_scores_a_padded_candidate_as_its_document(tmp_path: Path, seed: int) -> None:
    """The first stage returns the right document second, padded: the tf-idf reranker
    must find its text (and put it first), not leave it unscored behind a decoy."""
    rng = random.Random(seed)
    words = ["harbour", "violin", "glacier", "pepper", "saddle", "lantern"]
    (tmp_path / "corpus.jsonl").write_text(
        "".join(
            json.dumps({"_id": f"d{i}", "title": word, "text": f"all about the {word}"}) + "\n"
            for i, word in enumerate(words)
        )
        + json.dumps({"_id": "dx", "title": "decoy", "text": "nothing here"})
        + "\n",
        encoding="utf-8",
    )
    answers = {str(i): [padded(rng, "dx"), padded(rng, f"d{i}")] for i in range(len(words))}
    (tmp_path / "child.py").write_text(CHILD, encoding="utf-8")
    (tmp_path / "answers.json").write_text(json.dumps(answers), encoding="utf-8")
    config = tmp_path / "retrievalkit.toml"
    command = [sys.executable, str(tmp_path / "child.py"), str(tmp_path / "answers.json")]
    config.write_text(
        "[retrievers.first]\nplugin = \"command\"\n"
        f"command = {json.dumps(command)}\n"
        "[retrievers.reranked]\nplugin = \"rerank\"\nfirst_stage = \"first\"\n"
        "reranker = \"tfidf-cosine\"\ncandidates = 5\n"
        f"reranker_options = {{ corpus = {json.dumps(str(tmp_path / 'corpus.jsonl'))} }}\n",
        encoding="utf-8",
    )  # fmt: skip
    golden = rk.GoldenQuestionSet(
        "rerank",
        [
            rk.GoldenQuestion(id=f"q{i}", question=f"the {word} question {i}", expected=[f"d{i}"])
            for i, word in enumerate(words)
        ],
    )
    run = rk.evaluate(golden, "reranked", config=config, k=(1,), git_commit=None)
    assert run.metrics["hit@1"].mean == 1.0, [o.ranking for o in run.outcomes]
    assert run.returned_ids is not None and run.returned_ids.changed >= len(words)


@pytest.mark.parametrize("seed", range(4))
def test_a_sequential_run_counts_padded_ids_as_a_whole_run_does(seed: int) -> None:
    from retrievalkit.pipeline.gating.sequential_gate import evaluate_sequentially

    labels, answers, _ = case(seed, count=8)
    golden = golden_of(labels)
    clean = [[returned_id(each) for each in ranking] for ranking in answers]
    store = rk.open_store("memory:")
    store.save(rk.evaluate(golden, Answers(clean), k=(1,), git_commit=None).record)
    run, _, _ = evaluate_sequentially(
        golden,
        Answers(answers),
        store,
        rk.Thresholds({"hit@1": 0.1}),
        k=(1,),
        overfetch=3,
        confidence=0.95,
        resamples=200,
    )
    asked = {outcome.question_id for outcome in run.outcomes}
    expected = sum(
        returned != returned_id(returned)
        for index, ranking in enumerate(answers)
        if f"q{index}" in asked
        for returned in ranking
    )
    assert run.metrics["hit@1"].mean == 1.0
    assert run.returned_ids is not None and run.returned_ids.changed == expected
    assert any("returned document id" in warning for warning in run.warnings)


def test_the_warning_quotes_a_long_id_cut_short() -> None:
    label = "d" * 5000
    run = rk.evaluate(golden_of([label]), Answers([[label + " "]]), k=(1,), git_commit=None)
    assert run.metrics["hit@1"].mean == 1.0
    (warning,) = [w for w in run.warnings if "returned document id" in w]
    assert len(warning) < 600 and "(5001 characters)" in warning


@pytest.mark.parametrize("seed", range(6))
def test_fusion_adds_up_the_votes_of_a_padded_and_a_clean_spelling(
    tmp_path: Path, seed: int
) -> None:
    """One part returns the right document second and padded, the other first and clean:
    fused, its votes add up and it comes first (split, a decoy would win)."""
    rng = random.Random(seed)
    count = 5
    first = {str(i): ["dx", padded(rng, f"d{i}")] for i in range(count)}
    second = {str(i): [f"d{i}", "dy"] for i in range(count)}
    (tmp_path / "child.py").write_text(CHILD, encoding="utf-8")
    lines = []
    for name, answers in (("first", first), ("second", second)):
        (tmp_path / f"{name}.json").write_text(json.dumps(answers), encoding="utf-8")
        command = [sys.executable, str(tmp_path / "child.py"), str(tmp_path / f"{name}.json")]
        lines.append(f'[retrievers.{name}]\nplugin = "command"\ncommand = {json.dumps(command)}')
    lines.append('[retrievers.fused]\nplugin = "fusion"\nretrievers = ["first", "second"]')
    config = tmp_path / "retrievalkit.toml"
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")
    golden = golden_of([f"d{i}" for i in range(count)])
    run = rk.evaluate(golden, "fused", config=config, k=(1,), git_commit=None)
    assert run.metrics["hit@1"].mean == 1.0, [o.ranking for o in run.outcomes]
    assert run.returned_ids is not None and run.returned_ids.changed >= count
