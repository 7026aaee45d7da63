"""Intervals and paired tests that treat a cluster of related questions as the unit.

Questions of one cluster (rewordings of one target, questions generated from one
document, a paraphrase family) are not independent: their values move together, and
an interval that counts each question as a fresh draw is too narrow. With clusters:

- every interval is a **cluster bootstrap** (`CLUSTER_BOOTSTRAP`): whole clusters are
  drawn with replacement, a resampled mean is the ratio (sum of the drawn clusters'
  values) / (their number of defined values), and the bounds are BCa's, the
  acceleration from the cluster jackknife (Field & Welsh 2007; Cameron, Gelbach &
  Miller 2008 for the cluster-robust variance), widened by sqrt(C / (C - 1)) t_{C-1} / z
  for C clusters (Hesterberg 2015's expanded interval: 1.10 at 20 clusters), because a
  bootstrap of few units is too narrow;
- a cell whose values are all 0 or 1 gets the cluster bootstrap too, but never an
  interval narrower than the Clopper-Pearson interval of its effective sample size
  with the Korn-Graubard degrees-of-freedom correction (Korn & Graubard 1998): with 20
  clusters the bootstrap alone under-covers a rate;
- the paired test is the **sign-flip test on cluster sums**: under "no difference"
  each cluster's summed difference is as likely to have either sign;
- the effective sample size is n x (independent variance of the mean) / (cluster-robust
  variance of the mean), between 1 and n; with every value equal it is unknown (None).

Without clusters none of this runs (`retrievalkit.stats.intervals` and `retrievalkit.stats.paired`
are unchanged).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import numpy as np
import numpy.typing as npt

from retrievalkit.model.values import GoldenQuestion
from retrievalkit.stats.intervals import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    Estimate,
    bca_bounds,
    clopper_pearson,
    constant_bounds,
    mean_acceleration,
)
from retrievalkit.stats.paired import (
    DEFAULT_PERMUTATIONS,
    TIE,
    PairedTest,
    p_floor,
    paired_test,
    sign_flip_p_value,
)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]

#: The interval method of every clustered cell.
CLUSTER_BOOTSTRAP = "cluster-bootstrap"
#: Prefix of a clustered paired test's p-value method (``cluster-exact``, ...).
CLUSTER_PREFIX = "cluster-"
#: The fields a set can be clustered by, besides ``meta.NAME``.
CLUSTER_FIELDS = ("cluster", "hard_class", "expected")
#: Cluster draws per batch of resamples (bounds the count matrix).
_BATCH_CELLS = 1 << 22
#: Marks the cluster resamples' stream apart from the question resamples'.
_CLUSTER_STREAM = 0xC1


@attrs.frozen
class ClusteredEstimate(Estimate):
    """An `Estimate` from a cluster bootstrap: with its cluster count and effective size."""

    clusters: int = 0
    effective_n: float | None = None


def check_cluster_by(field: str) -> str:
    """``field`` if it names a way to cluster questions; ValueError with the choices if not."""
    if not isinstance(field, str):
        raise ValueError(
            f"cannot cluster by {field!r}, which is not a string: use cluster, hard_class, "
            "expected or meta.NAME"
        )
    if field in CLUSTER_FIELDS or (field.startswith("meta.") and field[5:].strip()):
        return field
    raise ValueError(
        f"cannot cluster by {field!r}: use cluster, hard_class, expected (questions with the "
        "same expected documents) or meta.NAME"
    )


def cluster_label(question: GoldenQuestion, field: str) -> str | None:
    """The label ``question`` has for ``field`` (not ``expected``: `shared_documents`
    joins those); None: the question is a cluster of its own."""
    if field == "cluster":
        return question.cluster
    if field == "hard_class":
        return question.hard_class
    if field == "expected":
        raise ValueError("clusters by expected documents come from shared_documents")
    return question.meta.get(field[len("meta.") :])


def cluster_codes(labels: Sequence[str | None]) -> IntArray:
    """One code a question, 0 .. clusters - 1, in order of first appearance; a question
    without a label gets a code of its own."""
    codes = np.empty(len(labels), dtype=np.intp)
    seen: dict[str, int] = {}
    following = 0
    for position, label in enumerate(labels):
        code = following if label is None else seen.setdefault(label, following)
        if code == following:
            following += 1
        codes[position] = code
    return codes


def questions_clusters(questions: Sequence[GoldenQuestion], field: str) -> IntArray:
    """The cluster code of each question of a set, clustered by ``field``."""
    if field == "expected":
        return shared_documents([relevant_documents(question) for question in questions])
    return cluster_codes([cluster_label(question, field) for question in questions])


def relevant_documents(question: GoldenQuestion) -> tuple[str, ...]:
    """The documents of grade 1 or more (expected, or graded), sorted."""
    return tuple(sorted({doc for doc, grade in question.judgments().items() if grade >= 1}))


def shared_documents(documents: Sequence[Sequence[str]]) -> IntArray:
    """Cluster codes joining questions that share a relevant document, directly or through
    others (connected components); a question with none is a cluster of its own."""
    parent = list(range(len(documents)))

    def root(item: int) -> int:
        while parent[item] != item:
            parent[item] = parent[parent[item]]
            item = parent[item]
        return item

    owner: dict[str, int] = {}
    for index, relevant in enumerate(documents):
        for document in relevant:
            other = owner.setdefault(document, index)
            if other != index:
                parent[root(index)] = root(other)
    return cluster_codes([str(root(index)) for index in range(len(documents))])


def effective_sizes(
    sums: FloatArray, sizes: FloatArray, squares: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """(effective sample size, cluster-robust variance of the mean) of each column.

    ``sums`` and ``sizes`` are (clusters, cells): each cluster's sum of defined values and
    their number; ``squares`` (cells) the values' sums of squares. NaN where undefined.
    """
    total = sizes.sum(axis=0)
    present = (sizes > 0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = sums.sum(axis=0) / total
        deviations = sums - sizes * mean
        robust = present / (present - 1.0) * (deviations**2).sum(axis=0) / total**2
        spread = (squares - total * mean**2) / (total - 1.0)
        effective = np.clip(spread / robust, 1.0, total)
    effective = np.where((robust > 0) & (spread > 0) & (present > 1), effective, np.nan)
    return effective, robust


def _draw_clusters(clusters: int, size: int, seed: int, number: int) -> FloatArray:
    """Batch ``number`` of resamples: how often each cluster is drawn in each."""
    rng = np.random.default_rng((seed, _CLUSTER_STREAM, number))
    draws = rng.integers(0, clusters, size=(size, clusters))
    # One bincount over (row, cluster) cells: row r's draws land in r * clusters + draw.
    cells = (draws + (np.arange(size) * clusters)[:, None]).ravel()
    counts = np.bincount(cells, minlength=size * clusters).reshape(size, clusters)
    return counts.astype(np.float64)


def cluster_bootstrap_means(
    values: FloatArray,
    groups: npt.NDArray[np.bool_],
    clusters: IntArray,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
    value_range: tuple[float, float] = (0.0, 1.0),
    binary: bool = True,
) -> list[list[ClusteredEstimate]]:
    """Estimates for every (group, metric) pair with whole clusters as the unit.

    As `retrievalkit.stats.intervals.bootstrap_means` (``values`` (questions, metrics) with NaN
    for undefined, ``groups`` one mask per slice), but each resample draws the clusters
    of the whole run, so a slice's resampled mean reads the same draws. ``clusters``
    holds each question's cluster code (`cluster_codes`).
    """
    count, metrics = values.shape
    group_count = groups.shape[0]
    cluster_count = int(clusters.max()) + 1 if count else 0
    defined = ~np.isnan(values)
    filled = np.where(defined, values, 0.0)
    cells = group_count * metrics
    # (clusters, cells): each cluster's sum and number of defined values in each cell.
    sums = np.zeros((cluster_count, cells))
    sizes = np.zeros((cluster_count, cells))
    squares = np.zeros(cells)
    lowest = np.full(cells, np.inf)
    highest = np.full(cells, -np.inf)
    non_binary = np.zeros(cells)
    is_binary = defined & ((filled == 0.0) | (filled == 1.0))
    for group, mask in enumerate(groups):
        columns = slice(group * metrics, (group + 1) * metrics)
        members = defined & mask[:, None]
        np.add.at(sums[:, columns], clusters, filled * members)
        np.add.at(sizes[:, columns], clusters, members.astype(np.float64))
        squares[columns] = (filled**2 * members).sum(axis=0)
        non_binary[columns] = (members & ~is_binary).sum(axis=0)
        if count:
            lowest[columns] = np.where(members, values, np.inf).min(axis=0)
            highest[columns] = np.where(members, values, -np.inf).max(axis=0)
    totals = sums.sum(axis=0)
    counts = sizes.sum(axis=0)
    present = (sizes > 0).sum(axis=0)
    means = np.divide(totals, counts, out=np.full(cells, np.nan), where=counts > 0)
    effective, _ = effective_sizes(sums, sizes, squares)
    low = np.full(cells, np.nan)
    high = np.full(cells, np.nan)
    flat = (lowest == highest) & (counts > 0)
    # All values one number: the widest range a sample of that many independent clusters
    # could hide (each cluster might be one value repeated).
    low[flat], high[flat] = constant_bounds(means[flat], present[flat], confidence, value_range)
    varied = np.flatnonzero(~flat & (counts > 0))
    if varied.size and resamples > 0:
        samples = _resampled_ratios(sums[:, varied], sizes[:, varied], resamples, seed)
        deviation = sums[:, varied] - sizes[:, varied] * means[varied]
        acceleration = mean_acceleration((deviation**3).sum(axis=0), (deviation**2).sum(axis=0))
        low[varied], high[varied] = bca_bounds(samples, means[varied], acceleration, confidence)
        widen = _expansion(present[varied], confidence)
        low[varied] = means[varied] - (means[varied] - low[varied]) * widen
        high[varied] = means[varied] + (high[varied] - means[varied]) * widen
        low[varied] = np.maximum(np.minimum(low[varied], means[varied]), lowest[varied])
        high[varied] = np.minimum(np.maximum(high[varied], means[varied]), highest[varied])
    if binary:
        rates = np.flatnonzero((non_binary == 0) & (counts > 0) & ~flat)
        if rates.size:
            floor_low, floor_high = _korn_graubard(
                means[rates], effective[rates], counts[rates], present[rates], confidence
            )
            low[rates] = np.fmin(low[rates], floor_low)
            high[rates] = np.fmax(high[rates], floor_high)
    low = np.clip(low, *value_range)
    high = np.clip(high, *value_range)
    return _cluster_estimates(means, low, high, counts, present, effective, group_count, metrics)


def _cluster_estimates(
    means: FloatArray,
    low: FloatArray,
    high: FloatArray,
    counts: FloatArray,
    present: FloatArray,
    effective: FloatArray,
    group_count: int,
    metrics: int,
) -> list[list[ClusteredEstimate]]:
    """One estimate a (group, metric) cell, from the cells' flat arrays."""
    estimates: list[list[ClusteredEstimate]] = []
    for group in range(group_count):
        row: list[ClusteredEstimate] = []
        for metric in range(metrics):
            cell = group * metrics + metric
            size = int(counts[cell])
            if size == 0:
                row.append(ClusteredEstimate(None, None, None, 0))
                continue
            known = not np.isnan(low[cell])
            row.append(
                ClusteredEstimate(
                    float(means[cell]),
                    float(low[cell]) if known else None,
                    float(high[cell]) if known else None,
                    size,
                    CLUSTER_BOOTSTRAP if known else None,
                    clusters=int(present[cell]),
                    effective_n=None
                    if np.isnan(effective[cell])
                    else round(float(effective[cell]), 1),
                )
            )
        estimates.append(row)
    return estimates


def _expansion(clusters: FloatArray, confidence: float) -> FloatArray:
    """How much wider than the bootstrap's an interval over few clusters is made: by
    sqrt(C / (C - 1)) t_{C-1} / z (Hesterberg 2015's expanded percentile interval), which
    the bootstrap of C units misses (it divides by C, and uses normal tails)."""
    from scipy.special import ndtri, stdtrit

    level = (1.0 + confidence) / 2.0
    units = np.maximum(clusters, 2.0)
    factor = np.sqrt(units / (units - 1.0)) * stdtrit(units - 1.0, level) / ndtri(level)
    return np.asarray(factor, dtype=np.float64)


def _resampled_ratios(sums: FloatArray, sizes: FloatArray, resamples: int, seed: int) -> FloatArray:
    """(resamples, cells): resampled means, whole clusters drawn with replacement."""
    cluster_count = sums.shape[0]
    batch = max(1, min(resamples, _BATCH_CELLS // max(cluster_count, 1)))
    parts = []
    for number, first in enumerate(range(0, resamples, batch)):
        counts = _draw_clusters(cluster_count, min(batch, resamples - first), seed, number)
        top = counts @ sums
        bottom = counts @ sizes
        parts.append(np.divide(top, bottom, out=np.full_like(top, np.nan), where=bottom > 0))
    return np.concatenate(parts)


def _korn_graubard(
    means: FloatArray,
    effective: FloatArray,
    counts: FloatArray,
    present: FloatArray,
    confidence: float,
) -> tuple[FloatArray, FloatArray]:
    """The Clopper-Pearson interval of a rate at its effective sample size, shrunk by
    (t quantile at n - 1 / t quantile at clusters - 1)^2 (Korn & Graubard 1998)."""
    from scipy.special import stdtrit

    level = (1.0 + confidence) / 2.0
    size = np.where(np.isnan(effective), present, effective)
    with np.errstate(invalid="ignore", divide="ignore"):
        shrink = (
            stdtrit(np.maximum(counts - 1, 1), level) / stdtrit(np.maximum(present - 1, 1), level)
        ) ** 2
    size = np.minimum(size * shrink, counts)
    return clopper_pearson(means * size, size, confidence)


def cluster_sums(differences: FloatArray, clusters: IntArray) -> FloatArray:
    """Each cluster's sum of ``differences`` (clusters without a value are left out)."""
    cluster_count = int(clusters.max()) + 1 if len(clusters) else 0
    totals = np.bincount(clusters, weights=differences, minlength=cluster_count)
    held = np.bincount(clusters, minlength=cluster_count) > 0
    return np.asarray(totals[held], dtype=np.float64)


def paired_test_by(
    baseline: FloatArray,
    candidate: FloatArray,
    *,
    clusters: IntArray | None,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
    permutations: int = DEFAULT_PERMUTATIONS,
) -> PairedTest:
    """The paired test with whole clusters as the unit when ``clusters`` (each question's
    cluster code) is given, else `retrievalkit.stats.paired.paired_test` of the questions."""
    if clusters is None:
        return paired_test(
            baseline,
            candidate,
            resamples=resamples,
            confidence=confidence,
            seed=seed,
            permutations=permutations,
        )
    return clustered_paired_test(
        baseline,
        candidate,
        clusters,
        resamples=resamples,
        confidence=confidence,
        seed=seed,
        permutations=permutations,
    )


def clustered_paired_test(
    baseline: FloatArray,
    candidate: FloatArray,
    clusters: IntArray,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
    permutations: int = DEFAULT_PERMUTATIONS,
) -> PairedTest:
    """`retrievalkit.stats.paired.paired_test` with clusters as the unit (NaN: undefined).

    The interval is the cluster bootstrap of the per-question differences; the p-value
    the sign-flip test of the clusters' summed differences (exact when enumerable, as
    the per-question test is), whose floor is 2 / 2^m for the m clusters whose sum is
    not zero. Its method is named ``cluster-`` and the per-question method.
    """
    both = ~np.isnan(baseline) & ~np.isnan(candidate)
    n = int(both.sum())
    if n == 0:
        return PairedTest(None, None, None, None, None, None, 0)
    base = baseline[both]
    cand = candidate[both]
    diff = cand - base
    _, codes = np.unique(clusters[both], return_inverse=True)
    codes = np.asarray(codes, dtype=np.intp)
    estimate = cluster_bootstrap_means(
        diff[:, None],
        np.ones((1, n), dtype=bool),
        codes,
        resamples=resamples,
        confidence=confidence,
        seed=seed,
        value_range=(-1.0, 1.0),
        binary=False,
    )[0][0]
    sums = cluster_sums(diff, codes)
    p_value, method, error = sign_flip_p_value(sums, permutations=permutations, seed=seed)
    discordant = int((np.abs(sums) > TIE).sum())
    return PairedTest(
        baseline=float(base.mean()),
        candidate=float(cand.mean()),
        difference=float(diff.mean()),
        low=estimate.low,
        high=estimate.high,
        p_value=p_value,
        n=n,
        discordant=discordant,
        p_floor=p_floor(discordant),
        p_method=CLUSTER_PREFIX + method,
        p_error=error,
        interval_method=estimate.method,
        clusters=estimate.clusters,
        effective_n=estimate.effective_n,
    )
