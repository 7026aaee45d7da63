"""The largest values retrievalkit accepts, checked where input enters, before any work.

A value past one of these limits is a mistake (a pasted number, a generated file gone
wrong), never a real evaluation; refusing it up front turns an overflow, a memory error
or a RecursionError deep inside a run into one line that names the option or the field.
"""

from __future__ import annotations

import os

from retrievalkit.errors import InputError

#: Cut-offs: trec_eval users go to 1000; ten times that is still a ranking, not a corpus.
MAX_K = 10_000
MAX_OVERFETCH = 100
#: Bootstrap resamples: each is a pass over every question.
MAX_RESAMPLES = 1_000_000
MAX_CONCURRENCY = 1_024
#: Seconds: a week. Python's thread waits overflow beyond about 292 years.
MAX_TIMEOUT = 7 * 24 * 3600.0
#: Relevance grades: TREC uses 0-4; a million still sums exactly in a float.
MAX_GRADE = 1_000_000
#: Bytes in one path component and in a whole path (Linux's NAME_MAX and PATH_MAX).
MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 4_096


def path_problem(text: str) -> str | None:
    """Why ``text`` cannot name a file on this system, or None."""
    if "\x00" in text:
        return "holds a NUL byte"
    try:
        encoded = os.fsencode(text)
    except UnicodeError:
        return "is not valid Unicode"
    if len(encoded) > MAX_PATH_BYTES:
        return f"is {len(encoded)} bytes long; the limit is {MAX_PATH_BYTES}"
    for part in encoded.split(b"/"):
        if len(part) > MAX_NAME_BYTES:
            shown = os.fsdecode(part[:24]) + "..."
            return (
                f"has a name of {len(part)} bytes ({shown}); names are limited to "
                f"{MAX_NAME_BYTES} bytes"
            )
    return None


def check_path(text: str, *, field: str | None = None, source: str | None = None) -> None:
    """Refuse a path that no file system call could accept, naming where it came from."""
    problem = path_problem(text)
    if problem is not None:
        raise InputError(f"the path {problem}", source=source, field=field)
