"""What a question's text and a set's strings may hold, and the longest question."""

from __future__ import annotations

import re
from typing import Any

from retrievalkit.formats.unsafe_text import UNSAFE as _LABEL_UNSAFE
from retrievalkit.model.values import QUESTION_FIELDS

#: A question longer than this is almost certainly a pasted document, not a question.
MAX_QUESTION_CHARS = 10_000


#: The fields a question line may have: `GoldenQuestion`'s, in its order.
KNOWN_FIELDS = QUESTION_FIELDS


#: Free text (a question, a gist, a description) may hold tabs and line breaks (also
#: U+2028 and U+2029); nothing else a terminal could act on (ESC, OSC, bidirectional
#: overrides) is accepted anywhere.
TEXT_UNSAFE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b\u200e\u200f\u202a-\u202e\u2060-\u2069\ufeff\ud800-\udfff]"
)


def unsafe_character(text: str, *, free_text: bool = False) -> str | None:
    """A description of the first control character in ``text``, or None when it has none."""
    found = (TEXT_UNSAFE if free_text else _LABEL_UNSAFE).search(text)
    if found is None:
        return None
    return f"control character U+{ord(found[0]):04X} at position {found.start() + 1}"


def check_text(text: str, field: str, fail: Any, *, free_text: bool = False) -> None:
    problem = unsafe_character(text, free_text=free_text)
    if problem is not None:
        raise fail(
            f"holds a {problem}",
            field=field,
            hint="remove it: control and direction-changing characters would act on a terminal",
        )
