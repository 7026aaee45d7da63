"""The retriever contract checked on a named or built retriever (`check_retriever`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from retrievalkit.testing.rules import (
    DEFAULT_PROBES,
    LIMITS,
    Violations,
    fail,
    load_entry_point,
    name_of,
    short,
)


def check_retriever(
    factory: Callable[..., Any] | str,
    /,
    *,
    probe_questions: Sequence[str] | None = None,
    default_probes: bool = True,
    approximate: bool = False,
    **options: Any,
) -> Any:
    """Build a retriever with ``factory(**options)`` and check it keeps the retriever contract.

    ``factory`` is a retriever factory (what a ``retrievalkit.retrievers`` entry point
    names) or the entry point's name, which also checks that it is installed.
    ``probe_questions`` are questions your corpus answers: with them, at least one must
    find a document (``retriever.answers``). The kit adds `DEFAULT_PROBES`, which
    a retriever must survive but need not answer, unless ``default_probes=False`` (for a
    retriever that only knows given questions, such as the ``run`` retriever, which
    rightly raises on any other). ``approximate=True`` skips
    ``retriever.order`` and the equality part of ``retriever.batch``, for approximate
    nearest-neighbour search whose top k legitimately depends on k.

    Returns the retriever, for further tests of your own.
    """
    if isinstance(factory, str):
        factory = load_entry_point("retriever.discovery", "RETRIEVERS", factory)
    assert callable(factory)
    try:
        retriever = factory(**options)
    except Exception as error:
        fail("retriever.factory", f"calling {name_of(factory)}(**{options!r}) raised", error)
    own = list(probe_questions or ())
    questions = list(dict.fromkeys([*own, *(DEFAULT_PROBES if default_probes else ())]))
    if not questions:
        raise ValueError("default_probes=False needs probe_questions")
    found = Violations()
    with found.step():
        identifier = getattr(retriever, "identifier", None)
        if not isinstance(identifier, str) or not identifier.strip():
            fail(
                "retriever.identifier",
                f"{type(retriever).__name__}.identifier is {identifier!r}",
            )
    with found.step():  # without retrieve() nothing else can be checked
        if not callable(getattr(retriever, "retrieve", None)):
            fail("retriever.retrieve", f"{type(retriever).__name__} has no callable retrieve")
        deepest: dict[str, list[str]] = {}
        for question in questions:
            with found.step():
                deepest[question] = _check_question(retriever, question, approximate)
        answered = all(question in deepest for question in own)
        if own and answered and not any(deepest[question] for question in own):
            with found.step():
                fail(
                    "retriever.answers",
                    f"none of the {len(own)} probe questions found a document "
                    f"(e.g. {short(own[0])}); is the index empty or the corpus option wrong?",
                )
        batch = getattr(retriever, "retrieve_many", None)
        if callable(batch) and len(deepest) == len(questions):
            _check_batch(batch, questions, deepest, approximate=approximate, found=found)
    found.raise_any()
    return retriever


def _check_question(retriever: Any, question: str, approximate: bool) -> list[str]:
    """Every limit, twice the deepest: the ranking of ``max(LIMITS)`` when all rules hold."""
    rankings = {limit: _ask(retriever, question, limit) for limit in LIMITS}
    deepest = rankings[max(LIMITS)]
    again = _ask(retriever, question, max(LIMITS))
    if again != deepest:
        fail(
            "retriever.deterministic",
            f"retrieve({short(question)}, {max(LIMITS)}) gave {deepest[:5]} and then {again[:5]}",
        )
    if not approximate:
        for limit in LIMITS[:-1]:
            expected = deepest[:limit]
            if rankings[limit] != expected:
                fail(
                    "retriever.order",
                    f"retrieve({short(question)}, {limit}) gave {rankings[limit]}, but the "
                    f"first {limit} of retrieve(..., {max(LIMITS)}) are {expected}",
                )
    return deepest


def _ask(retriever: Any, question: str, limit: int) -> list[str]:
    call = f"retrieve({short(question)}, {limit})"
    try:
        ids = retriever.retrieve(question, limit)
    except Exception as error:
        fail("retriever.no-error", f"{call} raised", error)
    return _check_ranking(ids, call, limit)


def _check_ranking(ids: Any, call: str, limit: int) -> list[str]:
    if not isinstance(ids, (list, tuple)):
        fail("retriever.sequence", f"{call} returned {type(ids).__name__}")
    from retrievalkit.formats.ids import trimmed

    for rank, doc_id in enumerate(ids, start=1):
        if not isinstance(doc_id, str) or not doc_id:
            fail(
                "retriever.string-ids",
                f"{call} returned {doc_id!r} ({type(doc_id).__name__}) at rank {rank}",
            )
        if trimmed(doc_id) != doc_id:
            # Scored as the id without them, with a warning: the contract wants them gone.
            fail(
                "retriever.string-ids",
                f"{call} returned {doc_id!r} at rank {rank}, with whitespace or an invisible "
                f"character around {trimmed(doc_id)!r}",
            )
    if len(ids) > limit:
        fail("retriever.limit", f"{call} returned {len(ids)} ids")
    return list(ids)


def _check_batch(
    batch: Callable[..., Any],
    questions: list[str],
    expected: Mapping[str, list[str]],
    *,
    approximate: bool,
    found: Violations,
) -> None:
    limit = max(LIMITS)
    try:
        answers = batch(questions, limit)
    except Exception as error:
        fail("retriever.batch", f"retrieve_many({len(questions)} questions, {limit}) raised", error)
    if not isinstance(answers, (list, tuple)) or len(answers) != len(questions):
        count = len(answers) if isinstance(answers, (list, tuple)) else type(answers).__name__
        fail("retriever.batch", f"{len(questions)} questions gave {count} answers")
    for question, answer in zip(questions, answers, strict=True):
        call = f"retrieve_many([..., {short(question)}, ...], {limit})"
        with found.step():
            if isinstance(answer, BaseException):
                fail("retriever.batch", f"{call} failed where retrieve() answered", answer)
            ranking = _check_ranking(answer, call, limit)
            if not approximate and ranking != expected[question]:
                fail(
                    "retriever.batch",
                    f"{call} gave {ranking[:5]}, retrieve() gave {expected[question][:5]}",
                )
