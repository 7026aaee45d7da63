"""Clustering by a field only some questions have: a warning naming the field and the count.

A question without the field is a cluster of its own (golden-sets.md), which counts it
as independent of every other: the reader is told, in `evaluate`'s run, `compare`'s
comparison and `gate`'s verdict (and once on the command line), naming the field and
how many questions lack it. A field no question has is refused by `evaluate` and
`compare` alike, in the same words. Seeded sets: which questions carry the field, and
which field (``cluster``, ``hard_class``, ``meta.NAME``), are drawn at random.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from child_env import child_environment

import retrievalkit as rk
from retrievalkit.errors import InputError
from retrievalkit.model.values import GoldenQuestionSet

DEMO = Path(rk.__file__).parent / "demo"
FIELDS = ("cluster", "hard_class", "meta.family")


class Echo:
    """A retriever whose answer is a seeded draw of the set's documents."""

    def __init__(self, documents: Sequence[str], seed: int) -> None:
        self.identifier = "echo"
        self.documents = list(documents)
        self.seed = seed

    def retrieve(self, question: str, limit: int) -> list[str]:
        draw = random.Random(f"{self.seed}:{question}")
        return draw.sample(self.documents, min(limit, len(self.documents)))


@pytest.fixture(scope="module")
def demo() -> GoldenQuestionSet:
    return rk.load_set(DEMO / "golden.jsonl")


def _with_field(demo: GoldenQuestionSet, field: str, carrying: set[int], groups: int) -> Any:
    questions = []
    for index, question in enumerate(demo.questions):
        label = f"g{index % groups}" if index in carrying else None
        if field == "cluster":
            question = attrs.evolve(question, cluster=label)
        elif field == "hard_class":
            question = attrs.evolve(question, hard_class=label)
        else:
            meta = {k: v for k, v in question.meta.items() if k != "family"}
            if label is not None:
                meta["family"] = label
            question = attrs.evolve(question, meta=meta)
        questions.append(question)
    return GoldenQuestionSet(demo.name, questions)


def _documents(demo: GoldenQuestionSet) -> list[str]:
    return sorted({doc for question in demo.questions for doc in question.expected})


@pytest.mark.parametrize("seed", range(30))
def test_a_field_some_questions_lack_is_warned_of_with_the_count(
    demo: GoldenQuestionSet, seed: int
) -> None:
    draw = random.Random(seed)
    field = FIELDS[seed % len(FIELDS)]
    total = len(demo.questions)
    lacking = draw.choice([0, 1, draw.randint(2, total - 2), total - 1])
    carrying = set(draw.sample(range(total), total - lacking))
    golden = _with_field(demo, field, carrying, draw.randint(2, 9))
    documents = _documents(demo)
    fast = {"resamples": 50, "git_commit": None}
    first = rk.evaluate(golden, Echo(documents, seed), cluster_by=field, **fast)
    second = rk.evaluate(golden, Echo(documents, seed + 1000), cluster_by=field, **fast)
    said = f"--cluster-by {field}: {lacking} of {total} questions have no {field}"
    found = [w for w in first.warnings if w.startswith("--cluster-by")]
    if lacking == 0:
        assert found == []
    else:
        assert found == [said + found[0][len(said) :]], found
        assert f"each of those {lacking} is a cluster of its own" in found[0]
    comparison = rk.compare([first, second], cluster_by=field, resamples=50)
    compared = [w for w in comparison.warnings if w.startswith("--cluster-by")]
    assert compared == found
    store = rk.open_store("memory:")
    store.save(first.record)
    verdict = rk.gate(second, store, {"hit@1": 1.0}, cluster_by=field)
    assert verdict.baseline_run_id == first.run_id
    assert [w for w in verdict.warnings if w.startswith("--cluster-by")] == found


@pytest.mark.parametrize("field", FIELDS)
def test_a_field_no_question_has_is_refused_by_evaluate_and_compare_alike(
    demo: GoldenQuestionSet, field: str
) -> None:
    golden = _with_field(demo, field, set(), 2)
    carried = _with_field(demo, field, set(range(len(demo.questions))), 5)
    documents = _documents(demo)
    fast = {"resamples": 50, "git_commit": None}
    with pytest.raises(InputError) as evaluated:
        rk.evaluate(golden, Echo(documents, 1), cluster_by=field, **fast)
    runs = [rk.evaluate(carried, Echo(documents, seed), **fast) for seed in (1, 2)]
    with pytest.raises(InputError) as compared:
        rk.compare(runs, cluster_by=field, questions=golden.questions, resamples=50)
    assert str(compared.value) == str(evaluated.value)
    assert evaluated.value.field == compared.value.field == "--cluster-by"


def test_the_command_line_says_it_once(tmp_path: Path, demo: GoldenQuestionSet) -> None:
    lines = (DEMO / "golden.jsonl").read_text(encoding="utf-8").splitlines()
    changed = []
    for index, line in enumerate(lines):
        question = json.loads(line)
        if index % 4 == 0:
            question.setdefault("meta", {})["family"] = f"f{index % 3}"
        changed.append(json.dumps(question))
    path = tmp_path / "partial.jsonl"
    path.write_text("\n".join(changed) + "\n", encoding="utf-8")
    lacking = sum(1 for index in range(len(lines)) if index % 4)
    for _ in range(2):  # the second run is gated against the first
        result = subprocess.run(
            [sys.executable, "-m", "retrievalkit", "eval", "--set", str(path), "--retriever",
             "bm25-demo", "--cluster-by", "meta.family", "--resamples", "50"],
            cwd=tmp_path, env=child_environment(NO_COLOR="1", COLUMNS="400"),
            capture_output=True, text=True, check=False, timeout=120,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        said = f"--cluster-by meta.family: {lacking} of {len(lines)} questions have no meta.family"
        assert (result.stdout + result.stderr).count(said) == 1, result.stdout[-3000:]
