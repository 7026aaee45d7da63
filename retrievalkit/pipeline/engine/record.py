"""Map a scored run onto the generic (set, model, grader) record, with its manifest.

Secrets never enter a record: options whose names look like secrets are redacted,
and values read from the environment through ``*_env`` options are only hashed.
"""

from __future__ import annotations

import datetime as dt
import secrets
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from retrievalkit._version import __version__
from retrievalkit.metrics.scoring import Scores, ScoringOptions
from retrievalkit.model.records import GRADER, ResultRecord
from retrievalkit.model.values import GoldenQuestionSet, Machine, Manifest
from retrievalkit.redaction import REDACTED as REDACTED
from retrievalkit.redaction import is_secret_option as is_secret_option
from retrievalkit.redaction import options_hash as options_hash
from retrievalkit.redaction import redact_options as redact_options


def new_run_id(moment: dt.datetime) -> str:
    """Sortable by time, unique by a random suffix: ``20261129T120501Z-3f9a1c2e``."""
    return f"{moment:%Y%m%dT%H%M%SZ}-{secrets.token_hex(4)}"


def git_commit(directory: Path | None = None) -> str | None:
    """The commit checked out in ``directory``, or None outside a git repository."""
    try:
        completed = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=directory or Path.cwd(),
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = completed.stdout.strip()
    return commit if completed.returncode == 0 and commit else None


def build_record(
    golden: GoldenQuestionSet,
    model: str,
    plugin: str,
    options: Mapping[str, Any],
    scores: Scores,
    scoring: ScoringOptions,
    *,
    overfetch: int,
    git_commit: str | None = None,
    now: dt.datetime | None = None,
    extra: Mapping[str, str] | None = None,
    embedding_backend: str | None = None,
    embedding_model_id: str | None = None,
    plugin_packages: Mapping[str, str] | None = None,
    retriever_identifier: str | None = None,
    machine: Machine | None = None,
) -> ResultRecord:
    """The generic record: pass_rate is top-1 hit rate, mean_score top-3 hit rate.

    ``embedding_backend`` and ``embedding_model_id`` come from the retriever
    (`retrievalkit.embedders.embedding_of`): the model lives in the index, not in
    the options, so a swapped model shows in history even when no option changed.
    ``git_commit`` is recorded as given (None: unknown; `git_commit` gives the
    working directory's), so building a record never starts a process.
    """
    moment = (now or dt.datetime.now(dt.timezone.utc)).replace(microsecond=0)
    manifest = Manifest(
        retrievalkit_version=__version__,
        set_name=golden.name,
        set_hash=golden.content_hash,
        retriever=model,
        plugin=plugin,
        retriever_options=redact_options(options),
        retriever_options_hash=options_hash(options),
        created_at=moment.isoformat().replace("+00:00", "Z"),
        ks=scoring.ks,
        overfetch=overfetch,
        confidence=scoring.confidence,
        resamples=scoring.resamples,
        seed=scoring.seed,
        git_commit=git_commit,
        extra=dict(extra or {}),
        embedding_backend=embedding_backend,
        embedding_model_id=embedding_model_id,
        plugin_packages=dict(plugin_packages or {}),
        retriever_identifier=retriever_identifier,
        machine=machine,
    )
    return ResultRecord(
        run_id=new_run_id(moment),
        set=golden.name,
        model=model,
        grader=GRADER,
        pass_rate=scores.metrics["hit@1"].mean or 0.0,
        mean_score=scores.metrics["hit@3"].mean or 0.0,
        metrics=scores.metrics,
        slices=scores.slices,
        outcomes=scores.outcomes,
        manifest=manifest,
        cluster_by=scoring.cluster_by,
        clusters={q.id: q.cluster for q in golden.questions if q.cluster is not None},
    )
