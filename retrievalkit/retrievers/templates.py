"""Placeholders such as ``{question}`` in the requests that service retrievers send.

A template may name ``{question}``, ``{limit}``, ``{question_id}`` and any ``meta`` field
of the golden question (``{topic}``, or ``{meta.topic}`` when the name clashes with one of
the others). ``{{`` and ``}}`` stand for literal braces. Each value is encoded for where
it stands: a URL template percent-encodes it as one URL component; a JSON body template
is a TOML table whose string leaves are filled in, so JSON encoding happens once, on
the finished structure, and a leaf that is exactly ``"{limit}"`` becomes a number.

The retriever contract hands a retriever only the question *text*. The question's id
and meta fields are found through the ``questions`` option (the set the questions come
from, as the ``run`` retriever's ``queries`` option), matched by whitespace-normalised
text.
"""

from __future__ import annotations

import string
import urllib.parse
from collections.abc import Mapping
from typing import Any

import attrs

from retrievalkit.errors import InputError

#: The placeholders every template may use without the ``questions`` option.
BASIC = ("question", "limit")


@attrs.frozen
class QuestionContext:
    """What a template can be filled with for one question."""

    question: str
    limit: int
    question_id: str | None = None
    meta: Mapping[str, str] = attrs.field(factory=dict)

    def value(self, name: str) -> str | int:
        if name == "question":
            return self.question
        if name == "limit":
            return self.limit
        if name == "question_id":
            if self.question_id is None:
                raise LookupError("the question's id is unknown")
            return self.question_id
        field = name.removeprefix("meta.")
        if field not in self.meta:
            raise LookupError(
                f"question {self.question_id or self.question[:60]!r} has no meta field "
                f"'{field}' (its fields: {', '.join(sorted(self.meta)) or 'none'})"
            )
        return self.meta[field]


def _parts(template: str, option: str) -> list[tuple[str, str | None]]:
    """(literal text, placeholder name or None) pairs; refuses format specs and conversions."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as error:
        raise InputError(
            f"is not a valid template ({error}): {template!r}",
            field=option,
            hint="placeholders look like {question}; write {{ and }} for literal braces",
        ) from None
    parts: list[tuple[str, str | None]] = []
    for literal, name, spec, conversion in parsed:
        if name is not None and (spec or conversion):
            raise InputError(
                f"placeholder {{{name}}} takes no format spec or conversion",
                field=option,
                hint="write {question}, {limit}, {question_id} or a meta field such as {topic}",
            )
        if name is not None and not name.strip():
            raise InputError(
                "an empty placeholder {} names nothing",
                field=option,
                hint="write {question}, {limit}, {question_id} or a meta field such as {topic}",
            )
        parts.append((literal, name))
    return parts


class Template:
    """One string with placeholders, checked once, filled per question."""

    def __init__(self, template: str, option: str) -> None:
        self.text = template
        self._parts = _parts(template, option)
        self.names = tuple(name for _, name in self._parts if name is not None)

    @property
    def single(self) -> str | None:
        """The placeholder name when the template is exactly one placeholder, else None."""
        if len(self._parts) == 1 and not self._parts[0][0] and self._parts[0][1]:
            return self._parts[0][1]
        return None

    def fill(self, context: QuestionContext, *, url_component: bool = False) -> str:
        out = []
        for literal, name in self._parts:
            out.append(literal)
            if name is not None:
                value = str(context.value(name))
                out.append(urllib.parse.quote(value, safe="") if url_component else value)
        return "".join(out)


class BodyTemplate:
    """A JSON request body given as a table: placeholders in its string leaves."""

    def __init__(self, body: Any, option: str) -> None:
        self._templates: dict[str, Template] = {}
        self.names: tuple[str, ...] = ()
        self._body = body
        self._collect(body, option)

    def _collect(self, node: Any, path: str) -> None:
        if isinstance(node, Mapping):
            for key, value in node.items():
                if not isinstance(key, str):
                    raise InputError("keys must be strings", field=path)
                self._collect(value, f"{path}.{key}")
        elif isinstance(node, (list, tuple)):
            for index, value in enumerate(node):
                self._collect(value, f"{path}[{index}]")
        elif isinstance(node, str):
            template = Template(node, path)
            self._templates[node] = template
            self.names = (*self.names, *template.names)

    def fill(self, context: QuestionContext) -> Any:
        return self._fill(self._body, context)

    def _fill(self, node: Any, context: QuestionContext) -> Any:
        if isinstance(node, Mapping):
            return {key: self._fill(value, context) for key, value in node.items()}
        if isinstance(node, (list, tuple)):
            return [self._fill(value, context) for value in node]
        if isinstance(node, str):
            template = self._templates[node]
            single = template.single
            # "{limit}" alone becomes the number itself, so a service gets "size": 30.
            return context.value(single) if single is not None else template.fill(context)
        return node


def needs_question_lookup(names: tuple[str, ...]) -> bool:
    """True when the templates name the question's id or a meta field."""
    return any(name not in BASIC for name in names)


class QuestionLookup:
    """Question text -> (id, meta), from the golden set the ``questions`` option names."""

    def __init__(self, source: str, used: tuple[str, ...]) -> None:
        from retrievalkit.retrievers.run import load_queries_as_set

        self.source = source
        self._by_text: dict[str, tuple[str, Mapping[str, str]]] = {}
        golden = load_queries_as_set(source)
        for question in golden.questions:
            key = " ".join(question.question.split())
            other = self._by_text.get(key)
            if other is not None and other[0] != question.id:
                raise InputError(
                    f"questions '{other[0]}' and '{question.id}' have the same text; a "
                    "retriever sees only the text, so it cannot tell which id to send",
                    source=source,
                    field="questions",
                    hint="reword one of them",
                )
            self._by_text[key] = (question.id, question.meta)
        fields = {key for _, meta in self._by_text.values() for key in meta}
        for name in used:
            field = name.removeprefix("meta.")
            if name not in (*BASIC, "question_id") and field not in fields:
                raise InputError(
                    f"placeholder {{{name}}} is neither question, limit, question_id nor a "
                    f"meta field of any question in {source}",
                    field=name,
                    hint=f"its meta fields: {', '.join(sorted(fields)) or 'none'}",
                )

    def context(self, question: str, limit: int) -> QuestionContext:
        found = self._by_text.get(" ".join(question.split()))
        if found is None:
            raise LookupError(
                f"question {question[:60]!r} is not in {self.source}, so its id and meta "
                "fields are unknown"
            )
        return QuestionContext(question, limit, found[0], found[1])


def question_lookup(
    questions: str | None, names: tuple[str, ...], plugin: str
) -> QuestionLookup | None:
    """The lookup the templates need, or None; refuses {question_id} without ``questions``."""
    if not needs_question_lookup(names):
        return QuestionLookup(questions, names) if questions else None
    if not questions:
        first = next(name for name in names if name not in BASIC)
        raise InputError(
            f"the placeholder {{{first}}} needs the option 'questions'",
            field="questions",
            hint=f"a {plugin} retriever is given only the question text; questions names the "
            "golden set (file, [sets.NAME] or set name) its ids and meta fields come from, "
            "usually the same as --set",
        )
    return QuestionLookup(questions, names)


def context_for(lookup: QuestionLookup | None, question: str, limit: int) -> QuestionContext:
    if lookup is None:
        return QuestionContext(question, limit)
    return lookup.context(question, limit)
