"""The value types of retrievalkit: golden questions and sets, retrievals, outcomes, manifests.

All are frozen attrs classes, and every mapping they hold is a read-only
`FrozenDict`, so a value cannot change once made. Values hash when what they
hold does (a question, an outcome, a metric value); a manifest's retriever options may
hold lists, so a manifest and the record holding it are not promised to hash. Turning
them into JSON, TOML or database rows and back is the job of `retrievalkit.formats.convert`,
never of methods on these classes. The record that holds a run is in
`retrievalkit.model.records`.
"""

from __future__ import annotations

import enum
import hashlib
import json
import operator
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import repeat
from json.encoder import c_make_encoder  # type: ignore[attr-defined]
from json.encoder import encode_basestring as _encode_string
from typing import Any, NoReturn

import attrs


class QuestionForm(str, enum.Enum):
    """How a question relates to the wording of its target documents."""

    MATCH = "MATCH"
    """Shares vocabulary with its target."""
    GAP = "GAP"
    """An everyday rewording with little word overlap."""


def as_tuple(value: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(value)


class FrozenDict(dict[str, Any]):
    """A dict that cannot change: what the value types hold wherever they hold a mapping.

    It reads, compares and serialises as the plain dict it is built from, but every
    mutating method raises ``TypeError``. It hashes when its values do (a question's
    grades and meta, an outcome's scores); a mapping holding lists, such as retriever
    options, is read-only but unhashable, and so is the value that holds it.
    """

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(f"{type(self).__name__} is read-only; build a new value instead")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _refuse
    __ior__ = _refuse

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))

    def __reduce__(self) -> tuple[Any, ...]:
        # copy, deepcopy and pickle rebuild it whole instead of item by item.
        return (type(self), (dict(self),))

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"


def as_frozen_dict(value: Any) -> FrozenDict:
    return value if type(value) is FrozenDict else FrozenDict(value)


class LazySlices(Mapping[str, Mapping[str, Mapping[str, Any]]]):
    """A stored record's slices, read from the store the first time anything looks at them.

    History, listings and the choice of a baseline never do: a record read from a store
    that keeps its slices apart (`retrievalkit.stores.sqlite`) costs its metric table
    and manifest only. It reads and compares as the read-only mapping it stands for.
    """

    __slots__ = ("_load", "_lock", "_value")

    def __init__(self, load: Callable[[], Mapping[str, Any]]) -> None:
        self._load = load
        self._value: FrozenDict | None = None
        self._lock = threading.Lock()

    def _slices(self) -> FrozenDict:
        value = self._value
        if value is None:
            with self._lock:
                value = self._value
                if value is None:
                    value = self._value = _nested(self._load())
        return value

    def __getitem__(self, key: str) -> Mapping[str, Mapping[str, Any]]:
        found: Mapping[str, Mapping[str, Any]] = self._slices()[key]
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._slices())

    def __len__(self) -> int:
        return len(self._slices())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazySlices):
            other = other._slices()
        return self._slices() == other if isinstance(other, Mapping) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._slices())

    def __repr__(self) -> str:
        return f"LazySlices({dict.__repr__(self._value) if self._value is not None else '...'})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (as_nested, (dict(self._slices()),))


def as_nested(value: Any) -> FrozenDict | LazySlices:
    """Slices: field -> label -> metric -> value, read-only at every level."""
    if isinstance(value, LazySlices):
        return value
    return _nested(value)


def _nested(value: Any) -> FrozenDict:
    return FrozenDict(
        {
            field: FrozenDict({label: as_frozen_dict(metrics) for label, metrics in labels.items()})
            for field, labels in value.items()
        }
    )


@attrs.frozen
class GoldenQuestion:
    """One labelled question.

    ``expected`` lists ALL document ids that answer the question; any one of them is a
    hit. An empty ``expected`` (with no grade of 1 or more) declares that no indexed
    document answers it. ``grades`` maps document ids to integer grades >= 0 for graded
    metrics; grade 0 means judged not relevant. A document without a grade that is in
    ``expected`` has grade 1.
    """

    id: str
    question: str
    form: QuestionForm | None = None
    expected: tuple[str, ...] = attrs.field(default=(), converter=as_tuple)
    grades: Mapping[str, int] = attrs.field(factory=dict, converter=as_frozen_dict)
    hard_class: str | None = None
    gist: str | None = None
    meta: Mapping[str, str] = attrs.field(factory=dict, converter=as_frozen_dict)
    expected_chunks: tuple[str, ...] = attrs.field(default=(), converter=as_tuple)
    """The chunk ids that answer it, for the chunk-level metrics (``chunk_rr`` ...), which
    score the retriever's raw ranking of chunks; empty: those metrics are undefined."""
    cluster: str | None = None
    """Questions with the same ``cluster`` are related (rewordings of one target, questions
    generated from one document): ``--cluster-by cluster`` treats them as one unit."""

    def judgments(self) -> dict[str, int]:
        """Every labelled document with its grade: expected ids at grade 1 unless graded."""
        labels = dict.fromkeys(self.expected, 1)
        labels.update(self.grades)
        return labels

    @property
    def answerable(self) -> bool:
        """False for a no-answer question: nothing expected and nothing graded 1 or more."""
        return bool(self.expected) or any(grade >= 1 for grade in self.grades.values())


#: The fields of `GoldenQuestion`, in their order: the one question schema, which the set
#: readers, the canonical writer and `questions_from_columns` all follow.
QUESTION_FIELDS: tuple[str, ...] = tuple(field.name for field in attrs.fields(GoldenQuestion))


def questions_from_columns(
    ids: Sequence[str],
    texts: Sequence[str],
    forms: Sequence[QuestionForm | None],
    expected: Sequence[tuple[str, ...]],
    grades: Sequence[FrozenDict],
    hard_classes: Sequence[str | None],
    gists: Sequence[str | None],
    meta: Sequence[FrozenDict],
    expected_chunks: Sequence[tuple[str, ...]] | None = None,
    clusters: Sequence[str | None] | None = None,
) -> list[GoldenQuestion]:
    """``GoldenQuestion(id, question, form, expected, grades, hard_class, gist, meta,
    cluster)`` of each row, built a field at a time with no Python run per question
    (``clusters`` None: no question has one).

    The columns must hold what the converters would make: ``expected`` tuples, ``grades``
    and ``meta`` as `FrozenDict`. The loaders use it for large sets whose values they have
    already checked; everything else builds questions the usual way.
    """
    count = len(ids)
    questions: list[GoldenQuestion] = list(map(object.__new__, repeat(GoldenQuestion, count)))
    slots = GoldenQuestion.__dict__
    chunks = [()] * count if expected_chunks is None else expected_chunks
    cluster_column = (None,) * count if clusters is None else clusters
    columns = (
        ids,
        texts,
        forms,
        expected,
        grades,
        hard_classes,
        gists,
        meta,
        chunks,
        cluster_column,
    )
    for name, column in zip(QUESTION_FIELDS, columns, strict=True):
        if len(column) != count:
            raise ValueError(f"{len(column)} values of {name} for {count} questions")
        # A slot's own setter: the frozen class refuses setattr, not its slots.
        deque(map(slots[name].__set__, questions, column), maxlen=0)
    return questions


@attrs.frozen
class GoldenQuestionSet:
    """A named golden set; its content hash identifies the exact questions and labels."""

    name: str
    questions: tuple[GoldenQuestion, ...] = attrs.field(converter=as_tuple)
    description: str | None = None
    source: str | None = None
    """Where the set was read from (a file, a directory, or a plugin), for messages."""
    warnings: tuple[str, ...] = attrs.field(default=(), converter=as_tuple, eq=False)
    """What reading it changed, e.g. ids compared in Unicode NFC (`retrievalkit.formats.ids`)."""

    @property
    def content_hash(self) -> str:
        """sha256 of the canonical JSON of the questions (the name is not part of it).

        The canonical JSON is the list of the questions' plain data (`retrievalkit.formats.convert`)
        with sorted keys and no spaces; a question without a ``cluster`` has no such key,
        so the hash of a set without clusters is what it always was. It is hashed a slice
        of questions at a time, each question's data written with its keys already in
        order, so a large set is never held as one text.
        """
        digest = hashlib.sha256(b"[")
        questions = self.questions
        for start in range(0, len(questions), _HASHED_AT_ONCE):
            chunk = questions[start : start + _HASHED_AT_ONCE]
            text = _canonical_texts(chunk)
            if text is None:
                data = [_canonical_data(q) for q in chunk]
                text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)[1:-1]
            digest.update((b"," if start else b"") + text.encode("utf-8"))
        digest.update(b"]")
        return digest.hexdigest()


#: Questions whose canonical JSON `GoldenQuestionSet.content_hash` writes at once.
_HASHED_AT_ONCE = 4096
#: The fields of a question's plain data, in sorted order (`_canonical_data`).
HASHED_FIELDS = ("expected", "form", "gist", "grades", "hard_class", "id", "meta", "question")


def _sorted(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    return mapping if len(mapping) < 2 else dict(sorted(mapping.items()))


def _canonical_data(question: GoldenQuestion) -> dict[str, Any]:
    """``converter.unstructure(question)`` with every mapping's keys sorted, as
    ``json.dumps(..., sort_keys=True)`` would write it."""
    data: dict[str, Any] = {"expected": list(question.expected)}
    if question.expected_chunks:
        # Only when given, so that every set without chunks keeps the hash it had.
        data["expected_chunks"] = list(question.expected_chunks)
    data |= {
        "form": None if question.form is None else question.form.value,
        "gist": question.gist,
        "grades": _sorted(question.grades),
        "hard_class": question.hard_class,
        "id": question.id,
        "meta": _sorted(question.meta),
        "question": question.question,
    }
    # "cluster" sorts first; it is left out when None, as the converter leaves it out.
    return data if question.cluster is None else {"cluster": question.cluster, **data}


_CANONICAL_QUESTION = (
    '{{"expected":[{}],"form":{},"gist":{},"grades":{},"hard_class":{},"id":{},"meta":{},'
    '"question":{}}}'
).format
_FORM_JSON: dict[QuestionForm | None, str] = {None: "null"}
_FORM_JSON.update((form, f'"{form.value}"') for form in QuestionForm)
_FORMS_OR_NONE: frozenset[type] = frozenset((QuestionForm, type(None)))


def _refuse_value(value: object) -> NoReturn:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


#: The C encoder ``json.dumps`` runs, with the canonical separators, keys sorted as
#: `_sorted` sorts them (by item) and no check for cycles: one mapping, one call.
_MAPPING_JSON: Callable[[Mapping[str, Any], int], list[str]] | None = (
    None
    if c_make_encoder is None
    else c_make_encoder(None, _refuse_value, _encode_string, None, ":", ",", True, False, True)
)


def _canonical_texts(questions: Sequence[GoldenQuestion]) -> str | None:
    """What ``json.dumps([_canonical_data(q) ...], separators=(",", ":"),
    ensure_ascii=False)[1:-1]`` writes, assembled a field at a time from strings the JSON
    encoder's own string and mapping encoders write, with no dict built per question.

    None unless every text field holds a string (or None) and every form is a form; then
    the caller writes the JSON the general way.
    """
    encode_mapping = _MAPPING_JSON
    if encode_mapping is None:  # pragma: no cover - CPython always has the C encoder
        return None
    ids = list(map(_ID_OF, questions))
    texts = list(map(_TEXT_OF, questions))
    forms = list(map(_FORM_OF, questions))
    expected = list(map(_EXPECTED_OF, questions))
    grades = list(map(_GRADES_OF, questions))
    hard_classes = list(map(_HARD_CLASS_OF, questions))
    gists = list(map(_GIST_OF, questions))
    meta = list(map(_META_OF, questions))
    if not _FORMS_OR_NONE.issuperset(map(type, forms)) or any(map(_CHUNKS_OF, questions)):
        return None
    if any(cluster is not None for cluster in map(_CLUSTER_OF, questions)):
        return None
    encode = _encode_string
    try:
        # The string encoder refuses anything but a string.
        classes = {value: encode(value) for value in set(hard_classes) if value is not None}
        classes[None] = "null"
        return ",".join(
            map(
                _CANONICAL_QUESTION,
                map(",".join, map(map, repeat(encode), expected)),
                map(_FORM_JSON.__getitem__, forms),
                ["null" if gist is None else encode(gist) for gist in gists],
                ["".join(encode_mapping(labels, 0)) if labels else "{}" for labels in grades],
                map(classes.__getitem__, hard_classes),
                map(encode, ids),
                ["".join(encode_mapping(labels, 0)) if labels else "{}" for labels in meta],
                map(encode, texts),
            )
        )
    except TypeError:
        return None


_ID_OF = operator.attrgetter("id")
_TEXT_OF = operator.attrgetter("question")
_FORM_OF = operator.attrgetter("form")
_EXPECTED_OF = operator.attrgetter("expected")
_GRADES_OF = operator.attrgetter("grades")
_HARD_CLASS_OF = operator.attrgetter("hard_class")
_GIST_OF = operator.attrgetter("gist")
_META_OF = operator.attrgetter("meta")
_CHUNKS_OF = operator.attrgetter("expected_chunks")
_CLUSTER_OF = operator.attrgetter("cluster")


@attrs.frozen
class Retrieval:
    """What one question got from a retriever: distinct ranked document ids, best first,
    or the error that replaced them (then the ranking is empty)."""

    ranking: tuple[str, ...] = attrs.field(converter=as_tuple)
    latency_ms: float
    error: str | None = None
    returned: int = 0
    """How many ids the retriever returned, before duplicates collapsed."""
    usage: Mapping[str, tuple[int, int]] | None = None
    """The tokens the question spent, model -> (input, output) (`retrievalkit.usage`);
    None when nothing was recorded."""


@attrs.frozen
class MetricValue:
    """A mean with its interval. ``mean`` is None where every value is undefined."""

    mean: float | None
    ci: tuple[float, float] | None
    n: int
    """How many questions had a defined value."""
    method: str | None = None
    """How ``ci`` was computed: ``clopper-pearson`` (0/1 values), ``bca`` (bootstrap),
    ``constant`` (all values equal), or ``percentile`` (records of schema 1); None
    without an interval. See `retrievalkit.stats.intervals`."""
    clusters: int | None = None
    """With ``--cluster-by``: the clusters the values fell in (``method`` is then
    ``cluster-bootstrap``); None for a run of independent questions."""
    effective_n: float | None = None
    """With ``--cluster-by``: the effective sample size, n x (the variance of the mean of
    independent questions) / (its cluster-robust variance); None without clusters."""


@attrs.frozen
class QuestionOutcome:
    """What happened to one question in a run."""

    question_id: str
    ranking: tuple[str, ...] = attrs.field(converter=as_tuple)
    """The best distinct document ids, best first, as scored."""
    scores: Mapping[str, float | None] = attrs.field(converter=as_frozen_dict)
    """Metric name to value; None where the metric is undefined for this question."""
    latency_ms: float
    error: str | None = None
    form: QuestionForm | None = None
    hard_class: str | None = None
    judgments: Mapping[str, int] = attrs.field(factory=dict, converter=as_frozen_dict)
    """The labels the question was scored against (expected ids at grade 1 unless graded)."""

    @property
    def expected(self) -> list[str]:
        return [doc for doc, grade in self.judgments.items() if grade >= 1]


def _optional_tuple(value: Iterable[float] | None) -> tuple[float, ...] | None:
    return None if value is None else tuple(value)


@attrs.frozen
class Machine:
    """The machine a run was timed on and how its questions were asked, so that two runs'
    latencies are compared knowing whether they are comparable (`retrievalkit gate`
    warns when they are not)."""

    cpu: str | None
    """The CPU's model name (``/proc/cpuinfo``, else ``platform.processor()``); None unknown."""
    cores: int | None
    """Logical cores (``os.cpu_count()``)."""
    load_at_start: tuple[float, ...] | None = attrs.field(converter=_optional_tuple)
    """The 1, 5 and 15 minute load averages before the first question; None where the
    system has none."""
    load_at_end: tuple[float, ...] | None = attrs.field(converter=_optional_tuple)
    """The load averages after the last answer."""
    python: str
    """The Python version (``3.12.1``)."""
    concurrency: int
    repeat: int
    """Times each question was asked (its latency the median, its ranking the first)."""
    warmup: int
    """Questions asked and discarded before the run."""


@attrs.frozen
class Manifest:
    """What produced a run, so two runs can be told apart and reproduced."""

    retrievalkit_version: str
    set_name: str
    set_hash: str
    retriever: str
    plugin: str
    retriever_options: Mapping[str, Any] = attrs.field(converter=as_frozen_dict)
    """The options as given, with secrets redacted."""
    retriever_options_hash: str
    created_at: str
    ks: tuple[int, ...] = attrs.field(converter=as_tuple)
    overfetch: int
    confidence: float
    resamples: int
    seed: int
    git_commit: str | None = None
    extra: Mapping[str, str] = attrs.field(factory=dict, converter=as_frozen_dict)
    embedding_backend: str | None = None
    """Where the vectors live (``embedded``, ``elasticsearch``, ...); None without vectors."""
    embedding_model_id: str | None = None
    """The embedder's ``model_id`` that made the vectors; None without vectors."""
    plugin_packages: Mapping[str, str] = attrs.field(factory=dict, converter=as_frozen_dict)
    """Package name -> version of each plugin the run used (the retriever's, the set's)."""
    retriever_identifier: str | None = None
    """What the retriever calls itself (its ``identifier``), when it has one."""
    machine: Machine | None = None
    """The machine the latencies were measured on; None for runs stored before it was
    recorded (and for runs built without asking a retriever)."""
    costs: Mapping[str, Any] = attrs.field(factory=dict, converter=as_frozen_dict)
    """``[costs]`` in effect for the run: model -> ``{"input", "output"}``, the price of
    1,000 tokens; empty when none was given (the run's tokens then have no cost)."""
