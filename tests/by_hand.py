"""Metric values counted here from the demo retriever's rankings, not by retrievalkit's scoring.

Tests that check a number shown by ``eval``, ``compare`` or ``report`` compare it with
these counts, so they check the number is right rather than that it did not change.
The counting follows DESIGN.md's table directly: the k best DISTINCT documents (chunk
ids ``doc#n`` collapse to ``doc``), ``expected`` documents are relevant, a no-answer
question is a hit only when nothing came back, and judged@k is undefined for it.
"""

from __future__ import annotations

from retrievalkit.demo import DemoSetProvider
from retrievalkit.formats.config import Config
from retrievalkit.model.values import GoldenQuestion
from retrievalkit.plugins.resolution import resolve_retriever

#: What eval asks a retriever for by default: the deepest k (10) times the overfetch (3).
DEPTH = 30


def demo_rankings() -> list[tuple[GoldenQuestion, list[str]]]:
    """Each demo question with bm25-demo's distinct documents, best first."""
    retriever = resolve_retriever("bm25-demo", Config()).retriever
    ranked = []
    for question in DemoSetProvider().load("demo").questions:
        ranking = retriever.retrieve(question.question, DEPTH)
        ranked.append((question, list(dict.fromkeys(doc.partition("#")[0] for doc in ranking))))
    return ranked


def hit_rate(rankings: list[tuple[GoldenQuestion, list[str]]], k: int) -> float:
    hits = 0
    for question, ranking in rankings:
        if question.expected:
            hits += any(doc in question.expected for doc in ranking[:k])
        else:
            hits += not ranking
    return hits / len(rankings)


def misses(rankings: list[tuple[GoldenQuestion, list[str]]], k: int) -> int:
    """Answerable questions with no expected document in the top k."""
    return sum(
        1
        for question, ranking in rankings
        if question.expected and not any(doc in question.expected for doc in ranking[:k])
    )


def judged_share(rankings: list[tuple[GoldenQuestion, list[str]]], k: int) -> float:
    """Mean over answerable questions that returned something: labelled share of the top k."""
    shares = []
    for question, ranking in rankings:
        top = ranking[:k]
        if not question.expected or not top:
            continue
        labelled = set(question.expected) | set(question.grades or {})
        shares.append(sum(doc in labelled for doc in top) / len(top))
    return sum(shares) / len(shares)
