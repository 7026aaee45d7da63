"""User text for a terminal: always plain text, never markup, control characters shown escaped.

Question ids, hard classes, meta values, retriever names and error texts come from
files and plugins that retrievalkit does not control. Each reaches a console only as a
rich `rich.text.Text` built here, so square brackets stay brackets and an
escape sequence (ESC, OSC, a bidirectional override) is printed as ``\\x1b`` instead of
being obeyed by the terminal.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.style import Style
    from rich.text import Text

from retrievalkit.formats.unsafe_text import UNSAFE as UNSAFE


def _escaped(match: re.Match[str]) -> str:
    code = ord(match[0])
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every character a terminal could act on written as an escape."""
    # Lone surrogates (from a \\ud800 escape) are escaped too: no terminal can encode them.
    return UNSAFE.sub(_escaped, text)


def plain(text: object, style: str | Style = "") -> Text:
    """A rich Text of ``text`` as it is: no markup, no emoji codes, controls escaped."""
    from rich.text import Text

    return Text(printable(str(text)), style=style)


def watched(stream: object) -> bool:
    """Whether ``stream`` is a terminal someone watches, where a progress bar may be drawn.

    Only the file itself decides: ``FORCE_COLOR`` asks for colours, and gets them, but
    never turns a CI log into a terminal that a redrawn bar would fill line after line.
    """
    try:
        return os.isatty(stream.fileno())  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return False


#: The narrowest table worth drawing; a smaller (or nonsensical) ``COLUMNS`` gets this.
MIN_WIDTH = 40


def width_from_environment(environ: Mapping[str, str]) -> int | None:
    """The width ``COLUMNS`` asks for, or None to let the terminal decide.

    ``COLUMNS=0`` (or negative, or not a number) would make rich draw nothing at all:
    such a value gets 80 columns, and anything under `MIN_WIDTH` gets `MIN_WIDTH`.
    """
    text = environ.get("COLUMNS")
    if text is None:
        return None
    try:
        value = int(text.strip())
    except ValueError:
        return 80
    if value <= 0:
        return 80
    return max(value, MIN_WIDTH)
