"""Read golden question sets from JSON Lines, TOML and BEIR directories, with exact error places.

Every problem is reported as an `retrievalkit.errors.InputError` that names the
file, the line (or question) and the field, and says what was expected. One module a job:

- `reading`: a set file by its kind (`load_set_file`);
- `jsonl` and its fast path `fast_jsonl`: JSON Lines, one question a line;
- `toml`: ``[[questions]]`` tables;
- `beir`: BEIR directories (queries and qrels);
- `questions`: one question from its fields (`parse_question`), the one careful reader;
- `strict_json`: JSON with a key named twice refused;
- `text`: the characters a text may hold and the longest question;
- `provided`: a plugin's set checked like a file;
- `writing`: a set written back as JSON Lines.
"""

from __future__ import annotations

from retrievalkit.formats.golden_sets.beir import load_beir
from retrievalkit.formats.golden_sets.jsonl import load_jsonl
from retrievalkit.formats.golden_sets.provided import check_provided_set
from retrievalkit.formats.golden_sets.questions import parse_question
from retrievalkit.formats.golden_sets.reading import load_set_file
from retrievalkit.formats.golden_sets.text import MAX_QUESTION_CHARS, unsafe_character
from retrievalkit.formats.golden_sets.toml import load_toml
from retrievalkit.formats.golden_sets.writing import question_record, write_jsonl

__all__ = [
    "MAX_QUESTION_CHARS",
    "check_provided_set",
    "load_beir",
    "load_jsonl",
    "load_set_file",
    "load_toml",
    "parse_question",
    "question_record",
    "unsafe_character",
    "write_jsonl",
]
