"""Mutation testing of the modules where a silent bug costs most, one module at a time.

Each module is mutated by mutmut in a scratch copy of the repository (``.mutants/NAME``)
and checked only against the tests that exercise it, so a full run stays short on a
two-core machine. Surviving mutants are compared with the triage file
(``tests/mutants-triage.toml``): a survivor listed there is equivalent (no test could
tell it apart, for the reason written next to it); any other survivor is a gap in the
tests. The report gives, per module, killed / survived / equivalent and the share of
non-equivalent mutants killed.

    python scripts/mutants.py                 # every module (what changed since the last run)
    python scripts/mutants.py --fresh         # every module, every mutant
    python scripts/mutants.py metrics stores  # some of them
    python scripts/mutants.py --report-only   # read the last run's results again
    python scripts/mutants.py --recheck stores  # the last run's survivors against new tests

Exit status: 0 when every module reached the goal (95 % of non-equivalent mutants
killed) and no triage entry is stale, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
SCRATCH = REPO / ".mutants"
TRIAGE = REPO / "tests" / "mutants-triage.toml"
GOAL = 0.95
#: mutmut runs under nice, so that a run at the desk leaves the machine usable.
NICENESS = 10


@dataclass(frozen=True)
class Target:
    """One module to mutate: its files, the functions to mutate, and the tests that judge."""

    files: tuple[str, ...]
    tests: tuple[str, ...]
    #: mutmut mutant-name globs; empty means every function of ``files``.
    functions: tuple[str, ...] = ()
    #: Tests of ``tests`` left out (pytest node ids): a seeded simulation that costs each
    #: survivor minutes, where tests of the definition pin the same code exactly.
    deselect: tuple[str, ...] = ()


TARGETS: dict[str, Target] = {
    "metrics": Target(
        ("retrievalkit/metrics/definitions.py",),
        (
            "tests/test_metrics_parity.py",
            "tests/test_metric_registry.py",
            "tests/test_scoring_protocol.py",
            # The streaming path (judge_codes) against the whole-run one, value for value.
            "tests/test_streaming.py",
        ),
    ),
    "intervals": Target(
        ("retrievalkit/stats/intervals.py",),
        # The coverage simulations (tests/test_coverage.py) are left out: each costs a
        # survivor tens of seconds, and the definition tests pin the same code exactly.
        ("tests/test_intervals.py", "tests/test_statistics_power.py", "tests/test_paired.py"),
    ),
    "scoring": Target(
        ("retrievalkit/metrics/scoring.py",),
        (
            "tests/test_scoring_protocol.py",
            "tests/test_metrics_parity.py",
            "tests/test_compare.py",
            "tests/test_streaming.py",
        ),
    ),
    "comparison": Target(
        ("retrievalkit/pipeline/gating/comparison.py",),
        ("tests/test_compare_records.py", "tests/test_compare.py"),
    ),
    "regression": Target(
        ("retrievalkit/pipeline/gating/gate.py",),
        (
            "tests/test_regression_gate.py",
            "tests/test_baselines.py",
            "tests/test_regression_unchecked.py",
            "tests/test_sequential.py",
            "tests/test_columns_comparison.py",
            "tests/test_compare.py",
        ),
    ),
    # Only the mapping of [regression] settings onto thresholds, not all of config.py.
    "config-thresholds": Target(
        ("retrievalkit/formats/config.py",),
        ("tests/test_thresholds.py", "tests/test_baselines.py"),
        functions=(
            "retrievalkit.formats.config.x__parse_regression__mutmut_*",
            "retrievalkit.formats.config.x__parse_slices__mutmut_*",
            "retrievalkit.formats.config.x__fraction__mutmut_*",
            "retrievalkit.formats.config.x__check_metric_name__mutmut_*",
        ),
    ),
    "redaction": Target(
        ("retrievalkit/redaction.py",),
        (
            "tests/test_redaction.py",
            "tests/test_redaction_names.py",
            "tests/test_secrets_never_leave.py",
            "tests/test_redaction_structure.py",
            "tests/test_redaction_urls.py",
        ),
    ),
    "stores": Target(
        (
            "retrievalkit/stores/__init__.py",
            "retrievalkit/stores/jsonl.py",
            "retrievalkit/stores/memory.py",
            "retrievalkit/stores/serialization.py",
            "retrievalkit/stores/sqlite.py",
        ),
        (
            "tests/test_stores.py",
            "tests/test_store_files.py",
            "tests/test_store_concurrency.py",
            "tests/test_store_schema_versions.py",
            "tests/test_baselines.py",
            "tests/test_store_columns.py",
        ),
    ),
    # The stored form of a run's per-question values: columns, their codes and compression.
    "outcomes": Target(
        ("retrievalkit/model/outcomes.py",),
        (
            "tests/test_outcomes.py",
            "tests/test_store_columns.py",
            "tests/test_columns_comparison.py",
        ),
    ),
    # --- where a verdict or a user's safety is decided --------------------------------
    "deadlines": Target(
        ("retrievalkit/retrievers/deadlines.py",),
        ("tests/test_retriever_faults.py", "tests/test_http_retriever.py"),
    ),
    # A ranking that repeats a chunk id: its document counted once, at its first rank.
    "chunks": Target(
        ("retrievalkit/pipeline/engine/chunks.py",),
        ("tests/test_chunk_metrics.py", "tests/test_returned_id_edges.py"),
    ),
    "stages": Target(
        ("retrievalkit/pipeline/engine/stages.py",),
        ("tests/test_stages.py", "tests/test_stage_comparison.py"),
    ),
    "gate": Target(
        ("retrievalkit/pipeline/gating/gate.py",),
        (
            "tests/test_regression_gate.py",
            "tests/test_gate_calibration.py",
            "tests/test_sequential.py",
            "tests/test_clusters.py",
            "tests/test_columns_comparison.py",
            "tests/test_baselines.py",
        ),
    ),
    "clusters": Target(
        ("retrievalkit/stats/clusters.py",),
        (
            "tests/test_clusters.py",
            "tests/test_oracles_holm_and_clusters.py",
            "tests/test_partial_clusters.py",
            "tests/test_related_questions.py",
        ),
    ),
    "paired": Target(
        ("retrievalkit/stats/paired.py",),
        (
            "tests/test_paired.py",
            "tests/test_oracles_holm_and_clusters.py",
            "tests/test_oracles_paired_and_power.py",
            "tests/test_statistics_power.py",
        ),
    ),
    "power": Target(
        ("retrievalkit/stats/power.py",),
        (
            "tests/test_power.py",
            "tests/test_oracles_paired_and_power.py",
            "tests/test_clustered_power_and_sequential.py",
        ),
        # The seeded simulations of the achieved power (hundreds of simulated sets each);
        # the exact sums against scipy's binomial, the normal formulas and the simulated
        # power against a simulation written apart in the tests pin the same code.
        deselect=(
            "tests/test_power.py::test_the_detectable_drop_is_found_80_percent_of_the_time",
            "tests/test_power.py::test_continuous_power_follows_the_sign_flip_test",
            "tests/test_power.py::test_questions_needed_for_ndcg_are_within_10_percent_of_the_simulated_count",
            "tests/test_oracles_paired_and_power.py::test_clustered_power_holds_in_a_seeded_simulation",
            "tests/test_clustered_power_and_sequential.py::test_clusters_needed_are_within_10_percent_of_the_simulated_count",
            "tests/test_clustered_power_and_sequential.py::test_the_worst_case_of_unequal_clusters_holds_in_simulation",
            "tests/test_clustered_power_and_sequential.py::test_clustered_aa_runs_fail_the_sequential_gate_at_most_5_percent",
        ),
    ),
    "ppi": Target(
        ("retrievalkit/stats/ppi.py",), ("tests/test_ppi.py", "tests/test_oracles_ppi.py")
    ),
    "sequential": Target(
        ("retrievalkit/stats/sequential.py",),
        (
            "tests/test_sequential.py",
            "tests/test_oracles_sequential.py",
            "tests/test_clustered_power_and_sequential.py",
        ),
    ),
    # Small-sample widening and the large-sample paths.
    "large-samples": Target(
        ("retrievalkit/stats/large_samples.py",),
        ("tests/test_large_samples.py", "tests/test_oracles_intervals.py"),
    ),
    "command": Target(
        ("retrievalkit/retrievers/command.py",),
        ("tests/test_command_retriever.py", "tests/test_child_processes.py"),
    ),
    "http-service": Target(
        ("retrievalkit/retrievers/http_service.py",),
        ("tests/test_http_retriever.py", "tests/test_retriever_faults.py"),
    ),
    "sweep": Target(
        ("retrievalkit/pipeline/sweeps/sweep.py",),
        ("tests/test_sweep.py", "tests/test_sweep_checks.py"),
    ),
    # Escaping of what a page shows, the origin and token rules.
    "serve": Target(
        (
            "retrievalkit/serve/app.py",
            "retrievalkit/serve/charts.py",
            "retrievalkit/serve/judging_queue.py",
            "retrievalkit/serve/templates.py",
            "retrievalkit/serve/views.py",
        ),
        ("tests/test_serve_in_process.py", "tests/test_serve_origin.py", "tests/test_serve.py"),
    ),
    # --- latency, interleaving, drift, incomplete judgments ----------------------------
    # Percentiles of a run's latencies, their intervals and the paired difference.
    "latency-stats": Target(
        ("retrievalkit/stats/latency.py",),
        ("tests/test_latency_stats.py", "tests/test_gate_latency.py"),
    ),
    # The latency thresholds of the gate, and its warning for runs timed apart.
    "latency-gate": Target(
        ("retrievalkit/pipeline/gating/latency.py", "retrievalkit/pipeline/gating/increases.py"),
        ("tests/test_gate_latency.py", "tests/test_timing.py", "tests/test_gate_increases.py"),
    ),
    # Team-draft interleaving: the merged ranking, the credit of each click, the verdict.
    "interleaving": Target(
        ("retrievalkit/model/interleaving.py", "retrievalkit/pipeline/gating/interleaving.py"),
        ("tests/test_interleaving.py",),
        # Two minutes a survivor; the worked examples of the credit pin the same code.
        deselect=(
            "tests/test_interleaving.py::test_equally_good_rankers_are_rarely_told_apart",
            "tests/test_interleaving.py::test_a_better_ranker_wins_the_sign_test",
        ),
    ),
    "drift": Target(("retrievalkit/pipeline/drift/engine.py",), ("tests/test_drift.py",)),
    # The unjudged-aware verdict, and the two metrics for incomplete judgments.
    "unjudged": Target(
        ("retrievalkit/pipeline/gating/unjudged.py", "retrievalkit/metrics/definitions.py"),
        ("tests/test_unjudged_verdict.py", "tests/test_incomplete_judgments.py"),
        functions=(
            "retrievalkit.pipeline.gating.unjudged.*",
            "retrievalkit.metrics.definitions.x__bpref__mutmut_*",
            "retrievalkit.metrics.definitions.x__infap__mutmut_*",
        ),
    ),
    # The machine record beside a run's latencies.
    "machine": Target(("retrievalkit/pipeline/engine/machine.py",), ("tests/test_timing.py",)),
    # --- comparing many runs, labelling fewer questions, pooling -----------------------
    # Tukey's HSD over three or more runs: the studentized range and its p-values.
    "tukey": Target(
        ("retrievalkit/stats/tukey.py",),
        ("tests/test_tukey_hsd.py",),
        # 400 seeded experiments of six systems; the full enumeration of the worked
        # example and the comparison with scipy pin the same code exactly.
        deselect=(
            "tests/test_tukey_hsd.py::test_the_family_wise_error_under_the_null_is_at_most_alpha",
        ),
    ),
    # The paired prediction-powered difference and the priority of questions to label.
    "ppi-paired": Target(
        ("retrievalkit/stats/ppi_paired.py",),
        ("tests/test_ppi_paired.py",),
        # 1,000 and 300 seeded comparisons; the agreement with ppi-python pins the same code.
        deselect=(
            "tests/test_ppi_paired.py::test_coverage_and_width_by_seeded_simulation",
            "tests/test_ppi_paired.py::test_a_90_percent_interval_fails_the_95_percent_check",
        ),
    ),
    # The judging pool of several runs: which unjudged pairs, and in which order.
    "pool": Target(("retrievalkit/pipeline/authoring/pool.py",), ("tests/test_pool.py",)),
}

#: A pytest plugin for the scratch copy: tests that run the command line in a child
#: process (the ``cli`` fixture) import the installed, unmutated package there, so they
#: can never kill a mutant; they only cost time, and are left out.
#: It also runs the fastest tests first (by the durations mutmut recorded), since mutmut
#: stops at the first failure: most mutants then die in the first second, not after a
#: coverage simulation that happened to be listed first.
IN_PROCESS_ONLY = """


def pytest_collection_modifyitems(config, items):
    import json
    import pathlib

    kept = [item for item in items if "cli" not in getattr(item, "fixturenames", ())]
    config.hook.pytest_deselected(items=[item for item in items if item not in kept])
    stats = pathlib.Path("mutmut-stats.json")
    durations = json.loads(stats.read_text())["duration_by_test"] if stats.is_file() else {}
    kept.sort(key=lambda item: durations.get(item.nodeid, 0.0))
    items[:] = kept
"""

#: Statements left alone: raising (its message) and logging.
NOT_MUTATED = (r"^\s*raise ", r"^\s*log\.(debug|info|warning|error|exception)\(")

KILLED = {"killed", "timeout", "caught by type check", "segfault"}

#: (function, change) -> (kind, why); see tests/mutants-triage.toml. Kinds: ``equivalent``
#: (no test can tell the mutant from the code) and ``gap`` (a survivor a test could kill,
#: not written yet: it still counts as survived, but is known, with what it needs).
Triage = dict[tuple[str, str], tuple[str, str]]
KINDS = ("equivalent", "gap")


def load_triage(path: Path = TRIAGE) -> Triage:
    document = tomllib.loads(path.read_text(encoding="utf-8"))
    triage: Triage = {}
    for kind in KINDS:
        for number, entry in enumerate(document.get(kind, []), 1):
            missing = {"function", "change", "why"} - set(entry)
            if missing:
                raise SystemExit(f"{path}: {kind} {number} has no {', '.join(sorted(missing))}")
            key = (entry["function"], entry["change"])
            if key in triage:
                raise SystemExit(f"{path}: {kind} {number} repeats an entry: {' '.join(key)}")
            triage[key] = (kind, entry["why"])
    return triage


def function_of(mutant: str) -> str:
    """mutmut's mutant name without its number: ``pkg.mod.x_f__mutmut_3`` -> ``pkg.mod.x_f``."""
    return mutant.rpartition("__mutmut_")[0]


@dataclass
class Tally:
    killed: int = 0
    survived: list[str] = field(default_factory=list)
    equivalent: list[str] = field(default_factory=list)
    #: survivors triaged as gaps: a test still to write, known and described
    known: list[str] = field(default_factory=list)
    other: dict[str, int] = field(default_factory=dict)

    @property
    def non_equivalent(self) -> int:
        return self.killed + len(self.survived) + sum(self.other.values())

    @property
    def score(self) -> float:
        return self.killed / self.non_equivalent if self.non_equivalent else 1.0


def _mutmut() -> str:
    found = shutil.which("mutmut") or str(Path(sys.executable).with_name("mutmut"))
    return found


def _copy_tests(workdir: Path, target: Target) -> None:
    """The tests as they are now, and the configuration that picks the module's own."""
    shutil.rmtree(workdir / "tests", ignore_errors=True)
    shutil.copytree(REPO / "tests", workdir / "tests")
    config = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    config += "\n[tool.mutmut]\n"
    config += 'source_paths = ["retrievalkit"]\n'
    config += f"only_mutate = {json.dumps(list(target.files))}\n"
    # A test file another part of the suite has not grown yet is left out, not an error.
    tests = [test for test in target.tests if (REPO / test).is_file()]
    config += f"pytest_add_cli_args_test_selection = {json.dumps(tests)}\n"
    deselected = [arg for test in target.deselect for arg in ("--deselect", test)]
    config += f"pytest_add_cli_args = {json.dumps(['-p', 'no:cacheprovider', '-q', *deselected])}\n"
    with open(workdir / "tests" / "conftest.py", "a", encoding="utf-8") as conftest:
        conftest.write(IN_PROCESS_ONLY)
    # The wording of error messages and log lines is checked by the bad-input tests; here it
    # would only multiply the mutants (each a full test run) without finding silent bugs.
    config += f"do_not_mutate_patterns = {json.dumps(list(NOT_MUTATED))}\n"
    (workdir / "pyproject.toml").write_text(config, encoding="utf-8")


def _prepare(name: str, target: Target, *, fresh: bool) -> tuple[Path, bool]:
    """The module's scratch copy, and whether it is new.

    An earlier copy is brought up to date instead of made anew: a source file whose
    content changed is copied (so mutmut mutates it again and runs only the mutants of
    the functions whose code changed), the others keep their mutants and results.
    """
    workdir = SCRATCH / name
    if not fresh and (workdir / "mutants").is_dir():
        if _sync(REPO / "retrievalkit", workdir / "retrievalkit"):
            # mutmut maps tests to functions once and only adds new tests later: a changed
            # or renamed function would keep a stale map (fewer tests than reach it now,
            # so false survivors), so the map is made again; verdicts of unchanged
            # functions are kept.
            (workdir / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)
        _copy_tests(workdir, target)
        return workdir, False
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    shutil.copytree(REPO / "retrievalkit", workdir / "retrievalkit")
    _copy_tests(workdir, target)
    # mutmut runs the tests from workdir/mutants: the IR collections must sit beside it.
    data = next(
        (
            parent / "shared" / "data"
            for parent in REPO.parents
            if (parent / "shared/data").is_dir()
        ),
        None,
    )
    if data is None:
        raise SystemExit("shared/data with the IR test collections is missing")
    (workdir / "shared").mkdir()
    (workdir / "shared" / "data").symlink_to(data)
    return workdir, True


def _sync(source: Path, copy: Path) -> bool:
    """Make ``copy`` hold what ``source`` holds, touching only the files that differ;
    whether any did."""
    changed = False
    wanted = {path.relative_to(source) for path in source.rglob("*") if path.is_file()}
    for relative in sorted(wanted):
        if "__pycache__" in relative.parts:
            continue
        target = copy / relative
        content = (source / relative).read_bytes()
        if not target.is_file() or target.read_bytes() != content:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)  # a new mtime: mutmut sees the file changed
            changed = True
    for path in sorted(copy.rglob("*"), reverse=True):
        if path.is_file() and path.relative_to(copy) not in wanted:
            path.unlink()
            changed = True
    return changed


def run(name: str, target: Target, triage: Triage, children: int, *, fresh: bool) -> None:
    workdir, new = _prepare(name, target, fresh=fresh)
    command = ["nice", "-n", str(NICENESS), _mutmut(), "run", "--max-children", str(children)]
    command += list(target.functions)
    tests = [test for test in target.tests if (REPO / test).is_file()]
    how = "all mutants" if new else "mutants of changed functions, then earlier survivors"
    print(f"== {name}: {' '.join(target.files)} against {' '.join(tests)} ({how})", flush=True)
    with open(workdir / "mutmut.log", "w", encoding="utf-8") as log:
        done = subprocess.run(command, cwd=workdir, stdout=log, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        tail = (workdir / "mutmut.log").read_text(encoding="utf-8", errors="replace")[-2000:]
        raise SystemExit(f"mutmut failed for {name} (exit {done.returncode}):\n{tail}")
    if not new:
        # mutmut keeps a survivor's verdict while its function is unchanged; a test
        # written since may kill it now.
        recheck(name, target, triage, children)


def recheck(name: str, target: Target, triage: Triage, children: int) -> None:
    """Run the last run's untriaged survivors of ``name`` again against the tests as they
    are now: after a test is written for a survivor, without mutating everything again."""
    workdir = SCRATCH / name
    if not (workdir / "mutants").is_dir():
        raise SystemExit(f"{name}: no earlier run to recheck; run it first")
    results = sorted(_results(name, target).items())
    diffs = _diffs(name, [mutant for mutant, status in results if status == "survived"])
    survivors = [
        mutant
        for mutant, status in results
        if status == "no tests"
        or (
            status == "survived"
            and triage.get((function_of(mutant), diffs[mutant]), ("gap", ""))[0] == "gap"
        )
    ]
    print(f"== {name}: {len(survivors)} survivors again", flush=True)
    if not survivors:
        return
    _copy_tests(workdir, target)
    # The map of tests to functions is made again (one clean run of the tests): mutmut only
    # adds new tests to it, so a test that was there before and now reaches the survivor's
    # function as well (a new call in it) would not be run against the survivor.
    (workdir / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)
    command = ["nice", "-n", str(NICENESS), _mutmut(), "run", "--max-children", str(children)]
    with open(workdir / "mutmut.log", "a", encoding="utf-8") as log:
        done = subprocess.run(
            [*command, *survivors], cwd=workdir, stdout=log, stderr=subprocess.STDOUT
        )
    if done.returncode != 0:
        tail = (workdir / "mutmut.log").read_text(encoding="utf-8", errors="replace")[-2000:]
        raise SystemExit(f"mutmut failed for {name} (exit {done.returncode}):\n{tail}")


def _results(name: str, target: Target) -> dict[str, str]:
    workdir = SCRATCH / name
    out = subprocess.run(
        [_mutmut(), "results", "--all", "true"],
        cwd=workdir,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    results = {}
    for line in out.splitlines():
        mutant, _, status = line.strip().rpartition(": ")
        if not mutant:
            continue
        if target.functions and not any(_glob(mutant, pattern) for pattern in target.functions):
            continue
        results[mutant] = status
    return results


def _glob(name: str, pattern: str) -> bool:
    import fnmatch

    return fnmatch.fnmatchcase(name, pattern)


#: Run in the scratch copy: mutmut's diff of each mutant named on stdin, as JSON. One
#: process for all of a module's survivors, not a ``mutmut show`` (a second) for each.
_DIFFS = """
import json, sys
from mutmut.mutation.diff_apply import get_diff_for_mutant
print(json.dumps({name: get_diff_for_mutant(name) for name in sys.stdin.read().split()}))
"""


def _diffs(name: str, mutants: list[str]) -> dict[str, str]:
    """Each mutant's change, as ``- old line | + new line`` (lines stripped)."""
    if not mutants:
        return {}
    python = Path(_mutmut()).with_name("python")
    shown = subprocess.run(
        [str(python if python.exists() else sys.executable), "-c", _DIFFS],
        cwd=SCRATCH / name,
        input="\n".join(mutants),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    changes = {}
    for mutant, diff in json.loads(shown).items():
        changed = [
            line
            for line in diff.splitlines()
            if line[:1] in "+-" and not line.startswith(("+++", "---"))
        ]
        changes[mutant] = " | ".join(f"{line[0]} {line[1:].strip()}" for line in changed)
    return changes


def report(names: list[str], triage: Triage) -> bool:
    ok = True
    seen: set[tuple[str, str]] = set()
    rows = []
    for name in names:
        target = TARGETS[name]
        if not (SCRATCH / name / "mutants").is_dir():
            print(f"{name}: no results (run it first)")
            ok = False
            continue
        tally = Tally()
        changes = {}
        results = sorted(_results(name, target).items())
        diffs = _diffs(name, [mutant for mutant, status in results if status == "survived"])
        for mutant, status in results:
            if status in KILLED:
                tally.killed += 1
                continue
            if status != "survived":
                tally.other[status] = tally.other.get(status, 0) + 1
                continue
            key = (function_of(mutant), diffs[mutant])
            kind = triage.get(key, ("", ""))[0]
            if kind:
                seen.add(key)
            if kind == "equivalent":
                tally.equivalent.append(mutant)
                continue
            changes[mutant] = key[1]
            tally.survived.append(mutant)
            if kind == "gap":
                tally.known.append(mutant)
        rows.append((name, tally))
        for mutant in tally.survived:
            label = "KNOWN GAP" if mutant in tally.known else "SURVIVED"
            print(f"{label} {mutant}: {changes[mutant]}")
        if tally.score < GOAL:
            ok = False
    stale = sorted(key for key in triage if _covers(names, key[0]) and key not in seen)
    for function, change in stale:
        print(f"STALE triage entry (no such surviving mutant now): {function}: {change}")
    print()
    print(f"{'module':<18} {'killed':>7} {'survived':>9} {'equivalent':>11} {'other':>6}  score")
    for name, tally in rows:
        other = sum(tally.other.values())
        notes = [f"{k}: {v}" for k, v in sorted(tally.other.items())]
        if tally.known:
            notes.append(f"known gaps: {len(tally.known)} of the survivors")
        print(
            f"{name:<18} {tally.killed:>7} {len(tally.survived):>9} {len(tally.equivalent):>11}"
            f" {other:>6}  {tally.score:6.1%}" + (f"  ({', '.join(notes)})" if notes else "")
        )
    return ok and not stale


def _covers(names: list[str], function: str) -> bool:
    """Whether one of the targets ``names`` mutates ``function`` (a triage entry's): a
    target of some functions of a module (``functions``) covers only those."""
    for name in names:
        target = TARGETS[name]
        if not function.startswith(tuple(f"{module}.x" for module in _modules([name]))):
            continue
        mutant = f"{function}__mutmut_1"
        if not target.functions or any(_glob(mutant, pattern) for pattern in target.functions):
            return True
    return False


def _modules(names: list[str]) -> set[str]:
    modules = set()
    for name in names:
        for path in TARGETS[name].files:
            modules.add(path.removesuffix(".py").removesuffix("/__init__").replace("/", "."))
    return modules


def _set_niceness(value: int) -> None:
    global NICENESS
    NICENESS = value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", metavar="MODULE", help=", ".join(TARGETS))
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="mutate and test everything again, instead of only what changed since the last run",
    )
    parser.add_argument(
        "--recheck",
        action="store_true",
        help="run only the last run's untriaged survivors again, against the current tests",
    )
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    parser.add_argument(
        "--nice", type=int, default=NICENESS, help=f"niceness of mutmut (default {NICENESS})"
    )
    args = parser.parse_args()
    _set_niceness(args.nice)
    names = list(args.modules) or list(TARGETS)
    unknown = sorted(set(names) - set(TARGETS))
    if unknown:
        parser.error(f"unknown module {', '.join(unknown)}; known: {', '.join(TARGETS)}")
    triage = load_triage()
    if args.recheck:
        for name in names:
            recheck(name, TARGETS[name], triage, args.max_children)
    elif not args.report_only:
        for name in names:
            run(name, TARGETS[name], triage, args.max_children, fresh=args.fresh)
    return 0 if report(names, triage) else 1


if __name__ == "__main__":
    raise SystemExit(main())
