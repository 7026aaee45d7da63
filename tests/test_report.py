"""``retrievalkit report``: the self-contained HTML report, checked as text and in Chromium.

Runs are made with the real command line on the bundled demo: the demo BM25 (twice,
so the history has a line) and BM25 over the titles only (a deliberately weak system,
the titles are the demo corpus with every body removed). The browser tests open the
reports in headless Chromium (Debian's ``chromium`` package; they fail, never skip,
when it is missing), scan its log for console messages and uncaught errors, read the
DOM after the page's script ran (a copy of the page gets a small probe script that
clicks column headings and measures the charts), and save a screenshot.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import attrs
import by_hand
import pytest
from child_env import child_environment

from retrievalkit.demo import DEMO_CORPUS
from retrievalkit.formats.golden_sets import load_set_file
from retrievalkit.metrics.scoring import ScoringOptions, score_run
from retrievalkit.pipeline.engine.evaluator import Retrieval
from retrievalkit.pipeline.engine.record import build_record
from retrievalkit.stores import open_store

DEMO_QUESTIONS = 75


def retrievalkit(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = child_environment()
    env["NO_COLOR"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "retrievalkit", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@attrs.frozen
class Runs:
    folder: Path
    store: str
    demo: str
    """The newer of the two bm25-demo runs."""
    demo_older: str
    titles: str
    single: Path
    """The report of ``demo``."""
    compared: Path
    """The report of ``titles`` against ``demo``."""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    folder = tmp_path_factory.mktemp("report")
    titles = folder / "titles.jsonl"
    with titles.open("w", encoding="utf-8") as handle:
        for line in DEMO_CORPUS.read_text(encoding="utf-8").splitlines():
            document = json.loads(line)
            document["text"] = ""
            handle.write(json.dumps(document) + "\n")
    (folder / "retrievalkit.toml").write_text(
        f'[retrievers.titles-only]\nplugin = "bm25"\ncorpus = "{titles}"\n'
        'doc_id_separator = "#"\nstemmer = ""\n\n[store]\nurl = "jsonl:///runs.jsonl"\n',
        encoding="utf-8",
    )
    for retriever in ("bm25-demo", "bm25-demo", "titles-only"):
        ok(retrievalkit("eval", "--set", "demo", "--retriever", retriever, "--quiet", cwd=folder))

    def run_ids(retriever: str) -> list[str]:
        listed = ok(
            retrievalkit(
                "history", "--set", "demo", "--retriever", retriever, "--format", "json", cwd=folder
            )
        )
        return [row["run_id"] for row in json.loads(listed)]

    demo, demo_older = run_ids("bm25-demo")
    (titles_run,) = run_ids("titles-only")
    single, compared = folder / "single.html", folder / "compared.html"
    ok(retrievalkit("report", demo, "-o", str(single), cwd=folder))
    ok(retrievalkit("report", titles_run, "--compare", demo, "-o", str(compared), cwd=folder))
    return Runs(folder, "jsonl:///runs.jsonl", demo, demo_older, titles_run, single, compared)


# --- the page as text -----------------------------------------------------------------------


def question_rows(page: str) -> list[str]:
    (table,) = re.findall(r'<table id="questions-table".*?</table>', page, re.DOTALL)
    (body,) = re.findall(r"<tbody>(.*)</tbody>", table, re.DOTALL)
    return re.findall(r"<tr\b.*?</tr>", body, re.DOTALL)


def assert_self_contained(page: str) -> None:
    """Nothing to fetch: no links to files or hosts, only in-page anchors and SVG references."""
    assert "<link" not in page and "@import" not in page
    for target in re.findall(r"""\b(?:src|href)\s*=\s*["']?([^"'\s>]*)""", page):
        assert target.startswith("#"), target
    for target in re.findall(r"url\(([^)]*)\)", page):
        assert target.startswith("#"), target


def test_a_single_run_report_has_its_charts_numbers_and_every_question(runs: Runs) -> None:
    page = runs.single.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert_self_contained(page)
    # By form, by hard class, first relevant ranks, history.
    assert page.count("<svg ") == 4
    assert page.count('class="chart"') == 4
    for anchor in ('id="by-form"', 'id="by-hard_5f_class"', 'id="ranks"', 'id="history"'):
        assert anchor in page
    assert 'id="differences"' not in page

    shown = json.loads(ok(retrievalkit("show", runs.demo, "--format", "json", cwd=runs.folder)))
    for metric in ("hit@1", "hit@3", "rr", "ndcg@10"):
        value = shown["metrics"][metric]
        low, high = value["ci"]
        card = f'<div class="name">{metric}</div><div class="value">{value["mean"]:.3f}</div>'
        assert card in page
        assert f"95% CI [{low:.3f}, {high:.3f}]" in page

    rows = question_rows(page)
    assert len(rows) == DEMO_QUESTIONS
    assert len(shown["errors"]) == 0
    # The demo set is found from the run's set name, so the texts are shown.
    assert "How do I get a library card?" in rows[0] and 'data-v="q01"' in rows[0]
    misses = sum('class="miss"' in row for row in rows)
    # Answerable questions with no relevant document in the top 10, counted by hand.
    assert misses == by_hand.misses(by_hand.demo_rankings(), 10)
    # The history of bm25-demo holds both runs, this one marked.
    assert "The 2 runs of this set and retriever" in page
    assert "this run" in page


def test_a_comparison_report_shows_the_paired_differences(runs: Runs) -> None:
    page = runs.compared.read_text(encoding="utf-8")
    assert_self_contained(page)
    assert page.count("<svg ") == 5
    assert 'id="differences"' in page
    assert len(question_rows(page)) == DEMO_QUESTIONS

    compared = json.loads(
        ok(
            retrievalkit(
                "compare",
                "--run",
                runs.demo,
                "--run",
                runs.titles,
                "--format",
                "json",
                cwd=runs.folder,
            )
        )
    )
    (pair,) = compared["pairs"]
    deltas = {delta["metric"]: delta for delta in pair["metrics"]}
    for metric in ("hit@1", "hit@3", "rr", "ndcg@10"):
        delta = deltas[metric]
        assert delta["difference"] < 0 and delta["significant"], "titles-only is clearly worse"
        low, high = delta["ci"]
        assert f"difference {delta['difference']:+.3f} (significant)" in page
        assert f"CI [{low:+.3f}, {high:+.3f}]" in page
        assert f"bm25-demo (baseline): {delta['baseline']:.3f}" in page
    rr = deltas["rr"]
    better, worse, same = rr["wins"], rr["losses"], rr["ties"]
    assert f"{better} better, {worse} worse, {same} unchanged (not drawn)" in page


def test_the_same_runs_give_a_byte_identical_report(runs: Runs) -> None:
    again = runs.folder / "again.html"
    ok(
        retrievalkit(
            "report", runs.titles, "--compare", runs.demo, "-o", str(again), cwd=runs.folder
        )
    )
    assert again.read_bytes() == runs.compared.read_bytes()


HOSTILE_ID = "q<script>window.__pwned=1</script>"
HOSTILE_TEXT = 'Is <img src=x onerror="window.__pwned=2"> & "this" safe?'
HOSTILE_DOC = "<img/src=x/onerror=window.__pwned=3>"
HOSTILE_CLASS = "<b>bold</b> $x$ class"
HOSTILE_ERROR = "ConnectionError: <script>window.__pwned=4</script>"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A report of a run whose ids, text, hard class, documents and error are HTML."""
    folder = tmp_path_factory.mktemp("hostile")
    questions = [
        {
            "id": HOSTILE_ID,
            "question": HOSTILE_TEXT,
            "form": "GAP",
            "expected": [HOSTILE_DOC],
            "hard_class": HOSTILE_CLASS,
        },
        {"id": "plain", "question": "an ordinary question", "expected": ["doc-1"]},
        {"id": "broken", "question": "this one errors", "expected": ["doc-1"]},
    ]
    set_file = folder / "hostile.jsonl"
    set_file.write_text("".join(json.dumps(q) + "\n" for q in questions), encoding="utf-8")
    golden = load_set_file(set_file)
    retrievals = [
        Retrieval((HOSTILE_DOC, "doc-1"), 1.0),
        Retrieval(("doc-2", "doc-1"), 2.0),
        Retrieval((), 3.0, error=HOSTILE_ERROR),
    ]
    scoring = ScoringOptions(ks=(1, 3), resamples=200)
    record = build_record(
        golden,
        "x<i>",
        "test",
        {},
        score_run(golden.questions, retrievals, scoring),
        scoring,
        overfetch=1,
        git_commit=None,
    )
    open_store(f"jsonl:///{folder}/runs.jsonl").save(record)
    page = folder / "hostile.html"
    ok(
        retrievalkit(
            "report",
            record.run_id,
            "-o",
            str(page),
            "--set",
            str(set_file),
            "--store",
            f"jsonl:///{folder}/runs.jsonl",
            cwd=folder,
        )
    )
    return page


def test_user_text_is_escaped_everywhere(hostile: Path) -> None:
    page = hostile.read_text(encoding="utf-8")
    assert page.count("<script") == 1, "only the report's own script"
    assert "<img" not in page and "<b>bold" not in page and "x<i>" not in page
    assert "q&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page
    assert "Is &lt;img src=x onerror=&quot;window.__pwned=2&quot;&gt; &amp; &quot;this" in page
    assert "&lt;img/src=x/onerror=window.__pwned=3&gt;" in page
    assert "ConnectionError: &lt;script&gt;window.__pwned=4&lt;/script&gt;" in page
    # In the charts too (matplotlib writes SVG text escaped), and $...$ is not math.
    assert "&lt;b&gt;bold&lt;/b&gt; $x$ class (1)" in page
    assert len(question_rows(page)) == 3
    assert "1 of 3 questions errored" in page


# --- the command line ------------------------------------------------------------------------

BLOCK_MATPLOTLIB = textwrap.dedent(
    """
    import sys

    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] == "matplotlib":
                raise ImportError("matplotlib is hidden by the test")
            return None

    sys.meta_path.insert(0, Block())
    from retrievalkit.cli.main import main
    raise SystemExit(main(sys.argv[1:]))
    """
)


def test_without_matplotlib_report_exits_2_and_names_the_extra(runs: Runs) -> None:
    out = runs.folder / "never.html"
    blocked = subprocess.run(
        [sys.executable, "-c", BLOCK_MATPLOTLIB, "report", runs.demo, "-o", str(out)],
        cwd=runs.folder,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert blocked.returncode == 2, blocked.stderr
    assert "pip install 'retrievalkit-eval[report]'" in blocked.stderr
    assert not out.exists()
    # The control: with matplotlib importable, the same script writes the report.
    allowed = subprocess.run(
        [
            sys.executable,
            "-c",
            BLOCK_MATPLOTLIB.replace('== "matplotlib"', '== "-"'),
            "report",
            runs.demo,
            "-o",
            str(out),
        ],
        cwd=runs.folder,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert allowed.returncode == 0, allowed.stderr
    assert out.exists()


def test_the_command_line_starts_without_importing_matplotlib() -> None:
    probe = (
        "import sys; from retrievalkit.cli.main import build_parser; build_parser(); "
        "print(sorted(m for m in sys.modules if m.partition('.')[0] == 'matplotlib'))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("no-such-run", "-o", "r.html"), "no run no-such-run in jsonl:///runs.jsonl"),
        (("{demo}", "--compare", "nope", "-o", "r.html"), "field '--compare': no run nope"),
        (("{demo}", "-o", "missing/r.html"), "the folder missing does not exist"),
        (("{demo}", "-o", "r.html", "--set", "nowhere.jsonl"), "no such file 'nowhere.jsonl'"),
    ],
)
def test_bad_report_usage_exits_2_with_a_message(
    runs: Runs, args: tuple[str, ...], message: str
) -> None:
    result = retrievalkit("report", *(a.format(demo=runs.demo) for a in args), cwd=runs.folder)
    assert result.returncode == 2
    assert message in result.stderr


@pytest.mark.parametrize(
    ("target", "field"), [("runs.jsonl", "--store"), ("retrievalkit.toml", "--config")]
)
def test_a_report_never_overwrites_the_store_or_the_config(
    runs: Runs, target: str, field: str
) -> None:
    path = runs.folder / target
    before = path.read_bytes()
    result = retrievalkit("report", runs.demo, "-o", target, cwd=runs.folder)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"would overwrite {target} ({field})" in result.stderr.replace(f"{runs.folder}/", "")
    assert path.read_bytes() == before
    listed = retrievalkit("history", "--set", "demo", "--retriever", "bm25-demo", cwd=runs.folder)
    assert runs.demo in ok(listed)


# --- in the browser --------------------------------------------------------------------------

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
)

#: Installed before the page's own script runs: records uncaught errors.
ERROR_TRAP = (
    "<script>window.__errors = [];"
    "window.addEventListener('error', function (e) { window.__errors.push(String(e.message)); });"
    "</script>"
)

#: Runs after the page's script: measures the charts, sorts the table, writes a JSON result.
PROBE = """
<script>
(function () {
  var pwned = window.__pwned === undefined ? null : window.__pwned;
  var result = {errors: window.__errors, pwned: pwned};
  try {
    var table = document.getElementById("questions-table");
    var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
    var column = function (name) {
      return heads.map(function (h) { return h.textContent; }).indexOf(name);
    };
    var values = function (index) {
      return Array.prototype.map.call(table.tBodies[0].rows, function (row) {
        return row.cells[index].dataset.v;
      });
    };
    result.charts = Array.prototype.map.call(document.querySelectorAll("svg.chart"),
      function (svg) { var box = svg.getBoundingClientRect(); return [box.width, box.height]; });
    result.chartTexts = document.querySelectorAll("svg.chart text").length;
    result.rows = table.tBodies[0].rows.length;
    result.rowHeights = Array.prototype.map.call(table.tBodies[0].rows,
      function (row) { return row.getBoundingClientRect().height; });
    result.images = document.querySelectorAll("img").length;
    result.text = document.body.textContent;
    var latency = column("latency ms"), id = column("id");
    heads[latency].click();
    result.latencyUp = values(latency);
    result.latencySortUp = heads[latency].getAttribute("aria-sort");
    heads[latency].click();
    result.latencyDown = values(latency);
    heads[id].click();
    result.ids = values(id);
    var filter = document.getElementById("question-filter");
    filter.value = result.ids[0];
    filter.dispatchEvent(new Event("input"));
    result.filtered = document.getElementById("question-count").textContent;
  } catch (error) {
    result.probeError = String(error);
  }
  var out = document.createElement("pre");
  out.id = "probe-result";
  out.textContent = JSON.stringify(result);
  document.body.appendChild(out);
})();
</script>
"""


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None and Path("/usr/bin/chromium").exists():
        found = "/usr/bin/chromium"
    if found is None:
        pytest.fail(
            "headless Chromium is needed for the report's browser tests: "
            "apt-get update && apt-get install -y chromium"
        )
    return found


def browse(page: Path, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """Open ``page`` in headless Chromium with a fresh profile; stdout/stderr as text."""
    profile.mkdir()
    return subprocess.run(
        [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, page.as_uri()],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def console_messages(log: str) -> list[str]:
    """What the page wrote to the console, and uncaught errors, from Chromium's log."""
    return [line for line in log.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


def probe(page: Path, tmp_path: Path) -> dict[str, Any]:
    """The probe's findings on a copy of ``page`` (the copy gets the trap and the probe)."""
    text = page.read_text(encoding="utf-8").replace("<head>", "<head>" + ERROR_TRAP, 1)
    probed = tmp_path / f"probed-{page.name}"
    probed.write_text(text.replace("</body>", PROBE + "</body>", 1), encoding="utf-8")
    result = browse(probed, tmp_path / f"profile-{page.stem}", "--dump-dom")
    assert result.returncode == 0, result.stderr[-3000:]
    found = re.search(r'<pre id="probe-result">(.*?)</pre>', result.stdout, re.DOTALL)
    assert found is not None, "the probe did not run: " + result.stdout[-2000:]
    findings: dict[str, Any] = json.loads(html.unescape(found.group(1)))
    # Only messages of the page itself count (the probe writes none).
    findings["console"] = console_messages(result.stderr)
    return findings


def as_number(value: str) -> float:
    return float(value) if value else float("inf")


def test_the_browser_check_catches_script_errors(tmp_path: Path) -> None:
    # The control: a page that throws must fail the checks the report passes below.
    broken = tmp_path / "broken.html"
    broken.write_text(
        "<!DOCTYPE html><html><head></head><body><table id='questions-table'></table>"
        "<script>console.error('boom'); notDefined();</script></body></html>",
        encoding="utf-8",
    )
    findings = probe(broken, tmp_path)
    assert any("notDefined" in error for error in findings["errors"])
    assert any("Uncaught ReferenceError" in line for line in findings["console"])
    assert any("boom" in line for line in findings["console"])
    assert "probeError" in findings


def test_the_comparison_report_renders_in_chromium(runs: Runs, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    result = browse(
        runs.compared,
        tmp_path / "profile-shot",
        f"--screenshot={shot}",
        "--window-size=1280,2000",
        "--hide-scrollbars",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert console_messages(result.stderr) == []
    print(f"screenshot of the report: {shot}")
    from matplotlib.image import imread

    pixels = imread(shot)
    assert pixels.shape[:2] == (2000, 1280)
    ink = (pixels[..., :3].mean(axis=2) < 0.9).mean()
    assert 0.03 < ink < 0.6, f"{ink:.1%} of the screenshot is not near-white"

    findings = probe(runs.compared, tmp_path)
    assert findings["errors"] == [] and findings["console"] == []
    assert "probeError" not in findings, findings.get("probeError")
    assert len(findings["charts"]) == 5
    for width, height in findings["charts"]:
        assert width > 600 and height > 150
    assert findings["chartTexts"] > 100, "axis labels and titles are SVG text"
    assert findings["rows"] == DEMO_QUESTIONS
    assert all(height > 10 for height in findings["rowHeights"])
    up = [as_number(value) for value in findings["latencyUp"]]
    down = [as_number(value) for value in findings["latencyDown"]]
    assert up == sorted(up) and down == sorted(down, reverse=True) and up != down
    assert findings["latencySortUp"] == "ascending"
    assert findings["ids"] == [f"q{number:02d}" for number in range(1, DEMO_QUESTIONS + 1)]
    assert findings["filtered"] == f"1 of {DEMO_QUESTIONS} shown"


def test_hostile_text_stays_text_in_chromium(hostile: Path, tmp_path: Path) -> None:
    findings = probe(hostile, tmp_path)
    assert findings["pwned"] is None, "a script from the data ran"
    assert findings["images"] == 0
    assert findings["errors"] == [] and findings["console"] == []
    assert HOSTILE_ID in findings["text"] and HOSTILE_TEXT in findings["text"]
    assert HOSTILE_DOC in findings["text"] and HOSTILE_ERROR in findings["text"]
