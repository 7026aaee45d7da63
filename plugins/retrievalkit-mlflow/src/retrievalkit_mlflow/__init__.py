"""retrievalkit runs kept in MLflow: ``--store mlflow+sqlite:///mlflow.db`` and its kin."""

from __future__ import annotations

from retrievalkit_mlflow.store import MlflowStore
from retrievalkit_mlflow.urls import Target, parse_target

__version__ = "0.1.0"
__all__ = ["MlflowStore", "Target", "__version__", "parse_target"]
