"""Score-based query-performance predictors over a retriever's top k, with no labels.

Both are computed from the scores a retriever returns (`retrieve_scored`), without the
corpus-wide score the original papers subtract, which a retriever plugin cannot give:

- ``nqc@k``: normalized query commitment (Shtok et al., 2012) in its corpus-free form,
  the standard deviation of the top k scores divided by the absolute mean of those
  scores; high when the top of the ranking stands apart.
- ``wig@k``: weighted information gain (Zhou and Croft, 2007) in its corpus-free form,
  the mean of the top k scores less the mean of all scores returned, divided by the
  square root of the query's length in words.

None where fewer than two scores came back (or the mean score is 0 for NQC).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def nqc_at(scores: Sequence[float], k: int) -> float | None:
    """Corpus-free NQC of the top ``k`` scores."""
    top = np.asarray(scores[:k], dtype=np.float64)
    if top.size < 2:
        return None
    mean = float(top.mean())
    if mean == 0.0:
        return None
    return float(top.std()) / abs(mean)


def wig_at(scores: Sequence[float], k: int, query: str) -> float | None:
    """Corpus-free WIG of the top ``k`` scores for ``query``."""
    every = np.asarray(scores, dtype=np.float64)
    if every.size < 2:
        return None
    words = max(1, len(query.split()))
    return (float(every[:k].mean()) - float(every.mean())) / math.sqrt(words)
