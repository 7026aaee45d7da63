"""A run's per-question outcomes by column: a typed array per metric, not an object a question.

`Outcomes` is an immutable ``Sequence[QuestionOutcome]``: indexing or iterating builds
`QuestionOutcome` values on the fly, so code written against a tuple of outcomes keeps
working. Code that reads many questions reads the columns instead:

- `Outcomes.question_ids`, `Outcomes.metric_names`;
- `Outcomes.values` (one metric, float64, NaN where undefined), `Outcomes.latency_ms`;
- `Outcomes.tokens` (model -> each question's input and output tokens, as the APIs the
  retriever called reported them; empty when none did);
- `Outcomes.errors` (question index -> message) and `Outcomes.errored`;
- `Outcomes.forms`, `Outcomes.hard_classes`, `Outcomes.question_texts` (what was asked, so
  a stored run shows its questions where its set cannot be found);
- `Outcomes.documents` with `Outcomes.rankings` and `Outcomes.judgments`, ragged
  lists in CSR form (offsets into one array of document codes).

Three ways to make one: `Outcomes.from_outcomes` (any iterable of `QuestionOutcome`),
`Outcomes.from_arrays` (the columns themselves, as a scorer computes them) and
`Outcomes.lazy` (columns read from a source on first use, as a store does).

The stored form of these columns, and reading them back lazily, is
`retrievalkit.stores.columns`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple, Protocol, overload

import numpy as np
import numpy.typing as npt

from retrievalkit.model.values import FrozenDict, QuestionForm, QuestionOutcome

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

QUESTION_IDS = "question_ids"
LATENCY = "latency_ms"
ERRORS = "errors"
FORMS = "forms"
HARD_CLASSES = "hard_classes"
QUESTION_TEXTS = "question_texts"
TOKENS = "tokens"
DOCUMENTS = "documents"
RANKINGS = "rankings"
JUDGMENTS = "judgments"
METRIC_PREFIX = "metric/"


class Rankings(NamedTuple):
    """Each question's ranking as codes into `Outcomes.documents`, in CSR form.

    Question ``i`` ranked ``documents[codes[offsets[i]:offsets[i + 1]]]``, best first.
    """

    offsets: IntArray
    """``len + 1`` non-decreasing offsets into ``codes``, starting at 0."""
    codes: IntArray


class TokenCounts(NamedTuple):
    """One model's tokens, one count a question (0 where the question spent none)."""

    input: IntArray
    output: IntArray


def token_columns(tokens: Mapping[str, Any] | None, count: int) -> dict[str, TokenCounts]:
    """``model -> (input, output)`` checked: two arrays of ``count`` whole numbers >= 0
    a model, read-only; a model whose counts are all 0 is left out."""
    found: dict[str, TokenCounts] = {}
    for model, pair in (tokens or {}).items():
        if not isinstance(model, str) or not model:
            raise ValueError("tokens must be keyed by model names")
        inputs, outputs = pair
        counts = TokenCounts(
            _int_array(inputs, "input tokens"), _int_array(outputs, "output tokens")
        )
        for array in counts:
            if array.shape != (count,):
                raise ValueError(f"the tokens of {model} must be {count} counts")
            if array.size and array.min() < 0:
                raise ValueError(f"the tokens of {model} must not be negative")
        if counts.input.any() or counts.output.any():
            found[model] = counts
    return found


class Judgments(NamedTuple):
    """Each question's labels as codes into `Outcomes.documents` with their grades (CSR)."""

    offsets: IntArray
    codes: IntArray
    grades: IntArray


def column_name(metric: str) -> str:
    """The stored column holding ``metric``'s per-question values (``metric/hit@1``)."""
    return METRIC_PREFIX + metric


def read_only(array: npt.NDArray[Any]) -> npt.NDArray[Any]:
    view: npt.NDArray[Any] = array.view()
    view.setflags(write=False)
    return view


def _int_array(values: Any, what: str) -> IntArray:
    array = np.asarray(values)
    if array.ndim != 1 or (array.size and not np.issubdtype(array.dtype, np.integer)):
        raise ValueError(f"{what} must be a one-dimensional array of integers")
    return read_only(array.astype(np.int64, copy=False))


def check_offsets(offsets: IntArray, count: int, size: int, what: str) -> None:
    if len(offsets) != count + 1 or (count + 1 and offsets[0] != 0):
        raise ValueError(f"{what} offsets must be {count + 1} values starting at 0")
    if np.any(np.diff(offsets) < 0) or offsets[-1] != size:
        raise ValueError(f"{what} offsets must not decrease and must end at {size}")


def check_codes(codes: IntArray, vocabulary: int, what: str) -> None:
    if codes.size and (codes.min() < 0 or codes.max() >= vocabulary):
        raise ValueError(f"{what} codes must index the {vocabulary} documents")


# --- encoding ---------------------------------------------------------------------------


class MetricColumn(NamedTuple):
    values: FloatArray
    absent: npt.NDArray[np.bool_] | None
    """True where the question's outcome had no value at all for the metric."""


Loader = Callable[[str], bytes]


#: How many document ids `Outcomes.document_names` decodes one by one from a store before
#: it decodes the whole vocabulary instead.
_PICKED_LIMIT = 20_000


class ColumnSource(Protocol):
    """Where the columns of lazily read outcomes come from (a store's stored form)."""

    def column(self, name: str, outcomes: Outcomes) -> Any:
        """The decoded column ``name`` of ``outcomes`` (which it may read other columns of)."""


class Outcomes(Sequence["QuestionOutcome"]):
    """The per-question outcomes of one run, by column; immutable.

    See the module documentation for the columns and the stored form. Two `Outcomes`
    are equal when every column is (undefined values equal each other); an `Outcomes`
    also equals a tuple or list of the same `QuestionOutcome` values.
    """

    __slots__ = (
        "_cache",
        "_count",
        "_errored",
        "_index",
        "_looked_up",
        "_metrics",
        "_picked",
        "_source",
    )

    def __init__(
        self,
        count: int,
        errored: int,
        metrics: Sequence[str],
        columns: dict[str, Any],
        source: ColumnSource | None = None,
    ) -> None:
        """Internal: use `from_outcomes`, `from_arrays` or `lazy`."""
        self._count = count
        self._errored = errored
        self._metrics = tuple(metrics)
        self._cache = columns
        self._source = source
        self._index: dict[str, int] | None = None
        self._picked = 0
        self._looked_up = False

    # -- construction ----------------------------------------------------------------------

    @classmethod
    def from_outcomes(cls, outcomes: Iterable[QuestionOutcome]) -> Outcomes:
        """The columns of any iterable of `QuestionOutcome` (an `Outcomes` is returned as is)."""
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
        metrics: dict[str, MetricColumn] = {}
        for position, name in enumerate(names):
            absent = None
            if not uniform:
                mask = np.fromiter((name not in i.scores for i in items), bool, count)
                absent = read_only(mask) if mask.any() else None
            metrics[name] = MetricColumn(read_only(table[:, position].copy()), absent)

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
            LATENCY: read_only(np.array([i.latency_ms for i in items], dtype=np.float64)),
            ERRORS: errors,
            FORMS: tuple(i.form for i in items),
            HARD_CLASSES: tuple(i.hard_class for i in items),
            QUESTION_TEXTS: (None,) * count,
            TOKENS: {},
            DOCUMENTS: tuple(vocabulary),
            RANKINGS: Rankings(read_only(ranking_offsets), _int_array(ranked, "ranking")),
            JUDGMENTS: Judgments(
                read_only(judgment_offsets),
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
        question_texts: Sequence[str | None] | None = None,
        documents: Sequence[str] = (),
        rankings: Rankings | tuple[npt.ArrayLike, npt.ArrayLike] | None = None,
        judgments: Judgments | tuple[npt.ArrayLike, npt.ArrayLike, npt.ArrayLike] | None = None,
        tokens: Mapping[str, tuple[npt.ArrayLike, npt.ArrayLike]] | None = None,
    ) -> Outcomes:
        """Outcomes from their columns, as a scorer computes them.

        - ``question_ids``: one id a question, in order;
        - ``values``: metric name -> one float per question (NaN: undefined). A float64
          array is taken over, not copied: do not change it afterwards;
        - ``latency_ms``: one float per question (0 when omitted);
        - ``errors``: question index -> error message, only for questions that errored;
        - ``forms`` and ``hard_classes``: one label or None a question (None when omitted);
        - ``question_texts``: what each question asked, or None (None when omitted);
        - ``documents``: the document ids that ``rankings`` and ``judgments`` index (it
          may hold more than they use, say the whole corpus: only the used ones are
          stored, each once, sorted);
        - ``rankings``: ``(offsets, codes)``, see `Rankings` (empty rankings when omitted);
        - ``judgments``: ``(offsets, codes, grades)``, see `Judgments`;
        - ``tokens``: model -> ``(input, output)``, one token count each a question, see
          `TokenCounts` (none when omitted).

        Raises ``ValueError`` when a column's length, an offset or a code does not fit.
        """
        ids = tuple(question_ids)
        count = len(ids)
        if any(not isinstance(question_id, str) for question_id in ids):
            raise ValueError("question ids must be strings")
        metrics: dict[str, MetricColumn] = {}
        for name, column in values.items():
            array = np.asarray(column, dtype=np.float64)
            if array.shape != (count,):
                raise ValueError(
                    f"values of {name} must be {count} floats, not shape {array.shape}"
                )
            metrics[name] = MetricColumn(read_only(array), None)
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
        text_column = tuple(question_texts) if question_texts is not None else (None,) * count
        for name, size in (
            ("forms", len(form_column)),
            ("hard_classes", len(hard_column)),
            ("question_texts", len(text_column)),
        ):
            if size != count:
                raise ValueError(f"{name} must hold {count} labels, not {size}")
        if any(text is not None and not isinstance(text, str) for text in text_column):
            raise ValueError("question_texts must be strings or None")
        vocabulary = documents if isinstance(documents, tuple) else tuple(documents)
        empty = np.zeros(0, dtype=np.int64)
        if rankings is None:
            ranked = Rankings(read_only(np.zeros(count + 1, dtype=np.int64)), read_only(empty))
        else:
            offsets, codes = rankings
            ranked = Rankings(_int_array(offsets, "ranking offsets"), _int_array(codes, "ranking"))
        if judgments is None:
            labels = Judgments(
                read_only(np.zeros(count + 1, dtype=np.int64)),
                read_only(empty),
                read_only(empty),
            )
        else:
            offsets, codes, grades = judgments
            labels = Judgments(
                _int_array(offsets, "judgment offsets"),
                _int_array(codes, "judgment"),
                _int_array(grades, "grade"),
            )
        check_offsets(ranked.offsets, count, len(ranked.codes), "ranking")
        check_offsets(labels.offsets, count, len(labels.codes), "judgment")
        if len(labels.grades) != len(labels.codes):
            raise ValueError("judgments need one grade per document code")
        check_codes(ranked.codes, len(vocabulary), "ranking")
        check_codes(labels.codes, len(vocabulary), "judgment")
        columns: dict[str, Any] = {
            QUESTION_IDS: ids,
            LATENCY: read_only(latency),
            ERRORS: error_map,
            FORMS: form_column,
            HARD_CLASSES: hard_column,
            QUESTION_TEXTS: text_column,
            TOKENS: token_columns(tokens, count),
            DOCUMENTS: vocabulary,
            RANKINGS: ranked,
            JUDGMENTS: labels,
        }
        columns.update({column_name(name): metric for name, metric in metrics.items()})
        return cls(count, len(error_map), list(metrics), columns)

    # -- reading columns ---------------------------------------------------------------

    @classmethod
    def lazy(
        cls, count: int, errored: int, metrics: Sequence[str], source: ColumnSource
    ) -> Outcomes:
        """Outcomes whose columns ``source`` gives on first use, each at most once.

        The length, the errored count and the metric names are known at once; a store
        reading its stored form (`retrievalkit.stores.columns.decode`) makes these.
        """
        return cls(count, errored, metrics, {}, source)

    def _column(self, name: str) -> Any:
        found = self._cache.get(name)
        if found is not None:
            return found
        if self._source is None:
            raise KeyError(name)
        decoded = self._source.column(name, self)
        self._cache[name] = decoded
        return decoded

    @property
    def source(self) -> ColumnSource | None:
        """Where columns not yet read come from (a store's), or None for outcomes in memory."""
        return self._source

    def loaded(self) -> bool:
        """Whether any column has been read or was given (always, for outcomes in memory)."""
        return bool(self._cache)

    def _metric(self, metric: str) -> MetricColumn:
        if metric not in self._metrics:
            raise KeyError(f"no metric {metric!r} in these outcomes")
        found: MetricColumn = self._column(column_name(metric))
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

    def absent(self, metric: str) -> npt.NDArray[np.bool_] | None:
        """Which questions' outcomes lacked ``metric`` altogether (not undefined: absent),
        or None when none did; read-only."""
        return self._metric(metric).absent

    @property
    def latency_ms(self) -> FloatArray:
        found: FloatArray = self._column(LATENCY)
        return found

    @property
    def tokens(self) -> Mapping[str, TokenCounts]:
        """Model -> each question's input and output tokens; empty when no question
        recorded any (and for runs stored before tokens were kept)."""
        found: Mapping[str, TokenCounts] = self._column(TOKENS)
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
    def question_texts(self) -> tuple[str | None, ...]:
        """What each question asked, as the run saw it; None where it is not known (outcomes
        built from `QuestionOutcome` values, or a run stored before texts were kept)."""
        found: tuple[str | None, ...] = self._column(QUESTION_TEXTS)
        return found

    def known_texts(self) -> dict[str, str]:
        """Question id -> text, for the questions whose text the outcomes know."""
        return {
            question_id: text
            for question_id, text in zip(self.question_ids, self.question_texts, strict=True)
            if text is not None
        }

    @property
    def documents(self) -> tuple[str, ...]:
        """The document ids `rankings` and `judgments` index.

        As given to `from_arrays`; read back from the stored form, only the ids the run
        uses, sorted, each once.
        """
        found: tuple[str, ...] = self._column(DOCUMENTS)
        return found

    @property
    def document_count(self) -> int:
        """``len(documents)``; from a store, without decoding an id."""
        table = self._cache.get(DOCUMENTS)
        counted = getattr(self._source, "document_count", None)
        if table is None and counted is not None:
            return int(counted())
        return len(self.documents)

    def document_names(self, codes: Iterable[int]) -> list[str]:
        """The ids of ``codes`` (positions in `documents`); from a store, decoding those
        alone where it can (a large run's vocabulary holds hundreds of thousands of ids,
        a page shows a few). Raises ``IndexError`` for a code outside `documents`."""
        wanted = [int(code) for code in codes]
        count = self.document_count
        for code in wanted:
            if not 0 <= code < count:
                raise IndexError(f"document code {code} is not in a vocabulary of {count}")
        table = self._cache.get(DOCUMENTS)
        picked = getattr(self._source, "document_names", None)
        # Past a few thousand ids asked one by one, decoding them all at once is cheaper.
        if table is None and picked is not None and self._picked + len(wanted) <= _PICKED_LIMIT:
            found: list[str] | None = picked(wanted)
            if found is not None:
                self._picked += len(wanted)
                return found
        documents = self.documents
        return [documents[code] for code in wanted]

    @property
    def rankings(self) -> Rankings:
        found: Rankings = self._column(RANKINGS)
        return found

    @property
    def judgments(self) -> Judgments:
        found: Judgments = self._column(JUDGMENTS)
        return found

    def first_relevant_rank(self, position: int) -> int | None:
        """1-based rank of the first document graded 1 or more in question ``position``'s
        ranking, None when there is none: read from the codes, no document id decoded."""
        ranked, labels = self.rankings, self.judgments
        codes = ranked.codes[ranked.offsets[position] : ranked.offsets[position + 1]]
        low, high = labels.offsets[position], labels.offsets[position + 1]
        relevant = labels.codes[low:high][labels.grades[low:high] >= 1]
        found = np.flatnonzero(np.isin(codes, relevant))
        return int(found[0]) + 1 if found.size else None

    def index_of(self, question_id: str) -> int:
        """The position of ``question_id``; raises ``ValueError`` when it is not here."""
        if self._index is None and not self._looked_up:
            # The first look-up scans the ids (a page of one question asks once); later
            # ones share an index of them all.
            self._looked_up = True
            try:
                return self.question_ids.index(question_id)
            except ValueError:
                raise ValueError(f"question {question_id!r} is not in these outcomes") from None
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
        return tuple(self.document_names(codes[offsets[index] : offsets[index + 1]].tolist()))

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
            LATENCY: read_only(self.latency_ms[picked]),
            ERRORS: new_errors,
            FORMS: tuple(forms[i] for i in picked.tolist()),
            HARD_CLASSES: tuple(hard[i] for i in picked.tolist()),
            QUESTION_TEXTS: tuple(self.question_texts[i] for i in picked.tolist()),
            TOKENS: token_columns(
                {model: (t.input[picked], t.output[picked]) for model, t in self.tokens.items()},
                len(picked),
            ),
            DOCUMENTS: self.documents,
            RANKINGS: Rankings(read_only(r_offsets), read_only(r_codes)),
            JUDGMENTS: Judgments(read_only(j_offsets), read_only(j_codes), read_only(j_grades)),
        }
        for name in self._metrics:
            metric = self._metric(name)
            absent = None if metric.absent is None else read_only(metric.absent[picked])
            columns[column_name(name)] = MetricColumn(read_only(metric.values[picked]), absent)
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
        mine_tokens, their_tokens = self.tokens, other.tokens
        if set(mine_tokens) != set(their_tokens) or not all(
            np.array_equal(a, b)
            for model in mine_tokens
            for a, b in zip(mine_tokens[model], their_tokens[model], strict=True)
        ):
            return False
        if dict(self.errors) != dict(other.errors):
            return False
        if self.forms != other.forms or self.hard_classes != other.hard_classes:
            return False
        # Question texts describe the questions; like a `QuestionOutcome`, equality leaves them out.
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
        # Pickled (for example, to another process) with every column read.
        names = [
            QUESTION_IDS, LATENCY, ERRORS, FORMS, HARD_CLASSES, QUESTION_TEXTS, TOKENS,
            DOCUMENTS, RANKINGS, JUDGMENTS,
        ]  # fmt: skip
        columns = {name: self._column(name) for name in names}
        columns.update({column_name(m): self._metric(m) for m in self._metrics})
        return (Outcomes, (self._count, self._errored, list(self._metrics), columns))


def _present(metric: MetricColumn, count: int) -> npt.NDArray[np.bool_]:
    return np.ones(count, dtype=bool) if metric.absent is None else ~metric.absent


def as_outcomes(value: Iterable[QuestionOutcome]) -> Outcomes:
    """The converter of `retrievalkit.model.records.ResultRecord.outcomes`."""
    return Outcomes.from_outcomes(value)
