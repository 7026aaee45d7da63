"""The release's performance goals, one row each, and which benchmark measures each row.

A benchmark reports a row with ``harness.target(KEY, met, figure)``: a ``goal:`` line
ending in ``[KEY]``. ``run_all.py`` prints every row of this table at the end with the
figure reported for it and MET or MISSED; a row that no benchmark reported (skipped,
left out with ``--only``, or measured at a smaller size than the goal's) is MISSED,
never MET.
"""

from __future__ import annotations

#: key: (what, goal, the benchmark that measures it), in the order they are printed.
TARGETS: dict[str, tuple[str, str, str]] = {
    "eval-100k": (
        "100k eval with save against a baseline, over the retriever",
        "<= 12 us a question",
        "scale",
    ),
    "eval-1m": ("10^6 eval with save against a baseline", "<= 12 s, <= 1 GB", "scale"),
    "validate-1m": ("10^6 `validate`", "<= 5 s, <= 500 MB", "scale"),
    "scoring": ("scoring 100k x 100 vs pytrec_eval, cold", "<= 0.2x", "scoring"),
    "compare-100k": ("`compare` of two stored 100k runs", "<= 1.5 s", "scale"),
    "sweep": (
        "a 27-configuration sweep varying only fusion and reranking options",
        "<= 1.5x one configuration's time",
        "sweep",
    ),
    "embedders": (
        "embedders: corpus embedding vs the model's own encode loop; exact dense search of "
        "300 questions over SciFact vs one numpy matrix product",
        ">= 0.95x its throughput; <= 1.2x",
        "models",
    ),
    "serve": ("`serve` pages at 100k questions", "<= 200 ms each", "serve"),
    "drift-100k": (
        "`drift` of a 10^5-line query log, two instant retrievers, save=False",
        "<= 20 s over the retrievers",
        "drift",
    ),
    "latency-gate": (
        "the gate with `[regression.latency] p95` at 10^5 questions",
        "<= 15 s",
        "latency_gate",
    ),
    "startup": (
        "start-up (`--help`, `list` with every plugin under plugins/ installed)",
        "<= 100 ms over bare Python",
        "startup",
    ),
}
