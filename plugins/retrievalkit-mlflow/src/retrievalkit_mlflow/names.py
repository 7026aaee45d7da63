"""A run's metrics, parameters and tags under the names MLflow allows.

MLflow names may hold ASCII letters, digits, ``_ - . /`` and spaces, and must not look
like another path (no empty, ``.`` or ``..`` part between slashes). So ``ndcg@10`` is
``ndcg_at_10``, its interval bounds ``ndcg_at_10.lo`` and ``ndcg_at_10.hi`` and its
count of defined values ``ndcg_at_10.n``; a slice's metric is ``FIELD/LABEL/METRIC``
(``form/GAP/hit_at_3``, ``meta.topic/billing/rr``) and a stage's
``stage/NAME/METRIC``. Any other character becomes ``_``; where two labels would then
share a name, the later one gets a short digest of its own text. An undefined mean
(``None``) is not logged: MLflow has no missing value, and 0.0 would be a lie.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
from retrievalkit.plugin_api import ResultRecord, dump_summary, redact_options

#: MLflow's limits (mlflow.utils.validation): parameter values, tag values, key lengths.
MAX_PARAM_VALUE = 6000
MAX_TAG_VALUE = 8000
MAX_KEY = 250
TAG_PREFIX = "retrievalkit."
_FORBIDDEN = re.compile(r"[^A-Za-z0-9_.\- /]")


def clean_part(text: str) -> str:
    """One ``/``-free part of a name: forbidden characters as ``_``, never empty or dots."""
    part = _FORBIDDEN.sub("_", text.replace("@", "_at_").replace("/", "_"))
    return "_" if part.strip(".") == "" else part


def metric_name(name: str) -> str:
    """``ndcg@10`` -> ``ndcg_at_10``."""
    return clean_part(name)


class Names:
    """Hands out MLflow names, keeping apart texts that clean to the same name."""

    def __init__(self) -> None:
        self._owner: dict[str, str] = {}

    def name(self, *parts: str) -> str:
        original = "\x00".join(parts)
        name = "/".join(clean_part(part) for part in parts)
        if len(name) > MAX_KEY - 8:
            name = name[: MAX_KEY - 16]
        owner = self._owner.setdefault(name, original)
        if owner != original:
            digest = hashlib.sha256(original.encode("utf-8")).hexdigest()[:6]
            name = f"{name}_{digest}"
            self._owner.setdefault(name, original)
        return name


def _metric_entries(name: str, value: Any) -> Iterator[tuple[str, float]]:
    mean = value.mean
    if mean is None or not math.isfinite(mean):
        return
    yield name, float(mean)
    if value.ci is not None:
        yield f"{name}.lo", float(value.ci[0])
        yield f"{name}.hi", float(value.ci[1])
    yield f"{name}.n", float(value.n)


def metrics_of(record: ResultRecord) -> dict[str, float]:
    """Every logged metric of ``record``: overall, per slice, per stage, with bounds."""
    names = Names()
    found: dict[str, float] = {}
    for metric, value in record.metrics.items():
        found.update(_metric_entries(names.name(metric), value))
    for field, labels in record.slices.items():
        for label, table in labels.items():
            for metric, value in table.items():
                found.update(_metric_entries(names.name(field, label, metric), value))
    if record.stages is not None:
        for stage, table in record.stages.metrics.items():
            for metric, value in table.items():
                found.update(_metric_entries(names.name("stage", stage, metric), value))
    found["pass_rate"] = float(record.pass_rate)
    found["mean_score"] = float(record.mean_score)
    found["questions"] = float(len(record.outcomes))
    found["errored"] = float(record.errored)
    return found


def _flatten(prefix: str, value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping) and value:
        for key, item in value.items():
            yield from _flatten(f"{prefix}.{key}" if prefix else str(key), item)
    else:
        yield prefix, value


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    if len(text) > MAX_PARAM_VALUE:
        return text[: MAX_PARAM_VALUE - 15] + "... (truncated)"
    return text


def manifest_data(record: ResultRecord) -> dict[str, Any]:
    """The run's manifest as plain data, every secret (and URL password) as ``***``."""
    manifest: dict[str, Any] = json.loads(dump_summary(record))["manifest"]
    # The manifest's options are redacted when the run is made; redacting again keeps a
    # secret out of MLflow whatever produced the record (extra, plugin packages, ...).
    redacted: dict[str, Any] = redact_options(manifest)
    return redacted


def redacted(record: ResultRecord) -> ResultRecord:
    """``record`` with every secret of its manifest as ``***``: what this store writes.

    The run's own redaction has done this already for any record ``evaluate`` made; a
    record built by other code gets the same treatment before it reaches MLflow.
    """
    manifest = record.manifest
    options = redact_options(manifest.retriever_options)
    extra = redact_options(manifest.extra)
    if options == dict(manifest.retriever_options) and extra == dict(manifest.extra):
        return record
    return attrs.evolve(
        record, manifest=attrs.evolve(manifest, retriever_options=options, extra=extra)
    )


def params_of(record: ResultRecord) -> dict[str, str]:
    """The manifest as MLflow parameters: ``retriever_options.k1``, ``ks``, ``seed``..."""
    names = Names()
    params: dict[str, str] = {}
    for key, value in _flatten("", manifest_data(record)):
        if value is None:
            continue
        params[names.name(key)] = _text(value)
    if record.cluster_by is not None:
        params["cluster_by"] = record.cluster_by
    return params


def tag(name: str) -> str:
    return f"{TAG_PREFIX}{name}"


def tags_of(record: ResultRecord, digests: Mapping[str, str]) -> dict[str, str]:
    """What a run is looked up and grouped by: set, retriever, grader, ids and digests."""
    manifest = record.manifest
    tags = {
        tag("run_id"): record.run_id,
        tag("set"): record.set,
        tag("retriever"): record.model,
        tag("grader"): record.grader,
        tag("set_hash"): manifest.set_hash,
        tag("plugin"): manifest.plugin,
        tag("created_at"): manifest.created_at,
        tag("schema_version"): str(record.schema_version),
        "mlflow.runName": f"{record.model} on {record.set} ({record.run_id})",
        "mlflow.note.content": (
            f"retrievalkit run {record.run_id}: retriever {record.model} on set {record.set}, "
            f"{len(record.outcomes)} questions, {record.errored} errored"
        ),
        **{tag(name): value for name, value in digests.items()},
    }
    if manifest.git_commit:
        tags["mlflow.source.git.commit"] = manifest.git_commit
    return {key: value[:MAX_TAG_VALUE] for key, value in tags.items()}


def verdict_tags(verdict: Any) -> dict[str, str]:
    """The gate's verdict as tags: ``regressed``, ``passed`` or ``not compared``."""
    if verdict.baseline_run_id is None:
        found = {tag("verdict"): "not compared", tag("verdict.note"): verdict.note or ""}
    else:
        found = {
            tag("verdict"): "regressed" if verdict.regressed else "passed",
            tag("baseline_run_id"): verdict.baseline_run_id,
            tag("baseline_kind"): verdict.baseline_kind,
            tag("verdict.failures"): ", ".join(
                item.metric if item.slice is None else f"{item.slice}:{item.metric}"
                for item in verdict.failures
            ),
        }
    return {key: value[:MAX_TAG_VALUE] for key, value in found.items()}
