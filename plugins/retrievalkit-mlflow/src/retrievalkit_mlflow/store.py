"""A retrievalkit store in MLflow: each saved run is an MLflow run, and is read back from it.

Each retrievalkit run becomes one FINISHED MLflow run of the store's experiment:
metrics with their interval bounds (see `retrievalkit_mlflow.names`), the manifest as
parameters, tags for the set, retriever, grader and (from ``eval``) the gate's verdict,
and artifacts: the report files ``eval --output-dir`` writes, under ``report/``, and
the stored record itself under ``retrievalkit/`` (its summary, and its per-question
columns in one file), from which history, baselines and ``show`` read it back whole.

A run is saved whole or not at all: it is FINISHED only once everything is logged, a
failed save deletes it, and reading considers FINISHED runs only. Pins are experiment
tags (``retrievalkit.pin.KEY`` -> run id), so ``baseline pin`` works, and ``history
--prune`` deletes runs the MLflow way (they move to MLflow's trash, which ``mlflow gc``
empties).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from retrievalkit.plugin_api import (
    GRADER,
    ResultRecord,
    StoreError,
    dump_columns,
    dump_summary,
    load_summary,
    one_line,
    redact_url,
    scrub_known,
    write_record_report,
)

from retrievalkit_mlflow.names import (
    MAX_TAG_VALUE,
    metrics_of,
    params_of,
    redacted,
    tag,
    tags_of,
    verdict_tags,
)
from retrievalkit_mlflow.urls import Target, parse_target

SUMMARY = "retrievalkit/summary.json"
COLUMNS = "retrievalkit/columns.json"
REPORT = "report"
PIN_PREFIX = tag("pin.")
#: MLflow's batch limits (mlflow.utils.validation): metrics, and params with tags.
_METRICS_PER_BATCH = 1000
_PARAMS_PER_BATCH = 100


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()[:32]


def key_digest(set_name: str, model: str, grader: str) -> str:
    """The tag value runs of one (set, model, grader) key share; hex, so safe in a filter."""
    return _digest(set_name, model, grader)


class MlflowStore:
    """Runs kept in one MLflow experiment, found again by retrievalkit's tags."""

    def __init__(self, target: Target, *, url: str) -> None:
        self.url = redact_url(url)
        self.target = target
        if target.tracking_uri.startswith("file:"):
            # MLflow 3 refuses its file store unless asked: an mlflow+file: URL asks.
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        # Reading a run back downloads two small files: no progress bar on stderr for each.
        os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
        # retrievalkit sends nothing anywhere but to the store it is given; a user who
        # wants MLflow's usage telemetry sets the variable to false.
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
        with self._mlflow("open the tracking store"):
            from mlflow import MlflowClient

            self.client = MlflowClient(tracking_uri=target.tracking_uri)
            self.experiment_id = self._experiment()

    @classmethod
    def from_url(cls, url: str) -> MlflowStore:
        """The ``retrievalkit.stores`` entry point of every ``mlflow...:`` scheme."""
        return cls(parse_target(url), url=url)

    # --- MLflow calls ------------------------------------------------------------------

    @contextlib.contextmanager
    def _mlflow(self, action: str) -> Iterator[None]:
        """MLflow's and the network's errors as one StoreError line naming the store."""
        try:
            yield
        except StoreError:
            raise
        except Exception as error:
            detail = scrub_known(one_line(str(error)) or type(error).__name__)
            raise StoreError(
                f"MLflow store {self.url} could not {action}: {detail[:600]}"
            ) from None

    def _experiment(self) -> str:
        name = self.target.experiment
        experiment = self.client.get_experiment_by_name(name)
        if experiment is None:
            try:
                return str(
                    self.client.create_experiment(
                        name, artifact_location=self.target.artifact_location
                    )
                )
            except Exception:
                experiment = self.client.get_experiment_by_name(name)  # made meanwhile?
                if experiment is None:
                    raise
        if experiment.lifecycle_stage != "active":
            raise StoreError(
                f"MLflow experiment {name!r} of {self.url} is deleted: restore it "
                f"(mlflow experiments restore --experiment-id {experiment.experiment_id}) "
                "or name another with ?experiment=NAME"
            )
        return str(experiment.experiment_id)

    def _search(self, tag_name: str | None, value: str | None) -> list[Any]:
        """The experiment's FINISHED, not deleted runs (with the tag, when named)."""
        from mlflow.entities import ViewType

        where = "attributes.status = 'FINISHED'"
        if tag_name is not None:
            where += f" and tags.`{tag(tag_name)}` = '{value}'"
        found: list[Any] = []
        token = None
        with self._mlflow("search its runs"):
            while True:
                page = self.client.search_runs(
                    [self.experiment_id],
                    where,
                    run_view_type=ViewType.ACTIVE_ONLY,
                    max_results=1000,
                    page_token=token,
                )
                found.extend(run for run in page if tag("run_id") in run.data.tags)
                token = page.token
                if not token:
                    return found

    def _find(self, run_id: str) -> Any | None:
        found = self._search("run_digest", _digest(run_id))
        return next((run for run in found if run.data.tags[tag("run_id")] == run_id), None)

    def _artifact(self, mlflow_run_id: str, path: str) -> bytes:
        with (
            self._mlflow(f"read {path} of MLflow run {mlflow_run_id}"),
            tempfile.TemporaryDirectory(prefix="retrievalkit-mlflow-") as folder,
        ):
            local = self.client.download_artifacts(mlflow_run_id, path, folder)
            return Path(local).read_bytes()

    def _load(self, run: Any) -> ResultRecord:
        mlflow_id = run.info.run_id
        where = f"{self.url} (MLflow run {mlflow_id})"
        columns: dict[str, bytes] = {}

        def load_column(name: str) -> bytes:
            if not columns:
                stored = json.loads(self._artifact(mlflow_id, COLUMNS))
                columns.update({key: base64.b64decode(text) for key, text in stored.items()})
            if name not in columns:
                raise StoreError(f"{where}: the stored run has no outcome column {name!r}")
            return columns[name]

        return load_summary(self._artifact(mlflow_id, SUMMARY), load_column, where=where)

    def _newest_first(self, found: list[Any]) -> list[ResultRecord]:
        def order(run: Any) -> tuple[str, int]:
            return (run.data.tags.get(tag("created_at"), ""), run.info.start_time or 0)

        return [self._load(run) for run in sorted(found, key=order, reverse=True)]

    # --- ResultStore ---------------------------------------------------------------------

    def save(self, record: ResultRecord) -> None:
        """Log ``record`` as one MLflow run, whole or not at all (secrets as ``***``)."""
        record = redacted(record)
        if self._find(record.run_id) is not None:
            raise StoreError(f"run {record.run_id} is already stored in {self.url}")
        digests = {
            "key": key_digest(record.set, record.model, record.grader),
            "run_digest": _digest(record.run_id),
        }
        encoded = dump_columns(record)
        columns = {name: base64.b64encode(data).decode("ascii") for name, data in encoded.items()}
        with self._mlflow(f"save run {record.run_id}"):
            run = self.client.create_run(self.experiment_id, tags=tags_of(record, digests))
            mlflow_id = run.info.run_id
            try:
                self._log_values(mlflow_id, record)
                self.client.log_text(mlflow_id, dump_summary(record, encoded), SUMMARY)
                self.client.log_text(mlflow_id, json.dumps(columns, sort_keys=True), COLUMNS)
                self._log_report(mlflow_id, record, None)
                self.client.set_terminated(mlflow_id, "FINISHED")
            except BaseException:
                # Half a run is no run: it goes to MLflow's trash, and reads skip it anyway
                # (it never became FINISHED).
                with contextlib.suppress(Exception):
                    self.client.delete_run(mlflow_id)
                raise

    def _log_values(self, mlflow_id: str, record: ResultRecord) -> None:
        from mlflow.entities import Metric, Param

        moment = int(time.time() * 1000)
        metrics = [Metric(name, value, moment, 0) for name, value in metrics_of(record).items()]
        params = [Param(name, value) for name, value in params_of(record).items()]
        for start in range(0, len(metrics), _METRICS_PER_BATCH):
            self.client.log_batch(mlflow_id, metrics=metrics[start : start + _METRICS_PER_BATCH])
        for start in range(0, len(params), _PARAMS_PER_BATCH):
            self.client.log_batch(mlflow_id, params=params[start : start + _PARAMS_PER_BATCH])

    def _log_report(self, mlflow_id: str, record: ResultRecord, verdict: Any) -> None:
        with tempfile.TemporaryDirectory(prefix="retrievalkit-mlflow-") as folder:
            write_record_report(record, Path(folder), saved_to=self.url, verdict=verdict)
            self.client.log_artifacts(mlflow_id, folder, REPORT)

    def runs(self, set_name: str, model: str, grader: str = GRADER) -> list[ResultRecord]:
        """Every run of the key, newest first."""
        found = self._search("key", key_digest(set_name, model, grader))
        return self._newest_first(
            [
                run
                for run in found
                if (run.data.tags.get(tag("set")), run.data.tags.get(tag("retriever")),
                    run.data.tags.get(tag("grader"))) == (set_name, model, grader)
            ]
        )  # fmt: skip

    def get(self, run_id: str) -> ResultRecord | None:
        """One run by id, or None."""
        run = self._find(run_id)
        return None if run is None else self._load(run)

    def all_runs(self) -> list[ResultRecord]:
        """Every run of every key, newest first."""
        return self._newest_first(self._search(None, None))

    # --- VerdictStore ------------------------------------------------------------------

    def save_verdict(self, record: ResultRecord, verdict: Any) -> None:
        """Tag the saved run with ``verdict`` and log its report again, verdict included."""
        run = self._find(record.run_id)
        if run is None:
            raise StoreError(f"run {record.run_id} is not in {self.url}: save it first")
        with self._mlflow(f"keep the verdict of run {record.run_id}"):
            for name, value in verdict_tags(verdict).items():
                self.client.set_tag(run.info.run_id, name, value)
            self._log_report(run.info.run_id, redacted(record), verdict)

    # --- PinningStore and DeletingStore -------------------------------------------------

    def _pins(self) -> dict[str, str]:
        with self._mlflow("read its pins"):
            tags = self.client.get_experiment(self.experiment_id).tags
        return {
            name: value for name, value in tags.items() if name.startswith(PIN_PREFIX) and value
        }

    def pinned(self, set_name: str, model: str, grader: str = GRADER) -> str | None:
        """The run id pinned for the key, or None."""
        return self._pins().get(PIN_PREFIX + key_digest(set_name, model, grader))

    def pin(self, record: ResultRecord) -> str | None:
        """Pin a stored run as its key's baseline; returns the run id it replaced."""
        if self._find(record.run_id) is None:
            raise StoreError(f"run {record.run_id} is not in {self.url}: nothing pinned")
        name = PIN_PREFIX + key_digest(*record.key)
        replaced = self._pins().get(name)
        with self._mlflow(f"pin run {record.run_id}"):
            self.client.set_experiment_tag(self.experiment_id, name, record.run_id[:MAX_TAG_VALUE])
        return replaced

    def unpin(self, set_name: str, model: str, grader: str = GRADER) -> str | None:
        """Remove the key's pin; returns the run id that was pinned, or None."""
        name = PIN_PREFIX + key_digest(set_name, model, grader)
        pinned = self._pins().get(name)
        if pinned is not None:
            with self._mlflow("unpin"):
                self.client.delete_experiment_tag(self.experiment_id, name)
        return pinned

    def delete(self, run_ids: Sequence[str]) -> int:
        """Move these runs to MLflow's trash; refuses (nothing deleted) if one is pinned."""
        pinned = set(self._pins().values())
        held = sorted(set(run_ids) & pinned)
        if held:
            raise StoreError(
                f"run {held[0]} is the pinned baseline of its key in {self.url}: unpin it "
                "first (retrievalkit baseline unpin); nothing was deleted"
            )
        found = [run for run in map(self._find, dict.fromkeys(run_ids)) if run is not None]
        with self._mlflow("delete runs"):
            for run in found:
                self.client.delete_run(run.info.run_id)
        return len(found)
