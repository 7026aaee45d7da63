"""A set a plugin provides, checked as strictly as a set file."""

from __future__ import annotations

from retrievalkit.errors import InputError
from retrievalkit.formats.golden_sets.questions import parse_question
from retrievalkit.formats.golden_sets.writing import question_record
from retrievalkit.model.values import GoldenQuestionSet


def check_provided_set(golden: GoldenQuestionSet, provider: str) -> GoldenQuestionSet:
    """Hold a set a plugin built in code to the rules a set file is held to.

    Each question goes through the same checks as a line of a JSON Lines file (empty
    text, an expected id graded 0, an id listed twice, ...), and ids must be unique; a
    failure names the provider, the set, the question and the field.
    """
    source = f"question set '{golden.name}' from {provider}"
    if not golden.questions:
        raise InputError(
            "holds no questions", source=source, hint="a provider's load() must return questions"
        )
    seen: dict[str, int] = {}
    for number, question in enumerate(golden.questions, start=1):
        where = f"{source}, question {number}"
        try:
            data = question_record(question)
        except Exception as error:
            raise InputError(
                f"is not a valid question: {type(error).__name__}: {error}", source=where
            ) from None
        parse_question(data, source=where)
        if question.id in seen:
            raise InputError(
                f"duplicate id '{question.id}', first used by question {seen[question.id]}",
                source=where,
                field="id",
                hint="ids must be unique within a set",
            )
        seen[question.id] = number
    from retrievalkit.formats.ids import canonical_set

    return canonical_set(golden)
