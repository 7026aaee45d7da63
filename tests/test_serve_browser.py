"""``retrievalkit serve`` in headless Chromium: a person's way through every view, and hostile text.

A real server process (``retrievalkit serve --port 0`` on 127.0.0.1) over real demo runs
is driven over the DevTools protocol (tests/chromium_pipe.py): from the list of keys to a
history, to a comparison chosen on the page, to a question, to the judging queue, where
ten documents are graded with the keyboard. The server is restarted and the grades are
still there; ``eval --extra-labels`` on the file they went to gives the means the grades
imply. Every view is screenshotted (into the test's folder, and into
``$RETRIEVALKIT_ARTIFACTS/serve`` when that is set; ``RETRIEVALKIT_DOCS_SCREENSHOTS=1``
also refreshes docs/img/serve-*.png). Then every payload family of the HTML hardening
tests, in every field a user controls, goes through every view: no script runs, no
element is injected, nothing is refused by the page's Content-Security-Policy (which
would mean markup got through), and the text shows as text.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from chromium_pipe import Browser
from serve_site import DemoRuns, demo_runs, grade_lines, ok, retrievalkit, serving
from test_report_escaping import FAMILIES, FIELDS, _payload, _record

from retrievalkit.demo import DEMO_CORPUS
from retrievalkit.formats.labels import Label, label_effect
from retrievalkit.model.records import ResultRecord
from retrievalkit.stores import open_store

REPO = Path(__file__).resolve().parent.parent
#: The grades typed, in order: every grade at least twice.
GRADES = "2031102300"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> DemoRuns:
    return demo_runs(tmp_path_factory.mktemp("serve"))


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    opened = Browser(tmp_path / "profile")
    try:
        yield opened
    finally:
        opened.close()


def keep(shot: Path, name: str, *, docs: bool = False) -> None:
    """Keep a screenshot as an artifact, and in the docs when they are being refreshed."""
    folder = os.environ.get("RETRIEVALKIT_ARTIFACTS")
    if folder:
        target = Path(folder) / "serve"
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, target / f"{name}.png")
    if docs and os.environ.get("RETRIEVALKIT_DOCS_SCREENSHOTS"):
        shutil.copy(shot, REPO / "docs" / "img" / f"serve-{name}.png")
    print(f"screenshot of {name}: {shot}")


def shoot(browser: Browser, folder: Path, name: str, *, docs: bool = True) -> None:
    from matplotlib.image import imread

    shot = browser.screenshot(folder / f"{name}.png")
    pixels = imread(shot)
    assert pixels.shape[1] == 1280 and pixels.shape[0] > 300
    ink = (pixels[..., :3].mean(axis=2) < 0.9).mean()
    assert 0.01 < ink < 0.7, f"{name}: {ink:.1%} of the screenshot is not near-white"
    keep(shot, name, docs=docs)


def progress(browser: Browser) -> tuple[int, int]:
    found = re.match(r"(\d+) of (\d+) graded", browser.text("#progress-text"))
    assert found is not None, browser.text("#progress")
    return int(found[1]), int(found[2])


def test_history_compare_question_judge_restart_and_eval(
    runs: DemoRuns, browser: Browser, tmp_path: Path
) -> None:
    labels = tmp_path / "human.tsv"
    arguments = ("--corpus", str(DEMO_CORPUS), "--labels", str(labels))
    with serving(runs.folder, *arguments) as server:
        browser.open(server.url + "/")
        see_keys(browser, tmp_path)
        see_history(runs, browser, tmp_path)
        compare_in_the_browser(runs, browser, tmp_path)
        record = see_the_question_that_moved_most(runs, browser, tmp_path)
        typed, total = grade_ten(runs, browser, tmp_path)
        assert browser.problems() == []

    written = grade_lines(labels)
    assert [(row[0], row[1], int(row[2])) for row in written] == [
        (label.question_id, label.document_id, label.grade) for label in typed
    ]
    assert {row[3] for row in written} == {"human"} and {row[4] for row in written} == {"alice"}

    # A new server process over the same file: the grades are kept, the queue resumes.
    with serving(runs.folder, *arguments) as server:
        browser.open(f"{server.url}/judge?run={runs.titles}")
        assert progress(browser) == (10, total)
        recent = browser.text("#recent")
        assert typed[-1].document_id in recent and typed[-5].document_id in recent
        shown = (browser.text("#item-question"), browser.text("#item-document"))
        assert shown not in {label.pair for label in typed}, "a graded document is asked again"
        assert browser.problems() == []

    check_eval_with_the_grades(runs, labels, record, typed)


def see_keys(browser: Browser, tmp_path: Path) -> None:
    """The start page: one row per (set, retriever) with its number of runs."""
    assert browser.text("h1") == "Sets and retrievers"
    rows = browser.evaluate(
        "Array.from(document.querySelectorAll('#keys tbody tr'))"
        ".map(r => Array.from(r.cells).map(c => c.textContent.trim()))"
    )
    assert [row[:3] for row in rows] == [
        ["demo", "bm25-demo", "2"],
        ["demo", "titles-only", "1"],
    ]
    shoot(browser, tmp_path, "keys")


def see_history(runs: DemoRuns, browser: Browser, tmp_path: Path) -> None:
    """History of bm25-demo: two runs on the chart, the newer passes against the older."""
    browser.click("#keys tbody tr:first-child a.history-link")
    assert browser.text("h1") == "History demo × bm25-demo"
    assert browser.evaluate("document.querySelectorAll('#trend .run-marker').length") == 2
    verdicts = browser.evaluate(
        "Array.from(document.querySelectorAll('#runs tbody tr')).map(r => r.cells[6].textContent)"
    )
    assert verdicts == ["passed against the run before it", "no baseline"]
    hover = browser.evaluate("document.querySelector('#trend .run-marker title').textContent")
    assert runs.demo_older in hover and "[" in hover
    # A slice chosen on the page redraws the chart for that slice.
    browser.evaluate("document.getElementById('slice').value = 'form=GAP'")
    browser.click("#choices button")
    assert "form=GAP" in browser.text("#trend .chart-title")
    shoot(browser, tmp_path, "history")


def compare_in_the_browser(runs: DemoRuns, browser: Browser, tmp_path: Path) -> None:
    """Compare: the newest run with the one before it, then titles-only against bm25-demo,
    whose hit@3 difference is the one ``compare --format json`` gives."""
    browser.click("a.compare-link")
    assert f"candidate {runs.demo}" in browser.text("main p")
    browser.evaluate(
        f"document.getElementById('candidate-choice').value = {json.dumps(runs.titles)};"
        f"document.getElementById('baseline-choice').value = {json.dumps(runs.demo)};"
    )
    browser.click("#compare-button")
    deltas = browser.evaluate(
        "Object.fromEntries(Array.from(document.querySelectorAll('#deltas tbody tr'))"
        ".map(r => [r.cells[0].textContent, r.cells[3].textContent]))"
    )
    assert float(deltas["hit@3"]) < 0, deltas
    shown = json.loads(
        ok(
            retrievalkit(
                "compare", "--run", runs.demo, "--run", runs.titles, "--format", "json",
                cwd=runs.folder,
            )
        )
    )  # fmt: skip
    (pair,) = shown["pairs"]
    hit3 = next(row for row in pair["metrics"] if row["metric"] == "hit@3")
    assert float(deltas["hit@3"]) == pytest.approx(hit3["difference"], abs=5e-4)
    changed = browser.evaluate("document.querySelectorAll('#changed a.question-link').length")
    assert changed == 10
    shoot(browser, tmp_path, "compare")


def see_the_question_that_moved_most(
    runs: DemoRuns, browser: Browser, tmp_path: Path
) -> ResultRecord:
    """The question that moved most, in both runs, with the documents' text; the stored
    titles-only run."""
    moved = browser.evaluate("document.querySelector('#changed a.question-link').textContent")
    browser.click("#changed a.question-link")
    assert browser.text("h1") == f"Question {moved}"
    record = open_store(f"jsonl:///{runs.folder / 'runs.jsonl'}").get(runs.titles)
    assert record is not None
    from retrievalkit.api import load_set

    golden = {question.id: question for question in load_set("demo").questions}
    assert browser.text("#question-text") == golden[moved].question
    assert browser.evaluate("document.querySelectorAll('section.ranking').length") == 2
    assert browser.evaluate("document.querySelectorAll('li.expected').length") >= 1
    assert browser.evaluate("document.querySelectorAll('.badge.unjudged').length") >= 1
    assert browser.evaluate("document.querySelectorAll('.snippet').length") >= 10
    shoot(browser, tmp_path, "question")
    return record


def grade_ten(runs: DemoRuns, browser: Browser, tmp_path: Path) -> tuple[list[Label], int]:
    """The judging queue of titles-only: a name, then ten grades from the keyboard; the
    labels typed and the size of the queue."""
    browser.click("a.judge-link")
    assert runs.titles in browser.text("h1")
    browser.evaluate("document.querySelector('#name-form input[name=grader]').value = 'alice'")
    browser.click("#name-form button")
    done, total = progress(browser)
    assert done == 0 and total > 20
    typed: list[Label] = []
    for number, key in enumerate(GRADES, start=1):
        question = browser.text("#item-question")
        document = browser.text("#item-document")
        assert browser.text(".document-text"), "the document's text is shown"
        browser.press(key)
        typed.append(Label(question, document, int(key)))
        assert progress(browser) == (number, total)
    assert len({label.pair for label in typed}) == 10
    shoot(browser, tmp_path, "judge")
    return typed, total


def check_eval_with_the_grades(
    runs: DemoRuns, labels: Path, record: ResultRecord, typed: list[Label]
) -> None:
    """eval with the file: the means the ten grades imply."""
    result = json.loads(
        ok(
            retrievalkit(
                "eval", "--set", "demo", "--retriever", "titles-only", "--no-save",
                "--format", "json", "--extra-labels", str(labels), cwd=runs.folder,
            )
        )
    )  # fmt: skip
    effect = result["extra_labels"]
    assert effect["added"] == 10
    expected = label_effect(record.outcomes, record.manifest.ks, typed, sources=["typed"])
    for metric, value in expected.after.items():
        assert effect["after"][metric] == pytest.approx(value, abs=1e-12), metric
    # By hand: ten more judged documents, each in its question's top 10 (judged@10 is the
    # judged share of the documents retrieved there, over the answerable questions that
    # retrieved any).
    scored = sum(1 for outcome in record.outcomes if outcome.expected)
    retrieved = sum(1 for outcome in record.outcomes if outcome.expected and outcome.ranking)
    outcomes = {outcome.question_id: outcome for outcome in record.outcomes}
    share = sum(1 / len(outcomes[label.question_id].ranking[:10]) for label in typed)
    assert effect["after"]["judged@10"] - effect["before"]["judged@10"] == pytest.approx(
        share / retrieved
    )
    relevant = [label for label in typed if label.grade >= 1]
    assert relevant, "some grade made a document relevant"
    assert effect["after"]["precision@10"] - effect["before"]["precision@10"] == pytest.approx(
        len(relevant) / 10 / scored
    )


def test_compare_shows_each_stage_and_where_each_question_lost_its_document(
    browser: Browser, tmp_path: Path
) -> None:
    from test_stage_comparison import staged_config

    folder = tmp_path / "staged"
    folder.mkdir()
    config = staged_config(folder)
    with config.open("a", encoding="utf-8") as handle:
        handle.write('\n[store]\nurl = "jsonl:///runs.jsonl"\n')
    for retriever in ("narrow", "wide"):
        ok(retrievalkit("eval", "--set", "demo", "--retriever", retriever, "--quiet", cwd=folder))
    store = open_store(f"jsonl:///{folder / 'runs.jsonl'}")
    (narrow,) = store.runs("demo", "narrow")
    (wide,) = store.runs("demo", "wide")
    assert narrow.stages is not None and wide.stages is not None
    with serving(folder, "--labels", str(tmp_path / "human.tsv")) as server:
        browser.open(f"{server.url}/compare?run={wide.run_id}&other={narrow.run_id}")
        rows = browser.evaluate(
            "Array.from(document.querySelectorAll('#stage-metrics tbody tr')).map(r =>"
            " [r.dataset.metric].concat(Array.from(r.cells).map(c => c.textContent.trim())))"
        )
        metrics = sorted({row[0] for row in rows})
        assert len(rows) == len(wide.stages.order) * len(metrics) and "rr" in metrics
        stage = ""
        for metric, name, shown, before, _, after, _, between, *_ in rows:
            stage = name or stage
            assert metric == shown
            assert before.split(" ")[0] == f"{narrow.stages.metrics[stage][metric].mean:.3f}"
            assert after.split(" ")[0] == f"{wide.stages.metrics[stage][metric].mean:.3f}"
            old = narrow.stages.metrics[stage][metric].mean
            new = wide.stages.metrics[stage][metric].mean
            assert old is not None and new is not None
            assert float(between.split(" ")[0]) == pytest.approx(new - old, abs=5e-4)
        assert [row[1] for row in rows if row[1]] == list(wide.stages.order)
        counts = browser.evaluate(
            "Array.from(document.querySelectorAll('#stage-attribution tbody tr'))"
            ".map(r => Array.from(r.cells).map(c => c.textContent.trim()))"
        )
        assert {label: (int(b), int(a)) for label, b, a in counts} == {
            label: (narrow.stages.attribution.get(label, 0), wide.stages.attribution.get(label, 0))
            for label in {*narrow.stages.attribution, *wide.stages.attribution}
        }
        listed = browser.evaluate(
            "Array.from(document.querySelectorAll('#stage-questions tbody tr')).map(r =>"
            " [r.className].concat(Array.from(r.cells).map(c => c.textContent.trim())))"
        )
        labelled = {*narrow.stages.questions, *wide.stages.questions}
        assert {row[1] for row in listed} == labelled
        for kind, question_id, _, before, after in listed:
            assert before == narrow.stages.questions.get(question_id, "–")
            assert after == wide.stages.questions.get(question_id, "–")
            assert (kind == "changed") == (before != after)
        assert any(kind == "changed" for kind, *_ in listed)
        shoot(browser, tmp_path, "compare-stages")
        # A question of the stage view opens in both runs.
        browser.click("#stage-questions tr.changed a.question-link")
        assert browser.evaluate("document.querySelectorAll('section.ranking').length") == 2
        assert browser.problems() == []


# ---------------------------------------------------------------- hostile text


PROBE = """
(function () {
  var title = document.title;
  return {
    pwned: window.__pwned === undefined ? null : window.__pwned,
    title: title,
    scripts: document.scripts.length,
    injected: document.querySelectorAll("img, iframe, object, embed, body script:not([src]), "
      + "[onerror], [onload], [onfocus], [onclick], [autofocus]").length,
    text: document.body.textContent + " " + Array.from(document.querySelectorAll("option"))
      .map(function (o) { return o.value; }).join(" ")
  };
})()
"""


#: The fields of the HTML report's hardening tests, and the stage names a retriever reports.
SERVE_FIELDS = (*FIELDS, "stage")


def _value(field: str, spaces: bool) -> str:
    if field == "stage":
        number = SERVE_FIELDS.index(field) + 1
        return "".join(
            pattern.format(n=number, s=" " if spaces else "/") for pattern in FAMILIES.values()
        )
    return "".join(_payload(family, field, spaces=spaces) for family in FAMILIES)


def _staged(record: ResultRecord, folder: Path) -> ResultRecord:
    """``record`` with stages named by a payload, scored on its set as a staged run's are:
    the hostile question's expected document is lost in the (hostile) fusion."""
    from retrievalkit.formats.golden_sets import load_set_file
    from retrievalkit.metrics.scoring import ScoringOptions
    from retrievalkit.model.outcomes import Outcomes
    from retrievalkit.pipeline.engine.evaluator import Retrievals
    from retrievalkit.pipeline.engine.stages import StageScorer

    questions = load_set_file(folder / "set.jsonl").questions
    prefix = _value("stage", True)
    retrieved, expected = _value("retrieved", False), _value("expected", False)
    stages = [
        {f"{prefix}.bm25": (expected, retrieved), f"{prefix}.fusion": (retrieved,)},
        {f"{prefix}.bm25": ("doc-2", "doc-1"), f"{prefix}.fusion": ("doc-2", "doc-1")},
        None,
    ]
    scorer = StageScorer(questions, ScoringOptions(ks=(1, 3), resamples=50))
    answers = Retrievals([(retrieved,), ("doc-2", "doc-1"), ()], [1.0] * 3, [1, 2, 0], {2: "x"})
    scorer.add(answers, stages)
    report, columns = scorer.finish()
    assert report is not None and report.questions == {
        _value("question-id", False): f"lost in fusion ({prefix}.fusion)"
    }
    held = record.outcomes
    outcomes = Outcomes.from_arrays(
        held.question_ids,
        {**{name: held.values(name) for name in held.metric_names}, **columns},
        latency_ms=held.latency_ms,
        errors=held.errors,
        forms=held.forms,
        hard_classes=held.hard_classes,
        documents=held.documents,
        rankings=held.rankings,
        judgments=held.judgments,
    )
    return attrs.evolve(record, outcomes=outcomes, stages=report)


@attrs.frozen
class Hostile:
    folder: Path
    first: str
    second: str
    set_name: str
    retriever: str
    question_id: str
    slice_name: str


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Hostile:
    folder = tmp_path_factory.mktemp("hostile")
    record = _staged(_record(folder, _value), folder)
    later = attrs.evolve(
        record,
        run_id="20990101T000000Z-00000002",
        manifest=attrs.evolve(
            record.manifest,
            created_at="2099-01-01T00:00:00Z",
            retriever_options={
                **record.manifest.retriever_options,
                "extra": _value("option-value", True),
            },
            retriever_options_hash="f" * 16,
            git_commit=_value("commit", False) + "2",
        ),
    )
    store = open_store("jsonl:///runs.jsonl".replace("///", f"///{folder}/"))
    store.save(record)
    store.save(later)
    corpus = folder / "corpus.jsonl"
    documents = {_value("retrieved", False), _value("expected", False), "doc-1", "doc-2"}
    corpus.write_text(
        "".join(
            json.dumps(
                {"_id": doc, "title": _value("question", True), "text": _value("error", True)}
            )
            + "\n"
            for doc in sorted(documents)
        ),
        encoding="utf-8",
    )
    (folder / "retrievalkit.toml").write_text(
        f'[sets.{json.dumps(record.set)}]\npath = "set.jsonl"\n', encoding="utf-8"
    )
    meta = _value("meta-name", True)
    return Hostile(
        folder,
        record.run_id,
        later.run_id,
        record.set,
        record.model,
        _value("question-id", False),
        f"{meta}={_value('meta-value', True)}",
    )


def _query(**parameters: str) -> str:
    import urllib.parse

    return urllib.parse.urlencode(parameters)


def test_every_payload_family_stays_text_in_every_view(
    hostile: Hostile, browser: Browser, tmp_path: Path
) -> None:
    labels = tmp_path / "human.tsv"
    arguments: tuple[str, ...] = ("--store", f"jsonl:///{hostile.folder / 'runs.jsonl'}")
    arguments += ("--labels", str(labels))
    arguments += ("--corpus", str(hostile.folder / "corpus.jsonl"))
    with serving(hostile.folder, *arguments) as server:
        # A grader name, so that the judging view shows its item.
        browser.open(f"{server.url}/judge?{_query(run=hostile.second)}")
        browser.evaluate("document.querySelector('#name-form input[name=grader]').value = 'eve'")
        browser.click("#name-form button")
        key = {"set": hostile.set_name, "retriever": hostile.retriever}
        pages = {
            "keys": "/",
            "history": f"/history?{_query(**key)}",
            "history-slice": f"/history?{_query(**key, slice=hostile.slice_name, metric='rr')}",
            "compare": f"/compare?{_query(run=hostile.second, other=hostile.first)}",
            "question": "/question?"
            + _query(run=hostile.second, id=hostile.question_id, other=hostile.first),
            "judge": f"/judge?{_query(run=hostile.second)}",
            "not-found": f"/question?{_query(run=hostile.second, id=_value('question', True))}",
        }
        seen: dict[str, dict[str, Any]] = {}
        for name, path in pages.items():
            browser.open(server.url + path)
            findings = browser.evaluate(PROBE)
            ran = findings["pwned"]
            assert ran is None, f"{name}: field {SERVE_FIELDS[ran - 1]} ran"
            assert findings["injected"] == 0, name
            assert findings["scripts"] == 1, name  # /static/serve.js only
            assert findings["title"].endswith("· retrievalkit serve"), (name, findings["title"])
            seen[name] = findings
            if name == "judge":
                shoot(browser, tmp_path, "judge-hostile", docs=False)
            # The page's refusals (a blocked inline script, a bad attribute) are logged here;
            # the not-found page's own 404 is the only message expected.
            expected = ["status of 404"] if name == "not-found" else []
            found = browser.problems()
            assert [e for e in expected if not any(e in line for line in found)] == []
            assert [line for line in found if not any(e in line for e in expected)] == [], name
            browser.events.clear()

    texts = {name: findings["text"] for name, findings in seen.items()}
    expectations = {
        "keys": ("set", "retriever"),
        "history": ("set", "retriever", "option-value", "commit", "meta-name", "meta-value"),
        "compare": ("set", "retriever", "stage", "question-id", "question"),
        "question": (
            "question-id",
            "question",
            "hard-class",
            "expected",
            "graded",
            "retrieved",
        ),
        "judge": ("set", "retriever", "question", "error"),
        "not-found": ("question",),
    }
    for name, fields in expectations.items():
        for field in fields:
            spaces = field in ("set", "retriever", "option-value", "option-name", "question",
                               "hard-class", "meta-name", "meta-value", "error",
                               "stage")  # fmt: skip
            assert _value(field, spaces) in texts[name], (name, field)
    # The stage view shows the stage names and the label that names the losing stage.
    assert f"lost in fusion ({_value('stage', True)}.fusion)" in texts["compare"]
    print(
        f"{len(FAMILIES)} payload families in {len(SERVE_FIELDS)} fields through {len(pages)} views"
    )
