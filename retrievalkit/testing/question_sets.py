"""The question-set provider contract (`check_question_set_provider`)."""

from __future__ import annotations

import re
import secrets
from typing import Any

from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet
from retrievalkit.testing.rules import Violations, fail, load_entry_point, name_of


def check_question_set_provider(provider: Any, /) -> list[GoldenQuestionSet]:
    """Check a question-set provider: its names, its sets, and that they are valid and stable.

    ``provider`` is a provider, a class or callable that makes one (what a
    ``retrievalkit.question_sets`` entry point may name), or the entry point's name,
    which also checks that it is installed. Returns the sets it offers.
    """
    from retrievalkit.plugins.registry import QuestionSetProvider

    if isinstance(provider, str):
        provider = load_entry_point("provider.discovery", "QUESTION_SETS", provider)
    if isinstance(provider, type) or not isinstance(provider, QuestionSetProvider):
        try:
            provider = provider()
        except Exception as error:
            fail(
                "provider.protocol",
                f"{name_of(provider)} is not a provider, and calling it",
                error,
            )
    if not isinstance(provider, QuestionSetProvider):
        fail("provider.protocol", f"{type(provider).__name__} lacks set_names() or load(name)")
    found = Violations()
    sets = []
    with found.step():
        names = _set_names(provider)
        with found.step():
            if list(_set_names(provider)) != names:
                fail("provider.names", "two calls of set_names() gave different names")
        for name in names:
            with found.step():
                golden = _load_set(provider, name)
                sets.append(golden)
                with found.step():
                    if golden.name != name:
                        fail(
                            "provider.set-name",
                            f"load({name!r}) returned a set called {golden.name!r}",
                        )
                with found.step():
                    again = _load_set(provider, name)
                    if again.content_hash != golden.content_hash:
                        fail(
                            "provider.deterministic",
                            f"two loads of {name!r} gave different questions",
                        )
                _validate_set(golden, found)
    with found.step():
        unknown = f"no-such-set-{secrets.token_hex(4)}"
        try:
            provider.load(unknown)
        except KeyError:
            pass
        except Exception as error:
            fail("provider.unknown-name", f"load({unknown!r}) raised another error", error)
        else:
            fail("provider.unknown-name", f"load({unknown!r}) returned instead of raising")
    found.raise_any()
    return sets


def _set_names(provider: Any) -> list[str]:
    try:
        names = provider.set_names()
    except Exception as error:
        fail("provider.names", "set_names() raised", error)
    if not isinstance(names, (list, tuple)) or not names:
        fail("provider.names", f"set_names() returned {names!r}")
    for name in names:
        if not isinstance(name, str) or not name or re.search(r"\s", name):
            fail("provider.names", f"set name {name!r} is not a non-empty string without spaces")
    if len(set(names)) != len(names):
        fail("provider.names", f"set_names() lists a name twice: {list(names)}")
    return list(names)


def _load_set(provider: Any, name: str) -> GoldenQuestionSet:
    try:
        golden = provider.load(name)
    except Exception as error:
        fail("provider.load", f"load({name!r}) raised", error)
    if not isinstance(golden, GoldenQuestionSet):
        fail("provider.load", f"load({name!r}) returned {type(golden).__name__}")
    return golden


def _validate_set(golden: GoldenQuestionSet, found: Violations) -> None:
    """Every question against the file rules; each bad question is its own violation."""
    from retrievalkit.errors import InputError
    from retrievalkit.formats.convert import unstructure
    from retrievalkit.formats.golden_sets import parse_question

    if not golden.questions:
        fail("provider.validates", f"set {golden.name!r} has no questions")
    seen: set[str] = set()
    for index, question in enumerate(golden.questions, start=1):
        with found.step():
            if not isinstance(question, GoldenQuestion):
                fail("provider.validates", f"question {index} is a {type(question).__name__}")
            where = f"set {golden.name!r}, question {index} ({question.id!r})"
            if question.id in seen:
                fail("provider.validates", f"{where}: the id is used twice")
            seen.add(question.id)
            data = {k: value for k, value in unstructure(question).items() if value is not None}
            try:
                parse_question(data, source=where)
            except InputError as error:
                fail("provider.validates", str(error))
