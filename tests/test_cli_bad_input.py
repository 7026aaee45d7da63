"""A catalogue of malformed inputs, each run through the real command line in a subprocess.

Every case must end with exit code 2 and ONE line on stderr that names the file, the
line and the field (or the option) and says what is expected: never a traceback. The
cases run concurrently in one module fixture (each its own ``python -m retrievalkit``
in its own folder), and each is then checked by its own parametrized test.

A read-only store folder: the tests run as root, for whom permission bits mean nothing,
so the folder is made immutable with ``chattr +i`` (those two cases are left out where
chattr does not work); a store path under a regular file is tested everywhere.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import attrs
import pytest
from child_env import child_environment

from retrievalkit.demo import DEMO_CORPUS

# The first test's setup runs every case's child (about 300 CLI runs, four at a time): two
# minutes on two idle cores, over five when CI runs other sessions beside this one. The
# default per-test bound would fail the setup, not a hang.
pytestmark = pytest.mark.timeout(1800)

GOOD = {"id": "q1", "question": "How do I get a library card?", "expected": ["doc-card"]}
EVAL = ("eval", "--retriever", "bm25-demo", "--store", "memory:", "-q", "--set")


def line(**changes: object) -> str:
    """One JSON Lines question: the good one with fields changed (a value of ... drops it)."""
    data = {**GOOD, **changes}
    return json.dumps({key: value for key, value in data.items() if value is not ...})


def jsonl(*lines: str) -> str:
    return "".join(text + "\n" for text in lines)


GOOD_LINE = line()
TOML_GOOD = 'name = "t"\n\n[[questions]]\nid = "q1"\nquestion = "a card?"\nexpected = ["d1"]\n'


def toml_question(body: str) -> str:
    return 'name = "t"\n\n[[questions]]\nid = "q0"\nquestion = "x?"\nexpected = ["d"]\n\n' + (
        "[[questions]]\n" + body
    )


QRELS_HEADER = "query-id\tcorpus-id\tscore\n"
QUERIES = '{"_id": "1", "text": "first"}\n{"_id": "2", "text": "second"}\n'


def beir(
    queries: str | bytes | None = QUERIES, qrels: str | bytes | None = None
) -> dict[str, str | bytes]:
    files: dict[str, str | bytes] = {"b/corpus.jsonl": '{"_id": "d1", "text": "x"}\n'}
    if queries is not None:
        files["b/queries.jsonl"] = queries
    if qrels is not None:
        files["b/qrels/test.tsv"] = qrels
    return files


def config(text: str) -> dict[str, str | bytes]:
    return {"cfg.toml": text}


CORPUS = json.dumps(str(DEMO_CORPUS))
BM25 = f'[retrievers.r]\nplugin = "bm25"\ncorpus = {CORPUS}\n'
CFG_EVAL = ("eval", "--config", "cfg.toml", "--store", "memory:", "-q", "--set", "demo")


@attrs.frozen
class Case:
    """One malformed input: the files to lay out, the arguments, what stderr must name."""

    name: str
    args: tuple[str, ...]
    expect: tuple[str, ...]
    files: Mapping[str, str | bytes] = attrs.field(factory=dict)
    setup: Callable[[Path], None] | None = None


def _under_a_file(directory: Path) -> None:
    (directory / "afile").write_text("not a folder\n", encoding="utf-8")


def _make_dir(name: str) -> Callable[[Path], None]:
    return lambda directory: (directory / name).mkdir()


def _store_with_a_run_of_another_set(directory: Path) -> None:
    fixture = Path(__file__).parent / "fixtures" / "schema_v1_runs.jsonl"
    shutil.copy(fixture, directory / "runs.jsonl")


def _read_only_dir(directory: Path) -> None:
    """An immutable folder: even root cannot create a file in it (undone at teardown)."""
    (directory / "ro").mkdir()
    subprocess.run(["chattr", "+i", str(directory / "ro")], check=True, capture_output=True)


def _chattr_works() -> bool:
    if shutil.which("chattr") is None:
        return False
    probe = Path(os.environ.get("TMPDIR", "/tmp")) / f"rk-chattr-probe-{os.getpid()}"
    probe.mkdir(exist_ok=True)
    try:
        done = subprocess.run(["chattr", "+i", str(probe)], capture_output=True, check=False)
        if done.returncode != 0:
            return False
        try:
            (probe / "x").touch()
        except OSError:
            return True
        return False
    finally:
        subprocess.run(["chattr", "-i", str(probe)], capture_output=True, check=False)
        shutil.rmtree(probe, ignore_errors=True)


CHATTR = _chattr_works()

# fmt: off
CASES: list[Case] = [
    # --- golden sets: JSON Lines -------------------------------------------------------------
    Case("jsonl-empty-file", (*EVAL, "s.jsonl"), ("s.jsonl", "no questions"), {"s.jsonl": ""}),
    Case("jsonl-only-blank-lines", (*EVAL, "s.jsonl"), ("s.jsonl", "no questions"),
         {"s.jsonl": "\n   \n\t\n"}),
    Case("jsonl-invalid-utf8", (*EVAL, "s.jsonl"), ("s.jsonl", "line 2", "UTF-8"),
         {"s.jsonl": GOOD_LINE.encode() + b'\n{"id": "q2", "question": "caf\xe9"}\n'}),
    Case("jsonl-utf16", (*EVAL, "s.jsonl"), ("s.jsonl", "line 1", "UTF-8"),
         {"s.jsonl": GOOD_LINE.encode("utf-16")}),
    Case("jsonl-truncated-line", (*EVAL, "s.jsonl"), ("s.jsonl", "line 2", "malformed JSON"),
         {"s.jsonl": jsonl(GOOD_LINE, '{"id": "q2", "question": "x", "expe')}),
    Case("jsonl-trailing-comma", (*EVAL, "s.jsonl"), ("s.jsonl", "line 1", "malformed JSON"),
         {"s.jsonl": '{"id": "q1", "question": "x", "expected": [],}\n'}),
    Case("jsonl-not-an-object", (*EVAL, "s.jsonl"), ("s.jsonl", "line 1", "object"),
         {"s.jsonl": '["q1", "x"]\n'}),
    Case("jsonl-bom-mid-file", (*EVAL, "s.jsonl"), ("s.jsonl", "line 2", "BOM"),
         {"s.jsonl": jsonl(GOOD_LINE, "\ufeff" + line(id="q2"))}),
    Case("jsonl-deep-nesting", (*EVAL, "s.jsonl"), ("s.jsonl", "line 1", "nested"),
         {"s.jsonl": '{"id": "q1", "question": "x", "expected": ' + "[" * 200_000 + "\n"}),
    Case("jsonl-missing-id", (*EVAL, "s.jsonl"), ("s.jsonl", "line 1", "field 'id'"),
         {"s.jsonl": jsonl(line(id=...))}),
    Case("jsonl-id-number", (*EVAL, "s.jsonl"), ("s.jsonl", "line 1", "field 'id'", "string"),
         {"s.jsonl": jsonl(line(id=7))}),
    Case("jsonl-id-with-space", (*EVAL, "s.jsonl"), ("line 1", "field 'id'", "spaces"),
         {"s.jsonl": jsonl(line(id="q 1"))}),
    Case("jsonl-duplicate-id", (*EVAL, "s.jsonl"), ("line 3", "field 'id'", "line 1"),
         {"s.jsonl": jsonl(GOOD_LINE, line(id="q2"), GOOD_LINE)}),
    Case("jsonl-missing-question", (*EVAL, "s.jsonl"), ("line 1", "field 'question'"),
         {"s.jsonl": jsonl(line(question=...))}),
    Case("jsonl-blank-question", (*EVAL, "s.jsonl"), ("line 1", "field 'question'", "non-empty"),
         {"s.jsonl": jsonl(line(question="   "))}),
    Case("jsonl-question-not-text", (*EVAL, "s.jsonl"), ("line 1", "field 'question'"),
         {"s.jsonl": jsonl(line(question=42))}),
    Case("jsonl-huge-question", (*EVAL, "s.jsonl"), ("line 1", "field 'question'", "limit"),
         {"s.jsonl": jsonl(line(question="why " * 5000))}),
    Case("jsonl-lone-surrogate", (*EVAL, "s.jsonl"), ("line 1", "field 'question'", "Unicode"),
         {"s.jsonl": '{"id": "q1", "question": "bad \\ud800 text", "expected": []}\n'}),
    Case("jsonl-missing-expected", (*EVAL, "s.jsonl"), ("line 1", "field 'expected'", "[]"),
         {"s.jsonl": jsonl(line(expected=...))}),
    Case("jsonl-expected-a-string", (*EVAL, "s.jsonl"), ("line 1", "field 'expected'", "list"),
         {"s.jsonl": jsonl(line(expected="doc-card"))}),
    Case("jsonl-expected-numbers", (*EVAL, "s.jsonl"), ("line 1", "field 'expected'"),
         {"s.jsonl": jsonl(line(expected=[12]))}),
    Case("jsonl-expected-id-with-space", (*EVAL, "s.jsonl"), ("field 'expected'", "spaces"),
         {"s.jsonl": jsonl(line(expected=["doc card"]))}),
    Case("jsonl-expected-control-char", (*EVAL, "s.jsonl"), ("field 'expected'", "control"),
         {"s.jsonl": jsonl(line(expected=["doc\u0007"]))}),
    Case("jsonl-expected-empty-id", (*EVAL, "s.jsonl"), ("line 1", "field 'expected'", "empty"),
         {"s.jsonl": jsonl(line(expected=[""]))}),
    Case("jsonl-expected-twice", (*EVAL, "s.jsonl"), ("field 'expected'", "twice"),
         {"s.jsonl": jsonl(line(expected=["d", "d"]))}),
    Case("jsonl-unknown-form", (*EVAL, "s.jsonl"), ("line 1", "field 'form'", "MATCH, GAP"),
         {"s.jsonl": jsonl(line(form="FUZZY"))}),
    Case("jsonl-form-number", (*EVAL, "s.jsonl"), ("line 1", "field 'form'"),
         {"s.jsonl": jsonl(line(form=1))}),
    Case("jsonl-grade-nan", (*EVAL, "s.jsonl"), ("line 1", "field 'grades'", "got nan"),
         {"s.jsonl": '{"id": "q1", "question": "x", "expected": [], "grades": {"d": NaN}}\n'}),
    Case("jsonl-grade-infinite", (*EVAL, "s.jsonl"), ("line 1", "field 'grades'"),
         {"s.jsonl": '{"id": "q1", "question": "x", "expected": [], "grades": {"d": 1e999}}\n'}),
    Case("jsonl-grade-negative", (*EVAL, "s.jsonl"), ("line 1", "field 'grades'", ">= 0"),
         {"s.jsonl": jsonl(line(grades={"doc-x": -1}))}),
    Case("jsonl-grade-fraction", (*EVAL, "s.jsonl"), ("line 1", "field 'grades'", "whole"),
         {"s.jsonl": jsonl(line(grades={"doc-x": 1.5}))}),
    Case("jsonl-grade-text", (*EVAL, "s.jsonl"), ("line 1", "field 'grades'", "integer"),
         {"s.jsonl": jsonl(line(grades={"doc-x": "2"}))}),
    Case("jsonl-grade-huge-integer", (*EVAL, "s.jsonl"), ("line 1", "field 'grades'"),
         {"s.jsonl": '{"id": "q1", "question": "x", "expected": [], "grades": {"d": '
          + "9" * 5000 + "}}\n"}),
    Case("jsonl-grades-a-list", (*EVAL, "s.jsonl"), ("line 1", "field 'grades'", "object"),
         {"s.jsonl": jsonl(line(grades=[1, 2]))}),
    Case("jsonl-expected-graded-zero", (*EVAL, "s.jsonl"), ("field 'grades'", "graded 0"),
         {"s.jsonl": jsonl(line(grades={"doc-card": 0}))}),
    Case("jsonl-unknown-field", (*EVAL, "s.jsonl"), ("line 1", "field 'answer'", "known fields"),
         {"s.jsonl": jsonl(line(answer="42"))}),
    Case("jsonl-field-name-with-newline", (*EVAL, "s.jsonl"), ("line 1", "field '\\n'"),
         {"s.jsonl": '{"id": "q1", "question": "x", "expected": [], "\\n": 1}\n'}),
    Case("jsonl-meta-not-strings", (*EVAL, "s.jsonl"), ("line 1", "field 'meta'"),
         {"s.jsonl": jsonl(line(meta={"topic": 3}))}),
    Case("jsonl-blank-hard-class", (*EVAL, "s.jsonl"), ("line 1", "field 'hard_class'"),
         {"s.jsonl": jsonl(line(hard_class=""))}),
    Case("set-file-missing", (*EVAL, "nope.jsonl"), ("--set", "nope.jsonl", "no such file")),
    # --- golden sets: TOML ---------------------------------------------------------------------
    Case("toml-malformed", (*EVAL, "s.toml"), ("s.toml", "line 3", "malformed TOML"),
         {"s.toml": 'name = "t"\n\n[[questions]\nid = "q1"\n'}),
    Case("toml-invalid-utf8", (*EVAL, "s.toml"), ("s.toml", "line 5", "UTF-8"),
         {"s.toml": TOML_GOOD.encode().replace(b"a card", b"caf\xe9")}),
    Case("toml-no-questions", (*EVAL, "s.toml"), ("s.toml", "field 'questions'"),
         {"s.toml": 'name = "t"\n'}),
    Case("toml-unknown-top-level-key", (*EVAL, "s.toml"), ("s.toml", "field 'title'"),
         {"s.toml": 'title = "t"\n' + TOML_GOOD.replace('name = "t"\n', "")}),
    Case("toml-questions-not-tables", (*EVAL, "s.toml"), ("s.toml", "question 1", "object"),
         {"s.toml": "questions = [1, 2]\n"}),
    Case("toml-question-missing-expected", (*EVAL, "s.toml"),
         ("s.toml", "line 8", "question 2", "field 'expected'"),
         {"s.toml": toml_question('id = "q1"\nquestion = "x?"\n')}),
    Case("toml-duplicate-id", (*EVAL, "s.toml"), ("s.toml", "line 8", "field 'id'", "duplicate"),
         {"s.toml": toml_question('id = "q0"\nquestion = "y?"\nexpected = []\n')}),
    Case("toml-negative-grade", (*EVAL, "s.toml"), ("s.toml", "line 8", "field 'grades'"),
         {"s.toml": toml_question('id = "q1"\nquestion = "y?"\nexpected = []\n'
                                  "grades = {d = -2}\n")}),
    Case("toml-id-a-date", (*EVAL, "s.toml"), ("s.toml", "line 8", "field 'id'"),
         {"s.toml": toml_question('id = 1979-05-27\nquestion = "y?"\nexpected = []\n')}),
    Case("toml-name-not-text", (*EVAL, "s.toml"), ("s.toml", "field 'name'", "string"),
         {"s.toml": TOML_GOOD.replace('name = "t"', "name = 3")}),
    # --- golden sets: BEIR directories ---------------------------------------------------------
    Case("beir-missing-queries", (*EVAL, "b"), ("queries.jsonl", "missing file"),
         beir(queries=None, qrels=QRELS_HEADER + "1\td1\t1\n")),
    Case("beir-missing-qrels", (*EVAL, "b"), ("test.tsv", "missing file"), beir()),
    Case("beir-qrels-two-columns", (*EVAL, "b"), ("test.tsv", "line 2", "3 tab-separated"),
         beir(qrels=QRELS_HEADER + "1\td1\n")),
    Case("beir-qrels-score-text", (*EVAL, "b"), ("test.tsv", "line 2", "field 'score'"),
         beir(qrels=QRELS_HEADER + "1\td1\thigh\n")),
    Case("beir-qrels-invalid-utf8", (*EVAL, "b"), ("test.tsv", "line 3", "UTF-8"),
         beir(qrels=(QRELS_HEADER + "1\td1\t1\n").encode() + b"2\td\xff\t1\n")),
    Case("beir-qrels-doc-id-with-space", (*EVAL, "b"),
         ("test.tsv", "line 2", "field 'corpus-id'", "spaces"),
         beir(qrels=QRELS_HEADER + "1\td 1\t1\n")),
    Case("beir-qrels-empty", (*EVAL, "b"), ("test.tsv", "no judged queries"),
         beir(qrels=QRELS_HEADER)),
    Case("beir-query-not-judged-in-queries", (*EVAL, "b"), ("test.tsv", "line 3", "'9'"),
         beir(qrels=QRELS_HEADER + "1\td1\t1\n9\td1\t1\n")),
    Case("beir-queries-malformed", (*EVAL, "b"), ("queries.jsonl", "line 2", "JSON"),
         beir(queries='{"_id": "1", "text": "first"}\n{"_id": "2", "te\n',
              qrels=QRELS_HEADER + "1\td1\t1\n")),
    Case("beir-query-text-missing", (*EVAL, "b"), ("queries.jsonl", "line 1", "text"),
         beir(queries='{"_id": "1"}\n', qrels=QRELS_HEADER + "1\td1\t1\n")),
    Case("beir-query-text-not-a-string", (*EVAL, "b"), ("queries.jsonl", "line 1", "field 'text'"),
         beir(queries='{"_id": "1", "text": 5}\n', qrels=QRELS_HEADER + "1\td1\t1\n")),
    # --- configuration files -------------------------------------------------------------------
    Case("config-missing", ("eval", "--config", "nope.toml", "--set", "demo", "--retriever",
                            "bm25-demo"), ("nope.toml", "--config", "not found")),
    Case("config-malformed", (*CFG_EVAL, "--retriever", "r"), ("cfg.toml", "line 2"),
         config("[eval]\nk = [1, 3\n")),
    Case("config-invalid-utf8", (*CFG_EVAL, "--retriever", "r"), ("cfg.toml", "line 2", "UTF-8"),
         {"cfg.toml": b'[eval]\n# caf\xe9\nk = [1]\n'}),
    Case("config-unknown-section", (*CFG_EVAL, "--retriever", "r"),
         ("cfg.toml", "line 1", "field 'sotre'", "known"), config('[sotre]\nurl = "memory:"\n')),
    Case("config-set-without-path", (*CFG_EVAL, "--retriever", "r"),
         ("cfg.toml", "field 'sets.s'", "path"), config('[sets.s]\nfile = "x.jsonl"\n')),
    Case("config-set-path-missing", ("eval", "--config", "cfg.toml", "--set", "s", "--retriever",
                                     "bm25-demo", "--store", "memory:"),
         ("gone.jsonl", "no such file"), config('[sets.s]\npath = "gone.jsonl"\n')),
    Case("config-retriever-without-plugin", (*CFG_EVAL, "--retriever", "r"),
         ("cfg.toml", "line 1", "field 'retrievers.r.plugin'"),
         config(f"[retrievers.r]\ncorpus = {CORPUS}\n")),
    Case("config-unknown-plugin", (*CFG_EVAL, "--retriever", "r"),
         ("cfg.toml", "line 2", "field 'retrievers.r.plugin'", "'nope'", "installed"),
         config('[retrievers.r]\nplugin = "nope"\n')),
    Case("config-option-not-accepted", (*CFG_EVAL, "--retriever", "r"),
         ("cfg.toml", "line 4", "field 'retrievers.r.colour'", "bm25"),
         config(BM25 + 'colour = "red"\n')),
    Case("config-option-wrong-type", (*CFG_EVAL, "--retriever", "r"),
         ("cfg.toml", "line 4", "field 'retrievers.r.k1'", ">= 0"), config(BM25 + 'k1 = "high"\n')),
    Case("config-retriever-corpus-missing", (*CFG_EVAL, "--retriever", "r"),
         ("nowhere.jsonl", "corpus"),
         config('[retrievers.r]\nplugin = "bm25"\ncorpus = "nowhere.jsonl"\n')),
    Case("config-store-url-not-text", (*CFG_EVAL, "--retriever", "bm25-demo"),
         ("cfg.toml", "line 2", "field 'store.url'"), config("[store]\nurl = 5\n")),
    Case("config-drop-out-of-range", (*CFG_EVAL, "--retriever", "bm25-demo"),
         ("cfg.toml", "line 2", "field 'regression.max_top1_drop'", "0 to 1"),
         config("[regression]\nmax_top1_drop = 2\n")),
    Case("config-unknown-metric", (*CFG_EVAL, "--retriever", "bm25-demo"),
         ("cfg.toml", "field 'regression.metrics.hits@3'", "unknown metric"),
         config('[regression.metrics]\n"hits@3" = 0.1\n')),
    Case("config-metrics-not-a-table", (*CFG_EVAL, "--retriever", "bm25-demo"),
         ("cfg.toml", "line 2", "field 'regression.metrics'", "table"),
         config("[regression]\nmetrics = 3\n")),
    Case("config-k-zero", (*CFG_EVAL, "--retriever", "bm25-demo"),
         ("cfg.toml", "line 2", "field 'eval.k'", ">= 1"), config("[eval]\nk = [0, 3]\n")),
    Case("config-k-text", (*CFG_EVAL, "--retriever", "bm25-demo"),
         ("cfg.toml", "line 2", "field 'eval.k'", "list"), config('[eval]\nk = "1,3"\n')),
    Case("config-confidence-one", (*CFG_EVAL, "--retriever", "bm25-demo"),
         ("cfg.toml", "line 2", "field 'eval.confidence'"), config("[eval]\nconfidence = 1.0\n")),
    Case("config-timeout-negative", (*CFG_EVAL, "--retriever", "bm25-demo"),
         ("cfg.toml", "line 2", "field 'eval.timeout'", "> 0"), config("[eval]\ntimeout = -1\n")),
    Case("config-unknown-eval-key", (*CFG_EVAL, "--retriever", "bm25-demo"),
         ("cfg.toml", "line 3", "field 'eval.kk'", "known"), config("[eval]\nk = [1]\nkk = [1]\n")),
    Case("pyproject-bad-tool-table", ("eval", "--set", "demo", "--retriever", "bm25-demo",
                                      "--store", "memory:"),
         ("pyproject.toml", "line 2", "field 'tool.retrievalkit.sotre'"),
         {"pyproject.toml": '[tool.retrievalkit]\nsotre = {url = "memory:"}\n'}),
    # --- command-line options ------------------------------------------------------------------
    Case("option-k-zero", ("eval", "--set", "demo", "--retriever", "bm25-demo", "--k", "0"),
         ("--k", ">= 1")),
    Case("option-k-negative", ("eval", "--set", "demo", "--retriever", "bm25-demo", "--k=-1,3"),
         ("--k", ">= 1")),
    Case("option-k-not-numbers", ("eval", "--set", "demo", "--retriever", "bm25-demo", "--k",
                                  "one,three"), ("--k", "whole numbers")),
    Case("option-k-empty", ("eval", "--set", "demo", "--retriever", "bm25-demo", "--k="),
         ("--k", "non-empty")),
    Case("option-overfetch-zero", ("eval", "--set", "demo", "--retriever", "bm25-demo",
                                   "--overfetch", "0"), ("--overfetch", ">= 1")),
    Case("option-drop-above-one", ("eval", "--set", "demo", "--retriever", "bm25-demo",
                                   "--max-top1-drop", "1.5"), ("--max-top1-drop", "0 to 1")),
    Case("option-drop-nan", ("eval", "--set", "demo", "--retriever", "bm25-demo",
                             "--max-top3-drop", "nan"), ("--max-top3-drop", "0 to 1")),
    Case("option-confidence-zero", ("eval", "--set", "demo", "--retriever", "bm25-demo",
                                    "--confidence", "0"), ("--confidence", "between 0 and 1")),
    Case("option-error-rate-negative", ("eval", "--set", "demo", "--retriever", "bm25-demo",
                                        "--max-error-rate=-0.1"), ("--max-error-rate", "0 to 1")),
    Case("option-concurrency-zero", ("eval", "--set", "demo", "--retriever", "bm25-demo",
                                     "--concurrency", "0"), ("--concurrency", ">= 1")),
    Case("option-resamples-negative", ("eval", "--set", "demo", "--retriever", "bm25-demo",
                                       "--resamples=-5"), ("--resamples", ">= 1")),
    Case("option-timeout-zero", ("eval", "--set", "demo", "--retriever", "bm25-demo",
                                 "--timeout", "0"), ("--timeout", "> 0")),
    Case("option-timeout-infinite", ("eval", "--set", "demo", "--retriever", "bm25-demo",
                                     "--timeout", "inf"), ("--timeout", "> 0")),
    Case("option-format-unknown", ("eval", "--set", "demo", "--retriever", "bm25-demo",
                                   "--format", "xml"), ("--format", "choose from")),
    Case("option-missing-retriever", ("eval", "--set", "demo"), ("--retriever", "required")),
    Case("option-unknown", ("eval", "--set", "demo", "--retriever", "bm25-demo", "--frobnicate"),
         ("--frobnicate", "unrecognized")),
    Case("option-unknown-retriever", ("eval", "--set", "demo", "--retriever", "nope"),
         ("--retriever", "'nope'")),
    Case("option-unknown-slice", ("eval", "--set", "demo", "--retriever", "bm25-demo", "--store",
                                  "memory:", "--slice", "topik"), ("--slice", "'topik'", "topic")),
    Case("option-unknown-baseline", ("eval", "--set", "demo", "--retriever", "bm25-demo",
                                     "--store", "memory:", "--baseline", "20200101T000000Z-x"),
         ("--baseline", "20200101T000000Z-x")),
    Case("option-output-dir-is-a-file", ("eval", "--set", "demo", "--retriever", "bm25-demo",
                                         "--store", "jsonl:///runs.jsonl", "--output-dir",
                                         "afile"), ("--output-dir", "afile", "folder"),
         setup=_under_a_file),
    Case("option-contradictory-baseline-of-another-set",
         ("eval", "--set", "demo", "--retriever", "bm25-demo", "--store", "jsonl:///runs.jsonl",
          "--baseline", "20261129T120000Z-00000000"),
         ("--baseline", "20261129T120000Z-00000000", "'support'", "'demo'"),
         setup=_store_with_a_run_of_another_set),
    Case("history-limit-zero", ("history", "--set", "demo", "--retriever", "bm25-demo",
                                "--limit", "0"), ("--limit", ">= 1")),
    # --- store URLs ----------------------------------------------------------------------------
    Case("store-unknown-scheme", ("history", "--set", "s", "--retriever", "r", "--store",
                                  "ftp://host/runs"), ("--store", "'ftp'", "sqlite")),
    Case("store-no-scheme", ("history", "--set", "s", "--retriever", "r", "--store",
                             "results.db"), ("--store", "no scheme")),
    Case("store-no-path", ("history", "--set", "s", "--retriever", "r", "--store", "sqlite://"),
         ("--store", "sqlite:///PATH")),
    Case("store-sqlite-folder-missing", ("history", "--set", "s", "--retriever", "r", "--store",
                                         "sqlite:///no/such/dir/r.sqlite3"),
         ("--store", "no/such/dir", "does not exist")),
    Case("store-jsonl-folder-missing", ("history", "--set", "s", "--retriever", "r", "--store",
                                        "jsonl:///no/such/dir/runs.jsonl"),
         ("--store", "no/such/dir", "does not exist")),
    Case("store-sqlite-under-a-file", ("history", "--set", "s", "--retriever", "r", "--store",
                                       "sqlite:///afile/r.sqlite3"),
         ("--store", "afile", "not a folder"), setup=_under_a_file),
    Case("store-jsonl-under-a-file", ("eval", "--set", "demo", "--retriever", "bm25-demo",
                                      "--store", "jsonl:///afile/runs.jsonl"),
         ("--store", "afile", "not a folder"), setup=_under_a_file),
    Case("store-sqlite-is-a-folder", ("history", "--set", "s", "--retriever", "r", "--store",
                                      "sqlite:///adir"), ("--store", "adir", "folder"),
         setup=_make_dir("adir")),
    Case("store-jsonl-is-a-folder", ("history", "--set", "s", "--retriever", "r", "--store",
                                     "jsonl:///adir"), ("--store", "adir", "folder"),
         setup=_make_dir("adir")),
    Case("store-sqlite-not-a-database", ("history", "--set", "s", "--retriever", "r", "--store",
                                         "sqlite:///text.sqlite3"),
         ("--store", "text.sqlite3", "not a database"),
         {"text.sqlite3": "these are not the runs you are looking for\n" * 100}),
    Case("store-jsonl-foreign-line", ("history", "--set", "s", "--retriever", "r", "--store",
                                      "jsonl:///runs.jsonl"),
         ("runs.jsonl", "line 1", "cannot be read"), {"runs.jsonl": '{"run_id": 1}\n'}),
]

# fmt: on

if CHATTR:
    # fmt: off
    CASES += [
        Case("store-sqlite-read-only-folder", ("eval", "--set", "demo", "--retriever",
                                               "bm25-demo", "--store", "sqlite:///ro/r.sqlite3"),
             ("--store", "ro/r.sqlite3", "read-only"), setup=_read_only_dir),
        Case("store-jsonl-read-only-folder", ("eval", "--set", "demo", "--retriever",
                                              "bm25-demo", "--store", "jsonl:///ro/runs.jsonl"),
             ("--store", "ro/runs.jsonl", "read-only"), setup=_read_only_dir),
    ]
    # fmt: on


# fmt: off
# --- generated: every hardening class crossed with every place it can enter ------------------
# Each generator below yields one case per (bad value, place); together with the cases
# listed above the catalogue passes 250 inputs, each with its own process.

VALIDATE = ("validate", "--set")
#: Characters a terminal would act on: ESC, BEL, NUL, a C1 CSI, DEL, bidirectional
#: override and isolate, a zero-width space and a stray byte order mark.
CONTROLS = {"esc": "\x1b", "bel": "\x07", "nul": "\x00", "csi": "\x9b", "del": "\x7f",
            "rlo": "\u202e", "rli": "\u2067", "zwsp": "\u200b", "bom": "\ufeff"}
#: Where user text enters a question, and the field the message must name.
TEXT_FIELDS = {"question": "question", "gist": "gist", "hard_class": "hard_class",
               "meta-key": "meta", "meta-value": "meta.topic"}
NON_ASCII_DIGITS = {"arabic-indic": "\u0663", "fullwidth": "\uff13", "nko": "\u07c3"}
LONG_NAME = "n" * 300


def _question_with(field: str, value: str) -> dict[str, object]:
    row: dict[str, object] = {**GOOD}
    if field == "meta-key":
        row["meta"] = {value: "v"}
    elif field == "meta-value":
        row["meta"] = {"topic": value}
    else:
        row[field] = value
    return row


def _control_cases() -> list[Case]:
    cases = []
    for name, char in CONTROLS.items():
        for field, named in TEXT_FIELDS.items():
            value = f"a{char}b"
            row = json.dumps(_question_with(field, value))
            cases.append(Case(f"gen-jsonl-{field}-{name}", (*VALIDATE, "s.jsonl"),
                              ("s.jsonl", "line 2", f"field '{named}'", f"U+{ord(char):04X}"),
                              {"s.jsonl": jsonl(GOOD_LINE.replace("q1", "q0"), row)}))
            toml_value = json.dumps(value)  # TOML basic strings take JSON's escapes
            head = 'id = "q1"\nquestion = "x?"\nexpected = []\n'
            if field == "meta-key":
                body = head + f'meta = {{{toml_value} = "v"}}\n'
            elif field == "meta-value":
                body = head + f"meta = {{topic = {toml_value}}}\n"
            elif field == "question":
                body = f'id = "q1"\nquestion = {toml_value}\nexpected = []\n'
            else:
                body = head + f"{field} = {toml_value}\n"
            cases.append(Case(f"gen-toml-{field}-{name}", (*VALIDATE, "s.toml"),
                              ("s.toml", "line 8", f"field '{named}'", f"U+{ord(char):04X}"),
                              {"s.toml": toml_question(body)}))
    return cases


def _limit_cases() -> list[Case]:
    base = ("eval", "--set", "demo", "--retriever", "bm25-demo", "--store", "memory:")
    options = {"--k": "10001", "--overfetch": "101", "--resamples": "1000001",
               "--concurrency": "1025", "--timeout": "604801"}
    cases = [Case(f"gen-option{option}-huge", (*base, option, value), (option, "at most"))
             for option, value in options.items()]
    cases += [Case(f"gen-option{option}-astronomic", (*base, option, "9" * 40), (option,))
              for option in options]
    cases += [Case("gen-option--timeout-1e308", (*base, "--timeout", "1e308"), ("--timeout",))]
    for name, digit in NON_ASCII_DIGITS.items():
        cases.append(Case(f"gen-option--k-{name}-digit", (*base, "--k", f"1,{digit}"),
                          ("--k", "whole numbers")))
        cases.append(Case(f"gen-option--resamples-{name}-digit", (*base, "--resamples", digit),
                          ("--resamples", ">= 1")))
        cases.append(Case(f"gen-config-metric-{name}-digit",
                          (*CFG_EVAL, "--retriever", "bm25-demo"),
                          ("cfg.toml", "line 2", f"field 'regression.metrics.hit@{digit}'",
                           "unknown metric"),
                          config(f'[regression.metrics]\n"hit@{digit}" = 0.1\n')))
        cases.append(Case(f"gen-config-slice-metric-{name}-digit",
                          (*CFG_EVAL, "--retriever", "bm25-demo"),
                          ("cfg.toml", f"hit@{digit}", "unknown metric"),
                          config('[regression.slices."hard_class=normal"]\n'
                                 f'"hit@{digit}" = 0.1\n')))
    eval_keys = {"k": "[1, 10001]", "overfetch": "101", "resamples": "1000001",
                 "concurrency": "1025", "timeout": "1e308"}
    cases += [Case(f"gen-config-eval-{key}-huge", (*CFG_EVAL, "--retriever", "bm25-demo"),
                   ("cfg.toml", "line 2", f"field 'eval.{key}'", "at most"),
                   config(f"[eval]\n{key} = {value}\n"))
              for key, value in eval_keys.items()]
    grades = {"2pow63": str(2**63), "1e308": "1e308", "million-and-one": "1000001"}
    for name, grade in grades.items():
        cases.append(Case(f"gen-jsonl-grade-{name}", (*VALIDATE, "s.jsonl"),
                          ("s.jsonl", "line 1", "field 'grades'", "at most"),
                          {"s.jsonl": '{"id": "q1", "question": "x", "expected": [], '
                                      f'"grades": {{"d": {grade}}}}}\n'}))
        cases.append(Case(f"gen-toml-grade-{name}", (*VALIDATE, "s.toml"),
                          ("s.toml", "line 8", "field 'grades'"),
                          {"s.toml": toml_question(f'id = "q1"\nquestion = "y?"\nexpected = []\n'
                                                   f"grades = {{d = {grade}}}\n")}))
    for name, score in {"2pow63": str(2**63), "million-and-one": "1000001"}.items():
        cases.append(Case(f"gen-qrels-score-{name}", (*VALIDATE, "b"),
                          ("test.tsv", "line 2", "field 'score'"),
                          beir(qrels=QRELS_HEADER + f"1\td1\t{score}\n")))
    return cases


def _duplicate_cases() -> list[Case]:
    cases = []
    for field in ("id", "question", "expected", "form", "grades", "hard_class", "gist", "meta"):
        value = {"id": '"q9"', "question": '"y"', "expected": "[]", "form": '"GAP"',
                 "grades": "{}", "hard_class": '"h"', "gist": '"g"', "meta": "{}"}[field]
        row = GOOD_LINE[:-1] + f', "{field}": {value}}}'
        if field not in GOOD:
            row = GOOD_LINE[:-1] + f', "{field}": {value}, "{field}": {value}}}'
        cases.append(Case(f"gen-jsonl-duplicate-key-{field}", (*VALIDATE, "s.jsonl"),
                          ("s.jsonl", "line 1", f"field '{field}'", "twice"),
                          {"s.jsonl": row + "\n"}))
    cases.append(Case("gen-jsonl-duplicate-key-nested", (*VALIDATE, "s.jsonl"),
                      ("s.jsonl", "line 1", "field 'topic'", "twice"),
                      {"s.jsonl": GOOD_LINE[:-1] + ', "meta": {"topic": "a", "topic": "b"}}\n'}))
    cases.append(Case("gen-beir-duplicate-key", (*VALIDATE, "b"),
                      ("queries.jsonl", "line 1", "field 'text'", "twice"),
                      beir(queries='{"_id": "1", "text": "a", "text": "b"}\n',
                           qrels=QRELS_HEADER + "1\td1\t1\n")))
    cases.append(Case("gen-beir-duplicate-query-id", (*VALIDATE, "b"),
                      ("queries.jsonl", "line 3", "field '_id'", "line 1"),
                      beir(queries=QUERIES + '{"_id": "1", "text": "again"}\n',
                           qrels=QRELS_HEADER + "1\td1\t1\n")))
    for name, rows in {"same-grade": "1\td1\t1\n1\td1\t1\n",
                       "other-grade": "1\td1\t1\n1\td1\t2\n",
                       "apart": "1\td1\t1\n2\td1\t1\n1\td1\t0\n",
                       "trec-four-columns": "1\t0\td1\t1\n1\t0\td1\t1\n"}.items():
        line = 4 if name == "apart" else 3
        cases.append(Case(f"gen-qrels-duplicate-row-{name}", (*VALIDATE, "b"),
                          ("test.tsv", f"line {line}", "field 'corpus-id'", "again"),
                          beir(qrels=QRELS_HEADER + rows)))
    return cases


def _unicode_and_nesting_cases() -> list[Case]:
    cases = []
    for field in ("gist", "hard_class"):
        cases.append(Case(f"gen-jsonl-surrogate-{field}", (*VALIDATE, "s.jsonl"),
                          ("s.jsonl", "line 1", f"field '{field}'", "Unicode"),
                          {"s.jsonl": GOOD_LINE[:-1] + f', "{field}": "x \\udc00"}}\n'}))
    cases.append(Case("gen-jsonl-surrogate-meta", (*VALIDATE, "s.jsonl"),
                      ("s.jsonl", "line 1", "field 'meta'", "Unicode"),
                      {"s.jsonl": GOOD_LINE[:-1] + ', "meta": {"t": "\\ud83d"}}\n'}))
    surrogates = {"high": "\\ud800", "low": "\\udfff", "reversed-pair": "\\ude00\\ud83d"}
    for name, text in surrogates.items():
        cases.append(Case(f"gen-beir-surrogate-{name}", (*VALIDATE, "b"),
                          ("queries.jsonl", "line 1", "field 'text'"),
                          beir(queries=f'{{"_id": "1", "text": "q {text}"}}\n',
                               qrels=QRELS_HEADER + "1\td1\t1\n")))
    deep = 50_000
    cases += [
        Case("gen-toml-set-deep-array", (*VALIDATE, "s.toml"), ("s.toml", "nested"),
             {"s.toml": 'name = "t"\nx = ' + "[" * deep + "]" * deep + "\n"}),
        Case("gen-toml-set-deep-inline-table", (*VALIDATE, "s.toml"), ("s.toml",),
             {"s.toml": 'name = "t"\nx = ' + "{a = " * 5000 + "1" + "}" * 5000 + "\n"}),
        Case("gen-config-deep-array", (*CFG_EVAL, "--retriever", "bm25-demo"),
             ("cfg.toml", "nested"), config("[eval]\nk = " + "[" * deep + "]" * deep + "\n")),
        Case("gen-beir-queries-deep", (*VALIDATE, "b"), ("queries.jsonl", "line 1"),
             beir(queries='{"_id": "1", "text": ' + "[" * deep + "\n",
                  qrels=QRELS_HEADER + "1\td1\t1\n")),
        Case("gen-jsonl-meta-deep", (*VALIDATE, "s.jsonl"), ("s.jsonl", "line 1", "nested"),
             {"s.jsonl": GOOD_LINE[:-1] + ', "meta": ' + '{"a": ' * deep + "\n"}),
    ]
    return cases


def _path_cases() -> list[Case]:
    cases = [
        Case("gen-path-set-long-name", (*VALIDATE, f"{LONG_NAME}.jsonl"), ("--set", "255 bytes")),
        Case("gen-path-set-long-folder", (*VALIDATE, f"{LONG_NAME}/s.jsonl"),
             ("--set", "255 bytes")),
        Case("gen-path-eval-set-long-name", (*EVAL, f"{LONG_NAME}.jsonl"), ("--set", "255 bytes")),
        Case("gen-path-config-long-name", ("eval", "--config", f"{LONG_NAME}.toml", "--set",
                                           "demo", "--retriever", "bm25-demo"),
             ("--config", "255 bytes")),
        Case("gen-path-store-jsonl-long-name", ("history", "--set", "s", "--retriever", "r",
                                                "--store", f"jsonl:///{LONG_NAME}.jsonl"),
             ("--store", "255 bytes")),
        Case("gen-path-store-sqlite-long-name", ("history", "--set", "s", "--retriever", "r",
                                                 "--store", f"sqlite:///{LONG_NAME}.db"),
             ("--store", "255 bytes")),
        Case("gen-path-store-long-folder", ("history", "--set", "s", "--retriever", "r",
                                            "--store", f"sqlite:///{LONG_NAME}/r.db"),
             ("--store", "255 bytes")),
        Case("gen-path-output-dir-long-name", ("eval", "--set", "demo", "--retriever",
                                               "bm25-demo", "--store", "memory:",
                                               "--output-dir", LONG_NAME),
             ("--output-dir", "255 bytes")),
        Case("gen-path-config-set-long-name", ("eval", "--config", "cfg.toml", "--set", "s",
                                               "--retriever", "bm25-demo", "--store", "memory:"),
             ("--set", "255 bytes"), config(f'[sets.s]\npath = "{LONG_NAME}.jsonl"\n')),
        Case("gen-path-store-too-long", ("history", "--set", "s", "--retriever", "r", "--store",
                                         "jsonl:///" + "/".join(["d" * 200] * 25)),
             ("--store", "bytes long")),
        Case("gen-nul-config-store-url", (*CFG_EVAL, "--retriever", "bm25-demo"),
             ("cfg.toml", "line 2", "field 'store.url'", "NUL"),
             config('[store]\nurl = "jsonl:///a\\u0000b.jsonl"\n')),
        Case("gen-nul-config-retriever-url", (*CFG_EVAL, "--retriever", "r"),
             ("cfg.toml", "line 3", "field 'retrievers.r.url'", "NUL"),
             config('[retrievers.r]\nplugin = "http"\nurl = "http://127.0.0.1:9/\\u0000x"\n')),
        Case("gen-nul-config-set-path", (*CFG_EVAL, "--retriever", "bm25-demo"),
             ("cfg.toml", "line 2", "field 'sets.s.path'", "NUL"),
             config('[sets.s]\npath = "a\\u0000.jsonl"\n')),
    ]
    return cases


def _fifo(name: str) -> Callable[[Path], None]:
    def make(directory: Path) -> None:
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(directory / name)

    return make


def _special_file_cases() -> list[Case]:
    history = ("history", "--set", "s", "--retriever", "r", "--store")
    return [
        Case("gen-fifo-set-jsonl", (*VALIDATE, "p.jsonl"), ("p.jsonl", "FIFO"),
             setup=_fifo("p.jsonl")),
        Case("gen-fifo-set-toml", (*VALIDATE, "p.toml"), ("p.toml", "FIFO"),
             setup=_fifo("p.toml")),
        Case("gen-fifo-config", ("eval", "--config", "p.toml", "--set", "demo", "--retriever",
                                 "bm25-demo"), ("p.toml", "FIFO"), setup=_fifo("p.toml")),
        Case("gen-fifo-store-jsonl", (*history, "jsonl:///p.jsonl"), ("--store", "FIFO"),
             setup=_fifo("p.jsonl")),
        Case("gen-fifo-store-sqlite", (*history, "sqlite:///p.db"), ("--store", "FIFO"),
             setup=_fifo("p.db")),
        Case("gen-fifo-beir-queries", (*VALIDATE, "b"), ("queries.jsonl", "FIFO"),
             {"b/corpus.jsonl": "{}\n", "b/qrels/test.tsv": QRELS_HEADER + "1\td1\t1\n"},
             setup=_fifo("b/queries.jsonl")),
        Case("gen-device-store-sqlite", (*history, "sqlite:////dev/zero"), ("--store", "device")),
        Case("gen-device-store-jsonl", (*history, "jsonl:////dev/null"), ("--store", "device")),
        Case("gen-device-set", (*VALIDATE, "/dev/zero"), ("/dev/zero", "device")),
        Case("gen-device-config", ("eval", "--config", "/dev/null", "--set", "demo",
                                   "--retriever", "bm25-demo"), ("/dev/null", "device")),
    ]


def _collision_cases() -> list[Case]:
    eval_out = ("eval", "--set", "demo", "--retriever", "bm25-demo", "--output-dir", "out")
    folder = _make_dir("out")
    cases = [
        Case(f"gen-collision-store-{name}", (*eval_out, "--store", f"{scheme}:///out/{name}"),
             ("--output-dir", name, "--store"), setup=folder)
        for scheme, name in (("jsonl", "summary.json"), ("jsonl", "per_question.jsonl"),
                             ("sqlite", "report.md"))
    ]
    cases.append(Case("gen-collision-set", ("eval", "--set", "out/report.md", "--retriever",
                                            "bm25-demo", "--store", "memory:",
                                            "--output-dir", "out"),
                      ("--output-dir", "--set"), {"out/report.md": GOOD_LINE + "\n"}))
    cases.append(Case("gen-collision-config", ("eval", "--config", "out/summary.json", "--set",
                                               "demo", "--retriever", "bm25-demo", "--store",
                                               "memory:", "--output-dir", "out"),
                      ("--output-dir", "--config"), {"out/summary.json": "[eval]\nk = [1]\n"}))
    return cases


CASES += [*_control_cases(), *_limit_cases(), *_duplicate_cases(),
          *_unicode_and_nesting_cases(), *_path_cases(), *_special_file_cases(),
          *_collision_cases()]
# fmt: on

# fmt: off
ACCEPTED = [
    # A UTF-8 byte order mark (Notepad writes one) is harmless: accepted on purpose.
    ("jsonl-with-bom", {"s.jsonl": "\ufeff" + jsonl(line(expected=["doc-membership-card"]))},
     (*EVAL, "s.jsonl")),
    # Windows line endings, and a U+2028 LINE SEPARATOR inside a string (valid JSON).
    ("jsonl-crlf-and-line-separator",
     {"s.jsonl": line(question="card?\u2028new line", expected=["doc-membership-card"])
      .replace("\\u2028", "\u2028") + "\r\n" + line(id="q2", expected=[]) + "\r\n"},
     (*EVAL, "s.jsonl")),
    ("config-with-bom", {"cfg.toml": "\ufeff[eval]\nk = [1, 3]\n"},
     ("eval", "--config", "cfg.toml", "--set", "demo", "--retriever", "bm25-demo", "--store",
      "memory:", "-q")),
]
# fmt: on


def _run(args: tuple[str, ...], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = child_environment()
    env.update(NO_COLOR="1", COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "retrievalkit", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        errors="replace",
        check=False,
        timeout=120,
    )


def _lay_out(directory: Path, files: Mapping[str, str | bytes]) -> None:
    for name, content in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


@pytest.fixture(scope="module")
def outcomes(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, subprocess.CompletedProcess[str]]]:
    """Run every case (and every accepted input) once, four at a time."""
    root = tmp_path_factory.mktemp("bad-input")
    jobs: dict[str, tuple[tuple[str, ...], Path]] = {}
    for case in CASES:
        directory = root / case.name
        directory.mkdir()
        _lay_out(directory, case.files)
        if case.setup is not None:
            case.setup(directory)
        jobs[case.name] = (case.args, directory)
    for name, files, args in ACCEPTED:
        directory = root / name
        directory.mkdir()
        _lay_out(directory, files)
        jobs[name] = (args, directory)
    try:
        with ThreadPoolExecutor(max_workers=4) as pool:
            futures = {name: pool.submit(_run, *job) for name, job in jobs.items()}
            yield {name: future.result() for name, future in futures.items()}
    finally:
        for directory in root.glob("*/ro"):
            subprocess.run(["chattr", "-i", str(directory)], capture_output=True, check=False)


def test_the_catalogue_is_large_and_distinct() -> None:
    names = [case.name for case in CASES]
    assert len(set(names)) == len(names)
    assert len({(case.args, tuple(sorted(case.files.items()))) for case in CASES}) == len(CASES)
    assert len(CASES) > 250


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_bad_input_exits_2_with_one_message_naming_the_place(
    case: Case, outcomes: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    completed = outcomes[case.name]
    stderr = completed.stderr
    assert "Traceback" not in stderr, stderr
    assert completed.returncode == 2, (completed.returncode, stderr, completed.stdout[-2000:])
    lines = [text for text in stderr.splitlines() if text.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("retrievalkit: error: "), stderr
    for expected in case.expect:
        assert expected in lines[0], (expected, lines[0])


@pytest.mark.parametrize("name", [name for name, _, _ in ACCEPTED])
def test_harmless_oddities_are_accepted(
    name: str, outcomes: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    completed = outcomes[name]
    assert completed.returncode == 0, completed.stderr
    assert "Traceback" not in completed.stderr


def test_read_only_store_folder_is_tested_here() -> None:
    # As root only an immutable folder (chattr +i) is truly read-only; where the file
    # system refuses chattr the read-only cases are absent, and that must not pass quietly.
    assert CHATTR, "chattr +i does not work here, so the read-only store cases did not run"
    assert any("read-only" in case.name for case in CASES)
