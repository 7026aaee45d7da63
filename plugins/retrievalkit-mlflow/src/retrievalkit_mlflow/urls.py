"""Turn an ``mlflow...:`` store URL into MLflow's tracking URI, experiment and artifact root.

``mlflow+file:///PATH`` and ``mlflow+sqlite:///PATH`` follow retrievalkit's convention
for paths (three slashes a path relative to the working directory, four an absolute
one); ``mlflow+http://HOST:PORT`` and ``mlflow+https://...`` name a tracking server;
``mlflow:`` uses ``$MLFLOW_TRACKING_URI``. The query string may name the
``experiment`` (default ``retrievalkit``, or ``$MLFLOW_EXPERIMENT_NAME``) and, for the
file and SQLite backends, the ``artifacts`` folder (same path convention; default
``mlartifacts`` beside the SQLite database; inside the folder for ``mlflow+file``).
"""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path

import attrs
from retrievalkit.plugin_api import InputError, check_parent, path_from_url, redact_url

DEFAULT_EXPERIMENT = "retrievalkit"
#: The parameters of the query string this store reads; any other is refused.
QUERY_NAMES = ("experiment", "artifacts")
SCHEMES = ("mlflow", "mlflow+file", "mlflow+sqlite", "mlflow+http", "mlflow+https")
EXAMPLES = (
    "mlflow+sqlite:///mlflow.db, mlflow+file:///mlruns, mlflow+http://127.0.0.1:5000 "
    "or mlflow: (with MLFLOW_TRACKING_URI set), each optionally ?experiment=NAME"
)


@attrs.frozen
class Target:
    """Where an MLflow store keeps its runs."""

    tracking_uri: str
    experiment: str
    artifact_location: str | None
    """The experiment's artifact root when this store creates it; None: MLflow's default."""
    local: Path | None
    """The file store's folder or the SQLite database, for the file backends."""


def _bad(url: str, problem: str) -> InputError:
    return InputError(f"store URL {redact_url(url)!r} {problem}", field="--store", hint=EXAMPLES)


def parse_target(url: str) -> Target:
    """The `Target` an ``mlflow...:`` URL names; an InputError naming the fix otherwise."""
    scheme, _, rest = url.partition(":")
    if scheme not in SCHEMES:
        raise _bad(url, f"has scheme {scheme!r}, not one of {', '.join(SCHEMES)}")
    base, _, query = rest.partition("?")
    options = urllib.parse.parse_qs(query, keep_blank_values=True) if query else {}
    unknown = sorted(set(options) - set(QUERY_NAMES))
    if unknown:
        raise _bad(url, f"has unknown parameter {unknown[0]!r} (known: {', '.join(QUERY_NAMES)})")
    if any(len(values) > 1 for values in options.values()):
        raise _bad(url, "names a parameter twice")
    if "experiment" in options:
        experiment = options["experiment"][0]
    else:
        experiment = os.environ.get("MLFLOW_EXPERIMENT_NAME", "") or DEFAULT_EXPERIMENT
    if experiment.strip() != experiment or not experiment:
        raise _bad(url, "has an empty experiment name or one with spaces around it")
    artifacts = options.get("artifacts", [""])[0]
    backend = scheme.partition("+")[2]
    if backend in ("file", "sqlite"):
        path = path_from_url(f"{backend}:{base}", backend)
        check_parent(path, redact_url(url), create=False)
        location: Path | None = (
            path_from_url(f"artifacts:{artifacts}", "artifacts") if artifacts else None
        )
        if location is None and backend == "sqlite":
            # MLflow's own default is ./mlruns in whatever folder the command runs from.
            location = path.parent / "mlartifacts"
        uri = path.resolve().as_uri() if backend == "file" else f"sqlite:///{path.resolve()}"
        root = None if location is None else location.resolve().as_uri()
        return Target(uri, experiment, root, path.resolve())
    if artifacts:
        raise _bad(url, "sets artifacts, which only the file and SQLite backends take")
    if backend in ("http", "https"):
        if not base.startswith("//") or len(base) <= 2:
            raise _bad(url, f"is not of the form {scheme}://HOST[:PORT][/PATH]")
        return Target(f"{backend}:{base}", experiment, None, None)
    if base:
        raise _bad(url, "has text after 'mlflow:'; the tracking URI comes from MLFLOW_TRACKING_URI")
    tracking = os.environ.get("MLFLOW_TRACKING_URI", "")
    if not tracking:
        raise InputError(
            "store URL 'mlflow:' needs MLFLOW_TRACKING_URI set to the tracking server or database",
            field="--store",
            hint="export MLFLOW_TRACKING_URI=http://HOST:5000, or name it: " + EXAMPLES,
        )
    return Target(tracking, experiment, None, None)
