"""Write golden questions from corpus chunks with a generator plugin, through a replay cache.

A ``retrievalkit.generators`` entry point is a factory called with keyword options
that returns a `QuestionGenerator`. Every generated question expects its
chunk's document, records the form the generator aimed at, and carries in ``meta``
who wrote it and its lexical overlap with the chunk (see `lexical_overlap`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import attrs

from retrievalkit.corpora.providers import Chunk, is_clean_id
from retrievalkit.errors import EvaluationError, InputError
from retrievalkit.generators.chat import ChatError
from retrievalkit.model.values import GoldenQuestion, QuestionForm

DEFAULT_CACHE_DIR = Path(".retrievalkit") / "generation-cache"

#: A question whose overlap with its chunk is at least this is a near-quote.
NEAR_QUOTE = 0.8
#: Below this overlap a question is a real rewording (the ``low`` band).
LOW_OVERLAP = 0.5
#: ``generate`` warns when more than this share of the questions are near-quotes.
NEAR_QUOTE_WARNING_SHARE = 0.5

_STOPWORD_TEXT = """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
"""
#: Words too common to say anything about overlap; left out of both sides.
STOPWORDS = frozenset(_STOPWORD_TEXT.split())

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


class GenerationFailed(EvaluationError):
    """A generator could not write a question for a chunk; the message is safe to show."""


@runtime_checkable
class QuestionGenerator(Protocol):
    """What a ``retrievalkit.generators`` factory returns.

    ``identifier``, ``model`` and ``prompt_version`` go into the cache key and into each
    question's ``meta``: change the prompt, bump its version. ``forms`` lists the forms
    it can aim at, the default first. It may have a ``concurrency`` attribute (how many
    chunks to ask about at once; 1 when absent); ``generate`` must then be thread-safe.
    """

    identifier: str
    model: str
    prompt_version: str
    forms: tuple[QuestionForm, ...]

    def generate(self, chunk: Chunk, form: QuestionForm) -> str:
        """The question text; raises on failure (the chunk is then counted as failed)."""
        ...


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    import Stemmer

    return Stemmer.Stemmer("english")


def content_tokens(text: str) -> list[str]:
    """Lower-cased, Snowball-stemmed words without stopwords, as a keyword engine sees them."""
    words = [word for word in _TOKEN.findall(text.lower()) if word not in STOPWORDS]
    return list(_stemmer().stemWords(words))


def lexical_overlap(question: str, chunk_text: str) -> float | None:
    """Share of the question's distinct content tokens that occur in the chunk.

    1.0 means every meaningful word of the question is in its chunk: a keyword engine
    finds it almost for free. None when the question has no content token at all.
    """
    asked = set(content_tokens(question))
    if not asked:
        return None
    present = set(content_tokens(chunk_text))
    return len(asked & present) / len(asked)


def overlap_band(overlap: float) -> str:
    """``high`` (near-quote), ``medium`` or ``low``: a meta field to slice results by."""
    if overlap >= NEAR_QUOTE:
        return "high"
    return "medium" if overlap >= LOW_OVERLAP else "low"


class GenerationCache:
    """Generated questions on disk, one JSON file per (chunk, generator, model, prompt, form).

    Only successes are cached, so a failed chunk is asked again on the next run.
    Entries hold no options and no secrets: the question and what produced it.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @staticmethod
    def key(chunk: Chunk, generator: QuestionGenerator, form: QuestionForm) -> str:
        parts = [
            chunk.content_hash,
            generator.identifier,
            generator.model,
            generator.prompt_version,
            form.value,
        ]
        return hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> str | None:
        try:
            entry = json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # missing or damaged: a miss, rewritten after the next success
        question = entry.get("question") if isinstance(entry, dict) else None
        return question if isinstance(question, str) and question.strip() else None

    def put(self, key: str, entry: dict[str, str]) -> None:
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # Write then rename, so a crash or a parallel run never leaves half an entry.
            handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                json.dump(entry, stream, sort_keys=True, ensure_ascii=False)
            os.replace(temporary, path)
        except OSError as error:
            raise InputError(
                f"cannot write the generation cache: {error.strerror}",
                source=str(self.directory),
                field="--cache",
            ) from None


@attrs.frozen
class GenerationFailure:
    chunk_id: str
    error: str


@attrs.frozen
class GenerationResult:
    """The questions written, in corpus order, and every chunk that failed, with why."""

    questions: tuple[GoldenQuestion, ...]
    failures: tuple[GenerationFailure, ...]
    replayed: int
    """Questions taken from the cache."""
    calls: int
    """Times the generator was asked (0 when everything was replayed)."""

    @property
    def near_quotes(self) -> int:
        return sum(1 for question in self.questions if question.meta.get("overlap_band") == "high")


def question_id_for(chunk: Chunk, taken: set[str]) -> str:
    """``gen-`` and the chunk id, made a valid, unique question id."""
    base = "gen-" + "".join(ch if is_clean_id(ch) else "_" for ch in chunk.id)
    candidate, number = base, 1
    while candidate in taken:
        number += 1
        candidate = f"{base}-{number}"
    taken.add(candidate)
    return candidate


def generate_questions(
    chunks: Sequence[Chunk],
    generator: QuestionGenerator,
    form: QuestionForm,
    *,
    cache: GenerationCache | None,
    regenerate: bool = False,
    progress: Callable[[int], None] | None = None,
) -> GenerationResult:
    """One question per chunk that succeeds; a failure is recorded, never dropped silently."""
    advance = progress or (lambda _: None)
    keys = [GenerationCache.key(chunk, generator, form) for chunk in chunks]
    texts: list[str | None] = [None] * len(chunks)
    errors: list[str | None] = [None] * len(chunks)
    pending: list[int] = []
    for index, key in enumerate(keys):
        cached = None if regenerate or cache is None else cache.get(key)
        if cached is None:
            pending.append(index)
        else:
            texts[index] = cached
            advance(1)
    replayed = len(chunks) - len(pending)

    def ask(index: int) -> tuple[int, str | None, str | None]:
        try:
            text = generator.generate(chunks[index], form)
            if not isinstance(text, str) or not text.strip():
                raise GenerationFailed("the generator returned no question")
            return index, text.strip(), None
        except Exception as error:
            return index, None, _describe(error)

    concurrency = max(1, int(getattr(generator, "concurrency", 1) or 1))
    moment = dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()
    outcomes: Iterable[tuple[int, str | None, str | None]]
    if concurrency == 1 or len(pending) <= 1:
        outcomes = map(ask, pending)
        pool = None
    else:
        pool = ThreadPoolExecutor(max_workers=concurrency)
        outcomes = pool.map(ask, pending)
    try:
        for index, text, error in outcomes:
            advance(1)
            if text is None:
                errors[index] = error
                continue
            texts[index] = text
            if cache is not None:
                cache.put(
                    keys[index],
                    {
                        "question": text,
                        "form": form.value,
                        "generator": generator.identifier,
                        "model": generator.model,
                        "prompt_version": generator.prompt_version,
                        "chunk_hash": chunks[index].content_hash,
                        "created_at": moment,
                    },
                )
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    from retrievalkit.formats.golden_sets import parse_question

    questions: list[GoldenQuestion] = []
    failures: list[GenerationFailure] = []
    taken: set[str] = set()
    for chunk, text, error in zip(chunks, texts, errors, strict=True):
        if text is None:
            failures.append(GenerationFailure(chunk.id, error or "no question"))
            continue
        meta = {
            "source": "generated",
            "generator": generator.identifier,
            "model": generator.model,
            "prompt_version": generator.prompt_version,
            "chunk": chunk.id,
        }
        overlap = lexical_overlap(text, f"{chunk.title}\n{chunk.text}")
        if overlap is not None:
            meta["lexical_overlap"] = f"{overlap:.2f}"
            meta["overlap_band"] = overlap_band(overlap)
        data = {
            "id": question_id_for(chunk, taken),
            "question": text,
            "form": form.value,
            "expected": [chunk.document_id],
            "meta": meta,
        }
        try:
            questions.append(parse_question(data, source=f"chunk {chunk.id}"))
        except InputError as invalid:
            failures.append(GenerationFailure(chunk.id, f"not a valid question: {invalid}"))
    return GenerationResult(tuple(questions), tuple(failures), replayed, len(pending))


def _describe(error: BaseException) -> str:
    text = " ".join(str(error).split())
    name = type(error).__name__
    if isinstance(error, (GenerationFailed, ChatError)):
        return text or name
    return f"{name}: {text}" if text else name
