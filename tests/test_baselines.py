"""Pinned baselines, run history and pruning, the significance- and slice-aware gate.

Stores are real: SQLite and JSON Lines files on disk in tmp_path, and the in-process
memory store. The command line runs as a subprocess in tmp_path with a
``retrievalkit.toml`` that defines retrievers of different quality over the demo corpus.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import by_hand
import pytest
from child_env import child_environment
from conftest import REPO, RunCli

from retrievalkit.demo import DEMO_CORPUS
from retrievalkit.errors import InputError, StoreError
from retrievalkit.formats.config import find_config
from retrievalkit.formats.golden_sets import load_jsonl
from retrievalkit.metrics.scoring import ScoringOptions, score_run
from retrievalkit.model.records import GRADER, ResultRecord
from retrievalkit.pipeline.engine.evaluator import Retrieval
from retrievalkit.pipeline.engine.record import build_record
from retrievalkit.pipeline.gating.baselines import NEWEST, PINNED, choose_baseline
from retrievalkit.pipeline.gating.gate import compare_runs
from retrievalkit.pipeline.gating.history import build_history, manifest_changes, runs_to_prune
from retrievalkit.stores import (
    DeletingStore,
    PinningStore,
    ResultStore,
    deleting,
    open_store,
    pinned_run_id,
    pinning,
)
from retrievalkit.stores.jsonl import JSONLStore
from retrievalkit.stores.sqlite import SQLiteStore

DEMO_SET = load_jsonl(REPO / "retrievalkit" / "demo" / "golden.jsonl", name="demo")
SCORING = ScoringOptions(ks=(1, 3, 5, 10), resamples=500)


def record_of(
    rankings: Sequence[Sequence[str]], *, options: dict[str, Any] | None = None
) -> ResultRecord:
    """A real record of retriever ``sys`` on the demo set from given rankings, scored as eval."""
    retrievals = [Retrieval(tuple(ranking), 1.0) for ranking in rankings]
    scores = score_run(DEMO_SET.questions, retrievals, SCORING)
    return build_record(
        DEMO_SET, "sys", "test", options or {}, scores, SCORING, overfetch=3, git_commit=None
    )


def perfect() -> list[list[str]]:
    return [list(question.expected) for question in DEMO_SET.questions]


def empty() -> list[list[str]]:
    return [[] for _ in DEMO_SET.questions]


# --- the three built-in stores: pins and deletion ---------------------------------------------


@pytest.fixture(params=["sqlite", "jsonl", "memory"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    # tmp_path is absolute, so these have the four slashes of an absolute store path.
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/runs.sqlite3"
    if request.param == "jsonl":
        return f"jsonl:///{tmp_path}/runs.jsonl"
    return f"memory:{uuid.uuid4().hex}"


def test_every_built_in_store_pins_and_deletes(store_url: str) -> None:
    store = open_store(store_url)
    assert isinstance(store, PinningStore) and isinstance(store, DeletingStore)
    first, second, third = record_of(perfect()), record_of(empty()), record_of(perfect())
    for record in (first, second, third):
        store.save(record)

    assert store.pinned("demo", "sys") is None
    assert store.pin(first) is None
    assert store.pinned("demo", "sys", GRADER) == first.run_id
    assert store.pin(second) == first.run_id  # a key has one pin; pinning replaces it
    assert store.pinned("demo", "sys") == second.run_id
    assert store.pinned("demo", "other") is None

    reopened = open_store(store_url)  # pins are stored, not held in the object
    assert pinned_run_id(reopened, "demo", "sys") == second.run_id

    with pytest.raises(StoreError, match="pinned baseline"):
        store.delete([first.run_id, second.run_id])
    assert len(store.runs("demo", "sys")) == 3  # refused whole: nothing was deleted

    assert store.delete([first.run_id]) == 1
    assert [run.run_id for run in store.runs("demo", "sys")] == [third.run_id, second.run_id]
    assert store.get(first.run_id) is None

    assert store.unpin("demo", "sys") == second.run_id
    assert store.unpin("demo", "sys") is None
    assert store.pinned("demo", "sys") is None
    assert store.delete([second.run_id, "no-such-run"]) == 1
    assert [run.run_id for run in store.all_runs()] == [third.run_id]


def test_a_run_that_is_not_stored_cannot_be_pinned(store_url: str) -> None:
    store = open_store(store_url)
    assert isinstance(store, PinningStore)
    with pytest.raises(StoreError, match="not stored"):
        store.pin(record_of(perfect()))


def test_jsonl_pins_live_in_a_sidecar_and_leave_the_runs_file_alone(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    store = JSONLStore(path)
    records = [record_of(perfect()), record_of(empty())]
    for record in records:
        store.save(record)
    before = path.read_bytes()
    store.pin(records[0])
    assert path.read_bytes() == before  # the runs file stays one run per line
    sidecar = tmp_path / "runs.jsonl.pins.json"
    document = json.loads(sidecar.read_text(encoding="utf-8"))
    assert document == {
        "pins": [{"grader": GRADER, "model": "sys", "run_id": records[0].run_id, "set": "demo"}],
        "schema_version": 1,
    }
    assert sidecar.read_text(encoding="utf-8").endswith("}\n")  # diff-friendly text


def test_jsonl_delete_keeps_lines_it_cannot_read(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    store = JSONLStore(path)
    old, new = record_of(perfect()), record_of(empty())
    store.save(old)
    with path.open("ab") as handle:
        handle.write(b'{"run_id": "torn-by-a-crash", "set"\n')
    store.save(new)
    assert store.delete([old.run_id]) == 1
    lines = path.read_bytes().splitlines()
    assert len(lines) == 2 and lines[0].startswith(b'{"run_id": "torn')
    assert [run.run_id for run in store.all_runs()] == [new.run_id]


def test_a_corrupt_pins_file_is_an_error_that_names_it(tmp_path: Path) -> None:
    store = JSONLStore(tmp_path / "runs.jsonl")
    (tmp_path / "runs.jsonl.pins.json").write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(StoreError, match=r"runs\.jsonl\.pins\.json"):
        store.pinned("demo", "sys")


class LegacyStore:
    """A store written against the first protocol: no pins, no delete (real SQLite inside)."""

    def __init__(self, path: Path) -> None:
        self._inner = SQLiteStore(path)
        self.url = "legacy:///runs"

    def save(self, record: ResultRecord) -> None:
        self._inner.save(record)

    def runs(self, set_name: str, model: str, grader: str = GRADER) -> list[ResultRecord]:
        return self._inner.runs(set_name, model, grader)

    def get(self, run_id: str) -> ResultRecord | None:
        return self._inner.get(run_id)

    def all_runs(self) -> list[ResultRecord]:
        return self._inner.all_runs()


def test_a_store_without_pins_still_gives_a_baseline_and_says_what_it_lacks(
    tmp_path: Path,
) -> None:
    store = LegacyStore(tmp_path / "legacy.sqlite3")
    assert isinstance(store, ResultStore) and not isinstance(store, PinningStore)
    older, newer = record_of(perfect()), record_of(empty())
    store.save(older)
    store.save(newer)
    choice = choose_baseline(store, "demo", "sys")
    assert choice.kind == NEWEST and choice.record == newer
    with pytest.raises(StoreError, match=r"LegacyStore\) cannot pin baselines: .*pin\(\)"):
        pinning(store, "pin baselines")
    with pytest.raises(StoreError, match=r"cannot prune runs: it has no delete\(\)"):
        deleting(store, "prune runs")


# --- choosing the baseline --------------------------------------------------------------------


def test_baseline_order_is_explicit_then_pinned_then_newest(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.sqlite3")
    assert choose_baseline(store, "demo", "sys").record is None
    first, second = record_of(perfect()), record_of(empty())
    store.save(first)
    store.save(second)
    assert choose_baseline(store, "demo", "sys").record == second
    store.pin(first)
    pinned = choose_baseline(store, "demo", "sys")
    assert (pinned.kind, pinned.record) == (PINNED, first)
    explicit = choose_baseline(store, "demo", "sys", explicit=second.run_id)
    assert (explicit.kind, explicit.record) == ("--baseline", second)
    with pytest.raises(InputError, match="--baseline"):
        choose_baseline(store, "demo", "sys", explicit="20000101T000000Z-00000000")


def test_a_pin_whose_run_is_gone_is_an_error_not_a_fallback(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.sqlite3")
    record = record_of(perfect())
    store.save(record)
    store.pin(record)
    # Another tool removed the row behind retrievalkit's back; the pin now dangles.
    with store._connection:
        store._connection.execute("DELETE FROM runs WHERE run_id = ?", (record.run_id,))
    with pytest.raises(StoreError, match=r"pinned baseline .* is not in"):
        choose_baseline(store, "demo", "sys")


# --- history ----------------------------------------------------------------------------------


def test_history_reports_manifest_changes_and_prunes_around_the_pin() -> None:
    runs = [
        record_of(perfect(), options={"k1": 1.2}),
        record_of(perfect(), options={"k1": 0.9}),
        record_of(empty(), options={"k1": 0.9}),
        record_of(empty(), options={"k1": 0.9}),
    ][::-1]  # newest first, as stores return them
    changes = manifest_changes(runs[-1], runs[-2])
    assert [change.field for change in changes] == ["retriever_options_hash"]
    assert changes[0].before == runs[-1].manifest.retriever_options_hash
    assert manifest_changes(runs[1], runs[0]) == ()

    history = build_history(
        runs, set_name="demo", retriever="sys", store="memory:", pinned=runs[3].run_id, limit=2
    )
    assert [entry.run_id for entry in history.entries] == [runs[0].run_id, runs[1].run_id]
    assert history.total == 4
    assert not any(entry.pinned for entry in history.entries)

    pruned = runs_to_prune(runs, keep=1, pinned=runs[3].run_id)
    assert pruned == [runs[1].run_id, runs[2].run_id]
    assert runs_to_prune(runs, keep=10, pinned=None) == []


# --- the gate: significance and slices --------------------------------------------------------


def _near_duplicate_ids() -> set[str]:
    return {q.id for q in DEMO_SET.questions if q.hard_class == "near-duplicate"}


def test_a_slice_regression_that_cancels_out_overall_is_caught() -> None:
    near = _near_duplicate_ids()
    normal = [q.id for q in DEMO_SET.questions if q.hard_class == "normal" and q.expected]
    traded = set(normal[: len(near)])
    # Baseline: misses as many normal questions as the candidate will lose near-duplicates.
    baseline = record_of([[] if q.id in traded else list(q.expected) for q in DEMO_SET.questions])
    candidate = record_of([[] if q.id in near else list(q.expected) for q in DEMO_SET.questions])
    options: dict[str, Any] = {"resamples": 500, "confidence": 0.95, "seed": 7}

    overall = compare_runs(
        candidate.outcomes, DEMO_SET.content_hash, baseline, {"hit@3": 0.0}, **options
    )
    assert not overall.regressed  # the overall mean did not move

    sliced = compare_runs(
        candidate.outcomes,
        DEMO_SET.content_hash,
        baseline,
        {"hit@3": 0.0},
        slice_thresholds={"hard_class=near-duplicate": {"hit@3": 0.1}},
        questions=DEMO_SET.questions,
        **options,
    )
    assert sliced.regressed
    (failure,) = sliced.failures
    assert (failure.metric, failure.slice, failure.n) == ("hit@3", "hard_class=near-duplicate", 7)
    assert failure.baseline == 1.0 and failure.candidate == 0.0


def test_require_significant_lets_a_noisy_drop_pass_and_keeps_a_clear_one() -> None:
    everything = perfect()
    one_lost = [[] if index == 0 else ranking for index, ranking in enumerate(everything)]
    many_lost = [[] if index % 2 else ranking for index, ranking in enumerate(everything)]
    baseline = record_of(everything)
    options: dict[str, Any] = {"resamples": 1000, "confidence": 0.95, "seed": 3}
    thresholds = {"hit@1": 0.0}

    noisy = record_of(one_lost)
    plain = compare_runs(noisy.outcomes, DEMO_SET.content_hash, baseline, thresholds, **options)
    assert plain.regressed
    lenient = compare_runs(
        noisy.outcomes,
        DEMO_SET.content_hash,
        baseline,
        thresholds,
        require_significant=True,
        **options,
    )
    assert not lenient.regressed
    assert lenient.checked[0].significant is False and lenient.checked[0].difference < 0

    clear = record_of(many_lost)
    strict = compare_runs(
        clear.outcomes,
        DEMO_SET.content_hash,
        baseline,
        thresholds,
        require_significant=True,
        **options,
    )
    assert strict.regressed and strict.failures[0].significant is True


def test_config_reads_slices_and_require_significant(tmp_path: Path) -> None:
    path = tmp_path / "retrievalkit.toml"
    path.write_text(
        "[regression]\nrequire_significant = true\n\n"
        '[regression.slices."hard_class = near-duplicate"]\n"hit@3" = 0.1\nrr = 0.2\n',
        encoding="utf-8",
    )
    regression = find_config(None, tmp_path).regression
    assert regression.require_significant is True
    assert regression.slices == {"hard_class=near-duplicate": {"hit@3": 0.1, "rr": 0.2}}


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('[regression]\nrequire_significant = "yes"\n', "regression.require_significant"),
        ('[regression.slices.near]\n"hit@3" = 0.1\n', 'regression.slices."near"'),
        ('[regression.slices."form=GAP"]\n"hits@3" = 0.1\n', 'regression.slices."form=GAP".hits@3'),
        ('[regression.slices."form=GAP"]\n"hit@3" = 2\n', 'regression.slices."form=GAP".hit@3'),
        ("[regression]\nslices = 3\n", "regression.slices"),
    ],
)
def test_bad_gate_configuration_names_the_key(tmp_path: Path, text: str, field: str) -> None:
    (tmp_path / "retrievalkit.toml").write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as caught:
        find_config(None, tmp_path)
    assert caught.value.field == field
    assert caught.value.exit_code == 2


# --- the command line -------------------------------------------------------------------------

STORE = "sqlite:///runs.sqlite3"


def write_config(directory: Path, system: str, extra: str = "", *, name: str = "sys") -> None:
    """Retriever ``name``: the demo BM25 ("good") or BM25 over titles only ("weak").

    Both are the same retriever name, so their runs share a key, as a retuned system does.
    """
    corpus = DEMO_CORPUS
    if system == "weak":
        corpus = directory / "titles.jsonl"
        if not corpus.exists():
            lines = []
            for line in DEMO_CORPUS.read_text(encoding="utf-8").splitlines():
                document = json.loads(line)
                document["text"] = ""
                lines.append(json.dumps(document))
            corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (directory / "retrievalkit.toml").write_text(
        f'[retrievers.{name}]\nplugin = "bm25"\ncorpus = "{corpus}"\ndoc_id_separator = "#"\n'
        + extra,
        encoding="utf-8",
    )


def eval_json(cli: RunCli, *args: str) -> tuple[int, dict[str, Any]]:
    result = cli(
        "eval", "--set", "demo", "--retriever", "sys", "--store", STORE, "--format", "json", *args
    )
    assert result.returncode in (0, 1), result.stderr
    return result.returncode, json.loads(result.stdout)


def test_eval_compares_with_the_pin_until_it_is_unpinned(cli: RunCli, tmp_path: Path) -> None:
    write_config(tmp_path, "good")
    _, first = eval_json(cli)
    pin = cli("baseline", "pin", first["run_id"], "--store", STORE)
    assert pin.returncode == 0, pin.stderr
    assert f"pinned {first['run_id']} as the baseline of demo × sys" in pin.stdout

    write_config(tmp_path, "weak")
    code, second = eval_json(cli, "--fail-on-regression")
    assert code == 1
    assert second["regression"]["baseline_run_id"] == first["run_id"]
    assert second["regression"]["baseline_kind"] == "pinned"

    write_config(tmp_path, "good")
    code, third = eval_json(cli, "--fail-on-regression")
    # The newest earlier run is the weak one; the pin keeps the comparison with the first.
    assert code == 0
    assert third["regression"]["baseline_run_id"] == first["run_id"]
    assert {item["difference"] for item in third["regression"]["checked"]} == {0.0}

    code, overridden = eval_json(cli, "--baseline", second["run_id"], "--no-save")
    assert overridden["regression"]["baseline_run_id"] == second["run_id"]
    assert overridden["regression"]["baseline_kind"] == "--baseline"

    shown = cli(
        "baseline",
        "show",
        "--set",
        "demo",
        "--retriever",
        "sys",
        "--store",
        STORE,
        "--format",
        "json",
    )
    assert shown.returncode == 0, shown.stderr
    status = json.loads(shown.stdout)
    assert status["pinned"]["run_id"] == first["run_id"]
    assert status["next_baseline_kind"] == "pinned"

    unpin = cli("baseline", "unpin", "--set", "demo", "--retriever", "sys", "--store", STORE)
    assert unpin.returncode == 0, unpin.stderr
    assert f"unpinned {first['run_id']}" in unpin.stdout
    assert third["run_id"] in unpin.stdout  # what the next eval compares with now
    _, fourth = eval_json(cli, "--no-save")
    assert fourth["regression"]["baseline_run_id"] == third["run_id"]
    assert fourth["regression"]["baseline_kind"] == NEWEST

    again = cli("baseline", "unpin", "--set", "demo", "--retriever", "sys", "--store", STORE)
    assert again.returncode == 0 and "nothing was pinned" in again.stdout


def test_history_shows_changes_and_prune_keeps_the_pinned_run(cli: RunCli, tmp_path: Path) -> None:
    write_config(tmp_path, "good")
    ids = [eval_json(cli)[1]["run_id"]]
    write_config(tmp_path, "weak")
    ids += [eval_json(cli)[1]["run_id"] for _ in range(3)]
    assert cli("baseline", "pin", ids[0], "--store", STORE).returncode == 0

    history = cli(
        "history", "--set", "demo", "--retriever", "sys", "--store", STORE, "--format", "json"
    )
    assert history.returncode == 0, history.stderr
    rows = json.loads(history.stdout)
    assert [row["run_id"] for row in rows] == ids[::-1]
    assert [row["pinned"] for row in rows] == [False, False, False, True]
    assert list(rows[2]["changes"]) == ["retriever_options_hash"]  # good -> weak
    assert rows[0]["changes"] == {} and rows[3]["changes"] == {}

    table = cli("history", "--set", "demo", "--retriever", "sys", "--store", STORE)
    assert table.returncode == 0, table.stderr
    assert "options" in table.stdout and "yes" in table.stdout

    dry = cli(
        "history",
        "--set",
        "demo",
        "--retriever",
        "sys",
        "--store",
        STORE,
        "--prune",
        "--keep",
        "1",
        "--dry-run",
    )
    assert dry.returncode == 0, dry.stderr
    assert "would prune 2 runs" in dry.stderr
    pruned = cli(
        "history",
        "--set",
        "demo",
        "--retriever",
        "sys",
        "--store",
        STORE,
        "--prune",
        "--keep",
        "1",
        "--format",
        "json",
    )
    assert pruned.returncode == 0, pruned.stderr
    assert f"pruned 2 runs of demo × sys: {ids[2]}, {ids[1]}" in pruned.stderr
    assert [row["run_id"] for row in json.loads(pruned.stdout)] == [ids[3], ids[0]]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("history", "--set", "demo", "--retriever", "sys", "--prune"), "--keep"),
        (("history", "--set", "demo", "--retriever", "sys", "--keep", "2"), "--keep"),
        (("history", "--set", "demo", "--retriever", "sys", "--dry-run"), "--dry-run"),
        (("history", "--set", "demo", "--retriever", "sys", "--prune", "--keep", "0"), "--keep"),
        (("baseline", "pin", "20000101T000000Z-00000000"), "RUN_ID"),
        (("baseline",), "ACTION"),
        (("baseline", "show", "--set", "demo"), "--retriever"),
    ],
)
def test_bad_baseline_and_history_usage_exits_2(
    cli: RunCli, args: tuple[str, ...], named: str
) -> None:
    result = cli(*args, "--store", STORE) if len(args) > 1 else cli(*args)
    assert result.returncode == 2, result.stderr
    assert named in result.stderr


def test_a_slice_threshold_in_the_config_gates_eval(cli: RunCli, tmp_path: Path) -> None:
    gate = (
        "\n[regression]\nmax_top1_drop = 1.0\nmax_top3_drop = 1.0\n\n"
        '[regression.slices."hard_class=near-duplicate"]\n"hit@3" = 0.0\n'
    )
    write_config(tmp_path, "good", gate)
    _, baseline = eval_json(cli)
    before = baseline["slices"]["hard_class"]["near-duplicate"]["hit@3"]
    write_config(tmp_path, "weak", gate)
    result = cli(
        "eval",
        "--set",
        "demo",
        "--retriever",
        "sys",
        "--store",
        STORE,
        "--fail-on-regression",
        "--quiet",
    )
    assert result.returncode == 1, result.stderr
    near_duplicates = [q for q in DEMO_SET.questions if q.hard_class == "near-duplicate"]
    shown = f"hit@3 [hard_class=near-duplicate, {len(near_duplicates)} questions]: "
    assert f"{shown}{before['mean']:.3f} -> " in result.stdout

    write_config(tmp_path, "weak", gate.replace("near-duplicate", "near-dupe"))
    typo = cli("eval", "--set", "demo", "--retriever", "sys", "--store", STORE)
    assert typo.returncode == 2
    assert 'regression.slices."hard_class=near-dupe"' in typo.stderr
    assert "near-duplicate" in typo.stderr  # the message lists the values that exist


def test_eval_warns_about_pooling_bias_in_every_format(cli: RunCli, tmp_path: Path) -> None:
    base = ("eval", "--set", "demo", "--retriever", "bm25-demo", "--no-save", "--quiet")
    as_json = cli(*base, "--format", "json")
    assert as_json.returncode == 0, as_json.stderr
    (warning,) = json.loads(as_json.stdout)["warnings"]
    share = by_hand.judged_share(by_hand.demo_rankings(), 1)
    assert share < 0.8  # the demo set's labels do not cover what bm25-demo puts first
    assert warning.startswith(f"bm25-demo: judged@1 = {share:.2f}") and "pooling bias" in warning
    markdown = cli(*base, "--format", "markdown")
    assert "## Warnings" in markdown.stdout and "pooling bias" in markdown.stdout
    table = cli(*base)
    assert "warning: bm25-demo: judged@1" in table.stdout


# --- the CI script of docs/comparing.md, run as written ---------------------------------------


def ci_script() -> str:
    text = (REPO / "docs" / "comparing.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- ci-script -->\s*```sh\n(.*?)```", text, re.DOTALL)
    assert match, "docs/comparing.md lost its CI script block"
    return match.group(1)


@pytest.fixture
def repository(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "repo"
    (root / "baselines").mkdir(parents=True)
    (root / "ci").mkdir()
    (root / "ci" / "retrieval-gate.sh").write_text(ci_script(), encoding="utf-8")
    yield root


def run_gate(root: Path) -> subprocess.CompletedProcess[str]:
    env = child_environment()
    env.update(RETRIEVAL_SET="demo", RETRIEVAL_RETRIEVER="my-search")
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["NO_COLOR"] = "1"
    return subprocess.run(
        ["bash", "ci/retrieval-gate.sh"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def test_the_documented_ci_script_gates_on_the_pinned_baseline(
    cli: RunCli, repository: Path
) -> None:
    gate = '\n[store]\nurl = "jsonl:///baselines/runs.jsonl"\n'
    write_config(repository, "good", gate, name="my-search")
    first = cli(
        "eval", "--set", "demo", "--retriever", "my-search", "--format", "json", cwd=repository
    )
    assert first.returncode == 0, first.stderr
    run_id = json.loads(first.stdout)["run_id"]
    assert cli("baseline", "pin", run_id, cwd=repository).returncode == 0
    # What a repository commits: the runs, their outcome columns and the pin, nothing else.
    assert sorted(path.name for path in (repository / "baselines").iterdir()) == [
        "runs.jsonl",
        "runs.jsonl.columns",
        "runs.jsonl.pins.json",
    ]

    unchanged = run_gate(repository)
    assert unchanged.returncode == 0, unchanged.stdout + unchanged.stderr

    write_config(repository, "weak", gate, name="my-search")  # a change that hurts retrieval
    regressed = run_gate(repository)
    assert regressed.returncode == 1, regressed.stdout + regressed.stderr
    assert "REGRESSION against pinned baseline" in regressed.stdout
    # CI never saves: the committed store is exactly what was committed.
    assert len((repository / "baselines" / "runs.jsonl").read_text().splitlines()) == 1
