"""A run's per-question outcomes by column: a typed array per metric, not an object a question.

`Outcomes` is an immutable ``Sequence[QuestionOutcome]``: indexing or iterating builds
`QuestionOutcome` values on the fly, so code written against a tuple of outcomes keeps
working. Code that reads many questions reads the columns instead:

- `Outcomes.question_ids`, `Outcomes.metric_names`;
- `Outcomes.values` (one metric, float64, NaN where undefined), `Outcomes.latency_ms`;
- `Outcomes.errors` (question index -> message) and `Outcomes.errored`;
- `Outcomes.forms`, `Outcomes.hard_classes`;
- `Outcomes.documents` with `Outcomes.rankings` and `Outcomes.judgments`, ragged
  lists in CSR form (offsets into one array of document codes).

Three ways to make one: `Outcomes.from_outcomes` (any iterable of `QuestionOutcome`),
`Outcomes.from_arrays` (the columns themselves, as a scorer computes them) and
`Outcomes.from_columns` (the stored form, read lazily).

## The stored form

`Outcomes.to_columns` encodes every column on its own, as ``name -> bytes``, and
`Outcomes.header` gives a small JSON-able summary (question count, errored count,
metric names, column names, format version). `Outcomes.from_columns` takes that header
and a ``load(name) -> bytes`` callable and reads a column only when it is first used:
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
- rankings and judgments share one vocabulary of document ids (only the ids a run
  uses, each once, sorted and front-coded: each id as the length of the prefix it
  shares with the one before and the rest), with per-question lengths and codes in the
  narrowest integer type.
"""

from __future__ import annotations

import itertools
import json
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, overload

import numpy as np
import numpy.typing as npt

from retrievalkit.errors import StoreError

if TYPE_CHECKING:
    from retrievalkit.model.values import QuestionForm, QuestionOutcome

#: The version of the column encoding; `Outcomes.from_columns` refuses a newer one.
FORMAT = 1

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

QUESTION_IDS = "question_ids"
LATENCY = "latency_ms"
ERRORS = "errors"
FORMS = "forms"
HARD_CLASSES = "hard_classes"
DOCUMENTS = "documents"
RANKINGS = "rankings"
JUDGMENTS = "judgments"
METRIC_PREFIX = "metric/"

_MAGIC = b"RKC1"
_DICTIONARY_LIMIT = 1 << 16
_CANONICAL_NAN = np.array([np.nan], dtype=np.float64).view(np.uint64)[0]


class Rankings(NamedTuple):
    """Each question's ranking as codes into `Outcomes.documents`, in CSR form.

    Question ``i`` ranked ``documents[codes[offsets[i]:offsets[i + 1]]]``, best first.
    """

    offsets: IntArray
    """``len + 1`` non-decreasing offsets into ``codes``, starting at 0."""
    codes: IntArray


class Judgments(NamedTuple):
    """Each question's labels as codes into `Outcomes.documents` with their grades (CSR)."""

    offsets: IntArray
    codes: IntArray
    grades: IntArray


def column_name(metric: str) -> str:
    """The stored column holding ``metric``'s per-question values (``metric/hit@1``)."""
    return METRIC_PREFIX + metric


def _read_only(array: npt.NDArray[Any]) -> npt.NDArray[Any]:
    view: npt.NDArray[Any] = array.view()
    view.setflags(write=False)
    return view


def _int_array(values: Any, what: str) -> IntArray:
    array = np.asarray(values)
    if array.ndim != 1 or (array.size and not np.issubdtype(array.dtype, np.integer)):
        raise ValueError(f"{what} must be a one-dimensional array of integers")
    return _read_only(array.astype(np.int64, copy=False))


def _check_offsets(offsets: IntArray, count: int, size: int, what: str) -> None:
    if len(offsets) != count + 1 or (count + 1 and offsets[0] != 0):
        raise ValueError(f"{what} offsets must be {count + 1} values starting at 0")
    if np.any(np.diff(offsets) < 0) or offsets[-1] != size:
        raise ValueError(f"{what} offsets must not decrease and must end at {size}")


def _check_codes(codes: IntArray, vocabulary: int, what: str) -> None:
    if codes.size and (codes.min() < 0 or codes.max() >= vocabulary):
        raise ValueError(f"{what} codes must index the {vocabulary} documents")


# --- encoding ---------------------------------------------------------------------------


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


class _Metric(NamedTuple):
    values: FloatArray
    absent: npt.NDArray[np.bool_] | None
    """True where the question's outcome had no value at all for the metric."""


Loader = Callable[[str], bytes]


class Outcomes(Sequence["QuestionOutcome"]):
    """The per-question outcomes of one run, by column; immutable.

    See the module documentation for the columns and the stored form. Two `Outcomes`
    are equal when every column is (undefined values equal each other); an `Outcomes`
    also equals a tuple or list of the same `QuestionOutcome` values.
    """

    __slots__ = ("_cache", "_count", "_errored", "_index", "_load", "_metrics", "_where")

    def __init__(
        self,
        count: int,
        errored: int,
        metrics: Sequence[str],
        columns: dict[str, Any],
        load: Loader | None = None,
        where: str = "outcomes",
    ) -> None:
        """Internal: use `from_outcomes`, `from_arrays` or `from_columns`."""
        self._count = count
        self._errored = errored
        self._metrics = tuple(metrics)
        self._cache = columns
        self._load = load
        self._where = where
        self._index: dict[str, int] | None = None

    # -- construction ----------------------------------------------------------------------

    @classmethod
    def from_outcomes(cls, outcomes: Iterable[QuestionOutcome]) -> Outcomes:
        """The columns of any iterable of `QuestionOutcome` (an `Outcomes` is returned as is)."""
        from retrievalkit.model.values import QuestionOutcome

        if isinstance(outcomes, Outcomes):
            return outcomes
        if isinstance(outcomes, (str, bytes, Mapping)):
            raise TypeError(
                f"outcomes must be an iterable of QuestionOutcome, not {type(outcomes).__name__}"
            )
        items = list(outcomes)
        for item in items:
            if not isinstance(item, QuestionOutcome):
                raise TypeError(
                    f"outcomes must be an iterable of QuestionOutcome, found {type(item).__name__}"
                )
        count = len(items)
        first_keys = items[0].scores.keys() if items else {}.keys()
        uniform = all(item.scores.keys() == first_keys for item in items)
        if uniform:
            names = list(first_keys)
        else:
            names = list(dict.fromkeys(name for item in items for name in item.scores))
        ordered = tuple(names)
        if all(tuple(item.scores) == ordered for item in items):
            rows = [list(item.scores.values()) for item in items]
        else:
            rows = [[item.scores.get(name) for name in names] for item in items]
        table = np.array(rows, dtype=np.float64).reshape(count, len(names))
        metrics: dict[str, _Metric] = {}
        for position, name in enumerate(names):
            absent = None
            if not uniform:
                mask = np.fromiter((name not in i.scores for i in items), bool, count)
                absent = _read_only(mask) if mask.any() else None
            metrics[name] = _Metric(_read_only(table[:, position].copy()), absent)

        vocabulary: dict[str, int] = {}
        ranked = [vocabulary.setdefault(doc, len(vocabulary)) for i in items for doc in i.ranking]
        judged = [vocabulary.setdefault(doc, len(vocabulary)) for i in items for doc in i.judgments]
        grades = [grade for i in items for grade in i.judgments.values()]
        ranking_offsets = np.zeros(count + 1, dtype=np.int64)
        ranking_offsets[1:] = np.cumsum([len(i.ranking) for i in items])
        judgment_offsets = np.zeros(count + 1, dtype=np.int64)
        judgment_offsets[1:] = np.cumsum([len(i.judgments) for i in items])
        errors = {index: i.error for index, i in enumerate(items) if i.error is not None}
        columns: dict[str, Any] = {
            QUESTION_IDS: tuple(i.question_id for i in items),
            LATENCY: _read_only(np.array([i.latency_ms for i in items], dtype=np.float64)),
            ERRORS: errors,
            FORMS: tuple(i.form for i in items),
            HARD_CLASSES: tuple(i.hard_class for i in items),
            DOCUMENTS: tuple(vocabulary),
            RANKINGS: Rankings(_read_only(ranking_offsets), _int_array(ranked, "ranking")),
            JUDGMENTS: Judgments(
                _read_only(judgment_offsets),
                _int_array(judged, "judgment"),
                _int_array(grades, "grade"),
            ),
        }
        columns.update({column_name(name): metric for name, metric in metrics.items()})
        return cls(count, len(errors), names, columns)

    @classmethod
    def from_arrays(
        cls,
        question_ids: Sequence[str],
        values: Mapping[str, npt.ArrayLike],
        *,
        latency_ms: npt.ArrayLike | None = None,
        errors: Mapping[int, str] | None = None,
        forms: Sequence[QuestionForm | str | None] | None = None,
        hard_classes: Sequence[str | None] | None = None,
        documents: Sequence[str] = (),
        rankings: Rankings | tuple[npt.ArrayLike, npt.ArrayLike] | None = None,
        judgments: Judgments | tuple[npt.ArrayLike, npt.ArrayLike, npt.ArrayLike] | None = None,
    ) -> Outcomes:
        """Outcomes from their columns, as a scorer computes them.

        - ``question_ids``: one id a question, in order;
        - ``values``: metric name -> one float per question (NaN: undefined). A float64
          array is taken over, not copied: do not change it afterwards;
        - ``latency_ms``: one float per question (0 when omitted);
        - ``errors``: question index -> error message, only for questions that errored;
        - ``forms`` and ``hard_classes``: one label or None a question (None when omitted);
        - ``documents``: the document ids that ``rankings`` and ``judgments`` index (it
          may hold more than they use, say the whole corpus: only the used ones are
          stored, each once, sorted);
        - ``rankings``: ``(offsets, codes)``, see `Rankings` (empty rankings when omitted);
        - ``judgments``: ``(offsets, codes, grades)``, see `Judgments`.

        Raises ``ValueError`` when a column's length, an offset or a code does not fit.
        """
        from retrievalkit.model.values import QuestionForm

        ids = tuple(question_ids)
        count = len(ids)
        if any(not isinstance(question_id, str) for question_id in ids):
            raise ValueError("question ids must be strings")
        metrics: dict[str, _Metric] = {}
        for name, column in values.items():
            array = np.asarray(column, dtype=np.float64)
            if array.shape != (count,):
                raise ValueError(
                    f"values of {name} must be {count} floats, not shape {array.shape}"
                )
            metrics[name] = _Metric(_read_only(array), None)
        latency = (
            np.zeros(count, dtype=np.float64)
            if latency_ms is None
            else np.asarray(latency_ms, dtype=np.float64)
        )
        if latency.shape != (count,):
            raise ValueError(f"latency_ms must be {count} floats, not shape {latency.shape}")
        error_map = dict(errors or {})
        for index, message in error_map.items():
            if not 0 <= index < count or not isinstance(message, str):
                raise ValueError(f"errors must map question indexes (0..{count - 1}) to messages")
        known: dict[Any, QuestionForm | None] = {None: None}
        known.update({form: form for form in QuestionForm})
        known.update({form.value: form for form in QuestionForm})
        try:
            form_column = (None,) * count if forms is None else tuple(map(known.__getitem__, forms))
        except (KeyError, TypeError):
            raise ValueError("forms must be MATCH, GAP or None") from None
        hard_column = tuple(hard_classes) if hard_classes is not None else (None,) * count
        for name, size in (("forms", len(form_column)), ("hard_classes", len(hard_column))):
            if size != count:
                raise ValueError(f"{name} must hold {count} labels, not {size}")
        vocabulary = documents if isinstance(documents, tuple) else tuple(documents)
        empty = np.zeros(0, dtype=np.int64)
        if rankings is None:
            ranked = Rankings(_read_only(np.zeros(count + 1, dtype=np.int64)), _read_only(empty))
        else:
            offsets, codes = rankings
            ranked = Rankings(_int_array(offsets, "ranking offsets"), _int_array(codes, "ranking"))
        if judgments is None:
            labels = Judgments(
                _read_only(np.zeros(count + 1, dtype=np.int64)),
                _read_only(empty),
                _read_only(empty),
            )
        else:
            offsets, codes, grades = judgments
            labels = Judgments(
                _int_array(offsets, "judgment offsets"),
                _int_array(codes, "judgment"),
                _int_array(grades, "grade"),
            )
        _check_offsets(ranked.offsets, count, len(ranked.codes), "ranking")
        _check_offsets(labels.offsets, count, len(labels.codes), "judgment")
        if len(labels.grades) != len(labels.codes):
            raise ValueError("judgments need one grade per document code")
        _check_codes(ranked.codes, len(vocabulary), "ranking")
        _check_codes(labels.codes, len(vocabulary), "judgment")
        columns: dict[str, Any] = {
            QUESTION_IDS: ids,
            LATENCY: _read_only(latency),
            ERRORS: error_map,
            FORMS: form_column,
            HARD_CLASSES: hard_column,
            DOCUMENTS: vocabulary,
            RANKINGS: ranked,
            JUDGMENTS: labels,
        }
        columns.update({column_name(name): metric for name, metric in metrics.items()})
        return cls(count, len(error_map), list(metrics), columns)

    @classmethod
    def from_columns(
        cls, header: Mapping[str, Any], load: Loader, *, where: str = "stored outcomes"
    ) -> Outcomes:
        """Outcomes read back from `header` and `to_columns`, each column loaded on first use.

        ``load(name)`` returns the bytes `to_columns` gave for ``name``; it is called at
        most once a column, and never for a column nothing reads. A column that cannot be
        decoded raises `retrievalkit.errors.StoreError` naming ``where`` and the column.
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
        return cls(count, errored, metrics, {}, load, where)

    # -- the stored form -----------------------------------------------------------------

    def column_names(self) -> list[str]:
        """The names of the stored columns, in a fixed order."""
        return [
            QUESTION_IDS,
            LATENCY,
            ERRORS,
            FORMS,
            HARD_CLASSES,
            DOCUMENTS,
            RANKINGS,
            JUDGMENTS,
            *(column_name(name) for name in self._metrics),
        ]

    def header(self) -> dict[str, Any]:
        """What `from_columns` needs besides the columns: small, JSON-able."""
        return {
            "format": FORMAT,
            "count": self._count,
            "errored": self._errored,
            "metrics": list(self._metrics),
            "columns": self.column_names(),
        }

    def to_columns(self) -> dict[str, bytes]:
        """Each column encoded on its own (see the module documentation)."""
        if self._load is not None and not self._cache:
            return {name: self._load(name) for name in self.column_names()}
        columns = self._encode_documents()
        columns[QUESTION_IDS] = _pack(_pack_strings("", self.question_ids), level=6)
        columns[LATENCY] = _pack(_encode_floats(self.latency_ms))
        errors = self.errors
        columns[ERRORS] = _pack(
            {
                "index": _narrowest(np.fromiter(errors, np.int64, len(errors))),
                **_pack_strings("message.", list(errors.values())),
            }
        )
        for name, labels in ((FORMS, self.forms), (HARD_CLASSES, self.hard_classes)):
            vocabulary, codes = _dictionary(labels)
            # A form is stored as its value (a form is a str enum: its value is itself).
            texts = [getattr(label, "value", label) for label in vocabulary]
            columns[name] = _pack(
                {"codes": _narrowest(codes), **_pack_strings("label.", texts)},
                {"labels": len(vocabulary)},
            )
        for name in self._metrics:
            metric = self._metric(name)
            arrays = _encode_floats(metric.values)
            if metric.absent is not None:
                arrays["absent"] = np.packbits(metric.absent)
            columns[column_name(name)] = _pack(arrays)
        return {name: columns[name] for name in self.column_names()}

    def _encode_documents(self) -> dict[str, bytes]:
        """Documents, rankings and judgments over one sorted vocabulary of the ids used."""
        ranked, labels, documents = self.rankings, self.judgments, self.documents
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

    # -- reading columns ---------------------------------------------------------------

    def _column(self, name: str) -> Any:
        found = self._cache.get(name)
        if found is not None:
            return found
        if self._load is None:
            raise KeyError(name)
        try:
            decoded = self._decode(name, self._load(name))
        except StoreError:
            raise
        except Exception as error:
            raise StoreError(
                f"{self._where}: outcome column {name!r} cannot be read: {error}"
            ) from None
        self._cache[name] = decoded
        return decoded

    def _decode(self, name: str, data: bytes) -> Any:
        from retrievalkit.model.values import QuestionForm

        arrays, meta = _unpack(data)
        count = self._count
        if name == QUESTION_IDS:
            return tuple(_unpack_strings("", arrays, count))
        if name == LATENCY:
            return _read_only(self._sized(_decode_floats(arrays), name))
        if name == ERRORS:
            index = arrays["index"].astype(np.int64).tolist()
            messages = _unpack_strings("message.", arrays, len(index))
            return dict(zip(index, messages, strict=True))
        if name in (FORMS, HARD_CLASSES):
            vocabulary: list[Any] = _unpack_strings("label.", arrays, meta["labels"])
            if name == FORMS:
                vocabulary = [QuestionForm(label) for label in vocabulary]
            table = [None, *vocabulary]
            return tuple(table[code] for code in self._sized(arrays["codes"], name).tolist())
        if name == DOCUMENTS:
            suffixes = _unpack_bytes("suffix.", arrays, meta["count"])
            return tuple(_front_decode(arrays["shared"].tolist(), suffixes))
        if name in (RANKINGS, JUDGMENTS):
            lengths = self._sized(arrays["lengths"], name).astype(np.int64)
            offsets = np.zeros(count + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            codes = _read_only(arrays["codes"].astype(np.int64))
            _check_offsets(offsets, count, len(codes), name)
            _check_codes(codes, len(self.documents), name)
            if name == RANKINGS:
                return Rankings(_read_only(offsets), codes)
            grades = _read_only(arrays["grades"].astype(np.int64))
            return Judgments(_read_only(offsets), codes, grades)
        if name.startswith(METRIC_PREFIX):
            values = self._sized(_decode_floats(arrays), name)
            absent = arrays.get("absent")
            mask = None if absent is None else np.unpackbits(absent, count=count).astype(bool)
            return _Metric(_read_only(values), None if mask is None else _read_only(mask))
        raise KeyError(name)

    def _sized(self, array: npt.NDArray[Any], name: str) -> npt.NDArray[Any]:
        if len(array) != self._count:
            raise ValueError(f"{len(array)} values for {self._count} questions")
        return array

    def _metric(self, metric: str) -> _Metric:
        if metric not in self._metrics:
            raise KeyError(f"no metric {metric!r} in these outcomes")
        found: _Metric = self._column(column_name(metric))
        return found

    @property
    def metric_names(self) -> tuple[str, ...]:
        """The metrics with a column, in the order the scorer gave them."""
        return self._metrics

    @property
    def errored(self) -> int:
        """How many questions errored (known without reading any column)."""
        return self._errored

    @property
    def question_ids(self) -> tuple[str, ...]:
        found: tuple[str, ...] = self._column(QUESTION_IDS)
        return found

    def values(self, metric: str) -> FloatArray:
        """``metric``'s value for each question, float64, NaN where undefined; read-only.

        Raises ``KeyError`` for a metric the run has no column for.
        """
        return self._metric(metric).values

    @property
    def latency_ms(self) -> FloatArray:
        found: FloatArray = self._column(LATENCY)
        return found

    @property
    def errors(self) -> Mapping[int, str]:
        """Question index -> error message, for the questions that errored."""
        found: Mapping[int, str] = self._column(ERRORS)
        return found

    @property
    def forms(self) -> tuple[QuestionForm | None, ...]:
        found: tuple[QuestionForm | None, ...] = self._column(FORMS)
        return found

    @property
    def hard_classes(self) -> tuple[str | None, ...]:
        found: tuple[str | None, ...] = self._column(HARD_CLASSES)
        return found

    @property
    def documents(self) -> tuple[str, ...]:
        """The document ids `rankings` and `judgments` index.

        As given to `from_arrays`; read back from the stored form, only the ids the run
        uses, sorted, each once.
        """
        found: tuple[str, ...] = self._column(DOCUMENTS)
        return found

    @property
    def rankings(self) -> Rankings:
        found: Rankings = self._column(RANKINGS)
        return found

    @property
    def judgments(self) -> Judgments:
        found: Judgments = self._column(JUDGMENTS)
        return found

    def index_of(self, question_id: str) -> int:
        """The position of ``question_id``; raises ``ValueError`` when it is not here."""
        if self._index is None:
            index: dict[str, int] = {}
            for position, found in enumerate(self.question_ids):
                index.setdefault(found, position)
            self._index = index
        try:
            return self._index[question_id]
        except KeyError:
            raise ValueError(f"question {question_id!r} is not in these outcomes") from None

    def ranking(self, index: int) -> tuple[str, ...]:
        """The ranking of the question at ``index``, as document ids."""
        offsets, codes = self.rankings
        documents = self.documents
        return tuple(documents[c] for c in codes[offsets[index] : offsets[index + 1]].tolist())

    # -- Sequence ------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> QuestionOutcome: ...

    @overload
    def __getitem__(self, index: slice) -> Outcomes: ...

    def __getitem__(self, index: int | slice) -> QuestionOutcome | Outcomes:
        if isinstance(index, slice):
            return self.take(range(self._count)[index])
        position = range(self._count)[index]
        return next(self._build(range(position, position + 1)))

    def __iter__(self) -> Iterator[QuestionOutcome]:
        return self._build(range(self._count))

    def _build(self, positions: range) -> Iterator[QuestionOutcome]:
        from retrievalkit.model.values import FrozenDict, QuestionOutcome

        if not positions:
            return
        start, stop = positions.start, positions.stop
        ids = self.question_ids
        names = self._metrics
        metrics = [self._metric(name) for name in names]
        if metrics:
            table = np.column_stack([m.values[start:stop] for m in metrics])
            cells = table.astype(object)
            cells[np.isnan(table)] = None
            rows = cells.tolist()
        else:
            rows = [[] for _ in positions]
        absent = [
            (name, m.absent[start:stop].tolist())
            for name, m in zip(names, metrics, strict=True)
            if m.absent is not None
        ]
        latency = self.latency_ms[start:stop].tolist()
        errors = self.errors
        forms, hard = self.forms, self.hard_classes
        documents = np.array(self.documents, dtype=object)
        ranked, labels = self.rankings, self.judgments
        r_offsets = ranked.offsets[start : stop + 1]
        r_docs = documents[ranked.codes[r_offsets[0] : r_offsets[-1]]].tolist()
        r_bounds = (r_offsets - r_offsets[0]).tolist()
        j_offsets = labels.offsets[start : stop + 1]
        j_docs = documents[labels.codes[j_offsets[0] : j_offsets[-1]]].tolist()
        j_grades = labels.grades[j_offsets[0] : j_offsets[-1]].tolist()
        j_bounds = (j_offsets - j_offsets[0]).tolist()
        for row, position in enumerate(positions):
            scores = dict(zip(names, rows[row], strict=True))
            for name, mask in absent:
                if mask[row]:
                    del scores[name]
            a, b = r_bounds[row], r_bounds[row + 1]
            c, d = j_bounds[row], j_bounds[row + 1]
            yield QuestionOutcome(
                question_id=ids[position],
                ranking=tuple(r_docs[a:b]),
                scores=FrozenDict(scores),
                latency_ms=latency[row],
                error=errors.get(position),
                form=forms[position],
                hard_class=hard[position],
                judgments=FrozenDict(zip(j_docs[c:d], j_grades[c:d], strict=True)),
            )

    def take(self, indices: Iterable[int]) -> Outcomes:
        """The outcomes at ``indices``, in that order, as a new `Outcomes`."""
        picked = np.fromiter(indices, dtype=np.int64)
        if picked.size and (picked.min() < 0 or picked.max() >= self._count):
            raise IndexError("outcome index out of range")
        ids = self.question_ids
        errors = self.errors
        new_errors = {new: errors[old] for new, old in enumerate(picked.tolist()) if old in errors}
        forms, hard = self.forms, self.hard_classes

        def ragged(offsets: IntArray, *columns: IntArray) -> tuple[IntArray, ...]:
            starts, ends = offsets[picked], offsets[picked + 1]
            lengths = ends - starts
            new_offsets = np.zeros(len(picked) + 1, dtype=np.int64)
            np.cumsum(lengths, out=new_offsets[1:])
            flat = (
                np.concatenate(
                    [np.arange(a, b) for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
                )
                if len(picked)
                else np.zeros(0, dtype=np.int64)
            ).astype(np.int64)
            return (new_offsets, *(column[flat] for column in columns))

        r_offsets, r_codes = ragged(self.rankings.offsets, self.rankings.codes)
        j = self.judgments
        j_offsets, j_codes, j_grades = ragged(j.offsets, j.codes, j.grades)
        columns: dict[str, Any] = {
            QUESTION_IDS: tuple(ids[i] for i in picked.tolist()),
            LATENCY: _read_only(self.latency_ms[picked]),
            ERRORS: new_errors,
            FORMS: tuple(forms[i] for i in picked.tolist()),
            HARD_CLASSES: tuple(hard[i] for i in picked.tolist()),
            DOCUMENTS: self.documents,
            RANKINGS: Rankings(_read_only(r_offsets), _read_only(r_codes)),
            JUDGMENTS: Judgments(_read_only(j_offsets), _read_only(j_codes), _read_only(j_grades)),
        }
        for name in self._metrics:
            metric = self._metric(name)
            absent = None if metric.absent is None else _read_only(metric.absent[picked])
            columns[column_name(name)] = _Metric(_read_only(metric.values[picked]), absent)
        return Outcomes(len(picked), len(new_errors), self._metrics, columns)

    # -- comparison ----------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Outcomes):
            return self._same_columns(other)
        if isinstance(other, (tuple, list)):
            return len(other) == self._count and all(
                a == b for a, b in zip(self, other, strict=True)
            )
        return NotImplemented

    def __hash__(self) -> int:
        # Equal to the hash of the tuple of the same outcomes, which it also equals.
        return hash(tuple(self))

    def _same_columns(self, other: Outcomes) -> bool:
        if self is other:
            return True
        if (self._count, self._errored) != (other._count, other._errored):
            return False
        if sorted(self._metrics) != sorted(other._metrics):
            return False
        if self.question_ids != other.question_ids:
            return False
        for name in self._metrics:
            mine, theirs = self._metric(name), other._metric(name)
            if not np.array_equal(mine.values, theirs.values, equal_nan=True):
                return False
            if not np.array_equal(_present(mine, self._count), _present(theirs, self._count)):
                return False
        if not np.array_equal(self.latency_ms, other.latency_ms, equal_nan=True):
            return False
        if dict(self.errors) != dict(other.errors):
            return False
        if self.forms != other.forms or self.hard_classes != other.hard_classes:
            return False
        return self._same_documents(other)

    def _same_documents(self, other: Outcomes) -> bool:
        mine, theirs = self.rankings, other.rankings
        if not np.array_equal(mine.offsets, theirs.offsets):
            return False
        mine_j, theirs_j = self.judgments, other.judgments
        if not np.array_equal(mine_j.offsets, theirs_j.offsets):
            return False
        my_docs = np.array(self.documents, dtype=object)
        their_docs = np.array(other.documents, dtype=object)
        if not np.array_equal(my_docs[mine.codes], their_docs[theirs.codes]):
            return False
        if np.array_equal(mine_j.grades, theirs_j.grades) and np.array_equal(
            my_docs[mine_j.codes], their_docs[theirs_j.codes]
        ):
            return True
        # Labels are a mapping: the same labels in another order are the same outcome.
        return all(dict(a.judgments) == dict(b.judgments) for a, b in zip(self, other, strict=True))

    def __repr__(self) -> str:
        return (
            f"Outcomes({self._count} questions, {self._errored} errored, "
            f"metrics {list(self._metrics)})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled (for example, to another process) with every column loaded.
        return (_rebuild, (self.header(), self.to_columns()))


def _rebuild(header: dict[str, Any], columns: dict[str, bytes]) -> Outcomes:
    return Outcomes.from_columns(header, columns.__getitem__)


def _present(metric: _Metric, count: int) -> npt.NDArray[np.bool_]:
    return np.ones(count, dtype=bool) if metric.absent is None else ~metric.absent


def as_outcomes(value: Iterable[QuestionOutcome]) -> Outcomes:
    """The converter of `retrievalkit.model.values.ResultRecord.outcomes`."""
    return Outcomes.from_outcomes(value)
