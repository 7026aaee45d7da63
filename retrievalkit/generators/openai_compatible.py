"""The ``openai-compatible`` generator: asks any chat-completions server for one question.

The prompt (version `PROMPT_VERSION`; change the text, bump the version, and
the cache asks again) asks for a paraphrase that avoids the passage's words (GAP, the
default) or a direct question in its own terms (MATCH). Temperature is 0.
"""

from __future__ import annotations

import re

from retrievalkit.corpora.providers import Chunk
from retrievalkit.generators.chat import ChatClient, configured_client
from retrievalkit.model.values import QuestionForm
from retrievalkit.pipeline.authoring.generation import GenerationFailed

PROMPT_VERSION = "generate-v1"

_LIST_MARKER = re.compile(r"^(?:[-*•]|\d{1,2}[.)])\s+")

SYSTEM_PROMPT = (
    "You write test questions for evaluating a search engine. You are shown one passage "
    "from a document collection. Write exactly one question that a user could ask and that "
    "this passage answers. Reply with the question only, on one line, without quotes, "
    "numbering or explanations."
)

FORM_INSTRUCTIONS = {
    QuestionForm.GAP: (
        "Form: GAP. Write the question the way someone who has never read the passage would "
        "ask it, in everyday words. Paraphrase: do not reuse the passage's distinctive terms, "
        "names or phrases where a common word will do, and never copy a sentence."
    ),
    QuestionForm.MATCH: (
        "Form: MATCH. Write a direct question that uses the passage's own terminology."
    ),
}


def generation_messages(chunk: Chunk, form: QuestionForm, max_chars: int) -> list[dict[str, str]]:
    """The chat messages for one chunk (the passage cut at ``max_chars`` characters)."""
    title = f"Title: {chunk.title}\n" if chunk.title else ""
    passage = chunk.text[:max_chars]
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {
            "role": "user",
            "content": f"{FORM_INSTRUCTIONS[form]}\n\n{title}Passage:\n<<<\n{passage}\n>>>",
        },
    ]


def parse_question_reply(reply: str) -> str:
    """The question in a model's reply: its first non-empty line, without labels or quotes."""
    for line in reply.splitlines():
        text = _LIST_MARKER.sub("", line.strip()).strip().strip("\"'“”`*").strip()
        for prefix in ("question:", "q:"):
            if text.lower().startswith(prefix):
                text = text[len(prefix) :].strip()
        text = text.strip("\"'“”`*").strip()
        if text:
            return text
    raise GenerationFailed("the reply holds no question")


class OpenAICompatibleGenerator:
    identifier = "openai-compatible"
    prompt_version = PROMPT_VERSION
    forms = (QuestionForm.GAP, QuestionForm.MATCH)

    def __init__(self, client: ChatClient, *, concurrency: int, max_passage_chars: int) -> None:
        self._client = client
        self.model = client.model
        self.concurrency = concurrency
        self.max_passage_chars = max_passage_chars

    def generate(self, chunk: Chunk, form: QuestionForm) -> str:
        reply = self._client.complete(generation_messages(chunk, form, self.max_passage_chars))
        return parse_question_reply(reply)


def create_openai_generator(
    *,
    base_url: str | None = None,
    model: str | None = None,
    api_key_env: str | None = None,
    timeout: float = 60.0,
    retries: int = 3,
    backoff: float = 1.0,
    concurrency: int = 4,
    max_passage_chars: int = 6000,
    max_tokens: int = 200,
) -> OpenAICompatibleGenerator:
    """Factory of the ``openai-compatible`` generator.

    Options: ``base_url`` (the API root, e.g. ``http://127.0.0.1:8000/v1``), ``model``,
    ``api_key_env`` (the environment variable holding the key; none for servers without
    keys), ``timeout`` (seconds per request, 60), ``retries`` (3), ``backoff`` (seconds
    before the first retry, doubled each time, 1), ``concurrency`` (requests at once, 4),
    ``max_passage_chars`` (6000) and ``max_tokens`` (200).
    """
    client = configured_client(
        base_url=base_url,
        model=model,
        api_key_env=api_key_env,
        timeout=timeout,
        retries=retries,
        backoff=backoff,
        max_tokens=max_tokens,
        whole_numbers={"concurrency": concurrency, "max_passage_chars": max_passage_chars},
    )
    return OpenAICompatibleGenerator(
        client, concurrency=concurrency, max_passage_chars=max_passage_chars
    )
