"""Value types are frozen for real: their mappings refuse changes, and hashing is honest."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest

from retrievalkit.formats.convert import structure, to_json, unstructure
from retrievalkit.model.records import ResultRecord
from retrievalkit.model.values import FrozenDict, GoldenQuestion, QuestionForm, Retrieval


def question(**changes: Any) -> GoldenQuestion:
    fields: dict[str, Any] = {
        "id": "q1",
        "question": "How long is a passport valid?",
        "form": QuestionForm.MATCH,
        "expected": ["doc-12"],
        "grades": {"doc-12": 2, "doc-9": 0},
        "meta": {"topic": "travel"},
    }
    fields.update(changes)
    return GoldenQuestion(**fields)


@pytest.mark.parametrize(
    "change",
    [
        lambda q: q.meta.__setitem__("topic", "x"),
        lambda q: q.meta.update(topic="x"),
        lambda q: q.meta.pop("topic"),
        lambda q: q.meta.clear(),
        lambda q: q.meta.setdefault("other", "x"),
        lambda q: q.grades.__delitem__("doc-9"),
        lambda q: q.grades.popitem(),
    ],
)
def test_a_questions_mappings_refuse_every_change(change: Any) -> None:
    golden = question()
    with pytest.raises(TypeError, match="read-only"):
        change(golden)
    assert golden.meta == {"topic": "travel"} and golden.grades == {"doc-12": 2, "doc-9": 0}


def test_a_mapping_given_in_is_copied_so_the_caller_cannot_change_the_value() -> None:
    meta = {"topic": "travel"}
    golden = question(meta=meta)
    meta["topic"] = "changed"
    assert golden.meta["topic"] == "travel"


def test_equal_questions_hash_equal_and_work_as_keys() -> None:
    first, second = question(), question(meta={"topic": "travel"})
    assert first == second and hash(first) == hash(second)
    assert {first: 1}[second] == 1
    assert hash(question(meta={"topic": "other"})) != hash(first)
    assert len({first, second, question(id="q2")}) == 2


def test_copies_pickles_and_stored_form_are_unchanged() -> None:
    golden = question()
    for again in (copy.copy(golden), copy.deepcopy(golden), pickle.loads(pickle.dumps(golden))):
        assert again == golden
        assert type(again.meta) is FrozenDict
    plain = unstructure(golden)
    assert type(plain["meta"]) is dict and plain["grades"] == {"doc-12": 2, "doc-9": 0}
    rebuilt = structure(plain, GoldenQuestion)
    assert rebuilt == golden and type(rebuilt.grades) is FrozenDict
    assert to_json(rebuilt) == to_json(golden)


def test_a_record_is_read_only_down_to_its_slices() -> None:
    import retrievalkit as rk

    golden = rk.GoldenQuestionSet(
        name="s", questions=[question(), question(id="q2", meta={"topic": "work"})]
    )

    class One:
        identifier = "one"

        def retrieve(self, text: str, limit: int) -> list[str]:
            return ["doc-12"]

    record: ResultRecord = rk.evaluate(
        golden, One(), slices=("topic",), resamples=20, git_commit=None
    ).record
    with pytest.raises(TypeError):
        record.metrics["hit@1"] = record.metrics["hit@3"]  # type: ignore[index]
    with pytest.raises(TypeError):
        record.slices["topic"]["travel"]["hit@1"] = record.metrics["hit@3"]  # type: ignore[index]
    with pytest.raises(TypeError):
        record.outcomes[0].scores["hit@1"] = 0.0  # type: ignore[index]
    # Retriever options may hold lists: read-only, but no hash is promised for a record.
    with pytest.raises(TypeError):
        record.manifest.retriever_options["k"] = 1  # type: ignore[index]


def test_retrieval_is_a_value_type_with_the_others() -> None:
    retrieval = Retrieval(["d1", "d2"], 1.5)
    assert retrieval.ranking == ("d1", "d2") and retrieval.error is None
    assert hash(retrieval) == hash(Retrieval(("d1", "d2"), 1.5))
    from retrievalkit.pipeline.engine import evaluator

    assert evaluator.Retrieval is Retrieval
