"""The ``openai-compatible`` judge: asks a chat-completions server to grade a document 0 to 3.

The grading prompt has version `PROMPT_VERSION`, written with every label; change
the text, bump the version. Grade 1 or more means relevant, as in the rest of
retrievalkit, so the scale puts "on topic but no answer" at 0. Temperature is 0.
"""

from __future__ import annotations

import re

from retrievalkit.formats.corpus import CorpusDocument
from retrievalkit.generators.chat import ChatClient, configured_client
from retrievalkit.pipeline.authoring.judging import JudgeFailed

PROMPT_VERSION = "judge-v1"

SYSTEM_PROMPT = (
    "You judge the results of a search engine. Given a question and a document, grade how "
    "well the document answers the question:\n"
    "3 = answers it fully and directly\n"
    "2 = answers most of it\n"
    "1 = contains part of the answer, or a fact needed for it\n"
    "0 = does not help answer it, even if it is on the same topic\n"
    "Reply with the single digit only."
)

#: A digit 0 to 3 that is not part of a longer number ("10", "2.5"); "0." ends a sentence.
_GRADE = re.compile(r"(?<![\d.])([0-3])(?!\d|\.\d)")


def judge_messages(question: str, document: CorpusDocument, max_chars: int) -> list[dict[str, str]]:
    """The chat messages for one pair (the document cut at ``max_chars`` characters)."""
    title = f"Title: {document.title}\n" if document.title else ""
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {
            "role": "user",
            "content": f"Question: {question}\n\nDocument:\n<<<\n{title}"
            f"{document.text[:max_chars]}\n>>>\n\nGrade (0-3):",
        },
    ]


def parse_grade(reply: str) -> int:
    """The first standalone digit 0 to 3 in a reply ("2", "Grade: 2", '{"grade": 2}')."""
    found = _GRADE.search(reply)
    if found is None:
        shown = " ".join(reply.split())[:60]
        raise JudgeFailed(f"the reply holds no grade from 0 to 3: {shown!r}")
    return int(found.group(1))


class OpenAICompatibleJudge:
    identifier = "openai-compatible"
    prompt_version = PROMPT_VERSION

    def __init__(self, client: ChatClient, *, concurrency: int, max_document_chars: int) -> None:
        self._client = client
        self.model = client.model
        self.concurrency = concurrency
        self.max_document_chars = max_document_chars

    def grade(self, question: str, document: CorpusDocument) -> int:
        reply = self._client.complete(judge_messages(question, document, self.max_document_chars))
        return parse_grade(reply)


def create_openai_judge(
    *,
    base_url: str | None = None,
    model: str | None = None,
    api_key_env: str | None = None,
    timeout: float = 60.0,
    retries: int = 3,
    backoff: float = 1.0,
    concurrency: int = 4,
    max_document_chars: int = 6000,
    max_tokens: int = 16,
) -> OpenAICompatibleJudge:
    """Factory of the ``openai-compatible`` judge.

    Options as for the generator of the same name: ``base_url``, ``model``,
    ``api_key_env``, ``timeout`` (60), ``retries`` (3), ``backoff`` (1), ``concurrency``
    (4), ``max_document_chars`` (6000) and ``max_tokens`` (16).
    """
    client = configured_client(
        base_url=base_url,
        model=model,
        api_key_env=api_key_env,
        timeout=timeout,
        retries=retries,
        backoff=backoff,
        max_tokens=max_tokens,
        whole_numbers={"concurrency": concurrency, "max_document_chars": max_document_chars},
    )
    return OpenAICompatibleJudge(
        client, concurrency=concurrency, max_document_chars=max_document_chars
    )
