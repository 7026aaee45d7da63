"""A result store that keeps each run as one JSON file in a folder: ``rundir:///PATH``.

Files are named ``<sequence>-<run id>.json``; the sequence number orders runs by when
they were saved, so "newest first" needs no clock. A save holds an exclusive lock on
the folder, writes a temporary file, flushes it to disk and renames it into place, so
a run is stored whole or not at all and two writers never take the same number.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from retrievalkit.plugin_api import (
    GRADER,
    ResultRecord,
    StoreError,
    check_parent,
    dump_record,
    load_record,
    path_from_url,
)

SCHEME = "rundir"


class RunDirStore:
    """Runs as files of one folder; the folder is created when the store is opened."""

    def __init__(self, folder: Path, *, url: str) -> None:
        self.folder = folder
        self.url = url

    @classmethod
    def from_url(cls, url: str) -> RunDirStore:
        folder = path_from_url(url, SCHEME)
        check_parent(folder, url, create=False)
        try:
            folder.mkdir(exist_ok=True)
        except OSError as error:
            raise StoreError(f"cannot create the folder of store {url}: {error.strerror}") from None
        if not folder.is_dir():
            raise StoreError(f"store {url} names a file; name a folder")
        return cls(folder, url=url)

    def _files(self) -> Iterator[tuple[int, str, Path]]:
        """(sequence, run id, path) of every stored run, oldest first."""
        found = []
        for path in self.folder.glob("*.json"):
            sequence, dash, run_id = path.stem.partition("-")
            if dash and sequence.isdigit():
                found.append((int(sequence), run_id, path))
        return iter(sorted(found))

    def save(self, record: ResultRecord) -> None:
        text = dump_record(record)
        try:
            with open(self.folder / ".lock", "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                files = list(self._files())
                if any(run_id == record.run_id for _, run_id, _ in files):
                    raise StoreError(f"run {record.run_id} is already stored in {self.url}")
                sequence = files[-1][0] + 1 if files else 1
                target = self.folder / f"{sequence:08d}-{record.run_id}.json"
                temporary: str | None = None
                try:
                    with tempfile.NamedTemporaryFile(
                        "w",
                        dir=self.folder,
                        prefix=".saving-",
                        suffix=".tmp",
                        delete=False,
                        encoding="utf-8",
                    ) as handle:
                        temporary = handle.name
                        handle.write(text)
                        handle.flush()
                        os.fsync(handle.fileno())
                    os.replace(temporary, target)
                except BaseException:
                    if temporary is not None:
                        Path(temporary).unlink(missing_ok=True)
                    raise
        except OSError as error:
            raise StoreError(
                f"cannot save to {self.url}: {error.strerror}; nothing was saved"
            ) from None

    def _records(self) -> list[ResultRecord]:
        records = []
        for _, _, path in self._files():
            records.append(load_record(_read(path), where=str(path)))
        return records

    def runs(self, set_name: str, model: str, grader: str = GRADER) -> list[ResultRecord]:
        return [record for record in self.all_runs() if record.key == (set_name, model, grader)]

    def get(self, run_id: str) -> ResultRecord | None:
        for _, stored_id, path in self._files():
            if stored_id == run_id:
                return load_record(_read(path), where=str(path))
        return None

    def all_runs(self) -> list[ResultRecord]:
        return list(reversed(self._records()))


def _read(path: Path) -> str:
    """A run file's text; one that cannot be read or is not UTF-8 is a damaged store."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as error:
        raise StoreError(f"cannot read {path}: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise StoreError(
            f"{path}: invalid UTF-8 at byte {error.start}: the run file was changed outside "
            "retrievalkit; restore or delete it"
        ) from None
