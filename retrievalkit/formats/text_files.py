"""Reading the text files people write: UTF-8 checks, line counting, TOML error lines.

Every file a built-in command or plugin reads (golden sets, configuration files,
corpora, run files, qrels, labels files, stores) is read through `read_text` or
`text_lines`, so each reports a bad byte or a TOML mistake with the same file, line and
hint.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

from retrievalkit.errors import InputError


def not_a_regular_file(path: Path) -> str | None:
    """Why ``path`` (which may not exist) cannot be a file to read or write, or None.

    A FIFO or a device would block a reader forever or swallow a store: both are refused.
    """
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as error:
        return error.strerror
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    kind = "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a device or socket"
    return f"{kind}, not a regular file"


def read_text(path: Path) -> str:
    """The file as text: UTF-8 (a byte order mark is fine); an error names the line if not.

    A FIFO or a device is refused before it is opened: reading one could block forever.
    """
    odd = not_a_regular_file(path)
    if odd is not None:
        raise InputError(f"is {odd}", source=str(path), hint="give the path of a file")
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise InputError(f"cannot read the file: {error.strerror}", source=str(path)) from None
    try:
        # utf-8-sig: a byte order mark written by some editors is harmless, so accept it.
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise undecodable(path, raw[: error.start].count(b"\n") + 1, error.start) from None


def text_lines(path: Path, what: str = "the file") -> Iterator[str]:
    """The lines of a UTF-8 text file (a byte order mark is fine), each with its ``\\n``,
    decoded one at a time as they are read: a corpus or a run file is never held whole.

    Lines end at ``\\n`` only, as `lines_of` counts them, so the n-th line yielded is line
    n of the file. Whatever the file is, what goes wrong is an `InputError` naming it: a
    FIFO or a device (refused before it is opened), a file that cannot be read, and
    invalid UTF-8, with the line and the byte offset of the bad byte.
    """
    odd = not_a_regular_file(path)
    if odd is not None:
        raise InputError(f"is {odd}", source=str(path), hint="give the path of a file")
    try:
        handle = path.open("rb")
    except OSError as error:
        raise InputError(f"cannot read {what}: {error.strerror}", source=str(path)) from None
    with handle:
        offset = 0
        number = 0
        while True:
            try:
                raw = handle.readline()
            except OSError as error:
                raise InputError(
                    f"cannot read {what}: {error.strerror}", source=str(path), line=number + 1
                ) from None
            if not raw:
                return
            number += 1
            start = 3 if number == 1 and raw.startswith(_BOM) else 0
            try:
                line = raw[start:].decode("utf-8")
            except UnicodeDecodeError as error:
                raise undecodable(path, number, offset + start + error.start) from None
            offset += len(raw)
            yield line


_BOM = b"\xef\xbb\xbf"


def undecodable(path: Path | str, line: int, byte: int) -> InputError:
    """The error for invalid UTF-8 at file offset ``byte``, on ``line`` of ``path``."""
    return InputError(
        f"invalid UTF-8 at byte {byte}", source=str(path), line=line, hint="save the file as UTF-8"
    )


def lines_of(text: str) -> list[str]:
    """Lines as JSON Lines and TOML count them: split at \\n only (a \\r\\n ending is fine).

    ``str.splitlines`` would also split at \\r, \\x0c or U+2028, which may sit inside a
    valid JSON string, and then every line number after it would be wrong.
    """
    lines = [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]
    return lines[:-1] if lines and lines[-1] == "" else lines


def iter_lines(text: str) -> Iterator[str]:
    """The lines of `lines_of` one at a time (a large set's lines are never all held at
    once); a last line of only \r comes out blank, where `lines_of` drops it."""
    start, end = 0, len(text)
    while start < end:
        stop = text.find("\n", start)
        if stop < 0:
            stop = end
        line = text[start:stop]
        yield line[:-1] if line.endswith("\r") else line
        start = stop + 1


_TOML_LINE = re.compile(r"\(at line (\d+), column \d+\)")


def toml_error_line(error: Exception, text: str = "") -> int | None:
    """The line tomllib names in a decode error ("... (at line 3, column 1)").

    An error "at end of document" is on the last line of ``text``.
    """
    found = _TOML_LINE.search(str(error))
    if found:
        return int(found.group(1))
    if "at end of document" in str(error) and text:
        return len(lines_of(text)) or 1
    return None


_TOML_HEADER = re.compile(r"^\s*\[\[?(?P<name>[^\]]+)\]\]?\s*(#.*)?$")
_TOML_KEY = re.compile(
    r"""^\s*(?P<key>("[^"]*"|'[^']*'|[\w\-@]+)(\s*\.\s*("[^"]*"|'[^']*'|[\w\-@]+))*)\s*="""
)
_KEY_PART = re.compile(r"""\s*("(?P<double>[^"]*)"|'(?P<single>[^']*)'|(?P<bare>[^.\s]+))\s*""")


def _key_parts(dotted: str) -> list[str]:
    return [
        match["double"] if match["double"] is not None else match["single"] or match["bare"] or ""
        for match in _KEY_PART.finditer(dotted)
    ]


def key_line(path: Path | str, dotted: str) -> int | None:
    """Best effort: the line of a TOML file that sets ``dotted`` (e.g. ``eval.k``).

    When the key itself is missing, the line of the nearest enclosing table or key that
    is there (``[retrievers.x]`` for a missing ``retrievers.x.plugin``); None when the
    file cannot be read or nothing matches. tomllib keeps no positions, hence this scan.
    """
    try:
        text = Path(path).read_text(encoding="utf-8-sig", errors="replace")
    except OSError:
        return None
    target = _key_parts(dotted)
    table: list[str] = []
    best, best_line = 0, None
    for number, raw in enumerate(text.split("\n"), start=1):
        header = _TOML_HEADER.match(raw)
        if header:
            table = _key_parts(header["name"])
            found = table
        else:
            key = _TOML_KEY.match(raw)
            if key is None:
                continue
            found = table + _key_parts(key["key"])
        if found == target:
            return number
        if len(found) > best and target[: len(found)] == found:
            best, best_line = len(found), number
    return best_line
