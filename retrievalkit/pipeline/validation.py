"""Lint a golden set that loaded: what it holds, and what is legal but probably a mistake."""

from __future__ import annotations

from collections import Counter
from typing import Any

from retrievalkit.model.values import GoldenQuestionSet


def lint_set(golden: GoldenQuestionSet) -> dict[str, Any]:
    questions = golden.questions
    forms = Counter(q.form.value if q.form else "(none)" for q in questions)
    classes = Counter(q.hard_class or "(none)" for q in questions)
    no_answer = [q.id for q in questions if not q.answerable]
    multi = sum(1 for q in questions if len(q.expected) > 1)
    graded = sum(1 for q in questions if q.grades)
    warnings: list[str] = []
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
