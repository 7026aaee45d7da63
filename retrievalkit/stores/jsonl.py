"""A store that is one JSON Lines file: a run per line, stable key order, safe to commit.

Each line is a run's summary (`retrievalkit.stores.serialization.dump_summary`: the
record without its per-question outcomes, plus their small header), so listing, history
and baseline choice read a few kilobytes a run. The outcome columns of each run live
beside the file in ``<file>.columns/`` (for ``runs.jsonl``: ``runs.jsonl.columns/``),
one file a run (`COLUMNS_SUFFIX`, `column_file_name`), read only when a record's outcomes
are. A column file holds the run id and the SHA-256 of the summary line it belongs to,
so a record never reads another run's columns: a run deleted (or replaced) since it was
read is a `StoreError` that says so. Lines written before (schema 1 and 2: the whole
record, outcomes inline) keep loading as they are; the file is never rewritten to
migrate it.

Appends take an exclusive file lock and end with fsync, so concurrent writers never
interleave. A run's column file is written whole (a temporary file renamed into place)
before its line is appended, so a line never names columns that are not there. A torn
last line (a writer killed mid-append) is reported and skipped on read, and the next
append starts on a fresh line instead of gluing onto it; the column file it left
behind belongs to no line and is ignored.

Pinned baselines live beside the runs in ``<file>.pins.json`` (for ``runs.jsonl``:
``runs.jsonl.pins.json``), one small JSON document with sorted keys, so the runs file
stays one run per line and a pin change is a one-line diff in review. Commit all three
(the file, the columns folder and the pins file). Pruning rewrites the runs file into a
temporary file and renames it over the old one, so a crash leaves either file whole, and
then removes the pruned runs' column files.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import logging
import os
import re
import struct
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from retrievalkit.errors import StoreBusyError, StoreError
from retrievalkit.formats.text_files import not_a_regular_file
from retrievalkit.model.records import GRADER, ResultRecord
from retrievalkit.stores import (
    DAMAGED,
    RunCheck,
    check_parent,
    check_whole,
    lock_timeout,
    path_from_url,
    read_only_reason,
    read_whole,
)
from retrievalkit.stores.serialization import (
    dump_columns,
    dump_summary,
    load_record,
    load_summary,
    verify_stored,
)

log = logging.getLogger(__name__)

PINS_SUFFIX = ".pins.json"
DRIFT_SUFFIX = ".drift.jsonl"
COLUMNS_SUFFIX = ".columns"
#: A column file: this magic, a big-endian length and that many bytes of JSON index
#: (run id, summary digest, each column's offset and length after the index), the columns.
_COLUMNS_MAGIC = b"RKJC1\n"
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,100}")


def column_file_name(run_id: str) -> str:
    """The column file of a run: its id when that is a safe file name, and a digest of it.

    The digest keeps two ids apart on a file system that ignores case, and names any id.
    """
    digest = hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:12]
    prefix = run_id if _SAFE_ID.fullmatch(run_id) else "run"
    return f"{prefix}-{digest}.rkc"


def _summary_digest(line: bytes) -> str:
    """The digest a column file holds of its summary: of the summary's JSON in canonical
    form (sorted keys, no spaces, unescaped), so that a line another tool wrote again with
    other key order, spacing or escapes still matches, and a changed value never does."""
    try:
        canonical = json.dumps(
            json.loads(line), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        ).encode("utf-8")
    except (ValueError, RecursionError):
        canonical = line.strip()
    return hashlib.sha256(canonical).hexdigest()


def _digests(line: bytes) -> tuple[str, str]:
    """The digests a column file may hold of ``line``: canonical, or (written before the
    canonical form) of its exact bytes."""
    return _summary_digest(line), hashlib.sha256(line.strip()).hexdigest()


def _column_file(run_id: str, line: bytes, columns: dict[str, bytes]) -> bytes:
    index: dict[str, object] = {"run_id": run_id, "summary_sha256": _summary_digest(line)}
    places, offset = {}, 0
    for name, data in columns.items():
        places[name] = [offset, len(data)]
        offset += len(data)
    index["columns"] = places
    head = json.dumps(index, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return b"".join([_COLUMNS_MAGIC, struct.pack(">I", len(head)), head, *columns.values()])


class _ColumnReader:
    """Loads a run's outcome columns from its column file, checking it is that run's."""

    __slots__ = ("_line", "_path", "_run_id", "_url")

    def __init__(self, path: Path, url: str, run_id: str, line: bytes) -> None:
        self._path, self._url, self._run_id, self._line = path, url, run_id, line

    def __call__(self, name: str) -> bytes:
        gone = StoreError(
            f"run {self._run_id} is no longer in {self._url} (deleted or pruned after it was "
            f"read), so its column '{name}' cannot be loaded; read the run again"
        )
        try:
            with open(self._path, "rb") as handle:
                head = handle.read(len(_COLUMNS_MAGIC) + 4)
                if len(head) < len(_COLUMNS_MAGIC) + 4 or not head.startswith(_COLUMNS_MAGIC):
                    raise self._damaged(name, "it is not a retrievalkit column file")
                (size,) = struct.unpack(">I", head[len(_COLUMNS_MAGIC) :])
                index = json.loads(handle.read(size))
                if index.get("run_id") != self._run_id:
                    raise gone  # the run was deleted, and another saved in its file
                if index.get("summary_sha256") not in _digests(self._line):
                    if self._saved_again(index.get("summary_sha256")):
                        raise gone  # deleted, and another run saved under its id since
                    from retrievalkit.stores.consistency import UntrustedRun

                    raise UntrustedRun(
                        f"{self._url}: the stored summary of run {self._run_id} does not "
                        f"match its column file {self._path.name}: a value of the summary "
                        "was changed outside retrievalkit (or the run was deleted and saved "
                        "again after it was read), so the run cannot be trusted; restore the "
                        "line, or delete the run"
                    )
                place = index.get("columns", {}).get(name)
                if place is None:
                    raise self._damaged(name, f"it holds no column '{name}'")
                offset, length = place
                handle.seek(len(head) + size + offset)
                data = handle.read(length)
        except FileNotFoundError:
            raise gone from None
        except OSError as error:
            raise StoreError(f"cannot read {self._path}: {error.strerror}") from None
        except (ValueError, TypeError, AttributeError) as error:
            raise self._damaged(name, f"its index cannot be read ({error})") from None
        if len(data) != length:
            raise self._damaged(name, "it is cut short")
        return data

    def _saved_again(self, digest: object) -> bool:
        """Whether the runs file now holds another line of this id that the column file is of."""
        folder = self._path.parent
        runs = folder.with_name(folder.name.removesuffix(".columns"))
        try:
            with open(runs, "rb") as handle:
                return any(
                    _run_id_of(line) == self._run_id and digest in _digests(line)
                    for line in handle
                    if self._run_id.encode("utf-8") in line or b"\\u" in line
                )
        except OSError:
            return False

    def _damaged(self, name: str, why: str) -> StoreError:
        return StoreError(
            f"{self._path}: column '{name}' of run {self._run_id} cannot be read: {why} "
            "(the file was changed outside retrievalkit)"
        )


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

    @property
    def columns_path(self) -> Path:
        """The folder of the runs' column files."""
        return self.path.with_name(self.path.name + COLUMNS_SUFFIX)

    def column_path(self, run_id: str) -> Path:
        """The column file of one run."""
        return self.columns_path / column_file_name(run_id)

    def _write_columns(self, run_id: str, line: bytes, columns: dict[str, bytes]) -> Path:
        """Write a run's column file whole (a temporary file renamed into place)."""
        self.columns_path.mkdir(exist_ok=True)
        target = self.column_path(run_id)
        self._replace_atomically(target, _column_file(run_id, line, columns), raw=True)
        folder = os.open(self.columns_path, os.O_RDONLY)
        try:
            os.fsync(folder)  # the rename is on disk before the line that needs it
        finally:
            os.close(folder)
        return target

    def save(self, record: ResultRecord) -> None:
        columns = dump_columns(record)
        summary = dump_summary(record, columns).encode("utf-8")
        line = summary + b"\n"
        written: Path | None = None
        try:
            with open(self.path, "a+b") as handle:
                _lock(handle, self.url, "save to")
                try:
                    if _replaced(handle, self.path):
                        raise _FileReplaced
                    handle.seek(0)
                    # A quick look for the id, then a true read of the line: another tool
                    # may have written it again with other spacing or escapes.
                    quoted = json.dumps(record.run_id).encode()
                    plain = json.dumps(record.run_id, ensure_ascii=False).encode()
                    if any(
                        (quoted in existing or plain in existing or b"\\u" in existing)
                        and _run_id_of(existing) == record.run_id
                        for existing in handle
                    ):
                        raise StoreError(f"run {record.run_id} is already stored in {self.url}")
                    size = handle.seek(0, os.SEEK_END)
                    if size > 0:
                        handle.seek(-1, os.SEEK_END)
                        if handle.read(1) != b"\n":
                            line = b"\n" + line  # a torn line stays apart from this run
                    written = self._write_columns(record.run_id, summary, columns)
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
            if written is not None:
                written.unlink(missing_ok=True)  # its line was not written
            reason = read_only_reason(self.path)
            if error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                reason = "disk full"
            raise StoreBusyError(
                f"cannot write {self.url}: {error.strerror}"
                + (f" ({reason})" if reason else "")
                + "; nothing was saved"
            ) from None

    def _lines(self) -> Iterator[tuple[str, bytes, Any]]:
        """(where, line, parsed JSON) of each run line, oldest first; torn lines skipped."""
        try:
            handle = open(self.path, "rb")  # noqa: SIM115
        except FileNotFoundError:
            return
        except OSError as error:
            raise StoreError(f"cannot read {self.url}: {error.strerror}") from None
        with handle:
            for number, raw in enumerate(handle, start=1):
                line = raw.decode("utf-8", errors="replace").encode("utf-8")
                if not line.strip():
                    continue
                where = f"{self.path}, line {number}"
                try:
                    yield where, line, json.loads(line)
                except json.JSONDecodeError:
                    log.warning("%s: incomplete or corrupt run skipped", where)

    def _record(self, where: str, line: bytes, data: Any) -> ResultRecord:
        # A summary holds the outcomes' header (a JSON object); a line written whole, by an
        # older retrievalkit or by hand (dump_record), holds the outcomes as a list.
        if isinstance(data, dict) and isinstance(data.get("outcomes"), dict):
            run_id = data.get("run_id")
            if not isinstance(run_id, str):
                raise StoreError(f"{where}: stored run has no run_id")
            reader = _ColumnReader(self.column_path(run_id), self.url, run_id, line.strip())
            return load_summary(line, reader, where=where)
        return load_record(line.decode("utf-8"), where=where)  # outcomes inline

    def _select(self, wanted: Any) -> list[ResultRecord]:
        """Records of the lines ``wanted(data)`` accepts, newest first."""
        chosen = [entry for entry in self._lines() if wanted(entry[2])]
        return [self._record(*entry) for entry in reversed(chosen)]

    def runs(self, set_name: str, model: str, grader: str = GRADER) -> list[ResultRecord]:
        key = (set_name, model, grader)
        return [
            record
            for record in self._select(lambda data: _key_of(data) in (key, None))
            if record.key == key
        ]

    def get(self, run_id: str) -> ResultRecord | None:
        for where, line, data in self._lines():
            found = data.get("run_id") if isinstance(data, dict) else None
            if found == run_id or found is None:
                record = self._record(where, line, data)
                if record.run_id == run_id:
                    return record
        return None

    def all_runs(self) -> list[ResultRecord]:
        return self._select(lambda data: True)

    def verify_runs(self) -> list[RunCheck]:
        """Every run line read whole and checked against its digest, newest first; a torn
        or corrupt line is reported as damaged (reading skips it with a warning)."""
        try:
            handle = open(self.path, "rb")  # noqa: SIM115
        except FileNotFoundError:
            return []
        except OSError as error:
            raise StoreError(f"cannot read {self.url}: {error.strerror}") from None
        found: list[RunCheck] = []
        with handle:
            for number, raw in enumerate(handle, start=1):
                line = raw.decode("utf-8", errors="replace").encode("utf-8")
                if not line.strip():
                    continue
                where = f"{self.path}, line {number}"
                try:
                    data = json.loads(line)
                except json.JSONDecodeError:
                    found.append(RunCheck("?", where, DAMAGED, "incomplete or corrupt line"))
                    continue
                run_id = data.get("run_id") if isinstance(data, dict) else None
                found.append(
                    check_whole(
                        run_id if isinstance(run_id, str) else "?",
                        where,
                        lambda where=where, line=line, data=data: self._verify(where, line, data),
                        _key_of(data),
                    )
                )
        return found[::-1]

    def _verify(self, where: str, line: bytes, data: Any) -> bool:
        if isinstance(data, dict) and isinstance(data.get("outcomes"), dict):
            run_id = data.get("run_id")
            if not isinstance(run_id, str):
                raise StoreError(f"{where}: stored run has no run_id")
            reader = _ColumnReader(self.column_path(run_id), self.url, run_id, line.strip())
            return verify_stored(line, reader, where=where)
        read_whole(load_record(line.decode("utf-8"), where=where))
        return False

    # --- pinned baselines (the sidecar file) and deletion ------------------------------------

    @property
    def drift_path(self) -> Path:
        """The file of drift records (``retrievalkit drift``) beside the runs file: readers
        of the runs file never see them."""
        return self.path.with_name(self.path.name + DRIFT_SUFFIX)

    def save_drift(self, record: dict[str, Any]) -> None:
        """Append a drift record as one line, under the writers' lock."""
        line = json.dumps(record, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"
        with self._exclusive("save to"):
            try:
                with open(self.drift_path, "ab") as handle:
                    handle.write(line.encode("utf-8"))
                    handle.flush()
                    os.fsync(handle.fileno())
            except OSError as error:
                raise StoreError(f"cannot save to {self.drift_path}: {error.strerror}") from None

    def drifts(self) -> list[dict[str, Any]]:
        """The drift records, newest first; a torn line is skipped with a warning."""
        try:
            text = self.drift_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except OSError as error:
            raise StoreError(f"cannot read {self.drift_path}: {error.strerror}") from None
        found = []
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                found.append(json.loads(line))
            except json.JSONDecodeError:
                log.warning(
                    "%s, line %d: not a whole drift record; skipped", self.drift_path, number
                )
        return found[::-1]

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
        except UnicodeDecodeError as error:
            raise StoreError(
                f"{self.pins_path}: invalid UTF-8 at byte {error.start}, so not a pins file; "
                "fix or delete it"
            ) from None
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
    def _replace_atomically(path: Path, content: bytes, *, raw: bool = False) -> None:
        """Write ``content`` to ``path`` through a temporary file beside it, renamed.

        ``raw``: let an OSError through (a save reports it), else a StoreError.
        """
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
            if raw:
                raise
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
                # After the file: a crash between leaves column files no line names.
                gone = {_run_id_of(line) for line in lines} & wanted
                for run_id in sorted(gone, key=str):
                    self.column_path(str(run_id)).unlink(missing_ok=True)
            return deleted


def _key_of(data: Any) -> tuple[str, str, str] | None:
    """A line's (set, model, grader), or None when it does not say plainly (read it whole)."""
    if not isinstance(data, dict):
        return None
    key = (data.get("set"), data.get("model"), data.get("grader"))
    return key if all(isinstance(part, str) for part in key) else None  # type: ignore[return-value]


def _run_id_of(line: bytes) -> str | None:
    """The run id of a stored line; None for blank, torn or foreign lines (which are kept)."""
    try:
        data = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    run_id = data.get("run_id") if isinstance(data, dict) else None
    return run_id if isinstance(run_id, str) else None
