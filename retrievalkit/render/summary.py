"""The evaluation report as plain data: what ``summary.json`` and ``--format json`` print.

This document is a public contract; keys are only ever added. Undefined values are
``null``, never a fabricated 0.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from retrievalkit.formats.convert import unstructure
from retrievalkit.model.records import ResultRecord
from retrievalkit.model.values import GoldenQuestion, MetricValue

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    # Types only: the regression module brings numpy, which `list` and `show` never need.
    from retrievalkit.formats.ids import IdChanges
    from retrievalkit.formats.labels import LabelEffect
    from retrievalkit.pipeline.gating.gate import Verdict


@attrs.frozen
class EvalReport:
    """Everything an ``eval`` run shows, computed once and rendered many ways."""

    record: ResultRecord
    questions: tuple[GoldenQuestion, ...]
    verdict: Verdict | None
    saved_to: str | None
    baseline_note: str | None = None
    not_saved_reason: str | None = None
    extra_labels: LabelEffect | None = None
    """The run scored again with ``eval --extra-labels`` merged in, when asked for."""
    read_back: bool = False
    """The run was read from ``saved_to`` (``show``), not just evaluated and saved there."""
    diagnostics: tuple[str, ...] = ()
    """Warnings only the evaluation could see (e.g. questions short of distinct documents)."""
    returned_ids: IdChanges | None = None
    """The returned ids the identity rule changed (`retrievalkit.formats.ids`), if any."""

    @property
    def warnings(self) -> tuple[str, ...]:
        """What the reader must know before trusting the numbers (e.g. pooling bias)."""
        from retrievalkit.metrics.cost import record_costs, unpriced_warning
        from retrievalkit.metrics.judged_share import judged_shares, judged_warning
        from retrievalkit.pipeline.engine.diagnostics import chunk_id_warning

        pooling = judged_warning(self.record.model, judged_shares(self.record.metrics))
        chunks = chunk_id_warning(self.record.outcomes)
        unpriced = unpriced_warning(record_costs(self.record))
        found = tuple(warning for warning in (pooling, chunks, unpriced) if warning is not None)
        # What the gate says too (clustering by a field some questions lack) is said once,
        # with the gate; what the record says, once.
        said = (*found, *(() if self.verdict is None else self.verdict.warnings))
        return found + tuple(warning for warning in self.diagnostics if warning not in said)


def metric_map(metrics: Mapping[str, MetricValue]) -> dict[str, Any]:
    return {
        name: {
            "mean": value.mean,
            "ci": None if value.ci is None else [value.ci[0], value.ci[1]],
            "n": value.n,
            # A clustered run names its method, clusters and effective size.
            **(
                {}
                if value.clusters is None
                else {
                    "method": value.method,
                    "clusters": value.clusters,
                    "effective_n": value.effective_n,
                }
            ),
        }
        for name, value in metrics.items()
    }


def effect_data(effect: LabelEffect) -> dict[str, Any]:
    """A `LabelEffect` as plain data; ``corrected`` only when human labels gave one."""
    data: dict[str, Any] = unstructure(effect)
    if data.get("corrected") is None:
        data.pop("corrected", None)
    return data


#: Keys a comparison or verdict has only with ``--cluster-by``.
_CLUSTER_KEYS = frozenset(("cluster_by", "clusters", "effective_n"))


def without_unset_clusters(data: Any) -> Any:
    """``data`` (plain) without the cluster keys that are null: the documents of runs of
    independent questions stay what they always were."""
    if isinstance(data, dict):
        return {
            key: without_unset_clusters(value)
            for key, value in data.items()
            if not (value is None and key in _CLUSTER_KEYS)
        }
    if isinstance(data, list):
        return [without_unset_clusters(item) for item in data]
    return data


def errored_questions(record: ResultRecord) -> list[tuple[str, str]]:
    """(question id, error) of each errored question, in the set's order, read from the
    outcomes' columns (no other question's outcome is built)."""
    from retrievalkit.metrics.scoring import as_columns

    columns = as_columns(record.outcomes)
    errors = columns.errors
    if not errors:
        return []
    ids = columns.question_ids
    return [(ids[index], errors[index]) for index in sorted(errors)]


def record_latencies(record: ResultRecord) -> npt.NDArray[np.float64]:
    """Each question's latency in milliseconds, from the outcomes' latency column."""
    from retrievalkit.metrics.scoring import as_columns

    return as_columns(record.outcomes).latency_ms


def latency_summary(
    latencies: Sequence[float] | npt.NDArray[np.float64],
) -> dict[str, float | None]:
    import numpy as np

    if not len(latencies):
        return {"mean": None, "p50": None, "p95": None}
    values = np.asarray(latencies)
    return {
        "mean": round(float(values.mean()), 3),
        "p50": round(float(np.percentile(values, 50)), 3),
        "p95": round(float(np.percentile(values, 95)), 3),
    }


def run_latency(record: ResultRecord) -> dict[str, Any]:
    """``{"p50": {"value", "ci", "method"}, "p95", "p99", "mean", "questions", "level"}``:
    the latency (ms) of the questions answered without an error, each quantile with its
    distribution-free order-statistic interval, the mean with a percentile bootstrap one,
    at the run's confidence, resamples and seed; ``{}`` when no question was answered."""
    import numpy as np

    from retrievalkit.metrics.scoring import as_columns
    from retrievalkit.stats.latency import latency_summary as summarise

    columns = as_columns(record.outcomes)
    latencies = columns.latency_ms
    errored = columns.errors
    if errored:
        keep = np.ones(len(latencies), dtype=bool)
        keep[np.fromiter(errored, np.intp, len(errored))] = False
        latencies = latencies[keep]
    manifest = record.manifest
    return summarise(
        latencies,
        level=manifest.confidence,
        resamples=manifest.resamples,
        seed=manifest.seed,
    )


def summary(report: EvalReport) -> dict[str, Any]:
    from retrievalkit.metrics.cost import run_cost
    from retrievalkit.render.stages import stages_document

    record = report.record
    return {
        "run_id": record.run_id,
        "set": record.set,
        "retriever": record.model,
        "questions": len(record.outcomes),
        "errored": record.errored,
        "metrics": metric_map(record.metrics),
        "slices": {
            field: {label: metric_map(metrics) for label, metrics in values.items()}
            for field, values in record.slices.items()
        },
        "record": {
            "set": record.set,
            "model": record.model,
            "grader": record.grader,
            "pass_rate": record.pass_rate,
            "mean_score": record.mean_score,
        },
        "regression": None
        if report.verdict is None
        else without_unset_clusters(unstructure(report.verdict)),
        **({} if record.cluster_by is None else {"cluster_by": record.cluster_by}),
        "errors": [
            {"question_id": question_id, "error": error}
            for question_id, error in errored_questions(record)
        ],
        "latency_ms": latency_summary(record_latencies(record)),
        "latency": run_latency(record),
        "cost": run_cost(record),
        "saved_to": report.saved_to,
        "not_saved_reason": report.not_saved_reason,
        "manifest": unstructure(record.manifest),
        "warnings": list(report.warnings),
        # Known only to the evaluation, not to a run read back from a store.
        "returned_ids": None
        if report.read_back
        else {"changed": 0}
        if report.returned_ids is None
        else report.returned_ids.document(),
        "extra_labels": None if report.extra_labels is None else effect_data(report.extra_labels),
        "stages": stages_document(record),
    }


def per_question_lines(report: EvalReport) -> list[str]:
    """``per_question.jsonl``: one line per question, in the set's order."""
    texts = {question.id: question.question for question in report.questions}
    by_id = {question.id: question for question in report.questions}
    stages = report.record.stages
    attributed = {} if stages is None else stages.questions
    lines = []
    for outcome in report.record.outcomes:
        question = by_id.get(outcome.question_id)
        extra: dict[str, Any] = {}
        if question is not None and question.expected_chunks:
            extra["expected_chunks"] = list(question.expected_chunks)
        if stages is not None:
            extra["stage"] = attributed.get(outcome.question_id)
        lines.append(
            json.dumps(
                {
                    "question_id": outcome.question_id,
                    "question": texts.get(outcome.question_id),
                    "form": None if outcome.form is None else outcome.form.value,
                    "hard_class": outcome.hard_class,
                    "expected": outcome.expected,
                    "judgments": dict(outcome.judgments),
                    "ranking": list(outcome.ranking),
                    "scores": dict(outcome.scores),
                    "error": outcome.error,
                    "latency_ms": outcome.latency_ms,
                    "meta": {} if question is None else dict(question.meta),
                    **extra,
                },
                sort_keys=True,
                ensure_ascii=False,
            )
        )
    return lines


def to_json_text(document: Any) -> str:
    return json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)


def header_line(report: EvalReport) -> str:
    record = report.record
    errored = f", {record.errored} errored" if record.errored else ""
    return (
        f"set {record.set} · retriever {record.model} · {len(record.outcomes)} questions{errored}"
    )


def storage_line(report: EvalReport) -> str:
    if report.saved_to and report.read_back:
        created = report.record.manifest.created_at
        return f"run {report.record.run_id} of {created}, as stored in {report.saved_to}"
    if report.saved_to:
        return f"run {report.record.run_id} saved to {report.saved_to}"
    reason = report.not_saved_reason or "not saved"
    return f"run {report.record.run_id} NOT saved: {reason}"
