"""The HTML report escapes by construction: every user-controlled field, fuzzed, stays text.

Each payload family tries to leave a different context (a double- or single-quoted
attribute, an element, a script, an SVG CDATA section, a URL fragment). One page
carries every family's payload in EVERY field a user controls at once (set and retriever
names, retriever options, question ids, texts, hard classes, meta names and values,
document ids, retrieved ids, error texts, the git commit), each numbered by its field,
and is loaded in headless Chromium: no script may run, no element may be injected, the
console stays empty and the title is the one the page was written with. A generated
property checks the same without a browser on random strings.
"""

from __future__ import annotations

import html
import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_report import ERROR_TRAP, browse, console_messages

from retrievalkit.formats.golden_sets import load_set_file
from retrievalkit.metrics.scoring import ScoringOptions, score_run
from retrievalkit.model.records import ResultRecord
from retrievalkit.pipeline.engine.evaluator import Retrieval
from retrievalkit.pipeline.engine.record import build_record
from retrievalkit.render.html_report import render_html_report
from retrievalkit.render.run_report import build_run_report

EXAMPLES = int(os.environ.get("RETRIEVALKIT_FUZZ_EXAMPLES", "0")) or 8

#: Payload families; {n} is the number of the field carrying it, {s} a space where the
#: field allows one (ids do not: HTML also separates attributes with '/').
FAMILIES = {
    "attribute-double": '"><img{s}src=x{s}onerror=window.__pwned={n}>',
    "attribute-single": "'><svg{s}onload=window.__pwned={n}>",
    "event-handler": '"{s}autofocus{s}onfocus="window.__pwned={n}',
    "script": "</script><script>window.__pwned={n}</script>",
    "iframe": '<iframe{s}srcdoc="<script>parent.__pwned={n}</script>"></iframe>',
    "cdata": "]]><script>window.__pwned={n}</script><![CDATA[",
    "fragment": "#x'onclick=window.__pwned={n}//",
    "title": "</title><script>document.title='pwned{n}'</script>",
}
FIELDS = (
    "set", "retriever", "option-value", "option-name", "question-id", "question", "hard-class",
    "meta-name", "meta-value", "expected", "graded", "retrieved", "error", "commit",
)  # fmt: skip


def _payload(family: str, field: str, *, spaces: bool) -> str:
    number = FIELDS.index(field) + 1
    return FAMILIES[family].format(n=number, s=" " if spaces else "/")


def _record(folder: Path, value: Any) -> ResultRecord:
    """A run in which every user-controlled field holds ``value(field, spaces)``."""
    qid = value("question-id", False)
    row = {
        "id": qid,
        "question": value("question", True),
        "expected": [value("expected", False)],
        "grades": {value("graded", False): 2},
        "hard_class": value("hard-class", True),
        "meta": {value("meta-name", True): value("meta-value", True)},
    }
    plain = {"id": "plain", "question": "an ordinary question", "expected": ["doc-1"]}
    broken = {"id": "broken", "question": "this one errors", "expected": ["doc-1"]}
    path = folder / "set.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (row, plain, broken)), "utf-8")
    loaded = load_set_file(path)
    golden = type(loaded)(name=value("set", True), questions=loaded.questions)
    retrievals = [
        Retrieval((value("retrieved", False), value("expected", False)), 1.0),
        Retrieval(("doc-2", "doc-1"), 2.0),
        Retrieval((), 3.0, error=value("error", True)),
    ]
    # The meta field is sliced by, so its name also becomes a section and an anchor.
    scoring = ScoringOptions(ks=(1, 3), resamples=50, slices=(value("meta-name", True),))
    return build_record(
        golden,
        value("retriever", True),
        "test",
        {value("option-name", True): value("option-value", True)},
        score_run(golden.questions, retrievals, scoring),
        scoring,
        overfetch=1,
        git_commit=value("commit", False),
    )


def _page(folder: Path, value: Any) -> str:
    record = _record(folder, value)
    texts = {outcome.question_id: value("question", True) for outcome in record.outcomes[:1]}
    report = build_run_report(
        record, store="jsonl:///runs.jsonl", history=[record], question_texts=texts
    )
    return render_html_report(report)


PROBE = """
<script>
(function () {
  var result = {
    pwned: window.__pwned === undefined ? null : window.__pwned,
    errors: window.__errors,
    title: document.title,
    scripts: document.scripts.length,
    injected: document.querySelectorAll("img, iframe, svg:not(.chart) script, [onerror], "
      + "[onload], [onfocus], [onclick], [autofocus]").length,
    text: document.body.textContent
  };
  var out = document.createElement("pre");
  out.id = "probe-result";
  out.textContent = JSON.stringify(result);
  document.body.appendChild(out);
})();
</script>
"""


def _load(page: str, folder: Path) -> dict[str, Any]:
    probed = folder / "probed.html"
    text = page.replace("<head>", "<head>" + ERROR_TRAP, 1).replace("</body>", PROBE + "</body>")
    probed.write_text(text, encoding="utf-8")
    result = browse(probed, folder / "profile", "--dump-dom")
    assert result.returncode == 0, result.stderr[-3000:]
    found = re.search(r'<pre id="probe-result">(.*?)</pre>', result.stdout, re.DOTALL)
    assert found is not None, "the probe did not run: " + result.stdout[-2000:]
    findings: dict[str, Any] = json.loads(html.unescape(found.group(1)))
    findings["console"] = console_messages(result.stderr)
    return findings


def test_every_payload_in_every_field_stays_text_in_chromium(tmp_path: Path) -> None:
    """One page: each field holds every family's payload, one after the other."""

    def value(field: str, spaces: bool) -> str:
        return "".join(_payload(family, field, spaces=spaces) for family in FAMILIES)

    page = _page(tmp_path, value)
    written = re.search(r"<title>(.*?)</title>", page, re.DOTALL)
    assert written is not None
    written_title = html.unescape(written[1])
    findings = _load(page, tmp_path)
    assert findings["pwned"] is None, f"field {FIELDS[findings['pwned'] - 1]} ran its script"
    assert findings["errors"] == [] and findings["console"] == [], findings
    assert findings["injected"] == 0
    assert findings["scripts"] == 3  # the page's own, the error trap and the probe
    assert findings["title"] == written_title and "pwned" not in findings["title"].split(":")[0]
    for field in ("set", "retriever", "question-id", "question", "error"):
        spaces = field in ("set", "retriever", "question", "error")
        assert value(field, spaces) in findings["text"] + findings["title"], field


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, int]] = []
        self.attributes: list[str] = []
        self.ids: list[str] = []
        self.svg_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.svg_depth += tag == "svg"
        self.tags.append((tag, self.svg_depth))
        self.attributes += [name for name, _ in attrs]
        self.ids += [value or "" for name, value in attrs if name == "id" and not self.svg_depth]

    def handle_endtag(self, tag: str) -> None:
        self.svg_depth -= tag == "svg"

    def tags_outside_svg(self) -> list[str]:
        return [tag for tag, depth in self.tags if not depth or tag == "svg"]


#: Printable text with every character HTML treats specially.
hostile = st.lists(
    st.sampled_from([*"<>\"'&=/`#;:()[]{}!- ", "script", "on", "x", "é", "]]>", "<!--"]),
    min_size=1,
    max_size=12,
).map(lambda parts: "".join(parts).strip() or "x")


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(hostile, min_size=len(FIELDS), max_size=len(FIELDS)))
def test_generated_strings_never_add_an_element_or_an_attribute(
    tmp_path_factory: pytest.TempPathFactory, values: list[str]
) -> None:
    def value(field: str, spaces: bool) -> str:
        text = f"{FIELDS.index(field)}{values[FIELDS.index(field)]}"
        return text if spaces else text.replace(" ", "_") or "x"

    baseline = _Elements()
    baseline.feed(_page(tmp_path_factory.mktemp("plain"), lambda field, _: f"plain{field}"))
    fuzzed = _Elements()
    page = _page(tmp_path_factory.mktemp("fuzz"), value)
    fuzzed.feed(page)
    # Charts are matplotlib's SVG (text escaped by matplotlib; its element count follows
    # the labels' lengths), so elements are compared outside them and checked inside.
    assert fuzzed.tags_outside_svg() == baseline.tags_outside_svg()
    assert not {tag for tag, _ in fuzzed.tags} - {tag for tag, _ in baseline.tags}
    assert sorted(set(fuzzed.attributes)) == sorted(set(baseline.attributes))
    assert all(re.fullmatch(r"[A-Za-z0-9_-]+", identifier) for identifier in fuzzed.ids)
    assert page.count("<script") == 1
