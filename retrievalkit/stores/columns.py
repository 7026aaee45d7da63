"""The stored form of a run's outcomes: every column encoded on its own, read back lazily.

`encode_columns` turns a `retrievalkit.model.outcomes.Outcomes` into its columns, each on
its own, as ``name -> bytes``, and `columns_header` gives a small JSON-able summary
(question count, errored count, metric names, column names, format version).
`decode_columns` takes that header and a ``load(name) -> bytes`` callable and reads a
column only when it is first used:
the length and the errored count come from the header, ``values("hit@1")`` loads one
column, and nothing else is read until asked for.

A column's bytes are ``RKC1``, a little-endian uint32 length, a JSON description of the
arrays it holds, and then those arrays, each byte-shuffled (all first bytes, then all
second bytes, ...), compressed together with zlib. Every column round-trips exactly:

- a metric column is dictionary-encoded when it holds at most 65,536 distinct values
  (hit@k, recall@k, precision@k, rr, judged@k, and nDCG@k and AP@k of short rankings
  always do): the distinct float64 values, compared bit for bit, and one uint8 or
  uint16 code per question. Otherwise it is stored as exact thousandths in an integer
  when every value is one, else as raw float64. Means, intervals and the regression gate
  computed from stored values are the ones computed before storing, to the last bit.
  A question whose outcome lacked a metric altogether (not undefined: absent) keeps
  that distinction in a bitmap that exists only when some question lacks it;
- latency is stored by the same rule (the scorer rounds it to 3 decimals, so it is
  exact thousandths of a millisecond);
- strings (question ids, document ids, error messages, hard classes) are UTF-8 text
  joined by NUL, or with explicit lengths when one holds a NUL;
- forms and hard classes are dictionary-encoded; errors are sparse (index, message);
- tokens (each question's input and output tokens, model by model) are stored as the
  model names and two integer arrays a model in the narrowest type, in a column that
  exists only when some question recorded tokens: a run stored before it has none;
- question texts (what each question asked, so that a store copied elsewhere shows its
  questions without their set) are dictionary-encoded like labels, in a column that exists
  only when some text is known: a run stored before it reads every text as None;
- rankings and judgments share one vocabulary of document ids (only the ids a run
  uses, each once, sorted and front-coded: each id as the length of the prefix it
  shares with the one before and the rest, every 32nd id whole, so that one id is
  decoded from at most 31 before it), with per-question lengths and codes in the
  narrowest integer type.
"""

from __future__ import annotations

import itertools
import json
import struct
import zlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import numpy.typing as npt

from retrievalkit.errors import StoreError
from retrievalkit.model.outcomes import (
    DOCUMENTS,
    ERRORS,
    FORMS,
    HARD_CLASSES,
    JUDGMENTS,
    LATENCY,
    METRIC_PREFIX,
    QUESTION_IDS,
    QUESTION_TEXTS,
    RANKINGS,
    TOKENS,
    FloatArray,
    IntArray,
    Judgments,
    Loader,
    MetricColumn,
    Outcomes,
    Rankings,
    TokenCounts,
    check_codes,
    check_offsets,
    column_name,
    read_only,
)
from retrievalkit.model.values import QuestionForm

#: The version of the column encoding; `decode_columns` refuses a newer one.
FORMAT = 1

_MAGIC = b"RKC1"
_DICTIONARY_LIMIT = 1 << 16
_CANONICAL_NAN = np.array([np.nan], dtype=np.float64).view(np.uint64)[0]


def _narrowest(values: IntArray) -> npt.NDArray[Any]:
    """``values`` in the narrowest integer type that holds them all."""
    if values.size == 0:
        return values.astype(np.uint8)
    low, high = int(values.min()), int(values.max())
    kinds = (np.uint8, np.uint16, np.uint32) if low >= 0 else (np.int8, np.int16, np.int32)
    for kind in kinds:
        info = np.iinfo(kind)
        if info.min <= low and high <= info.max:
            return values.astype(kind, copy=False)
    return values.astype(np.int64, copy=False)


def _shuffled(array: npt.NDArray[Any]) -> Iterator[memoryview]:
    """The array's bytes shuffled (all first bytes, then all second bytes, ...), a byte
    plane at a time: never a second copy of the whole array."""
    width = array.dtype.itemsize
    raw = np.ascontiguousarray(array).view(np.uint8)
    if width == 1:
        yield raw.data
        return
    planes = raw.reshape(-1, width)
    for plane in range(width):
        yield np.ascontiguousarray(planes[:, plane]).data


def _unshuffle(data: bytes, dtype: np.dtype[Any], count: int) -> npt.NDArray[Any]:
    width = dtype.itemsize
    raw = np.frombuffer(data, dtype=np.uint8)
    if width == 1:
        single: npt.NDArray[Any] = raw.view(dtype).copy()
        return single
    wide: npt.NDArray[Any] = np.ascontiguousarray(raw.reshape(width, count).T).view(dtype)
    return wide.reshape(count)


def _pack(
    arrays: Mapping[str, npt.NDArray[Any]],
    meta: Mapping[str, Any] | None = None,
    *,
    level: int = 1,
) -> bytes:
    """One column's bytes: magic, described arrays, and their shuffled bytes compressed.

    zlib level 1 for numbers (codes are close to their entropy already; higher levels
    cost several times the time for a few percent), a higher ``level`` for text. The
    shuffled bytes are compressed as they are made (a stream compressed in pieces is
    the bytes ``zlib.compress`` makes of them joined), so they are never held whole.
    """
    described = [[name, array.dtype.str, len(array)] for name, array in arrays.items()]
    head = json.dumps({"arrays": described, "meta": dict(meta or {})}, separators=(",", ":"))
    encoded = head.encode("utf-8")
    packer = zlib.compressobj(level)
    parts = [_MAGIC, struct.pack("<I", len(encoded)), encoded]
    parts.extend(packer.compress(piece) for array in arrays.values() for piece in _shuffled(array))
    parts.append(packer.flush())
    return b"".join(parts)


def _unpack(data: bytes) -> tuple[dict[str, npt.NDArray[Any]], dict[str, Any]]:
    if data[:4] != _MAGIC:
        raise ValueError("not a retrievalkit outcome column")
    (size,) = struct.unpack("<I", data[4:8])
    head = json.loads(data[8 : 8 + size].decode("utf-8"))
    body = zlib.decompress(data[8 + size :])
    arrays: dict[str, npt.NDArray[Any]] = {}
    at = 0
    for name, dtype_text, count in head["arrays"]:
        dtype = np.dtype(dtype_text)
        end = at + dtype.itemsize * count
        arrays[name] = _unshuffle(body[at:end], dtype, count)
        at = end
    if at != len(body):
        raise ValueError("column body does not match its description")
    return arrays, head["meta"]


def _pack_bytes(prefix: str, pieces: Sequence[bytes]) -> dict[str, npt.NDArray[Any]]:
    """Byte strings joined by NUL, or with explicit lengths when one holds a NUL."""
    joined = b"\x00".join(pieces)
    if not pieces or joined.count(b"\x00") == len(pieces) - 1:
        return {prefix + "text": np.frombuffer(joined, dtype=np.uint8)}
    lengths = np.fromiter((len(piece) for piece in pieces), np.int64, len(pieces))
    return {
        prefix + "text": np.frombuffer(b"".join(pieces), dtype=np.uint8),
        prefix + "lengths": _narrowest(lengths),
    }


def _unpack_bytes(prefix: str, arrays: Mapping[str, npt.NDArray[Any]], count: int) -> list[bytes]:
    raw = arrays[prefix + "text"].tobytes()
    lengths = arrays.get(prefix + "lengths")
    if lengths is None:
        pieces = raw.split(b"\x00") if count else []
    else:
        ends = np.cumsum(lengths.astype(np.int64)).tolist()
        starts = [0, *ends[:-1]]
        pieces = [raw[a:b] for a, b in zip(starts, ends, strict=True)]
    if len(pieces) != count:
        raise ValueError(f"expected {count} strings, found {len(pieces)}")
    return pieces


def _pack_strings(prefix: str, strings: Sequence[str]) -> dict[str, npt.NDArray[Any]]:
    """Strings as UTF-8 text joined by NUL (or with lengths when a string holds a NUL)."""
    text = "\x00".join(strings)
    if not strings or text.count("\x00") == len(strings) - 1:
        blob = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
        return {prefix + "text": blob}
    return _pack_bytes(prefix, [s.encode("utf-8", "surrogatepass") for s in strings])


def _encoded(strings: list[str]) -> list[bytes]:
    """Each string in UTF-8, encoded in one call when none holds a NUL."""
    text = "\x00".join(strings)
    if strings and text.count("\x00") == len(strings) - 1:
        return text.encode("utf-8", "surrogatepass").split(b"\x00")
    return [string.encode("utf-8", "surrogatepass") for string in strings]


def _unpack_strings(prefix: str, arrays: Mapping[str, npt.NDArray[Any]], count: int) -> list[str]:
    if prefix + "lengths" not in arrays:
        raw = arrays[prefix + "text"].tobytes()
        strings = raw.decode("utf-8", "surrogatepass").split("\x00") if count else []
        if len(strings) != count:
            raise ValueError(f"expected {count} strings, found {len(strings)}")
        return strings
    return [
        piece.decode("utf-8", "surrogatepass") for piece in _unpack_bytes(prefix, arrays, count)
    ]


def _pick(strings: Sequence[str], positions: IntArray) -> list[str]:
    return list(map(strings.__getitem__, positions.tolist()))


#: Document ids longer than this (in UTF-8 bytes) are stored without front coding.
_FRONT_CODING_WIDTH = 128
#: One document id in this many is stored whole (sharing no prefix), so that any id is
#: decoded from the nearest whole one before it: a page showing one question's documents
#: decodes those, not a vocabulary of hundreds of thousands.
_RESTART = 32
#: Decoding one id of a run stored without such restarts (before retrievalkit 0.3) walks
#: back at most this many ids; further back, the whole vocabulary is decoded once instead.
_WALK_LIMIT = 4096


def _front_code(
    names: list[bytes],
) -> tuple[IntArray, IntArray, IntArray, dict[str, npt.NDArray[Any]]]:
    """Sorted, de-duplicated ``names`` as shared-prefix lengths and suffixes.

    Returns the order that sorts ``names``, the new code of each sorted name (equal
    names share one), for each distinct name the length of the prefix it shares with
    the one before, and the rest of each as `_pack_bytes` packs it (prefix ``suffix.``).
    """
    count = len(names)
    if count == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, _pack_bytes(_SUFFIX, [])
    lengths = np.fromiter(map(len, names), np.int64, count)
    width = int(lengths.max())
    if width > _FRONT_CODING_WIDTH:
        return _front_code_long(names)
    fixed = np.array(names, dtype=f"S{max(width, 1)}")
    return _front_code_matrix(fixed.view(np.uint8).reshape(count, max(width, 1)), lengths)


def _front_code_strings(
    strings: list[str],
) -> tuple[IntArray, IntArray, IntArray, dict[str, npt.NDArray[Any]]]:
    """`_front_code` of the strings in UTF-8, laid out side by side from their text
    joined by NUL (no bytes object a string) when none holds a NUL."""
    text = "\x00".join(strings)
    if not strings or text.count("\x00") != len(strings) - 1:
        return _front_code(_encoded(strings))
    blob = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    separators = blob == 0
    ends = np.append(np.flatnonzero(separators), len(blob))
    lengths = np.diff(ends, prepend=-1) - 1
    width = int(lengths.max())
    if width > _FRONT_CODING_WIDTH:
        return _front_code_long(blob.tobytes().split(b"\x00"))
    matrix = np.zeros((len(strings), max(width, 1)), dtype=np.uint8)
    # Row after row, the cells a name fills are its bytes in order: the text less its NULs.
    matrix[np.arange(matrix.shape[1]) < lengths[:, None]] = blob[~separators]
    del text, blob, separators, ends  # not held while the names are sorted
    return _front_code_matrix(matrix, lengths)


def _front_code_matrix(
    matrix: npt.NDArray[np.uint8], lengths: IntArray
) -> tuple[IntArray, IntArray, IntArray, dict[str, npt.NDArray[Any]]]:
    """`_front_code` of names given as the rows of ``matrix`` (NUL-padded) and lengths."""
    width = int(lengths.max())
    order = _byte_order(matrix, lengths)
    matrix = matrix[order]
    ordered_lengths = lengths[order]
    differs = matrix[1:] != matrix[:-1]
    any_difference = differs.any(axis=1)
    first = np.where(any_difference, differs.argmax(axis=1), width)
    shorter = np.minimum(ordered_lengths[1:], ordered_lengths[:-1])
    shared = np.concatenate([[0], np.minimum(first, shorter)]).astype(np.int64)
    same = np.concatenate(
        [[False], ~any_difference & (ordered_lengths[1:] == ordered_lengths[:-1])]
    )
    codes = np.cumsum(~same) - 1
    keep = np.flatnonzero(~same)
    # A kept name shares its prefix with the kept name before it: duplicates dropped
    # between them were equal to that one, so the shared length holds.
    kept_shared, kept_lengths = shared[keep], ordered_lengths[keep]
    kept_shared[::_RESTART] = 0
    kept = np.zeros((len(keep), matrix.shape[1] + 1), dtype=np.uint8)
    kept[:, :-1] = matrix[keep]
    columns = np.arange(kept.shape[1])
    # Every suffix, one after the other, each with the NUL (padding) after it.
    ended = kept[(columns >= kept_shared[:, None]) & (columns <= kept_lengths[:, None])]
    sizes = kept_lengths - kept_shared
    if np.count_nonzero(ended == 0) == len(keep):
        # As _pack_bytes joins them: a NUL after every suffix but the last.
        return order, codes.astype(np.int64), kept_shared, {_SUFFIX + "text": ended[:-1]}
    text = np.delete(ended, np.cumsum(sizes + 1) - 1)  # less the NUL after each
    packed = {_SUFFIX + "text": text, _SUFFIX + "lengths": _narrowest(sizes)}
    return order, codes.astype(np.int64), kept_shared, packed


_SUFFIX = "suffix."


def _byte_order(matrix: npt.NDArray[np.uint8], lengths: IntArray) -> IntArray:
    """The order that sorts the rows of ``matrix`` (names NUL-padded to one width) as
    bytes, shorter first between equal padded bytes (so equal names sit side by side);
    equal names keep their order.

    Sorting integers is several times faster than sorting byte strings: each row is
    read as big-endian 64-bit words (`_word_keys`), sorted by one sort of integers when
    they fit in one (`_packed_order`), else by a sort per word.
    """
    keys = _word_keys(matrix, lengths)
    order = _packed_order(keys)
    if order is None:
        order = np.lexsort(keys[::-1]).astype(np.int64)
    return order


def _word_keys(matrix: npt.NDArray[np.uint8], lengths: IntArray) -> list[npt.NDArray[np.uint64]]:
    """Each row of ``matrix`` as big-endian 64-bit words, most significant first; the last
    word ends in the row's length (the padding leaves that byte free)."""
    count, width = matrix.shape
    words = width // 8 + 1
    keys = []
    for word in range(words):
        chunk = np.zeros((count, 8), dtype=np.uint8)
        part = matrix[:, word * 8 : (word + 1) * 8]
        chunk[:, : part.shape[1]] = part
        if word == words - 1:
            chunk[:, 7] = lengths
        keys.append(chunk.view(">u8").reshape(count).astype(np.uint64))
    return keys


def _packed_order(keys: list[npt.NDArray[np.uint64]]) -> IntArray | None:
    """The stable order of the rows by ``keys`` (most significant first), from one sort of
    integers: each key's rank among its distinct values, the ranks as the digits of one
    number, and the row number below it. None when those do not fit in 64 bits."""
    count = len(keys[0])
    bits = max(1, (count - 1).bit_length())
    room = 1 << (64 - bits)
    combined = np.zeros(count, dtype=np.uint64)
    size = 1
    for key in keys:
        distinct, rank = np.unique(key, return_inverse=True)
        size *= len(distinct)
        if size > room:
            return None
        combined = combined * np.uint64(len(distinct)) + rank.reshape(count).astype(np.uint64)
    packed = (combined << np.uint64(bits)) | np.arange(count, dtype=np.uint64)
    packed.sort()
    order: IntArray = (packed & np.uint64((1 << bits) - 1)).astype(np.int64)
    return order


def _front_code_long(
    names: list[bytes],
) -> tuple[IntArray, IntArray, IntArray, dict[str, npt.NDArray[Any]]]:
    """`_front_code` for names too long to lay out side by side: compared in Python."""
    count = len(names)
    order = np.array(sorted(range(count), key=names.__getitem__), dtype=np.int64)
    ordered = [names[i] for i in order.tolist()]
    same = np.array([False] + [a == b for a, b in itertools.pairwise(ordered)], dtype=bool)
    codes = np.cumsum(~same) - 1
    keep = np.flatnonzero(~same).tolist()
    kept_shared = np.zeros(len(keep), dtype=np.int64)
    suffixes = [ordered[i] for i in keep]
    return order, codes.astype(np.int64), kept_shared, _pack_bytes(_SUFFIX, suffixes)


class _Vocabulary:
    """A run's front-coded document ids as stored: every id decoded at once, or one id
    from the nearest id before it that is stored whole (see `_RESTART`)."""

    __slots__ = ("_arrays", "_bounds", "_restarts", "count")

    def __init__(self, arrays: Mapping[str, npt.NDArray[Any]], count: int) -> None:
        if len(arrays["shared"]) != count:
            raise ValueError(f"{len(arrays['shared'])} shared lengths for {count} document ids")
        self._arrays = arrays
        self.count = count
        self._bounds: tuple[bytes, IntArray, IntArray] | None = None
        self._restarts: IntArray | None = None

    def names(self) -> list[str]:
        suffixes = _unpack_bytes(_SUFFIX, self._arrays, self.count)
        return _front_decode(self._arrays["shared"].tolist(), suffixes)

    def name(self, code: int) -> str | None:
        """The id of ``code`` (in range), or None when it lies too far from an id stored
        whole (`_WALK_LIMIT`)."""
        shared = self._arrays["shared"]
        if self._restarts is None:
            self._restarts = np.flatnonzero(shared == 0)
        start = int(self._restarts[np.searchsorted(self._restarts, code, side="right") - 1])
        if code - start > _WALK_LIMIT:
            return None
        raw, starts, ends = self._suffix_bounds()
        name = b""
        span = slice(start, code + 1)
        lengths, lows, highs = shared[span].tolist(), starts[span].tolist(), ends[span].tolist()
        for length, low, high in zip(lengths, lows, highs, strict=True):
            name = name[:length] + raw[low:high]
        return name.decode("utf-8", "surrogatepass")

    def _suffix_bounds(self) -> tuple[bytes, IntArray, IntArray]:
        """The suffixes' text and where each starts and ends in it."""
        if self._bounds is None:
            text = self._arrays[_SUFFIX + "text"]
            lengths = self._arrays.get(_SUFFIX + "lengths")
            if lengths is None:
                ends = np.append(np.flatnonzero(text == 0), len(text)) if self.count else text[:0]
                starts = ends - np.diff(ends, prepend=-1) + 1
            else:
                ends = np.cumsum(lengths.astype(np.int64))
                starts = ends - lengths.astype(np.int64)
            if len(ends) != self.count:
                raise ValueError(f"expected {self.count} strings, found {len(ends)}")
            self._bounds = (text.tobytes(), starts, ends)
        return self._bounds


def _front_decode(shared: list[int], suffixes: list[bytes]) -> list[str]:
    names = []
    previous = b""
    for length, suffix in zip(shared, suffixes, strict=True):
        previous = previous[:length] + suffix
        names.append(previous.decode("utf-8", "surrogatepass"))
    return names


def _encode_floats(values: FloatArray) -> dict[str, npt.NDArray[Any]]:
    """Exact float64 values: dictionary-encoded, as thousandths or raw, whichever is smaller."""
    bits = values.view(np.uint64).copy()
    bits[np.isnan(values)] = _CANONICAL_NAN
    distinct, codes = _distinct_codes(bits)
    candidates: list[dict[str, npt.NDArray[Any]]] = []
    if len(distinct) <= _DICTIONARY_LIMIT:
        kind = np.uint8 if len(distinct) <= 256 else np.uint16
        candidates.append({"distinct": distinct, "codes": codes.astype(kind)})
        if len(distinct) <= 256:
            return candidates[0]
    if np.isfinite(values).all():
        scaled = np.rint(values * 1000.0)
        if (
            np.abs(scaled).max() < 2**53
            and np.array_equal(scaled / 1000.0, values)
            and np.array_equal(np.signbit(values), np.signbit(scaled / 1000.0))
        ):
            candidates.append({"thousandths": _narrowest(scaled.astype(np.int64))})
    if not candidates:
        return {"raw": bits}
    return min(candidates, key=lambda arrays: sum(array.nbytes for array in arrays.values()))


#: Columns longer than this look for their distinct values in a sample first.
_SAMPLED_OVER = 1 << 16


def _distinct_codes(bits: npt.NDArray[np.uint64]) -> tuple[npt.NDArray[np.uint64], IntArray]:
    """``np.unique(bits, return_inverse=True)``, the codes flat.

    A long column of few distinct values (hit@k, recall@k, ...) is coded by a search
    among the distinct values of a sample of it, with the values the sample missed
    added: no sort of the whole column.
    """
    if len(bits) > _SAMPLED_OVER:
        distinct = np.unique(bits[:: len(bits) // 8192])
        if len(distinct) <= 256:
            codes = np.searchsorted(distinct, bits)
            missed = distinct[np.minimum(codes, len(distinct) - 1)] != bits
            if not missed.any():
                return distinct, codes
            missing = np.unique(bits[missed])
            if len(distinct) + len(missing) <= 256:
                distinct = np.union1d(distinct, missing)
                return distinct, np.searchsorted(distinct, bits)
    distinct, inverse = np.unique(bits, return_inverse=True)
    return distinct, inverse.reshape(-1)


def _decode_floats(arrays: Mapping[str, npt.NDArray[Any]]) -> FloatArray:
    decoded: FloatArray
    if "distinct" in arrays:
        decoded = arrays["distinct"].view(np.float64)[arrays["codes"].astype(np.intp)]
    elif "thousandths" in arrays:
        decoded = arrays["thousandths"].astype(np.int64) / 1000.0
    else:
        decoded = arrays["raw"].view(np.float64).copy()
    return decoded


def _dictionary(labels: Sequence[Any]) -> tuple[list[Any], IntArray]:
    """Distinct labels in first-seen order and one code per label (0 for None)."""
    vocabulary = dict.fromkeys(labels)
    vocabulary.pop(None, None)
    code_of = {label: code for code, label in enumerate(vocabulary, 1)}
    code_of[None] = 0
    codes = np.fromiter(map(code_of.__getitem__, labels), np.int64, len(labels))
    return list(vocabulary), codes


# --- the class ----------------------------------------------------------------------------


def column_names(outcomes: Outcomes) -> list[str]:
    """The names of the stored columns, in a fixed order (question texts only when known)."""
    return [
        QUESTION_IDS,
        LATENCY,
        ERRORS,
        FORMS,
        HARD_CLASSES,
        *((QUESTION_TEXTS,) if _has_texts(outcomes) else ()),
        *((TOKENS,) if _has_tokens(outcomes) else ()),
        DOCUMENTS,
        RANKINGS,
        JUDGMENTS,
        *(column_name(name) for name in outcomes.metric_names),
    ]


def _has_texts(outcomes: Outcomes) -> bool:
    """Whether ``outcomes`` know some question's text; for stored outcomes, whether their
    stored form has the column (read from the header, no column decoded)."""
    source = outcomes.source
    if isinstance(source, StoredColumns) and source.names is not None:
        return QUESTION_TEXTS in source.names
    return any(text is not None for text in outcomes.question_texts)


def _has_tokens(outcomes: Outcomes) -> bool:
    """Whether ``outcomes`` hold some question's tokens (for stored outcomes, read from
    the header, no column decoded)."""
    source = outcomes.source
    if isinstance(source, StoredColumns) and source.names is not None:
        return TOKENS in source.names
    return bool(outcomes.tokens)


def columns_header(outcomes: Outcomes) -> dict[str, Any]:
    """What `decode_columns` needs besides the columns: small, JSON-able."""
    return {
        "format": FORMAT,
        "count": len(outcomes),
        "errored": outcomes.errored,
        "metrics": list(outcomes.metric_names),
        "columns": column_names(outcomes),
    }


def encode_columns(outcomes: Outcomes) -> dict[str, bytes]:
    """Each column encoded on its own (see the module documentation).

    Outcomes read from a stored form and not yet read give their stored bytes back as
    they are.
    """
    source = outcomes.source
    if isinstance(source, StoredColumns) and not outcomes.loaded():
        return {name: source.load(name) for name in column_names(outcomes)}
    columns = _encode_documents(outcomes)
    columns[QUESTION_IDS] = _pack(_pack_strings("", outcomes.question_ids), level=6)
    columns[LATENCY] = _pack(_encode_floats(outcomes.latency_ms))
    errors = outcomes.errors
    columns[ERRORS] = _pack(
        {
            "index": _narrowest(np.fromiter(errors, np.int64, len(errors))),
            **_pack_strings("message.", list(errors.values())),
        }
    )
    labelled: list[tuple[str, Sequence[Any]]] = [
        (FORMS, outcomes.forms),
        (HARD_CLASSES, outcomes.hard_classes),
    ]
    if _has_texts(outcomes):
        labelled.append((QUESTION_TEXTS, outcomes.question_texts))
    tokens = outcomes.tokens
    if tokens:
        arrays: dict[str, npt.NDArray[Any]] = dict(_pack_strings("model.", list(tokens)))
        for number, counts in enumerate(tokens.values()):
            arrays[f"input.{number}"] = _narrowest(counts.input)
            arrays[f"output.{number}"] = _narrowest(counts.output)
        columns[TOKENS] = _pack(arrays, {"models": len(tokens)})
    for name, labels in labelled:
        vocabulary, codes = _dictionary(labels)
        # A form is stored as its value (a form is a str enum: its value is itself).
        texts = [getattr(label, "value", label) for label in vocabulary]
        columns[name] = _pack(
            {"codes": _narrowest(codes), **_pack_strings("label.", texts)},
            {"labels": len(vocabulary)},
        )
    for name in outcomes.metric_names:
        values = outcomes.values(name)
        arrays = _encode_floats(values)
        absent = outcomes.absent(name)
        if absent is not None:
            arrays["absent"] = np.packbits(absent)
        columns[column_name(name)] = _pack(arrays)
    return {name: columns[name] for name in column_names(outcomes)}


def _encode_documents(outcomes: Outcomes) -> dict[str, bytes]:
    """Documents, rankings and judgments over one sorted vocabulary of the ids used."""
    ranked, labels, documents = outcomes.rankings, outcomes.judgments, outcomes.documents
    seen = np.zeros(len(documents), dtype=bool)
    seen[ranked.codes] = True
    seen[labels.codes] = True
    used = np.flatnonzero(seen)
    used_names = documents if len(used) == len(documents) else _pick(documents, used)
    order, codes, shared, suffixes = _front_code_strings(list(used_names))
    # In the narrowest type that holds every new code: gathering the codes of a large
    # run's rankings through it makes no int64 array of them.
    remap = np.zeros(len(documents), dtype=np.int64)
    remap[used[order]] = codes
    remap = _narrowest(remap)
    return {
        DOCUMENTS: _pack(
            {"shared": _narrowest(shared), **suffixes},
            {"count": len(shared)},
            level=6,
        ),
        RANKINGS: _pack(
            {
                "lengths": _narrowest(np.diff(ranked.offsets)),
                "codes": _narrowest(remap[ranked.codes]),
            }
        ),
        JUDGMENTS: _pack(
            {
                "lengths": _narrowest(np.diff(labels.offsets)),
                "codes": _narrowest(remap[labels.codes]),
                "grades": _narrowest(labels.grades),
            }
        ),
    }


def decode_columns(
    header: Mapping[str, Any], load: Loader, *, where: str = "stored outcomes"
) -> Outcomes:
    """Outcomes read back from `columns_header` and `encode_columns`, each loaded on first use.

    ``load(name)`` returns the bytes `encode_columns` gave for ``name``; it is called at most once
    a column, and never for a column nothing reads. A column that cannot be decoded
    raises `retrievalkit.errors.StoreError` naming ``where`` and the column.
    """
    try:
        version = header["format"]
        count = header["count"]
        errored = header["errored"]
        metrics = header["metrics"]
    except (KeyError, TypeError):
        raise StoreError(f"{where}: the outcomes header is incomplete") from None
    if not isinstance(version, int) or version > FORMAT:
        raise StoreError(
            f"{where}: outcome columns of format {version!r} are newer than this "
            f"retrievalkit reads ({FORMAT}); upgrade retrievalkit to read them"
        )
    if not (isinstance(count, int) and isinstance(errored, int) and 0 <= errored <= count):
        raise StoreError(f"{where}: the outcomes header has no valid counts")
    if not isinstance(metrics, list) or not all(isinstance(m, str) for m in metrics):
        raise StoreError(f"{where}: the outcomes header has no valid metric names")
    names = header.get("columns")
    if names is not None and (
        not isinstance(names, list) or not all(isinstance(name, str) for name in names)
    ):
        raise StoreError(f"{where}: the outcomes header has no valid column names")
    return Outcomes.lazy(count, errored, metrics, StoredColumns(load, where, names))


class StoredColumns:
    """The stored columns of one run's outcomes, decoded one at a time when first read."""

    __slots__ = ("_vocabulary", "load", "names", "where")

    def __init__(self, load: Loader, where: str, names: Sequence[str] | None = None) -> None:
        self.load = load
        self.where = where
        #: The stored columns' names (from the header), or None when not known.
        self.names = None if names is None else frozenset(names)
        self._vocabulary: _Vocabulary | None = None

    def _documents(self) -> _Vocabulary:
        """The run's vocabulary of document ids, read once: its size checks the codes of
        a ranking without decoding an id, and ids are decoded all at once or one by one."""
        if self._vocabulary is None:
            arrays, meta = _unpack(self.load(DOCUMENTS))
            self._vocabulary = _Vocabulary(arrays, int(meta["count"]))
        return self._vocabulary

    def column(self, name: str, outcomes: Outcomes) -> Any:
        with self._reading(name):
            if name == DOCUMENTS:
                return tuple(self._documents().names())
            if name == QUESTION_TEXTS and (self.names is None or name not in self.names):
                return (None,) * len(outcomes)  # stored before question texts were kept
            if name == TOKENS and (self.names is None or name not in self.names):
                return {}  # no question recorded tokens, or stored before they were kept
            return self._decode(name, self.load(name), outcomes)

    def document_count(self) -> int:
        """How many document ids the run's vocabulary holds (no id decoded)."""
        with self._reading(DOCUMENTS):
            return self._documents().count

    def document_names(self, codes: Sequence[int]) -> list[str] | None:
        """The ids of ``codes`` (each within `document_count`, as `Outcomes.document_names`
        checks) alone, or None when decoding them one by one would cost more than
        decoding the whole vocabulary (a run stored before restarts existed)."""
        names = []
        with self._reading(DOCUMENTS):
            vocabulary = self._documents()
            for code in codes:
                name = vocabulary.name(code)
                if name is None:
                    return None
                names.append(name)
        return names

    @contextmanager
    def _reading(self, name: str) -> Iterator[None]:
        """Any failure to decode column ``name`` as a `StoreError` naming it."""
        try:
            yield
        except StoreError:
            raise
        except Exception as error:
            raise StoreError(
                f"{self.where}: outcome column {name!r} cannot be read: {error}"
            ) from None

    def _decode(self, name: str, data: bytes, outcomes: Outcomes) -> Any:
        arrays, meta = _unpack(data)
        count = len(outcomes)

        def sized(array: npt.NDArray[Any]) -> npt.NDArray[Any]:
            if len(array) != count:
                raise ValueError(f"{len(array)} values for {count} questions")
            return array

        if name == QUESTION_IDS:
            return tuple(_unpack_strings("", arrays, count))
        if name == LATENCY:
            return read_only(sized(_decode_floats(arrays)))
        if name == TOKENS:
            models = _unpack_strings("model.", arrays, meta["models"])
            return {
                model: TokenCounts(
                    read_only(sized(arrays[f"input.{number}"]).astype(np.int64)),
                    read_only(sized(arrays[f"output.{number}"]).astype(np.int64)),
                )
                for number, model in enumerate(models)
            }
        if name == ERRORS:
            index = arrays["index"].astype(np.int64).tolist()
            messages = _unpack_strings("message.", arrays, len(index))
            return dict(zip(index, messages, strict=True))
        if name in (FORMS, HARD_CLASSES, QUESTION_TEXTS):
            vocabulary: list[Any] = _unpack_strings("label.", arrays, meta["labels"])
            if name == FORMS:
                vocabulary = [QuestionForm(label) for label in vocabulary]
            table = [None, *vocabulary]
            return tuple(map(table.__getitem__, sized(arrays["codes"]).tolist()))
        if name in (RANKINGS, JUDGMENTS):
            lengths = sized(arrays["lengths"]).astype(np.int64)
            offsets = np.zeros(count + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            codes = read_only(arrays["codes"].astype(np.int64))
            check_offsets(offsets, count, len(codes), name)
            check_codes(codes, self._documents().count, name)
            if name == RANKINGS:
                return Rankings(read_only(offsets), codes)
            grades = read_only(arrays["grades"].astype(np.int64))
            return Judgments(read_only(offsets), codes, grades)
        if name.startswith(METRIC_PREFIX):
            values = sized(_decode_floats(arrays))
            absent = arrays.get("absent")
            mask = None if absent is None else np.unpackbits(absent, count=count).astype(bool)
            return MetricColumn(read_only(values), None if mask is None else read_only(mask))
        raise KeyError(name)
