"""Whether a stored run's summary agrees with its outcome columns, before the gate trusts it.

A run is stored as a summary (means, counts) beside its per-question columns. An edit
by hand, a bad merge or a damaged file can leave the two disagreeing: a summary that
says hit@1 is 0.9 over columns that say 0.5. The gate compares columns, and reports
summaries; it must never do either with a run whose parts disagree. `check_run`
recomputes what the summary claims from the columns and names the first difference.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from retrievalkit.errors import EXIT_EVALUATION_FAILED, StoreError
from retrievalkit.model.records import ResultRecord


class UntrustedRun(StoreError):
    """A stored run whose summary disagrees with its columns: exit code 3."""

    exit_code = EXIT_EVALUATION_FAILED


class DamagedRun(UntrustedRun):
    """A stored run whose content no longer matches the digest written when it was saved:
    exit code 3, like every stored run the gate cannot trust."""


def check_run(record: ResultRecord, metrics: Iterable[str], store: str) -> None:
    """Raise `UntrustedRun` when ``record``'s summary disagrees with its columns.

    Checked: the question count, the errored count, and for each of ``metrics`` the
    summary has, how many questions define it and its mean (to 1e-9: the order in
    which values were summed may differ).
    """
    import numpy as np

    outcomes = record.outcomes
    problems: list[str] = []
    try:
        ids = len(outcomes.question_ids)
        if ids != len(outcomes):
            problems.append(f"{len(outcomes)} questions in the summary, {ids} in the columns")
        errored = len(outcomes.errors)
        if errored != record.errored:
            problems.append(f"{record.errored} errored in the summary, {errored} in the columns")
        for metric in dict.fromkeys(metrics):
            stored = record.metrics.get(metric)
            if stored is None:
                continue
            try:
                values = np.asarray(outcomes.values(metric), dtype=float)
            except KeyError:
                problems.append(f"{metric} is in the summary but has no column")
                continue
            defined = values[~np.isnan(values)]
            mean = float(defined.mean()) if defined.size else None
            if stored.n != defined.size:
                problems.append(
                    f"{metric} is defined for {stored.n} questions in the summary, "
                    f"{defined.size} in the columns"
                )
            elif (mean is None) != (stored.mean is None) or (
                mean is not None
                and stored.mean is not None
                and not math.isclose(mean, stored.mean, rel_tol=1e-9, abs_tol=1e-12)
            ):
                problems.append(
                    f"{metric} has the mean {stored.mean!r} in the summary, {mean!r} in the columns"
                )
    except UntrustedRun:
        raise
    except StoreError as error:  # a column that does not decode as its header says
        problems.append(str(error))
    except Exception as error:  # columns that cannot be decoded
        problems.append(f"its columns cannot be read ({type(error).__name__}: {error})")
    if problems:
        raise UntrustedRun(
            f"run {record.run_id} in {store}: its stored summary disagrees with its outcome "
            f"columns ({'; '.join(problems[:3])}); it was changed outside retrievalkit or "
            "damaged, and the gate does not use it (restore the store from a backup, or "
            "delete the run and choose another baseline)"
        )
