"""The ``offline`` generator: a deterministic MATCH question from a chunk's key sentence.

It needs no model and no network, so the whole pipeline runs anywhere and tests need
no server. The key sentence is the one whose content words are most frequent in the
chunk and its title (the earliest wins a tie); the question asks about that sentence's
first content words, in the chunk's own words. Such questions are near-quotes by
construction: they measure whether a retriever finds a chunk by its vocabulary (MATCH),
and flatter keyword search. Use a model-backed generator for GAP questions.
"""

from __future__ import annotations

import re
from collections import Counter

from retrievalkit.corpora.providers import Chunk
from retrievalkit.model.values import QuestionForm
from retrievalkit.pipeline.authoring.generation import STOPWORDS, GenerationFailed

PROMPT_VERSION = "offline-key-sentence-v1"
#: How many of the key sentence's content words the question names.
QUESTION_WORDS = 8

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n\s*\n")
_WORD = re.compile(r"[^\W_]+(?:[-'][^\W_]+)*", re.UNICODE)


#: Words that carry no topic: discourse markers, and abstract section labels in capitals.
#: Numbers are left out too (``95 CI 25 4`` is no question).
_FILLER = frozenset(
    [
        "however",
        "moreover",
        "furthermore",
        "thus",
        "therefore",
        "also",
        "although",
        "whereas",
        "yet",
        "here",
    ]
)
_SECTION_LABELS = frozenset(
    [
        "BACKGROUND",
        "METHODS",
        "RESULTS",
        "CONCLUSION",
        "CONCLUSIONS",
        "OBJECTIVE",
        "OBJECTIVES",
        "INTRODUCTION",
        "ABSTRACT",
        "PURPOSE",
        "DESIGN",
        "SETTING",
        "FINDINGS",
        "INTERPRETATION",
        "CONTEXT",
        "AIM",
        "AIMS",
    ]
)


def _content_words(text: str) -> list[str]:
    return [
        word
        for word in _WORD.findall(text)
        if word.lower() not in STOPWORDS
        and word.lower() not in _FILLER
        and any(ch.isalpha() for ch in word)
        and word not in _SECTION_LABELS
    ]


class OfflineGenerator:
    identifier = "offline"
    model = "key-sentence"
    prompt_version = PROMPT_VERSION
    forms = (QuestionForm.MATCH,)
    concurrency = 1

    def generate(self, chunk: Chunk, form: QuestionForm) -> str:
        if form is not QuestionForm.MATCH:
            raise GenerationFailed("the offline generator writes MATCH questions only")
        frequency = Counter(word.lower() for word in _content_words(f"{chunk.title}\n{chunk.text}"))
        best: tuple[float, list[str]] | None = None
        for sentence in _SENTENCE_END.split(chunk.text):
            words = _content_words(sentence.lstrip("#>-*• \t"))
            distinct = list(dict.fromkeys(word.lower() for word in words))
            if len(distinct) < 3:
                continue
            centrality = sum(frequency[word] for word in distinct) / len(distinct)
            if best is None or centrality > best[0]:
                best = (centrality, words)
        if best is None:
            raise GenerationFailed("the chunk has no sentence with three or more content words")
        chosen: list[str] = []
        seen: set[str] = set()
        for word in best[1]:
            if word.lower() not in seen:
                seen.add(word.lower())
                chosen.append(word)
            if len(chosen) == QUESTION_WORDS:
                break
        return f"What is known about {' '.join(chosen)}?"


def create_offline() -> OfflineGenerator:
    """Factory of the ``offline`` generator: takes no options."""
    return OfflineGenerator()
