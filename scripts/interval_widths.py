"""Measure how wide the demo's confidence intervals are at 30, 100 and 300 questions.

The numbers in docs/golden-sets.md ("How many questions a decision needs") come from
this script:

    python scripts/interval_widths.py

It runs the built-in ``bm25-demo`` retriever on the bundled 75-question ``demo`` set,
keeps each question's hit@1 and hit@3 outcome, and then, for each set size n, draws
``--draws`` sets of n questions with replacement from those 75 outcomes (a set of n
questions that behaves like the demo). Each drawn set gets the interval ``retrievalkit
eval`` would report: :func:`retrievalkit.stats.intervals.bootstrap_means` with its defaults
(2000 resamples, 95 %, the fixed seed). The table shows the median width (high - low)
and the 10th to 90th percentile of the widths over the draws.

The paired table does the same for the difference between two retrievers (BM25 with
and without stemming, over the demo corpus), with
:func:`retrievalkit.stats.paired.paired_test`, the interval a regression verdict
shows.
"""

from __future__ import annotations

import argparse

import numpy as np

from retrievalkit.demo import DEMO_CORPUS, DemoSetProvider
from retrievalkit.metrics.definitions import DEFAULT_KS
from retrievalkit.metrics.scoring import ScoringOptions, score_run
from retrievalkit.pipeline.engine.evaluator import evaluate_questions
from retrievalkit.retrievers.bm25 import BM25Retriever, create_bm25_demo
from retrievalkit.stats.intervals import bootstrap_means
from retrievalkit.stats.paired import paired_test

SIZES = (30, 75, 100, 300)
METRICS = ("hit@1", "hit@3")


def outcomes(retriever: object) -> np.ndarray:
    """(questions, 2): hit@1 and hit@3 of each demo question."""
    questions = DemoSetProvider().load("demo").questions
    retrievals = evaluate_questions(retriever, questions, depth=max(DEFAULT_KS))
    scores = score_run(questions, retrievals, ScoringOptions(ks=DEFAULT_KS, resamples=1))
    return np.array(
        [[outcome.scores[name] for name in METRICS] for outcome in scores.outcomes], dtype=float
    )


def spread(widths: list[float]) -> str:
    low, median, high = np.percentile(widths, [10, 50, 90])
    return f"{median:.3f} ({low:.3f}-{high:.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=200, help="drawn sets per size")
    parser.add_argument("--seed", type=int, default=7, help="seed of the drawing")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)

    stemmed = outcomes(create_bm25_demo())
    unstemmed = outcomes(BM25Retriever(DEMO_CORPUS, stemmer=None, doc_id_separator="#"))
    count = len(stemmed)
    print(f"demo: {count} questions; bm25-demo hit@1 {stemmed[:, 0].mean():.3f}, ", end="")
    print(f"hit@3 {stemmed[:, 1].mean():.3f}; without stemming hit@1 {unstemmed[:, 0].mean():.3f}")
    print(f"median 95% interval width over {args.draws} drawn sets (10th-90th percentile)")
    print("| questions | hit@1 | hit@3 | paired hit@1 difference | paired hit@3 difference |")
    print("|---:|---|---|---|---|")
    everyone = np.ones((1, count), dtype=bool)
    for size in SIZES:
        single: dict[str, list[float]] = {name: [] for name in METRICS}
        paired: dict[str, list[float]] = {name: [] for name in METRICS}
        for _ in range(args.draws):
            rows = rng.integers(0, count, size=size) if size != count else np.arange(count)
            mask = np.ones((1, size), dtype=bool) if size != count else everyone
            for column, name in enumerate(METRICS):
                estimate = bootstrap_means(stemmed[rows, column : column + 1], mask)[0][0]
                assert estimate.low is not None and estimate.high is not None
                single[name].append(estimate.high - estimate.low)
                difference = paired_test(
                    unstemmed[rows, column], stemmed[rows, column], permutations=1
                )
                assert difference.low is not None and difference.high is not None
                paired[name].append(difference.high - difference.low)
            if size == count:
                break  # the demo itself: one set, no drawing
        label = f"{size} (the demo itself)" if size == count else str(size)
        cells = [spread(single[name]) for name in METRICS]
        cells += [spread(paired[name]) for name in METRICS]
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
