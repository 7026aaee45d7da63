"""A store that is one JSON Lines file: a run per line, stable key order, safe to commit.

Appends take an exclusive file lock and end with fsync, so concurrent writers never
interleave. A torn last line (a writer killed mid-append) is reported and skipped on
read, and the next append starts on a fresh line instead of gluing onto it.

Pinned baselines live beside the runs in ``<file>.pins.json`` (for ``runs.jsonl``:
``runs.jsonl.pins.json``), one small JSON document with sorted keys, so the runs file
stays one run per line, readable by older retrievalkit versions, and a pin change is a
one-line diff in review. Commit both files. Pruning rewrites the runs file into a
temporary file and renames it over the old one, so a crash leaves either file whole.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from retrievalkit.errors import StoreBusyError, StoreError
from retrievalkit.model import GRADER, ResultRecord
from retrievalkit.stores import (
    check_parent,
    lock_timeout,
    not_a_regular_file,
    path_from_url,
    read_only_reason,
)
from retrievalkit.stores.serialization import dump_record, load_record

log = logging.getLogger(__name__)

PINS_SUFFIX = ".pins.json"


class _FileReplaced(Exception):
    """The runs file was replaced (by a prune) while this process waited for its lock."""


def _lock(handle: IO[bytes], url: str, action: str) -> None:
    """Take the exclusive lock, waiting at most the store timeout (then exit code 3)."""
    timeout = lock_timeout()
    deadline = time.monotonic() + timeout
    pause = 0.01
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise StoreBusyError(
                    f"cannot {action} {url}: another process held its lock for more than "
                    f"{timeout:g} s; nothing was changed (try again, or raise "
                    "RETRIEVALKIT_STORE_TIMEOUT)"
                ) from None
            time.sleep(pause)
            pause = min(pause * 2, 0.25)


def _append(descriptor: int, data: bytes) -> None:
    """Write all of ``data`` at the end of the file (a short write is continued)."""
    view = memoryview(data)
    while view:
        written = os.write(descriptor, view)
        view = view[written:]


def _replaced(handle: IO[bytes], path: Path) -> bool:
    try:
        return os.fstat(handle.fileno()).st_ino != os.stat(path).st_ino
    except FileNotFoundError:
        return True


class JSONLStore:
    """Runs as lines of one file, oldest first; reads answer newest first."""

    def __init__(self, path: Path, *, url: str | None = None) -> None:
        self.path = path
        self.url = url or f"jsonl:///{path}"

    @classmethod
    def from_url(cls, url: str) -> JSONLStore:
        path = path_from_url(url, "jsonl")
        check_parent(path, url, create=False)
        if path.is_dir():
            raise StoreError(f"store {url!r} names a folder; name a .jsonl file")
        odd = not_a_regular_file(path)
        if odd is not None:
            raise StoreError(f"store {url!r} names {odd}; name a .jsonl file")
        return cls(path, url=url)

    def check_can_write(self) -> None:
        """Take the writers' lock and let it go: a locked store fails now, before any work."""
        if not self.path.exists():
            return  # created by the first save; the folder was checked when opening
        with self._exclusive("write to"):
            pass

    def save(self, record: ResultRecord) -> None:
        line = dump_record(record).encode("utf-8") + b"\n"
        try:
            with open(self.path, "a+b") as handle:
                _lock(handle, self.url, "save to")
                try:
                    if _replaced(handle, self.path):
                        raise _FileReplaced
                    handle.seek(0)
                    marker = f'"run_id":{json.dumps(record.run_id)}'.encode()
                    if any(marker in existing for existing in handle):
                        raise StoreError(f"run {record.run_id} is already stored in {self.url}")
                    size = handle.seek(0, os.SEEK_END)
                    if size > 0:
                        handle.seek(-1, os.SEEK_END)
                        if handle.read(1) != b"\n":
                            line = b"\n" + line  # a torn line stays apart from this run
                    # Written unbuffered, so that a failed write (a full disk) can be cut
                    # back to the old size and no fragment is left for later reads.
                    try:
                        _append(handle.fileno(), line)
                        os.fsync(handle.fileno())
                    except OSError:
                        os.ftruncate(handle.fileno(), size)
                        os.fsync(handle.fileno())
                        raise
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)
        except _FileReplaced:
            # A prune rewrote the file while this writer waited for the lock: append to the
            # new file, never to the unlinked old one.
            self.save(record)
        except OSError as error:
            reason = read_only_reason(self.path)
            raise StoreBusyError(
                f"cannot write {self.url}: {error.strerror}"
                + (f" ({reason})" if reason else "")
                + "; nothing was saved"
            ) from None

    def _records(self) -> Iterator[ResultRecord]:
        try:
            handle = open(self.path, encoding="utf-8", errors="replace")  # noqa: SIM115
        except FileNotFoundError:
            return
        except OSError as error:
            raise StoreError(f"cannot read {self.url}: {error.strerror}") from None
        with handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                where = f"{self.path}, line {number}"
                try:
                    yield load_record(line, where=where)
                except json.JSONDecodeError:
                    log.warning("%s: incomplete or corrupt run skipped", where)

    def runs(self, set_name: str, model: str, grader: str = GRADER) -> list[ResultRecord]:
        return [record for record in self.all_runs() if record.key == (set_name, model, grader)]

    def get(self, run_id: str) -> ResultRecord | None:
        return next((record for record in self._records() if record.run_id == run_id), None)

    def all_runs(self) -> list[ResultRecord]:
        return list(reversed(list(self._records())))

    # --- pinned baselines (the sidecar file) and deletion ------------------------------------

    @property
    def pins_path(self) -> Path:
        return self.path.with_name(self.path.name + PINS_SUFFIX)

    @contextmanager
    def _exclusive(self, action: str = "change") -> Iterator[None]:
        """Hold the lock that writers of the runs file take, on the file as it is now."""
        while True:
            try:
                handle = open(self.path, "a+b")  # noqa: SIM115
            except OSError as error:
                raise StoreError(f"cannot open {self.url}: {error.strerror}") from None
            with handle:
                _lock(handle, self.url, action)
                try:
                    if _replaced(handle, self.path):
                        continue
                    yield
                    return
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)

    def _read_pins(self) -> dict[tuple[str, str, str], str]:
        try:
            text = self.pins_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as error:
            raise StoreError(f"cannot read {self.pins_path}: {error.strerror}") from None
        try:
            document: Any = json.loads(text)
            return {
                (str(pin["set"]), str(pin["model"]), str(pin["grader"])): str(pin["run_id"])
                for pin in document["pins"]
            }
        except (json.JSONDecodeError, KeyError, TypeError) as error:
            raise StoreError(
                f"{self.pins_path}: not a pins file ({type(error).__name__}: {error}); it "
                'should read {"pins": [{"set": ..., "model": ..., "grader": ..., '
                '"run_id": ...}]}; fix or delete it'
            ) from None

    def _write_pins(self, pins: dict[tuple[str, str, str], str]) -> None:
        document = {
            "pins": [
                {"grader": grader, "model": model, "run_id": run_id, "set": set_name}
                for (set_name, model, grader), run_id in sorted(pins.items())
            ],
            "schema_version": 1,
        }
        text = json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
        self._replace_atomically(self.pins_path, text.encode("utf-8"))

    @staticmethod
    def _replace_atomically(path: Path, content: bytes) -> None:
        try:
            descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
            try:
                with os.fdopen(descriptor, "wb") as handle:
                    handle.write(content)
                    handle.flush()
                    os.fsync(handle.fileno())
                if path.exists():
                    os.chmod(temporary, path.stat().st_mode & 0o777)
                else:
                    os.chmod(temporary, 0o644)
                os.replace(temporary, path)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
        except OSError as error:
            raise StoreError(f"cannot write {path}: {error.strerror}; nothing changed") from None

    def pin(self, record: ResultRecord) -> str | None:
        with self._exclusive("pin in"):
            if self.get(record.run_id) is None:
                raise StoreError(f"run {record.run_id} is not stored in {self.url}")
            pins = self._read_pins()
            before = pins.get(record.key)
            pins[record.key] = record.run_id
            self._write_pins(pins)
            return before

    def unpin(self, set_name: str, model: str, grader: str = GRADER) -> str | None:
        with self._exclusive("unpin in"):
            pins = self._read_pins()
            before = pins.pop((set_name, model, grader), None)
            if before is not None:
                self._write_pins(pins)
            return before

    def pinned(self, set_name: str, model: str, grader: str = GRADER) -> str | None:
        return self._read_pins().get((set_name, model, grader))

    def delete(self, run_ids: Sequence[str]) -> int:
        wanted = set(run_ids)
        if not wanted:
            return 0
        with self._exclusive("delete from"):
            pinned = sorted(wanted & set(self._read_pins().values()))
            if pinned:
                raise StoreError(
                    f"run {pinned[0]} is a pinned baseline in {self.url}; unpin it first "
                    "(retrievalkit baseline unpin); nothing was deleted"
                )
            try:
                lines = self.path.read_bytes().splitlines(keepends=True)
            except OSError as error:
                raise StoreError(f"cannot read {self.url}: {error.strerror}") from None
            kept = [line for line in lines if _run_id_of(line) not in wanted]
            deleted = len(lines) - len(kept)
            if deleted:
                if kept and not kept[-1].endswith(b"\n"):
                    kept[-1] += b"\n"
                self._replace_atomically(self.path, b"".join(kept))
            return deleted


def _run_id_of(line: bytes) -> str | None:
    """The run id of a stored line; None for blank, torn or foreign lines (which are kept)."""
    try:
        data = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    run_id = data.get("run_id") if isinstance(data, dict) else None
    return run_id if isinstance(run_id, str) else None
