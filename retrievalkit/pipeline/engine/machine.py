"""The machine a run is timed on: what its manifest records beside the latencies.

Latency depends on the machine and on what else it was doing: `machine_at_start` reads
the CPU model, the cores and the load average before the first question, and
`machine_at_end` adds the load average after the last answer. `retrievalkit gate`
compares two runs' records before it trusts a latency threshold
(`retrievalkit.pipeline.gating.latency`).
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import attrs

from retrievalkit.model.values import Machine

_CPUINFO = Path("/proc/cpuinfo")


def cpu_model(cpuinfo: Path = _CPUINFO) -> str | None:
    """The CPU's model name: the first ``model name`` (or ``Hardware``) line
    of ``/proc/cpuinfo``, else ``platform.processor()``; None when neither says."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        key, colon, value = line.partition(":")
        if colon and value.strip() and key.strip().lower() in ("model name", "hardware"):
            return value.strip()
    return platform.processor().strip() or None


def load_average() -> tuple[float, ...] | None:
    """The 1, 5 and 15 minute load averages; None where the system keeps none."""
    try:
        return tuple(round(value, 2) for value in os.getloadavg())
    except (AttributeError, OSError):
        return None


def machine_at_start(*, concurrency: int, repeat: int, warmup: int) -> Machine:
    """The machine record of a run about to ask its questions (no end load yet)."""
    return Machine(
        cpu=cpu_model(),
        cores=os.cpu_count(),
        load_at_start=load_average(),
        load_at_end=None,
        python=platform.python_version(),
        concurrency=concurrency,
        repeat=repeat,
        warmup=warmup,
    )


def machine_at_end(machine: Machine) -> Machine:
    """``machine`` with the load average now, after the last answer."""
    return attrs.evolve(machine, load_at_end=load_average())
