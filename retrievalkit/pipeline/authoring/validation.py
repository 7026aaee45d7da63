"""Lint a golden set that loaded: what it holds, and what is legal but probably a mistake."""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Callable, Hashable, Mapping
from itertools import compress, repeat
from typing import Any

from retrievalkit.model.values import GoldenQuestionSet

_EXPECTED = operator.attrgetter("expected")
_GRADES = operator.attrgetter("grades")
_FORM = operator.attrgetter("form")
_HARD_CLASS = operator.attrgetter("hard_class")
_TEXT = operator.attrgetter("question")
_CLUSTER = operator.attrgetter("cluster")


def _counts(counted: Counter[Any], name: Callable[[Any], Hashable]) -> Counter[Any]:
    """``counted`` with its keys renamed (two may become one), in order of first use."""
    renamed: Counter[Any] = Counter()
    for key, count in counted.items():
        renamed[name(key)] += count
    return renamed


def lint_set(
    golden: GoldenQuestionSet, separators: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """What ``golden`` holds and what is probably a mistake; ``separators`` maps each
    configured retriever to its options, whose ``doc_id_separator`` no label may hold."""
    from retrievalkit.formats.ids import separator_problem, separators_of

    questions = golden.questions
    # A column of each field once; every count below is a pass over a column in C.
    expected = list(map(_EXPECTED, questions))
    grades = list(map(_GRADES, questions))
    forms = _counts(Counter(map(_FORM, questions)), lambda form: form.value if form else "(none)")
    classes = _counts(Counter(map(_HARD_CLASS, questions)), lambda name: name or "(none)")
    no_answer = [
        questions[index].id
        for index in compress(range(len(questions)), map(operator.not_, expected))
        if not any(grade >= 1 for grade in grades[index].values())
    ]
    multi = sum(map((1).__lt__, map(len, expected)))
    graded = sum(map(bool, grades))
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
    keys = list(map(str.lower, map(str.strip, map(_TEXT, questions))))
    texts = Counter(keys)
    repeated = map((1).__lt__, map(texts.__getitem__, keys))
    # Graded ids all expected (the usual case) leave nothing to say: checked in C.
    beyond = map(operator.not_, map(operator.le, map(dict.keys, grades), map(set, expected)))
    for index in compress(range(len(questions)), map(operator.or_, repeated, beyond)):
        q = questions[index]
        if texts[keys[index]] > 1:
            warnings.append(f"question {q.id}: the same text appears in more than one question")
        extra = sorted(
            doc for doc, grade in q.grades.items() if grade >= 1 and doc not in q.expected
        )
        if extra:
            warnings.append(
                f"question {q.id}: {', '.join(extra)} graded relevant but not in expected "
                "(it counts as relevant everywhere)"
            )
    if not any(map(operator.is_not, map(_CLUSTER, questions), repeat(None))):
        from retrievalkit.pipeline.engine.related_questions import related_warning

        related = related_warning(questions)
        if related is not None:
            warnings.append(related)
    if len(questions) < 30:
        warnings.append(
            f"{len(questions)} questions: intervals will be wide; 100 or more are needed to "
            "see differences of a few points"
        )
    content_hash = golden.content_hash
    summary = [
        f"set {golden.name}: {len(questions)} questions, content hash {content_hash[:12]}",
        "forms: " + ", ".join(f"{name} {count}" for name, count in sorted(forms.items())),
        "hard classes: " + ", ".join(f"{name} {count}" for name, count in sorted(classes.items())),
        f"multi-target: {multi}, graded: {graded}, no-answer: {len(no_answer)}",
    ]
    return {
        "set": golden.name,
        "questions": len(questions),
        "content_hash": content_hash,
        "forms": dict(forms),
        "hard_classes": dict(classes),
        "multi_target": multi,
        "graded": graded,
        "no_answer": no_answer,
        "summary": summary,
        "warnings": warnings,
    }
