"""The largest values retrievalkit accepts, checked where input enters, before any work.

A value past one of these limits is a mistake (a pasted number, a generated file gone
wrong), never a real evaluation; refusing it up front turns an overflow, a memory error
or a RecursionError deep inside a run into one line that names the option or the field.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from retrievalkit.errors import InputError

#: Cut-offs: trec_eval users go to 1000; ten times that is still a ranking, not a corpus.
MAX_K = 10_000
MAX_OVERFETCH = 100
#: Bootstrap resamples: each is a pass over every question.
MAX_RESAMPLES = 1_000_000
MAX_CONCURRENCY = 1_024
#: Times each question is asked (`--repeat`) and questions asked first and discarded
#: (`--warmup`): timing, not a load test.
MAX_REPEAT = 1_000
MAX_WARMUP = 100_000
#: Seconds: a week. Python's thread waits overflow beyond about 292 years.
MAX_TIMEOUT = 7 * 24 * 3600.0
#: The latency statistics a threshold can name (`retrievalkit.stats.latency.QUANTILES`).
LATENCY_STATISTICS = ("p50", "p95", "p99")
#: The cost statistics a threshold can name (`retrievalkit.pipeline.gating.cost`).
COST_STATISTICS = ("per_question",)
#: A latency threshold is a relative increase: 100 lets the candidate be 101 times slower.
MAX_LATENCY_INCREASE = 100.0
#: Relevance grades: TREC uses 0-4; a million still sums exactly in a float.
MAX_GRADE = 1_000_000
#: Bytes in one line of a JSON Lines file (a question, a query, a judgment): a question
#: is at most 10,000 characters and a few hundred labels, so a line past 16 MiB is a
#: file without line breaks (or not a set at all), refused before it is held whole.
MAX_LINE_BYTES = 16 << 20
#: Bytes in one path component and in a whole path (Linux's NAME_MAX and PATH_MAX).
MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 4_096


def check_relative_increases(
    value: Any,
    *,
    kind: str,
    statistics: tuple[str, ...],
    example: float,
    field: str,
    shape: str,
    error: Callable[[str, str, str | None], Exception],
) -> dict[str, float]:
    """``statistic -> largest relative increase`` of a latency or cost threshold, each
    from 0 to `MAX_LATENCY_INCREASE` (0.2: at most 20 % above the baseline).

    The configuration's ``[regression.latency]``/``[regression.cost]`` and the Python
    API's ``Thresholds(latency=..., cost=...)`` read them alike; ``error(key, message,
    hint)`` makes each side's error (``key`` is ``field.statistic``), and ``shape`` says
    what ``value`` must be when it is not a mapping; ``example`` is the increase the
    message shows.
    """
    if not isinstance(value, Mapping):
        raise error(field, shape, None)
    found: dict[str, float] = {}
    for name, increase in value.items():
        key = f"{field}.{name}"
        if name not in statistics:
            hint = "one of " + ", ".join(statistics)
            raise error(key, f"unknown {kind} statistic {name!r}", hint)
        if (
            isinstance(increase, bool)
            or not isinstance(increase, (int, float))
            or not 0 <= increase <= MAX_LATENCY_INCREASE
        ):
            raise error(
                key,
                f"must be a relative increase from 0 to {MAX_LATENCY_INCREASE:g} ({example:g}: "
                f"at most {example * 100:g} % above the baseline), got {increase!r}",
                None,
            )
        found[name] = float(increase)
    return found


def line_too_long(size: int, *, source: str, line: int) -> InputError:
    """The error of a line of ``size`` bytes or more, past `MAX_LINE_BYTES`."""
    return InputError(
        f"the line is {size:,} bytes or more; the limit for one line is "
        f"{MAX_LINE_BYTES:,} bytes ({MAX_LINE_BYTES >> 20} MiB)",
        source=source,
        line=line,
        hint="a JSON Lines file holds one object a line: is a line break missing?",
    )


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
