"""Output files written whole, and never over a file the run reads or writes.

Every file retrievalkit writes on request (``--output-dir``, ``--junit-xml``,
``export --output``, ``generate --output``, ``report -o``, the GitHub job summary) goes
through here. `check_outputs` refuses, before any work, an output that is the same file
as an input, the store or one of the files kept beside it, or another output: compared
by resolved real path and by device and inode, so a symlink or a hard link to the set
is caught too. `write_file` writes beside the target and renames the new file over it,
so a full disk leaves the old file whole; `append_whole` appends all of its text or
cuts the file back to where it was.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from retrievalkit.errors import EvaluationError, InputError

#: The files SQLite and the JSON Lines store keep beside the store's own file.
STORE_SIDE_FILES = ("-wal", "-shm", "-journal", ".pins.json", ".columns", ".lock")

#: The errors of a full disk (or a file-size limit, or a quota): exit code 3, not 2.
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def store_files(store: object) -> list[Path]:
    """The store's file and its side files, for a store kept in a local file."""
    path = getattr(store, "path", None)
    if not isinstance(path, Path):
        return []
    return [path.with_name(path.name + suffix) for suffix in ("", *STORE_SIDE_FILES)]


def _identity(path: Path) -> tuple[str, tuple[int, int] | None]:
    """The real path (every symlink followed) and, if the file exists, its device and inode."""
    real = os.path.abspath(path)
    try:
        real = os.path.realpath(path)
        status = os.stat(real)
    except OSError:
        return real, None
    return real, (status.st_dev, status.st_ino)


def _same(
    first: tuple[str, tuple[int, int] | None], second: tuple[str, tuple[int, int] | None]
) -> bool:
    return first[0] == second[0] or (first[1] is not None and first[1] == second[1])


def check_outputs(
    outputs: Sequence[tuple[str, str | Path | None]],
    inputs: Iterable[tuple[str, str | Path | None]],
    *,
    store: object = None,
) -> None:
    """Refuse an output that is an input, the store (or a file beside it) or another output.

    ``outputs`` and ``inputs`` are (option, path) pairs; None paths are skipped. The
    message names the output's option, the file it would overwrite and whose it is.
    """
    claimed: list[tuple[str, Path, tuple[str, tuple[int, int] | None]]] = []
    for name, source in inputs:
        if source:
            claimed.append((name, Path(source), _identity(Path(source))))
    for path in store_files(store):
        claimed.append(("--store", path, _identity(path)))
    for field, output in outputs:
        if not output:
            continue
        target = Path(output)
        mine = _identity(target)
        for name, other, identity in claimed:
            if _same(mine, identity):
                raise InputError(
                    f"would overwrite {other} ({name})",
                    # An output folder is named as given, not the file in it.
                    source=str(target.parent if field == "--output-dir" else target),
                    field=field,
                    hint="write the output somewhere else: it must not be a file the run "
                    "reads or writes",
                )
        # Against later outputs, an output is its own name: a symlink there is replaced
        # (two outputs may be links to one outside file), a hard link is the file.
        own = os.path.join(os.path.realpath(target.parent), target.name)
        claimed.append((field, target, (own, None if _is_symlink(target) else mine[1])))


def _is_symlink(path: Path) -> bool:
    try:
        return path.is_symlink()
    except OSError:  # a name no file system takes: checked, and named, where it is used
        return False


def output_error(error: OSError, path: Path | str, field: str, what: str) -> Exception:
    """The error to raise for a failed write: disk full is exit 3, the rest exit 2."""
    if error.errno in DISK_FULL:
        return EvaluationError(
            f"{path}: disk full while writing {what}; the old file, if any, was left whole"
            f" ({field})"
        )
    return InputError(f"cannot write {what}: {error.strerror}", source=str(path), field=field)


def write_file(path: Path, content: str | bytes, *, mode: int = 0o644) -> None:
    """Write ``path`` whole: into a temporary file beside it, renamed over it at the end.

    A symlink at ``path`` is replaced, never written through; a failure (a full disk)
    leaves whatever was at ``path`` as it was, and no temporary file behind.
    """
    data = content.encode("utf-8") if isinstance(content, str) else content
    directory = path.parent if str(path.parent) else Path()
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def append_whole(path: Path, text: str) -> None:
    """Append ``text`` to ``path`` all at once, or cut the file back to its old size."""
    data = text.encode("utf-8")
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        start = os.fstat(descriptor).st_size
        try:
            written = 0
            while written < len(data):
                written += os.write(descriptor, data[written:])
            os.fsync(descriptor)
        except BaseException:
            with contextlib.suppress(OSError):  # not a regular file: nothing to cut back
                os.ftruncate(descriptor, start)
            raise
    finally:
        os.close(descriptor)
