"""Stage metric names: ``stage.STAGE:METRIC`` (``stage.rerank:ndcg@20``), made and split.

A metric's name is a metric of the table (``ndcg@10``, ``rr``) or a stage's metric.
`retrievalkit.metrics.definitions.canonical_metric_name` is the one parser of both: the
configuration's `[regression]` keys, the command line's ``--metric`` and ``history
--metric``, the Python API's ``metrics=`` and the gate all read names through it, so a
name is accepted, refused and spelled the same way everywhere.
"""

from __future__ import annotations

#: What starts the name of a stage's metric: ``stage.rerank:rr``.
STAGE_PREFIX = "stage."


def stage_metric(stage: str, metric: str) -> str:
    """The name of ``metric`` of ``stage`` in a record's outcomes, the gate and history."""
    return f"{STAGE_PREFIX}{stage}:{metric}"


def split_stage_metric(name: str) -> tuple[str, str] | None:
    """``stage.rerank:rr`` -> (``rerank``, ``rr``); None for a name that is not a stage's;
    ``ValueError`` for a stage name without its metric."""
    if not name.startswith(STAGE_PREFIX):
        return None
    body = name[len(STAGE_PREFIX) :]
    # A condensed variant keeps its suffix: stage.rerank:ndcg@10:condensed.
    suffix = ":condensed" if body.lower().endswith(":condensed") else ""
    stage, colon, metric = body[: len(body) - len(suffix)].rpartition(":")
    metric += body[len(body) - len(suffix) :]
    if not colon or not stage.strip() or not metric.strip():
        raise ValueError(f"stage metric {name!r} is not stage.STAGE:METRIC, e.g. stage.rerank:rr")
    return stage, metric


def bare_metric_name(name: str) -> str:
    """The metric of a name, a stage's name included: ``stage.rerank:ndcg@20`` ->
    ``ndcg@20``; any other name as it is."""
    split = split_stage_metric(name) if name.startswith(STAGE_PREFIX) else None
    return name if split is None else split[1]
