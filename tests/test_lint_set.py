"""`validate`'s findings (counts and warnings, in order) agree with the check as written one
question at a time, on seeded sets of every shape."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pytest

from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet, QuestionForm
from retrievalkit.pipeline.authoring.validation import lint_set


def reference_lint(
    golden: GoldenQuestionSet, separators: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """What ``golden`` holds and what is probably a mistake; ``separators`` maps each
    configured retriever to its options, whose ``doc_id_separator`` no label may hold."""
    from retrievalkit.formats.ids import separator_problem, separators_of

    questions = golden.questions
    forms = Counter(q.form.value if q.form else "(none)" for q in questions)
    classes = Counter(q.hard_class or "(none)" for q in questions)
    no_answer = [q.id for q in questions if not q.answerable]
    multi = sum(1 for q in questions if len(q.expected) > 1)
    graded = sum(1 for q in questions if q.grades)
    warnings: list[str] = list(golden.warnings)
    for retriever, options in sorted((separators or {}).items()):
        for separator in separators_of(options):
            problem = separator_problem(golden, separator, retriever)
            if problem is not None:
                question_id, field, label = problem
                warnings.append(
                    f"question {question_id}: {field} {label!r} holds the doc_id_separator "
                    f"{separator!r} of retriever '{retriever}', so that retriever can never "
                    f"hit it (eval refuses the set with it): label the document as "
                    f"{label.partition(separator)[0]!r}, or choose another separator"
                )
    texts = Counter(q.question.strip().lower() for q in questions)
    for q in questions:
        if texts[q.question.strip().lower()] > 1:
            warnings.append(f"question {q.id}: the same text appears in more than one question")
        extra = sorted(
            doc for doc, grade in q.grades.items() if grade >= 1 and doc not in q.expected
        )
        if extra:
            warnings.append(
                f"question {q.id}: {', '.join(extra)} graded relevant but not in expected "
                "(it counts as relevant everywhere)"
            )
    if not any(q.cluster is not None for q in questions):
        from retrievalkit.pipeline.engine.related_questions import related_warning

        related = related_warning(questions)
        if related is not None:
            warnings.append(related)
    if len(questions) < 30:
        warnings.append(
            f"{len(questions)} questions: intervals will be wide; 100 or more are needed to "
            "see differences of a few points"
        )
    summary = [
        f"set {golden.name}: {len(questions)} questions, content hash {golden.content_hash[:12]}",
        "forms: " + ", ".join(f"{name} {count}" for name, count in sorted(forms.items())),
        "hard classes: " + ", ".join(f"{name} {count}" for name, count in sorted(classes.items())),
        f"multi-target: {multi}, graded: {graded}, no-answer: {len(no_answer)}",
    ]
    return {
        "set": golden.name,
        "questions": len(questions),
        "content_hash": golden.content_hash,
        "forms": dict(forms),
        "hard_classes": dict(classes),
        "multi_target": multi,
        "graded": graded,
        "no_answer": no_answer,
        "summary": summary,
        "warnings": warnings,
    }


def random_set(seed: int) -> GoldenQuestionSet:
    rng = random.Random(seed)
    documents = [f"d{n}" for n in range(rng.choice([3, 30, 300]))]
    texts = [f"what is {n}" for n in range(rng.choice([5, 50, 500]))]
    questions = []
    for index in range(rng.randrange(1, 150)):
        expected = tuple(rng.sample(documents, rng.choice([0, 0, 1, 1, 2, 3])))
        graded = rng.sample(documents, rng.randrange(0, 3)) if rng.random() < 0.5 else []
        grades = {doc: rng.randrange(0, 4) for doc in graded}
        grades = {doc: grade for doc, grade in grades.items() if grade or doc not in expected}
        text = rng.choice(texts)
        questions.append(
            GoldenQuestion(
                f"q{index}",
                text.upper() if rng.random() < 0.2 else f" {text} ",
                expected=expected,
                grades=grades,
                form=rng.choice([None, *QuestionForm]),
                hard_class=rng.choice([None, "", "normal", "boilerplate"]),
                cluster=f"c{index % 4}" if seed % 5 == 0 else None,
            )
        )
    return GoldenQuestionSet("s", questions)


@pytest.mark.parametrize("seed", range(40))
def test_findings_agree_with_the_check_one_question_at_a_time(seed: int) -> None:
    golden = random_set(seed)
    separators = {"r": {"doc_id_separator": "#"}}
    found = lint_set(golden, separators)
    expected = reference_lint(golden, separators)
    assert found == expected
    assert list(found["forms"]) == list(expected["forms"])
    assert list(found["hard_classes"]) == list(expected["hard_classes"])
