"""Drift: ask two retrievers the queries of a log and measure how far their answers moved.

No labels are needed. Each query's answers are compared with rank-biased overlap,
overlap@k and Jaccard@k (`retrievalkit.metrics.rank_similarity`); each side's zero-result
rate, latency and score-based query-performance predictors (`retrievalkit.metrics.qpp`)
are compared in pairs. Every mean is weighted by how often the query was asked and has a
bootstrap interval over queries (`retrievalkit.stats.weighted`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from retrievalkit.formats.query_log import QueryLog
from retrievalkit.metrics.qpp import nqc_at, wig_at
from retrievalkit.metrics.rank_similarity import DEFAULT_RBO_P, jaccard_at, overlap_at, rbo
from retrievalkit.pipeline.engine.evaluator import (
    call_with_timeout,
    describe_retriever_error,
    distinct_ranking,
)
from retrievalkit.redaction import scrub
from retrievalkit.stats.latency import QUANTILES, paired_difference, paired_ratio
from retrievalkit.stats.weighted import mean_intervals

DEFAULT_K = 10
DEFAULT_DEPTH = 50
DEFAULT_MOVED = 10


@attrs.frozen
class Answers:
    """One side's answers to the log's queries, by column."""

    rankings: list[tuple[str, ...]]
    scores: list[tuple[float, ...] | None]
    latency_ms: list[float]
    errors: dict[int, str]


@attrs.frozen
class DriftLimits:
    """What `--fail-on-drift` checks: None leaves a limit out."""

    min_rbo: float | None = None
    max_zero_result_increase: float | None = None


@attrs.frozen
class DriftResult:
    """What a drift comparison found: ``measures`` is the JSON form (see docs/cli.md)."""

    drift_id: str
    created_at: str
    log: str
    queries: int
    logged: int
    baseline: str
    candidate: str
    settings: dict[str, Any]
    measures: dict[str, Any]
    moved: list[dict[str, Any]]
    failures: list[str]
    gated: bool

    @property
    def passed(self) -> bool:
        return not self.failures

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "drift",
            "drift_id": self.drift_id,
            "created_at": self.created_at,
            "log": self.log,
            "queries": self.queries,
            "logged": self.logged,
            "baseline": self.baseline,
            "candidate": self.candidate,
            "settings": self.settings,
            **self.measures,
            "moved": self.moved,
            "gate": {"checked": self.gated, "passed": self.passed, "failures": self.failures},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DriftResult:
        names = ("rbo", "zero_result_rate", "latency", "qpp")
        measures = {
            key: value
            for key, value in data.items()
            if key in names or key.startswith(("overlap@", "jaccard@"))
        }
        gate = data.get("gate", {})
        return cls(
            drift_id=data["drift_id"],
            created_at=data["created_at"],
            log=data["log"],
            queries=data["queries"],
            logged=data["logged"],
            baseline=data["baseline"],
            candidate=data["candidate"],
            settings=data.get("settings", {}),
            measures=measures,
            moved=data.get("moved", []),
            failures=list(gate.get("failures", [])),
            gated=bool(gate.get("checked", False)),
        )


def ask_all(
    retriever: Any,
    queries: Sequence[str],
    *,
    depth: int,
    concurrency: int = 1,
    timeout: float | None = None,
    secrets: Sequence[str] = (),
    progress: Callable[[int], None] | None = None,
) -> Answers:
    """Each query's distinct ranking (and scores, from ``retrieve_scored`` where the
    retriever has it), its latency and any error, in the log's order."""
    scored = callable(getattr(retriever, "retrieve_scored", None))

    def one(text: str) -> tuple[tuple[str, ...], tuple[float, ...] | None, float, str | None]:
        start = time.perf_counter()
        try:
            if scored:
                pairs = call_with_timeout(lambda: retriever.retrieve_scored(text, depth), timeout)
                pairs = list(pairs)
                ids = [pair[0] for pair in pairs]
                ranking = distinct_ranking(ids, depth, depth)
                first: dict[str, float] = {}
                for doc_id, score in pairs:
                    first.setdefault(doc_id, float(score))
                scores: tuple[float, ...] | None = tuple(first[doc] for doc in ranking)
            else:
                ids = call_with_timeout(lambda: retriever.retrieve(text, depth), timeout)
                ranking = distinct_ranking(ids, depth, depth)
                scores = None
        except KeyboardInterrupt:
            raise
        except BaseException as error:  # that query's error outcome
            elapsed = (time.perf_counter() - start) * 1000.0
            return (), None, elapsed, scrub(describe_retriever_error(error), secrets)
        if progress is not None:
            progress(1)
        return ranking, scores, (time.perf_counter() - start) * 1000.0, None

    if concurrency > 1:
        with ThreadPoolExecutor(concurrency, thread_name_prefix="retrievalkit-drift") as pool:
            results = list(pool.map(one, queries))
    else:
        results = [one(text) for text in queries]
    return Answers(
        [result[0] for result in results],
        [result[1] for result in results],
        [result[2] for result in results],
        {index: result[3] for index, result in enumerate(results) if result[3] is not None},
    )


def replayed(
    queries: Sequence[str], answered: Mapping[str, tuple[Sequence[str], float, str | None]]
) -> Answers:
    """The answers a stored run gave: ``answered`` maps a query's text to the run's
    ranking, latency (ms) and error of that question (scores are not stored, so a
    replayed side has none and the predictors are left out)."""
    rankings, latencies, errors = [], [], {}
    for index, text in enumerate(queries):
        ranking, latency, error = answered[text]
        rankings.append(tuple(ranking))
        latencies.append(float(latency))
        if error is not None:
            errors[index] = error
    return Answers(rankings, [None] * len(queries), latencies, errors)


def _value(pair: tuple[float | None, tuple[float, float] | None]) -> dict[str, Any]:
    return {"value": pair[0], "ci": list(pair[1]) if pair[1] is not None else None}


def _paired(
    intervals: dict[str, tuple[float | None, tuple[float, float] | None]], name: str
) -> dict[str, Any]:
    difference, ci = intervals[f"{name}/difference"]
    return {
        "baseline": intervals[f"{name}/baseline"][0],
        "candidate": intervals[f"{name}/candidate"][0],
        "difference": difference,
        "ci": list(ci) if ci is not None else None,
    }


def _column(values: Sequence[float | None]) -> npt.NDArray[np.float64]:
    return np.array([math.nan if value is None else value for value in values], dtype=np.float64)


def measure(
    log: QueryLog,
    baseline: Answers,
    candidate: Answers,
    *,
    k: int = DEFAULT_K,
    rbo_p: float = DEFAULT_RBO_P,
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    moved: int = DEFAULT_MOVED,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The JSON measures of a drift and its most moved queries."""
    count = len(log)
    rbos = [
        rbo(
            baseline.rankings[index],
            candidate.rankings[index],
            rbo_p,
            first_scores=baseline.scores[index],
            second_scores=candidate.scores[index],
        )
        for index in range(count)
    ]
    columns: dict[str, npt.NDArray[np.float64]] = {
        "rbo": _column([None if found is None else found.value for found in rbos]),
        "rbo_lower": _column([None if found is None else found.lower for found in rbos]),
        "rbo_upper": _column([None if found is None else found.upper for found in rbos]),
        "overlap": _column(
            [
                overlap_at(b, c, k)
                for b, c in zip(baseline.rankings, candidate.rankings, strict=True)
            ]
        ),
        "jaccard": _column(
            [
                jaccard_at(b, c, k)
                for b, c in zip(baseline.rankings, candidate.rankings, strict=True)
            ]
        ),
    }
    # An errored query is not a zero-result query: it has no defined value.
    for side, answers in (("baseline", baseline), ("candidate", candidate)):
        columns[f"zero/{side}"] = _column(
            [
                None if index in answers.errors else float(not ranking)
                for index, ranking in enumerate(answers.rankings)
            ]
        )
    columns["zero/difference"] = columns["zero/candidate"] - columns["zero/baseline"]
    has_scores = any(s is not None for s in baseline.scores) and any(
        s is not None for s in candidate.scores
    )
    if has_scores:
        predictors: tuple[tuple[str, Callable[[Sequence[float], str], float | None]], ...] = (
            ("nqc", lambda scores, query: nqc_at(scores, k)),
            ("wig", lambda scores, query: wig_at(scores, k, query)),
        )
        for name, predictor in predictors:
            for side, answers in (("baseline", baseline), ("candidate", candidate)):
                columns[f"{name}/{side}"] = _column(
                    [
                        None if scores is None else predictor(scores, query)
                        for scores, query in zip(answers.scores, log.queries, strict=True)
                    ]
                )
            columns[f"{name}/difference"] = (
                columns[f"{name}/candidate"] - columns[f"{name}/baseline"]
            )
    intervals = mean_intervals(
        columns, log.weights, resamples=resamples, seed=seed, confidence=confidence
    )
    rbo_value = _value(intervals["rbo"])
    rbo_value["lower"] = intervals["rbo_lower"][0]
    rbo_value["upper"] = intervals["rbo_upper"][0]
    rbo_value["p"] = rbo_p
    measures: dict[str, Any] = {
        "rbo": rbo_value,
        f"overlap@{k}": _value(intervals["overlap"]),
        f"jaccard@{k}": _value(intervals["jaccard"]),
        "zero_result_rate": {
            **_paired(intervals, "zero"),
        },
        "latency": _latency(baseline, candidate, resamples, seed, confidence),
        "qpp": (
            {f"nqc@{k}": _paired(intervals, "nqc"), f"wig@{k}": _paired(intervals, "wig")}
            if has_scores
            else None
        ),
        "errors": {"baseline": len(baseline.errors), "candidate": len(candidate.errors)},
    }
    order = sorted(
        (index for index in range(count) if not math.isnan(columns["rbo"][index])),
        key=lambda index: (columns["rbo"][index], -log.weights[index], log.queries[index]),
    )
    moved_queries = [
        {
            "query": log.queries[index],
            "weight": float(log.weights[index]),
            "rbo": float(columns["rbo"][index]),
            f"overlap@{k}": None
            if math.isnan(columns["overlap"][index])
            else float(columns["overlap"][index]),
            "baseline": list(baseline.rankings[index][:k]),
            "candidate": list(candidate.rankings[index][:k]),
        }
        for index in order[:moved]
    ]
    return measures, moved_queries


def _latency(
    baseline: Answers, candidate: Answers, resamples: int, seed: int, confidence: float
) -> dict[str, Any]:
    """Each of p50, p95, p99 and the mean of the two sides' latencies (ms) over the
    distinct queries (each asked once: a latency belongs to the answer, not to how often
    the query was logged), with the paired bootstrap interval of the difference and the
    ratio candidate / baseline with its own, from `retrievalkit.stats.latency`."""
    left = np.asarray(baseline.latency_ms, dtype=np.float64)
    right = np.asarray(candidate.latency_ms, dtype=np.float64)
    found: dict[str, Any] = {}
    if not len(left) or not (np.isfinite(left) & np.isfinite(right)).any():
        return found
    for name in (*QUANTILES, "mean"):
        paired = paired_difference(left, right, name, confidence, resamples, seed)
        ratio = paired_ratio(left, right, name, confidence, resamples, seed)
        found[name] = {
            "baseline": paired["baseline"],
            "candidate": paired["candidate"],
            "difference": paired["difference"],
            "ci": paired["ci"],
            "ratio": _finite(ratio["ratio"]),
            "ratio_ci": _finite_pair(ratio["ci"]),
            "method": paired["method"],
        }
    return found


def _finite(value: object) -> float | None:
    """A float for JSON; None for an undefined (infinite or NaN) one."""
    number = float(value)  # type: ignore[arg-type]
    return number if math.isfinite(number) else None


def _finite_pair(pair: object) -> list[float] | None:
    ends = [_finite(end) for end in pair]  # type: ignore[attr-defined]
    return None if None in ends else ends  # type: ignore[return-value]


def check_limits(measures: dict[str, Any], limits: DriftLimits) -> list[str]:
    """One line for each limit crossed."""
    failures = []
    value = measures["rbo"]["value"]
    if limits.min_rbo is not None and (value is None or value < limits.min_rbo):
        shown = "undefined" if value is None else f"{value:.4f}"
        failures.append(f"rbo = {shown} is below --min-rbo {limits.min_rbo:g}")
    change = measures["zero_result_rate"]["difference"]
    if (
        limits.max_zero_result_increase is not None
        and change is not None
        and change > limits.max_zero_result_increase
    ):
        failures.append(
            f"zero_result_rate rose by {change:.4f}, above --max-zero-result-increase "
            f"{limits.max_zero_result_increase:g}"
        )
    return failures


def drift_id(log: QueryLog, baseline: str, candidate: str, created_at: str) -> str:
    """A new id: a digest of what was compared and when, with a random part, so two drifts
    saved in the same second never share one."""
    digest = hashlib.sha256(
        json.dumps(
            [log.source, len(log), baseline, candidate, created_at, uuid.uuid4().hex]
        ).encode()
    ).hexdigest()
    return "drift-" + digest[:12]


def now_text(now: dt.datetime | None = None) -> str:
    moment = now or dt.datetime.now(dt.timezone.utc)
    return moment.astimezone(dt.timezone.utc).isoformat(timespec="seconds")
