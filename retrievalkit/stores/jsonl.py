"""A store that is one JSON Lines file: a run per line, stable key order, safe to commit.

Appends take an exclusive file lock and end with fsync, so concurrent writers never
interleave. A torn last line (a writer killed mid-append) is reported and skipped on
read, and the next append starts on a fresh line instead of gluing onto it.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from retrievalkit.errors import StoreError
from retrievalkit.model import GRADER, ResultRecord
from retrievalkit.stores import check_parent, path_from_url
from retrievalkit.stores.serialization import dump_record, load_record

log = logging.getLogger(__name__)


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
        return cls(path, url=url)

    def save(self, record: ResultRecord) -> None:
        line = dump_record(record).encode("utf-8") + b"\n"
        try:
            with open(self.path, "a+b") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX)
                try:
                    handle.seek(0)
                    marker = f'"run_id":{json.dumps(record.run_id)}'.encode()
                    if any(marker in existing for existing in handle):
                        raise StoreError(f"run {record.run_id} is already stored in {self.url}")
                    handle.seek(0, os.SEEK_END)
                    if handle.tell() > 0:
                        handle.seek(-1, os.SEEK_END)
                        if handle.read(1) != b"\n":
                            handle.write(b"\n")  # a torn line stays apart from this run
                    handle.write(line)
                    handle.flush()
                    os.fsync(handle.fileno())
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)
        except OSError as error:
            raise StoreError(
                f"cannot write {self.url}: {error.strerror}; nothing was saved"
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
