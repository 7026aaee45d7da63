"""Golden sets from JSON Lines: one question a line, each error naming its line and field.

A well-formed file takes the fast path (`fast_jsonl`); any line it cannot vouch for is
read again here, one line at a time, for an exact message.
"""

from __future__ import annotations

from pathlib import Path

from retrievalkit.errors import InputError
from retrievalkit.formats.golden_sets.fast_jsonl import fast_questions
from retrievalkit.formats.golden_sets.questions import line_question
from retrievalkit.formats.limits import MAX_LINE_BYTES, line_too_long
from retrievalkit.formats.text_files import iter_lines, read_text
from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet


def load_jsonl(path: Path, *, name: str | None = None) -> GoldenQuestionSet:
    """One question per line; blank lines are skipped.

    A file is read a block at a time and each block's questions are checked together
    (`fast_questions`); a block that is unusual in any way goes through the checks of
    one line at a time, and any problem at all reads the whole file again the one line at
    a time way (`_load_jsonl_lines`), so every message is the one it always was.
    """
    fast = fast_questions(path)
    if fast is None:
        questions = _load_jsonl_lines(path)
        return GoldenQuestionSet(name=name or path.stem, questions=questions, source=str(path))
    questions, plain = fast
    golden = GoldenQuestionSet(name=name or path.stem, questions=questions, source=str(path))
    if plain:
        from retrievalkit.formats.ids import known_canonical

        # ASCII without a \u escape: every id is its own NFC form, with nothing to check.
        known_canonical(golden)
    return golden


def _load_jsonl_lines(path: Path) -> list[GoldenQuestion]:
    """Every question of the file, checked one line at a time: the first problem in the
    file is raised, naming its line and field."""
    text = read_text(path)
    questions: list[GoldenQuestion] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(iter_lines(text), start=1):
        if len(line) > MAX_LINE_BYTES:
            raise line_too_long(len(line), source=str(path), line=number)
        if not line.strip():
            continue
        question = line_question(line, number, str(path))
        if question.id in seen:
            raise InputError(
                f"duplicate id '{question.id}', first used on line {seen[question.id]}",
                source=str(path),
                line=number,
                field="id",
                hint="ids must be unique within a set",
            )
        seen[question.id] = number
        questions.append(question)
    if not questions:
        raise InputError(
            "the file holds no questions",
            source=str(path),
            hint="write one JSON object per line, as in the docs' golden set guide",
        )
    return questions
