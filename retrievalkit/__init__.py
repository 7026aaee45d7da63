"""retrievalkit: measure the retrieval step of search and RAG systems.

The Python API (the command line is a shell over it):

- `load_set`, `open_store`, `load_config`: the inputs;
- `evaluate(set, retriever, ...) -> Run`: ask every question, score, with intervals;
- `gate(run, store, thresholds) -> Verdict`: compare with the baseline and decide;
- `compare(runs) -> Comparison`: paired comparison of two or more runs;
- `fidelity(set, candidate, reference)`: label-free overlap with a reference retriever;
- `pool(set, runs, depth=10)`: the unjudged pairs to label next to settle a comparison;
- `drift(log, retriever, against) -> DriftResult`: label-free comparison on a query log;
- `sweep(set, NAME) -> SweepResult`: tune a retriever over a grid, confirm the winner held out;
- `record_usage(model, input_tokens, output_tokens)`: the tokens an API call spent, for
  the question being asked (the run's cost);
- the value types `GoldenQuestion`, `GoldenQuestionSet`, `ResultRecord`, `MetricValue`.

Names are imported on first use, so `import retrievalkit` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from retrievalkit._version import __version__ as __version__

if TYPE_CHECKING:
    from retrievalkit.api import (
        Run,
        Thresholds,
        compare,
        drift,
        drift_records,
        evaluate,
        fidelity,
        gate,
        interleave_credit,
        load_config,
        load_set,
        open_store,
        pool,
        power,
        sweep,
    )
    from retrievalkit.errors import RunFailed
    from retrievalkit.formats.sweep_table import SweepConfig
    from retrievalkit.metrics.definitions import Metric, parse_metric
    from retrievalkit.model.records import ResultRecord
    from retrievalkit.model.values import (
        GoldenQuestion,
        GoldenQuestionSet,
        MetricValue,
        QuestionForm,
        QuestionOutcome,
    )
    from retrievalkit.pipeline.gating.comparison import Comparison
    from retrievalkit.pipeline.gating.gate import Verdict
    from retrievalkit.pipeline.sweeps.sweep import SweepResult
    from retrievalkit.stats.ppi_paired import (
        CorrectedDifference,
        corrected_difference,
        labelling_priority,
    )
    from retrievalkit.usage import record_usage

_EXPORTS = {
    "Run": "retrievalkit.api",
    "RunFailed": "retrievalkit.errors",
    "Thresholds": "retrievalkit.pipeline.gating.thresholds",
    "compare": "retrievalkit.api",
    "drift": "retrievalkit.api",
    "drift_records": "retrievalkit.api",
    "evaluate": "retrievalkit.api",
    "fidelity": "retrievalkit.api",
    "gate": "retrievalkit.api",
    "power": "retrievalkit.api",
    "pool": "retrievalkit.api",
    "interleave_credit": "retrievalkit.api",
    "load_config": "retrievalkit.api",
    "load_set": "retrievalkit.api",
    "open_store": "retrievalkit.api",
    "sweep": "retrievalkit.api",
    "SweepConfig": "retrievalkit.formats.sweep_table",
    "SweepResult": "retrievalkit.pipeline.sweeps.sweep",
    "Comparison": "retrievalkit.pipeline.gating.comparison",
    "Metric": "retrievalkit.metrics.definitions",
    "parse_metric": "retrievalkit.metrics.definitions",
    "GoldenQuestion": "retrievalkit.model.values",
    "GoldenQuestionSet": "retrievalkit.model.values",
    "MetricValue": "retrievalkit.model.values",
    "QuestionForm": "retrievalkit.model.values",
    "QuestionOutcome": "retrievalkit.model.values",
    "ResultRecord": "retrievalkit.model.records",
    "Verdict": "retrievalkit.pipeline.gating.gate",
    "record_usage": "retrievalkit.usage",
    "CorrectedDifference": "retrievalkit.stats.ppi_paired",
    "corrected_difference": "retrievalkit.stats.ppi_paired",
    "labelling_priority": "retrievalkit.stats.ppi_paired",
}

__all__ = [
    "Comparison",
    "CorrectedDifference",
    "GoldenQuestion",
    "GoldenQuestionSet",
    "Metric",
    "MetricValue",
    "QuestionForm",
    "QuestionOutcome",
    "ResultRecord",
    "Run",
    "RunFailed",
    "SweepConfig",
    "SweepResult",
    "Thresholds",
    "Verdict",
    "__version__",
    "compare",
    "corrected_difference",
    "drift",
    "drift_records",
    "evaluate",
    "fidelity",
    "gate",
    "interleave_credit",
    "labelling_priority",
    "load_config",
    "load_set",
    "open_store",
    "parse_metric",
    "pool",
    "power",
    "record_usage",
    "sweep",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'retrievalkit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
