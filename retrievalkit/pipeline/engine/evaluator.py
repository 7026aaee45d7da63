"""Ask a retriever every question of a set and keep what came back, question by question.

This is the only place that calls retrievers. It applies the scoring protocol's
fetching rules (ask for ``max(k) * overfetch`` ids, collapse duplicates to their first
occurrence, keep the best ``max(k)`` distinct documents) and turns every failure of a
retriever into an explicit error outcome instead of losing the question: an exception,
a broken result, or no answer within the per-question timeout. Each question is asked
with a `retrievalkit.usage.Meter` of its own, so the tokens its API calls report
(`retrievalkit.usage.record_usage`) are kept with its answer.
"""

from __future__ import annotations

import queue
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from retrievalkit.formats.ids import ReturnedIds, clean_ranking, needs_cleaning, unordered_kind
from retrievalkit.model.retrievals import Retrievals as Retrievals
from retrievalkit.model.values import GoldenQuestion
from retrievalkit.model.values import Retrieval as Retrieval
from retrievalkit.redaction import scrub
from retrievalkit.usage import Meter, QuestionMeters, metered, reset_meter, set_meter

T = TypeVar("T")

DEFAULT_OVERFETCH = 3
_BATCH = 64
#: Questions asked before their answers are handed over to be scored (`ask_in_batches`);
#: a whole number of ``retrieve_many`` groups, so the groups are those of the whole set.
STREAM_BATCH = 64 * _BATCH


ProgressCallback = Callable[[int], None]


def _ordered(ids: Any) -> bool:
    """A list, a tuple or another sequence (a NumPy array of ids too): something ranked."""
    if isinstance(ids, Sequence):
        return True
    return type(ids).__module__ == "numpy" and getattr(ids, "ndim", None) == 1


def distinct_ranking(
    ids: Any, limit: int, depth: int, notes: ReturnedIds | None = None, question: str | None = None
) -> tuple[str, ...]:
    """Validate what a retriever returned and keep the best ``depth`` distinct ids.

    Raises ``ValueError`` with a message for the report when the result breaks the
    contract: not an ordered sequence (a set or a dict has no ranking, and its order
    changes with PYTHONHASHSEED), a non-string or empty id, or more ids than asked for.
    Ids are compared as `retrievalkit.formats.ids` says (NFC, no surrounding
    whitespace or invisible characters); ``notes`` counts those that changed, with
    ``question`` (the text asked) for the warning's example.
    """
    unordered = unordered_kind(ids)
    if unordered is not None:
        raise ValueError(
            f"returned {unordered} ({type(ids).__name__}), which has no order; return a "
            "list of ids, best first"
        )
    if isinstance(ids, (str, bytes)) or not hasattr(ids, "__len__") or not _ordered(ids):
        raise ValueError(
            f"returned {type(ids).__name__} instead of a sequence of ids (a list, best first)"
        )
    if len(ids) > limit:
        raise ValueError(f"returned {len(ids)} ids for a limit of {limit}")
    try:
        # Joining succeeds exactly when every id is a string, and runs in C: the loop
        # below, run for every question, cost more than the rest of the evaluator.
        joined = "".join(ids)
    except TypeError:
        for rank, doc_id in enumerate(ids, start=1):
            if not isinstance(doc_id, str):
                raise ValueError(
                    f"returned a {type(doc_id).__name__} ({doc_id!r}) at rank {rank}; "
                    "ids are strings"
                ) from None
        raise
    if needs_cleaning(joined) or "" in ids:
        ids = clean_ranking(ids, notes, question)
    if type(ids) is list or type(ids) is tuple:
        # The first ``depth`` ids, when they are distinct, are the ranking: a set of them
        # costs a third of collapsing every id returned.
        ranking = tuple(ids[:depth])
        if len(set(ranking)) == len(ranking):
            return ranking
    return tuple(dict.fromkeys(ids))[:depth]


def describe_retriever_error(error: BaseException) -> str:
    """How a retriever's failure reads in its question's error outcome: the exception's
    kind and first line (an exit() it called is named as such)."""
    if isinstance(error, SystemExit):
        return f"SystemExit: the retriever called exit({error.code!r})"
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


_describe = describe_retriever_error


def call_with_timeout(function: Callable[[], T], timeout: float | None) -> T:
    """``function()``, run in a daemon thread when there is a timeout.

    Raises ``TimeoutError`` when no answer came within ``timeout`` seconds. The thread
    is left behind, but as a daemon it cannot keep the process alive once the run ends;
    a Ctrl-C while waiting interrupts the wait at once.
    """
    if timeout is None:
        return function()
    outcome: list[Any] = []
    done = threading.Event()

    def work() -> None:
        try:
            outcome.append((True, function()))
        except BaseException as error:  # handed over to the waiting thread below
            outcome.append((False, error))
        finally:
            done.set()

    threading.Thread(target=work, name="retrievalkit-retrieve", daemon=True).start()
    if not done.wait(timeout):
        raise TimeoutError(f"no answer within {timeout:g} s (--timeout)")
    succeeded, value = outcome[0]
    if not succeeded:
        raise value
    return value  # type: ignore[no-any-return]


class _Waiter:
    """`call_with_timeout` for calls made one after another from one thread: each call
    runs in the same daemon thread, so that a question costs no new thread.

    A call that does not answer in time is abandoned with its thread, which ends once the
    call returns (Python cannot stop it); the next call gets a new thread. `close` lets
    the thread end after its call.
    """

    def __init__(self) -> None:
        self._channel: (
            tuple[queue.SimpleQueue[Callable[[], Any] | None], queue.SimpleQueue[Any]] | None
        ) = None

    def call(self, function: Callable[[], T], timeout: float) -> T:
        if self._channel is None:
            self._channel = (queue.SimpleQueue(), queue.SimpleQueue())
            threading.Thread(
                target=_serve, args=self._channel, name="retrievalkit-retrieve", daemon=True
            ).start()
        calls, answers = self._channel
        calls.put(function)
        try:
            succeeded, value = answers.get(timeout=timeout)
        except queue.Empty:
            self.close()
            raise TimeoutError(f"no answer within {timeout:g} s (--timeout)") from None
        if not succeeded:
            raise value
        return value  # type: ignore[no-any-return]

    def close(self) -> None:
        if self._channel is not None:
            self._channel[0].put(None)
            self._channel = None


def _serve(
    calls: queue.SimpleQueue[Callable[[], Any] | None], answers: queue.SimpleQueue[Any]
) -> None:
    """A `_Waiter`'s thread: answer each call until told to stop (None)."""
    while (function := calls.get()) is not None:
        try:
            answers.put((True, function()))
        except BaseException as error:  # handed over to the waiting thread
            answers.put((False, error))


def evaluate_questions(
    retriever: Any,
    questions: Sequence[GoldenQuestion],
    *,
    depth: int,
    overfetch: int = DEFAULT_OVERFETCH,
    concurrency: int = 1,
    progress: ProgressCallback | None = None,
    timeout: float | None = None,
    secrets: Sequence[str] = (),
    notes: ReturnedIds | None = None,
    repeat: int = 1,
    warmup: int = 0,
) -> list[Retrieval]:
    """One `Retrieval` per question, in the set's order.

    ``warmup`` questions are asked first and discarded (`warm_up`); each question is
    asked ``repeat`` times, its latency the median and its ranking the first answer's.

    ``timeout`` bounds each question (a batch of n questions gets n times as long);
    ``concurrency`` is how many questions, or for a retriever with ``retrieve_many``
    how many batches, are asked at once;
    ``secrets`` are scrubbed from every error text, since a retriever's exception may
    quote its own credentials; ``notes`` counts the returned ids the identity rule
    changed (`retrievalkit.formats.ids`).
    """
    if warmup:
        warm_up(
            retriever,
            questions,
            warmup,
            depth=depth,
            overfetch=overfetch,
            concurrency=concurrency,
            timeout=timeout,
        )
    retrievals: list[Retrieval] = []
    for answered in ask_in_batches(
        retriever,
        questions,
        depth=depth,
        overfetch=overfetch,
        concurrency=concurrency,
        progress=progress,
        timeout=timeout,
        secrets=secrets,
        batch=max(1, len(questions)),
        notes=notes,
        repeat=repeat,
    ):
        retrievals += answered
    return retrievals


def ask_in_batches(
    retriever: Any,
    questions: Sequence[GoldenQuestion],
    *,
    depth: int,
    overfetch: int = DEFAULT_OVERFETCH,
    concurrency: int = 1,
    progress: ProgressCallback | None = None,
    timeout: float | None = None,
    secrets: Sequence[str] = (),
    batch: int = STREAM_BATCH,
    notes: ReturnedIds | None = None,
    repeat: int = 1,
) -> Iterator[Retrievals]:
    """`evaluate_questions` a ``batch`` of questions at a time: the retrievals of the
    next questions of the set, in order, so that a caller can score them and let them go.

    Within a batch, questions are asked exactly as `evaluate_questions` asks them
    (``concurrency`` at once, ``retrieve_many`` in groups of 64, each with its timeout).
    With ``repeat`` above 1 the batch is asked that many times: the first ask's rankings
    are kept, and each question's latency is the median of its asks.
    """
    limit = depth * overfetch
    advance = progress or (lambda _: None)

    def describe(error: BaseException) -> str:
        return scrub(describe_retriever_error(error), secrets)

    batched = callable(getattr(retriever, "retrieve_many", None))

    def ask(text: str, call: Callable[..., Any] = call_with_timeout) -> Retrieval:
        meter = Meter()
        start = time.perf_counter()
        try:
            ids = call(metered(meter, lambda: retriever.retrieve(text, limit)), timeout)
            ranking = distinct_ranking(ids, limit, depth, notes, text)
        except KeyboardInterrupt:
            raise  # an interrupted run, whoever raised it
        except BaseException as error:  # SystemExit too: that question's error outcome
            elapsed = (time.perf_counter() - start) * 1000.0
            return Retrieval((), elapsed, describe(error), usage=meter.tokens())
        elapsed = (time.perf_counter() - start) * 1000.0
        return Retrieval(ranking, elapsed, returned=len(ids), usage=meter.tokens())

    def once(texts: list[str], tell: ProgressCallback, noted: ReturnedIds | None) -> Retrievals:
        if batched:
            return _evaluate_batched(
                retriever, texts, limit, depth, tell, timeout, describe, concurrency, noted
            )
        if concurrency > 1:
            return Retrievals.of(_evaluate_concurrently(ask, texts, concurrency, tell, timeout))
        if timeout is not None:
            results = []
            for text in texts:
                results.append(ask(text, waiter.call))
                tell(1)
            return Retrievals.of(results)
        return _ask_one_by_one(
            retriever.retrieve,
            texts,
            limit,
            depth,
            tell if repeat > 1 else progress,
            describe,
            noted,
        )

    # One question after another with a timeout: each waits on the same thread.
    waiter = _Waiter()
    try:
        for low in range(0, len(questions), max(1, batch)):
            texts = [question.question for question in questions[low : low + batch]]
            if repeat <= 1:
                yield once(texts, advance, notes)
                continue
            # Asked ``repeat`` times: the first answers are scored (the returned ids
            # counted once), each question's latency is the median of its asks.
            shared = SharedProgress(advance, repeat)
            first = once(texts, shared, notes)
            asks = [first.latency_ms]
            for _ in range(repeat - 1):
                asks.append(once(texts, shared, None).latency_ms)
            yield with_median_latency(first, asks)
    finally:
        waiter.close()


def with_median_latency(first: Retrievals, asks: Sequence[Sequence[float]]) -> Retrievals:
    """``first``'s rankings, counts and errors, with each question's latency the median of
    its latencies in ``asks`` (one sequence an ask, the questions in the same order)."""
    medians = [float(statistics.median(each)) for each in zip(*asks, strict=True)]
    return Retrievals(first.rankings, medians, first.returned, first.errors, first.usage)


class SharedProgress:
    """A progress callback told of each of ``repeat`` asks of the same questions, passing
    on one question for every ``repeat`` answers, so that a bar sized to the set ends full."""

    def __init__(self, progress: ProgressCallback, repeat: int) -> None:
        self._progress, self._repeat = progress, repeat
        self._answers = self._told = 0

    def __call__(self, answered: int) -> None:
        self._answers += answered
        due = self._answers // self._repeat - self._told
        if due:
            self._told += due
            self._progress(due)


def warmup_questions(questions: Sequence[GoldenQuestion], count: int) -> list[GoldenQuestion]:
    """The questions a warm-up asks: the set's first ``count``, cycling through the set
    when it has fewer."""
    if not questions or count <= 0:
        return []
    return [questions[index % len(questions)] for index in range(count)]


def warm_up(
    retriever: Any,
    questions: Sequence[GoldenQuestion],
    count: int,
    *,
    depth: int,
    overfetch: int = DEFAULT_OVERFETCH,
    concurrency: int = 1,
    timeout: float | None = None,
) -> None:
    """Ask `warmup_questions` as a run would ask them, and discard every answer, latency
    and error: caches, connections and lazily loaded models are warm before timing. (A
    staged retriever is warmed stage by stage: `retrievalkit.pipeline.engine.warmup`.)"""
    for _ in ask_in_batches(
        retriever,
        warmup_questions(questions, count),
        depth=depth,
        overfetch=overfetch,
        concurrency=concurrency,
        timeout=timeout,
    ):
        pass


def _ask_one_by_one(
    retrieve: Callable[[str, int], Any],
    texts: list[str],
    limit: int,
    depth: int,
    progress: ProgressCallback | None,
    describe: Callable[[BaseException], str],
    notes: ReturnedIds | None = None,
) -> Retrievals:
    """Ask each question in turn, in this thread, with no timeout: what the ``ask`` of
    `ask_in_batches` does question by question, written out in one loop.

    The ids are checked as `distinct_ranking` checks them; a list or a tuple of strings
    within the limit, what retrievers return, is collapsed here without a call, and
    anything else goes through `distinct_ranking`, whose message reports it.
    """
    rankings: list[tuple[str, ...]] = []
    latencies: list[float] = []
    returned: list[int] = []
    errors: dict[int, str] = {}
    keep, took, counted = rankings.append, latencies.append, returned.append
    clock, distinct, unique, join = time.perf_counter, dict.fromkeys, set, "".join
    # One meter object for the loop, told which question is asked: cheaper than a new
    # meter and context variable a question, in the loop that asks fastest.
    meters = QuestionMeters()
    metering = set_meter(meters)
    try:
        for position, text in enumerate(texts):
            meters.at = position
            start = clock()
            try:
                ids = retrieve(text, limit)
                kind = type(ids)
                if (kind is list or kind is tuple) and len(ids) <= limit:
                    try:
                        joined = join(ids)
                    except TypeError:
                        distinct_ranking(ids, limit, depth)
                        raise
                    if needs_cleaning(joined) or "" in ids:
                        ranking = distinct_ranking(ids, limit, depth, notes, text)
                    else:
                        ranking = tuple(ids[:depth])  # as in distinct_ranking
                        if len(unique(ranking)) != len(ranking):
                            ranking = tuple(distinct(ids))[:depth]
                else:
                    ranking = distinct_ranking(ids, limit, depth, notes, text)
            except KeyboardInterrupt:
                raise  # an interrupted run, whoever raised it
            except BaseException as error:  # SystemExit too: that question's error outcome
                took((clock() - start) * 1000.0)
                keep(())
                counted(0)
                errors[position] = describe(error)
            else:
                took((clock() - start) * 1000.0)
                keep(ranking)
                counted(len(ids))
            if progress is not None:
                progress(1)
    finally:
        reset_meter(metering)
    return Retrievals(rankings, latencies, returned, errors, meters.usage(len(texts)))


def _evaluate_concurrently(
    ask: Callable[[str, Callable[..., Any]], Retrieval],
    texts: list[str],
    concurrency: int,
    advance: ProgressCallback,
    timeout: float | None = None,
) -> list[Retrieval]:
    """Ask from ``concurrency`` daemon threads; the calling thread only waits.

    Daemon threads rather than a ThreadPoolExecutor: on Ctrl-C an executor would wait
    for every queued question before the process could exit, and a hung retriever
    would keep it alive for good. With a ``timeout``, each of them waits for its
    questions on a `_Waiter` of its own.
    """
    results: list[Retrieval | None] = [None] * len(texts)
    pending: queue.Queue[int] = queue.Queue()
    finished: queue.Queue[int] = queue.Queue()
    for index in range(len(texts)):
        pending.put(index)

    def work() -> None:
        waiter = _Waiter()
        call = call_with_timeout if timeout is None else waiter.call
        try:
            while True:
                try:
                    index = pending.get_nowait()
                except queue.Empty:
                    return
                try:
                    results[index] = ask(texts[index], call)
                except KeyboardInterrupt as error:  # the run is interrupted: tell the waiter
                    interrupted.append(error)
                except BaseException as error:  # never lose a question, whatever escaped
                    results[index] = Retrieval((), 0.0, describe_retriever_error(error))
                finished.put(index)
        finally:
            waiter.close()

    interrupted: list[KeyboardInterrupt] = []
    for number in range(min(concurrency, len(texts))):
        threading.Thread(target=work, name=f"retrievalkit-ask-{number}", daemon=True).start()
    for _ in texts:
        finished.get()
        _reraise(interrupted)
        advance(1)
    return [result for result in results if result is not None]


def _reraise(interrupted: list[KeyboardInterrupt]) -> None:
    """Raise in the waiting thread a KeyboardInterrupt a retriever raised in a worker: an
    interrupted run stops, as it does when the question is asked in the main thread."""
    if interrupted:
        error = interrupted[0]
        raise KeyboardInterrupt(*error.args).with_traceback(error.__traceback__) from None


def _evaluate_batched(
    retriever: Any,
    texts: list[str],
    limit: int,
    depth: int,
    advance: ProgressCallback,
    timeout: float | None = None,
    describe: Callable[[BaseException], str] = describe_retriever_error,
    concurrency: int = 1,
    notes: ReturnedIds | None = None,
) -> Retrievals:
    """``_BATCH`` questions a call of ``retrieve_many``; ``concurrency`` calls at once."""

    def ask(batch: list[str]) -> Retrievals:
        meter = Meter()
        began = time.perf_counter()
        try:
            bound = None if timeout is None else timeout * len(batch)
            answers = call_with_timeout(
                metered(meter, lambda: list(retriever.retrieve_many(batch, limit))), bound
            )
            if len(answers) != len(batch):
                raise ValueError(
                    f"retrieve_many returned {len(answers)} rankings for {len(batch)} questions"
                )
        except KeyboardInterrupt:
            raise  # an interrupted run, whoever raised it
        except BaseException as error:  # SystemExit too: the batch's error outcomes
            answers = [error] * len(batch)
        each = (time.perf_counter() - began) * 1000.0 / len(batch)
        rankings: list[tuple[str, ...]] = []
        returned: list[int] = []
        errors: dict[int, str] = {}
        for position, answer in enumerate(answers):
            if isinstance(answer, BaseException):
                errors[position] = describe(answer)
            else:
                try:
                    rankings.append(distinct_ranking(answer, limit, depth, notes, batch[position]))
                    returned.append(len(answer))
                    continue
                except ValueError as error:
                    errors[position] = describe(error)
            rankings.append(())
            returned.append(0)
        return Retrievals(
            rankings, [each] * len(batch), returned, errors, shared_usage(meter, len(batch))
        )

    batches = [texts[start : start + _BATCH] for start in range(0, len(texts), _BATCH)]
    if concurrency <= 1 or len(batches) <= 1:
        parts: list[Retrievals] = []
        for batch in batches:
            parts.append(ask(batch))
            advance(len(batch))
        return Retrievals.joined(parts)
    return _batches_concurrently(ask, batches, concurrency, advance)


def shared_usage(meter: Meter, count: int) -> list[Any] | None:
    """The tokens of one call for ``count`` questions, shared evenly among them in whole
    tokens (the first questions take the remainder, one token each), so that the
    questions' tokens add up to the call's; None when the call recorded none."""
    spent = meter.tokens()
    if spent is None or count < 1:
        return None
    shares: list[dict[str, tuple[int, int]]] = [{} for _ in range(count)]
    for model, (inputs, outputs) in spent.items():
        for position, share in enumerate(shares):
            share[model] = (
                inputs // count + (position < inputs % count),
                outputs // count + (position < outputs % count),
            )
    return list(shares)


def _batches_concurrently(
    ask: Callable[[list[str]], Retrievals],
    batches: list[list[str]],
    concurrency: int,
    advance: ProgressCallback,
) -> Retrievals:
    """Up to ``concurrency`` batches in flight, from daemon threads, as in
    `_evaluate_concurrently`; the outcomes keep the set's order."""

    def failed(batch: list[str], error: BaseException) -> Retrievals:
        return Retrievals.of([Retrieval((), 0.0, describe_retriever_error(error))] * len(batch))

    results = in_threads(
        ask, batches, concurrency, failed=failed, done=advance, name="retrievalkit-batch"
    )
    return Retrievals.joined(results)


def in_threads(
    work: Callable[[list[str]], T],
    groups: list[list[str]],
    concurrency: int,
    *,
    failed: Callable[[list[str], BaseException], T],
    done: Callable[[int], None] | None,
    name: str,
) -> list[T]:
    """``work(group)`` of every group, up to ``concurrency`` at once on daemon threads (a
    hung retriever cannot keep the process alive), in the groups' order. Whatever a group
    raises becomes ``failed(group, error)``, so no question is ever lost; ``done`` hears
    each group's size as it finishes."""
    results: list[T | None] = [None] * len(groups)
    pending: queue.Queue[int] = queue.Queue()
    finished: queue.Queue[int] = queue.Queue()
    for index in range(len(groups)):
        pending.put(index)

    def run() -> None:
        while True:
            try:
                index = pending.get_nowait()
            except queue.Empty:
                return
            try:
                results[index] = work(groups[index])
            except KeyboardInterrupt as error:  # the run is interrupted: tell the waiter
                interrupted.append(error)
            except BaseException as error:  # never lose a question, whatever escaped
                results[index] = failed(groups[index], error)
            finished.put(index)

    interrupted: list[KeyboardInterrupt] = []
    for number in range(min(concurrency, len(groups))):
        threading.Thread(target=run, name=f"{name}-{number}", daemon=True).start()
    for _ in groups:
        index = finished.get()
        _reraise(interrupted)
        if done is not None:
            done(len(groups[index]))
    return [result for result in results if result is not None]
