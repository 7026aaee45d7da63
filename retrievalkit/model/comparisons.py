"""What a comparison of runs found: the values `retrievalkit.pipeline.gating.comparison` computes.

Plain frozen values, so that renderers can name them without importing the pipeline
that computes them (`retrievalkit.pipeline.gating.comparison.Comparison` adds the displays).
"""

from __future__ import annotations

import attrs


@attrs.frozen
class JudgedContext:
    """The unjudged-aware verdict of one difference: how much of each side's top k carries
    a label, and, when the two shares differ by more than ``margin``, the same difference
    on the condensed rankings (unjudged documents removed)."""

    measure: str
    """The judged share compared (``judged@10``; the deepest for ``rr``, ``bpref``)."""
    baseline: float | None
    candidate: float | None
    margin: float
    """How far apart the two shares may be before the condensed result is shown."""
    condensed_metric: str | None = None
    """``ndcg@10:condensed``; None when the shares are within the margin, or the metric
    has no condensed variant."""
    condensed_baseline: float | None = None
    condensed_candidate: float | None = None
    condensed_difference: float | None = None
    condensed_ci: tuple[float, float] | None = None
    condensed_p_value: float | None = None
    condensed_verdict: str | None = None
    """``significant``, ``not significant`` or ``unresolvable``, by the unadjusted p."""
    disagree: bool = False
    """The condensed difference points the other way, or only one of the two is
    significant: the difference may come from which documents were labelled."""


@attrs.frozen
class MetricDifference:
    """candidate - baseline for one metric over the questions where both are defined,
    with the paired test of `retrievalkit.stats.paired`."""

    metric: str
    baseline: float | None
    candidate: float | None
    difference: float | None
    ci: tuple[float, float] | None
    p_value: float | None
    significant: bool | None = None
    """Whether the p-value (Holm-adjusted in a comparison of several candidates) is below
    1 - confidence; None without a test."""
    n: int = 0
    """Questions compared (where both runs have a defined value)."""
    discordant: int = 0
    """Questions whose values differ: only they carry evidence."""
    p_floor: float | None = None
    """The smallest p-value attainable with ``discordant`` questions."""
    verdict: str | None = None
    """``significant``, ``not significant`` or ``unresolvable`` (the floor is not below
    alpha: no outcome of these questions could have been significant)."""
    p_method: str | None = None
    """``exact`` or ``monte-carlo``."""
    p_error: float | None = None
    """Standard error of a Monte Carlo p-value (0 when exact)."""
    ci_method: str | None = None
    """How ``ci`` was computed (see `retrievalkit.stats.intervals`)."""
    clusters: int | None = None
    """With ``--cluster-by``: the clusters compared (``discordant`` then counts clusters)."""
    effective_n: float | None = None
    """With ``--cluster-by``: the effective sample size of the differences."""
    judged: JudgedContext | None = attrs.field(default=None, kw_only=True)
    """Both sides' judged@k beside the difference, and the condensed result when they
    differ by more than `JudgedContext.margin`; None when the set has no judged@k."""


@attrs.frozen
class LatencyChange:
    """The paired change of one latency statistic between two runs of the same questions:
    the ratio candidate / baseline with its paired bootstrap interval
    (`retrievalkit.stats.latency.paired_ratios`), over the questions both runs answered."""

    statistic: str
    """``p50``, ``p95`` or ``p99``."""
    baseline: float | None
    """The baseline's statistic in milliseconds (None without a question to compare)."""
    candidate: float | None
    ratio: float | None
    """candidate / baseline; None when the baseline's statistic is 0 (no latency recorded)."""
    ci: tuple[float, float] | None
    method: str
    n: int
    """Questions compared: answered (no error) in both runs."""


@attrs.frozen
class CostChange:
    """The paired change of the cost per question between two runs of the same questions:
    the ratio candidate / baseline of the mean cost with its paired bootstrap interval
    (`retrievalkit.stats.latency.paired_ratios`), each run priced at its own ``[costs]``."""

    statistic: str
    """``per_question``: the mean cost of a question."""
    baseline: float
    candidate: float
    ratio: float | None
    """candidate / baseline; None when the baseline's cost is 0."""
    ci: tuple[float, float] | None
    method: str
    n: int
    """Questions compared: those both runs asked (an errored one was billed too)."""


@attrs.frozen
class System:
    """One side of a comparison: a fresh or stored run, and its share of judged documents."""

    label: str
    run_id: str
    retriever: str
    set_name: str
    set_hash: str
    questions: int
    """Questions in the run (before restricting to the shared ones)."""
    errored: int
    """Errored questions among the compared ones."""
    judged: dict[str, float | None]
    """``judged@k`` -> mean over the compared questions; empty when the set has no judged@k."""
    saved_to: str | None = None


@attrs.frozen
class MetricDelta(MetricDifference):
    """candidate - baseline for one metric, with how many questions each side won."""

    p_holm: float | None = attrs.field(default=None, kw_only=True)
    """The Holm-adjusted p-value (and ``p_floor`` adjusted too); None with a single
    candidate, or under another correction."""
    p_adjusted: float | None = attrs.field(default=None, kw_only=True)
    """The p-value adjusted for multiple comparisons by ``ComparedRuns.correction`` over
    its ``family``; None when nothing is adjusted."""
    effect_size: dict[str, object] | None = attrs.field(default=None, kw_only=True)
    """``{"value", "ci", "kind"}``: the paired standardised mean difference d_z of the
    per-question differences with its exact noncentral-t interval
    (`retrievalkit.stats.effect_size`); None when undefined (the differences all equal)."""
    wins: int = attrs.field(kw_only=True)
    ties: int = attrs.field(kw_only=True)
    losses: int = attrs.field(kw_only=True)


@attrs.frozen
class QuestionChange:
    """A question whose value moved, with the rank of its first relevant document on each side."""

    question_id: str
    question: str | None
    baseline: float
    candidate: float
    difference: float
    baseline_rank: int | None
    """Rank of the first relevant document (None: none in the scored depth)."""
    candidate_rank: int | None
    baseline_error: str | None = None
    candidate_error: str | None = None


@attrs.frozen
class PairComparison:
    baseline: str
    candidate: str
    metrics: tuple[MetricDelta, ...]
    changed_by: str
    changed: tuple[QuestionChange, ...]
    """The questions whose ``changed_by`` value moved most, largest move first."""
    latency: tuple[LatencyChange, ...] = ()
    """The paired change of p50, p95 and p99 latency, candidate / baseline."""
    cost: CostChange | None = None
    """The paired change of the cost per question, candidate / baseline; None unless both
    runs recorded tokens of a priced model."""


@attrs.frozen
class ComparedRuns:
    """Everything ``retrievalkit compare`` shows, computed once and rendered many ways."""

    set_name: str
    systems: tuple[System, ...]
    pairs: tuple[PairComparison, ...]
    shared_questions: int
    same_set: bool
    confidence: float
    resamples: int
    correction: str | None
    """``holm`` (the default with more than one pair), ``tukey`` (the randomised Tukey
    HSD over the systems, when asked for), else None."""
    warnings: tuple[str, ...]
    cluster_by: str | None = None
    """The field whose clusters the paired tests treated as the unit; None: questions."""
    pairing: str = "baseline"
    """``baseline`` (each against the first), ``all-pairs`` or ``control``."""
    family: str | None = None
    """What ``correction`` adjusts over: ``candidates`` (Holm, each metric over the
    candidates), ``systems`` (Tukey, each metric over the systems) or ``pairs and
    metrics`` (every pair and metric: Holm at once, or Tukey per metric and Bonferroni
    over the metrics); None without correction."""
