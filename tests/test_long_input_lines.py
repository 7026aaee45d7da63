"""Generated sets without line breaks: refused with their line and the size limit, after
reading no more than the limit (never the whole file, never a copy per block)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import retrievalkit.formats.golden_sets as golden_files
import retrievalkit.formats.limits as limits
from retrievalkit.errors import InputError
from retrievalkit.formats.golden_sets import beir, fast_jsonl, jsonl

LIMIT, BLOCK = 4096, 64
GENERATED = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture
def small_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fast_jsonl, "_BLOCK_BYTES", BLOCK)
    for reader in (beir, fast_jsonl, jsonl):  # each holds the limit it imported
        monkeypatch.setattr(reader, "MAX_LINE_BYTES", LIMIT)
    monkeypatch.setattr(limits, "MAX_LINE_BYTES", LIMIT)


class CountingStream(io.BufferedReader):
    read_bytes = 0

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        CountingStream.read_bytes += len(data)
        return data


def _line(index: int) -> str:
    return json.dumps({"id": f"q{index}", "question": f"question {index}", "expected": []})


@GENERATED
@given(
    before=st.integers(0, 30),
    long_line=st.integers(LIMIT + 1, 60 * LIMIT),
    filler=st.sampled_from([b"x", b" ", b"\x00", "é".encode(), b"{"]),
    after=st.booleans(),
)
def test_a_line_past_the_limit_is_refused_with_its_line_and_the_limit(
    small_limits: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    before: int,
    long_line: int,
    filler: bytes,
    after: bool,
) -> None:
    path = tmp_path / "set.jsonl"
    head = "".join(_line(i) + "\n" for i in range(before)).encode()
    body = (filler * (long_line // len(filler) + 1))[:long_line]
    path.write_bytes(head + body + (b"\n" + _line(999).encode() if after else b""))
    original = Path.open

    def counting_open(self: Path, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if mode == "rb":
            return CountingStream(io.FileIO(self, "rb"))
        return original(self, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", counting_open)
    CountingStream.read_bytes = 0
    with pytest.raises(InputError) as refused:
        golden_files.load_jsonl(path)
    assert refused.value.line == before + 1
    assert f"limit for one line is {LIMIT:,} bytes" in refused.value.detail
    # Read no further than the limit and a block past where the line starts.
    assert CountingStream.read_bytes <= len(head) + LIMIT + 3 * BLOCK


def test_a_set_of_hundreds_of_megabytes_without_a_line_break_is_refused_at_the_real_limit(
    tmp_path: Path,
) -> None:
    path = tmp_path / "flat.jsonl"
    with path.open("wb") as stream:  # sparse: no disk is written for its zeros
        stream.truncate(512 << 20)
    with pytest.raises(InputError) as refused:
        golden_files.load_set_file(path)
    assert refused.value.line == 1 and refused.value.source == str(path)
    assert "16 MiB" in refused.value.detail


@GENERATED
@given(size=st.integers(1, LIMIT), lines=st.integers(1, 5))
def test_long_lines_within_the_limit_still_load(
    small_limits: None, tmp_path: Path, size: int, lines: int
) -> None:
    path = tmp_path / "set.jsonl"
    rows = []
    for index in range(lines):
        row = _line(index)
        pad = max(0, size - len(row) - len(', "gist": ""'))
        rows.append(row[:-1] + f', "gist": "{"g" * pad}"}}')
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    if max(len(row.encode()) for row in rows) > LIMIT:
        with pytest.raises(InputError):
            golden_files.load_jsonl(path)
        return
    assert [q.id for q in golden_files.load_jsonl(path).questions] == [
        f"q{i}" for i in range(lines)
    ]
