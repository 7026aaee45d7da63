"""The Python API is the pipeline the commands use: same records, same gate, same secrets rules.

``eval`` and ``compare`` run the same retriever, configured with secrets that its
exceptions quote; both must store the same record (apart from the run id, the time and
the latencies), and neither may store a secret. The API itself is exercised in process
on the built-in demo set and retriever, and on a scripted retriever object.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import retrievalkit as rk
from retrievalkit.errors import InputError
from retrievalkit.formats.convert import to_json
from retrievalkit.stores.jsonl import JSONLStore

if TYPE_CHECKING:
    from conftest import RunCli

SECRETS = {"password": "pw-S3CRET-7e1d", "api_key": "key-S3CRET-90ab", "token": "tok-S3CRET-c4"}

CONFIG = f"""\
[retrievers.vault]
plugin = "faulty-secretive"
api_key_env = "RK_API_TEST_KEY"
password = "{SECRETS["password"]}"
token = "{SECRETS["token"]}"
client_secret = "not-looked-for"
url = "http://127.0.0.1:9"
"""


def _stored(path: Path) -> list[dict[str, Any]]:
    """The runs of a JSON Lines store read back whole (summary and columns), oldest first."""
    return [json.loads(to_json(run)) for run in reversed(JSONLStore(path).all_runs())]


def _comparable(stored: dict[str, Any]) -> dict[str, Any]:
    """A stored run without what differs between two evaluations: id, time, latencies,
    the machine's load averages."""
    record = json.loads(json.dumps(stored))
    record.pop("run_id")
    record["manifest"].pop("created_at")
    del record["manifest"]["machine"]["load_at_start"], record["manifest"]["machine"]["load_at_end"]
    for outcome in record["outcomes"]:
        outcome.pop("latency_ms")
    return record


def test_eval_and_compare_store_the_same_record_without_secrets(
    cli: RunCli, faulty_site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RK_API_TEST_KEY", SECRETS["api_key"])
    lines = [
        json.dumps(
            {
                "id": f"q{n}",
                "question": ("boom " if n == 2 else "") + f"question about d{n}",
                "expected": [f"d{n}"],
            }
        )
        for n in range(1, 7)
    ]
    (tmp_path / "golden.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "retrievalkit.toml").write_text(CONFIG, encoding="utf-8")
    common = ("--set", "golden.jsonl", "--max-error-rate", "0.5", "--format", "json")
    done = cli(
        "eval", "--retriever", "vault", "--store", "jsonl:///e.jsonl", *common, sites=[faulty_site]
    )
    assert done.returncode == 0, done.stderr
    done = cli(
        "compare",
        "--retriever",
        "vault",
        "--retriever",
        "vault",
        "--store",
        "jsonl:///c.jsonl",
        *common,
        sites=[faulty_site],
    )
    assert done.returncode == 0, done.stderr

    [from_eval] = _stored(tmp_path / "e.jsonl")
    from_compare = _stored(tmp_path / "c.jsonl")
    assert len(from_compare) == 2
    for run in from_compare:
        assert _comparable(run) == _comparable(from_eval)
    for stored in (from_eval, *from_compare):
        text = json.dumps(stored, ensure_ascii=False)
        leaked = [name for name, value in SECRETS.items() if value in text]
        assert leaked == [], f"secrets stored in clear: {leaked}"
    files = [path for path in tmp_path.rglob("[ec].jsonl*") if path.is_file()]
    files += [path for path in tmp_path.rglob("*.rkc")]
    assert len(files) == 2 + 3  # each store's lines, and a column file a run
    for path in files:
        leaked = [name for name, value in SECRETS.items() if value.encode() in path.read_bytes()]
        assert leaked == [], f"secrets stored in clear in {path}: {leaked}"
    record = from_eval
    [error] = [outcome["error"] for outcome in record["outcomes"] if outcome["error"]]
    assert error.startswith("PermissionError: login refused") and "password=***" in error
    assert record["manifest"]["retriever_options"]["password"] == "***"


# --- the API in process ------------------------------------------------------------------


class Scripted:
    """Answers from a script; a question missing from it raises, as a broken backend would."""

    identifier = "scripted"

    def __init__(self, answers: dict[str, Sequence[str]]) -> None:
        self.answers = answers

    def retrieve(self, question: str, limit: int) -> list[str]:
        if question not in self.answers:
            raise ConnectionError("backend unreachable")
        return list(self.answers[question])[:limit]


def small_set() -> rk.GoldenQuestionSet:
    questions = [
        rk.GoldenQuestion(id=f"q{n}", question=f"question {n}", expected=[f"d{n}"])
        for n in range(1, 11)
    ]
    return rk.GoldenQuestionSet(name="small", questions=questions)


def perfect() -> Scripted:
    return Scripted({f"question {n}": [f"d{n}", "x"] for n in range(1, 11)})


def test_evaluate_a_named_retriever_on_a_named_set() -> None:
    run = rk.evaluate("demo", "bm25-demo", k=(1, 5), resamples=200, config=rk.load_config(None))
    assert run.record.set == "demo" and run.retriever == "bm25-demo"
    assert run.record.manifest.ks == (1, 3, 5)
    assert run.metrics["hit@5"].mean is not None and run.metrics["hit@5"].ci is not None
    assert len(run.outcomes) == len(rk.load_set("demo").questions)
    assert run.errored == 0
    assert run.record.manifest.plugin == "bm25-demo"


def test_evaluate_an_object_then_gate_and_compare(tmp_path: Path) -> None:
    golden = small_set()
    store = rk.open_store(f"sqlite:///{tmp_path}/runs.sqlite3")
    first = rk.evaluate(golden, perfect(), resamples=200, git_commit="abc123")
    assert first.metrics["hit@1"].mean == 1.0
    assert first.record.manifest.git_commit == "abc123"
    assert first.record.manifest.plugin == "python-object"

    verdict = rk.gate(first, store)
    assert verdict.baseline_run_id is None and not verdict.regressed
    assert verdict.note is not None and "first run" in verdict.note
    store.save(first.record)
    # Saved first: a run is never its own baseline.
    assert rk.gate(first, store).baseline_run_id is None

    # Half of the questions now find their document at rank 2 only.
    worse = Scripted(
        {f"question {n}": ["x", f"d{n}"] if n % 2 else [f"d{n}"] for n in range(1, 11)}
    )
    second = rk.evaluate(golden, worse, resamples=200, git_commit=None)
    verdict = rk.gate(second, store, {"hit@1": 0.1})
    assert verdict.baseline_run_id == first.run_id
    assert verdict.regressed
    [failure] = verdict.failures
    assert (failure.metric, failure.baseline, failure.candidate) == ("hit@1", 1.0, 0.5)
    assert not rk.gate(second, store, {"hit@1": 0.6}).regressed
    assert not rk.gate(second, store, {"hit@3": 0.0}).regressed

    comparison = rk.compare([first, second])
    [pair] = comparison.pairs
    hit1 = next(delta for delta in pair.metrics if delta.metric == "hit@1")
    assert hit1.difference == pytest.approx(-0.5)
    assert (hit1.wins, hit1.losses) == (0, 5)
    assert [system.label for system in comparison.systems] == [
        "scripted",
        f"scripted@{second.run_id}",
    ]


def test_too_many_errors_raise_with_the_failed_run() -> None:
    half = Scripted({f"question {n}": [f"d{n}"] for n in range(1, 6)})
    with pytest.raises(rk.RunFailed) as raised:
        rk.evaluate(small_set(), half, resamples=50, git_commit=None)
    assert raised.value.run.errored == 5
    assert "5 of 10 questions errored, e.g. ConnectionError: backend unreachable" in str(
        raised.value
    )
    accepted = rk.evaluate(small_set(), half, resamples=50, max_error_rate=0.5, git_commit=None)
    assert accepted.errored == 5 and accepted.metrics["hit@1"].mean == 0.5


def test_an_unknown_slice_is_refused_before_any_question_is_asked() -> None:
    asked: list[str] = []

    class Recording(Scripted):
        def retrieve(self, question: str, limit: int) -> list[str]:
            asked.append(question)
            return super().retrieve(question, limit)

    with pytest.raises(InputError, match="no question of the set has a meta field 'topic'"):
        rk.evaluate(small_set(), Recording({}), slices=("topic",), git_commit=None)
    assert asked == []


def test_run_as_a_table_and_in_a_notebook() -> None:
    golden = rk.GoldenQuestionSet(
        name="<b>set</b>",
        questions=[
            rk.GoldenQuestion(id="a", question="one", expected=["d1"]),
            rk.GoldenQuestion(id="b", question="two", expected=["d2"]),
        ],
    )
    run = rk.evaluate(
        golden,
        Scripted({"one": ["d1"], "two": ["d9", "d2"]}),
        name="<script>x</script>",
        resamples=50,
        confidence=0.8,
        git_commit=None,
    )
    frame = run.to_pandas()
    assert list(frame.index) == ["a", "b"]
    assert frame.loc["b", "hit@1"] == 0.0 and frame.loc["b", "hit@3"] == 1.0
    assert frame.loc["b", "rr"] == 0.5
    table = run.to_arrow()
    assert table.num_rows == 2 and table.column("question_id").to_pylist() == ["a", "b"]
    page = run._repr_html_()
    assert "<script>" not in page and "&lt;script&gt;x&lt;/script&gt;" in page
    assert "&lt;b&gt;set&lt;/b&gt;" in page and "80% interval" in page


def test_to_pandas_without_pandas_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    run = rk.evaluate(small_set(), perfect(), resamples=50, git_commit=None)
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"to_pandas\(\) needs pandas.*pip install"):
        run.to_pandas()


def test_the_package_exports_the_api_lazily() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, retrievalkit; assert 'numpy' not in sys.modules; "
            "print(retrievalkit.evaluate.__module__, sorted(retrievalkit.__all__)[:3])",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.startswith("retrievalkit.api")
    for name in rk.__all__:
        assert getattr(rk, name) is not None, name
