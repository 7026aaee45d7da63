"""The HTML report says what the regression gate decided for the run it shows."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

QUESTIONS = [
    {"id": f"q{n}", "question": f"topic {n}", "form": "GAP" if n % 2 else "MATCH",
     "expected": [f"d{n}"]}
    for n in range(1, 7)
]  # fmt: skip


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "retrievalkit", *args],
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def write_run(path: Path, misses: set[str]) -> None:
    lines = [
        f"{q['id']} Q0 {'dx' if q['id'] in misses else q['expected'][0]} 1 9 tag" for q in QUESTIONS
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def evaluate(project: Path, misses: set[str]) -> str:
    write_run(project / "run.txt", misses)
    done = cli("eval", "--set", "golden.jsonl", "--retriever", "prod", "-q", "--format", "json",
               cwd=project)  # fmt: skip
    assert done.returncode == 0, done.stderr
    run_id: str = json.loads(done.stdout)["run_id"]
    return run_id


def banner(project: Path, *args: str) -> tuple[str, str]:
    done = cli("report", *args, "-o", "report.html", cwd=project)
    assert done.returncode == 0, done.stderr
    page = (project / "report.html").read_text(encoding="utf-8")
    found = re.search(
        r'<section class="verdict \w+" id="verdict" data-verdict="(\w+)">(.*?)</section>',
        page,
        re.S,
    )
    assert found is not None, "the report has no verdict banner"
    return found.group(1), found.group(2)


def test_the_report_shows_the_gates_verdict(tmp_path: Path) -> None:
    (tmp_path / "golden.jsonl").write_text(
        "".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8"
    )
    (tmp_path / "retrievalkit.toml").write_text(
        '[retrievers.prod]\nplugin = "run"\npath = "run.txt"\nqueries = "golden.jsonl"\n'
        "[regression]\nmax_top1_drop = 0.2\n",
        encoding="utf-8",
    )
    first = evaluate(tmp_path, set())
    worse = evaluate(tmp_path, {"q1", "q2", "q3"})  # hit@1 1.0 -> 0.5: past the 0.2 allowed
    slightly = evaluate(tmp_path, {"q1", "q2", "q3", "q4"})  # 0.5 -> 0.333 against `worse`

    state, text = banner(tmp_path, first)
    assert state == "none" and "Gate: not checked" in text and "no baseline" in text

    # `slightly` is newer, yet the baseline of `worse` is the newest run OLDER than it.
    state, text = banner(tmp_path, worse)
    assert state == "failed"
    assert "Gate: REGRESSION" in text
    assert f"REGRESSION against baseline {first}:" in text
    assert "hit@1: 1.000 -&gt; 0.500 (difference -0.500" in text  # escaped, as every text
    assert "allowed drop 0.200" in text

    # A pin wins over the newest earlier run, and --compare over both.
    assert cli("baseline", "pin", worse, cwd=tmp_path).returncode == 0
    state, text = banner(tmp_path, slightly)
    assert state == "failed" and f"REGRESSION against pinned baseline {worse}:" in text
    assert "<li>hit@3: 0.500 -&gt; 0.333" in text
    assert "<li>hit@1:" not in text  # its drop, 0.167, is within the 0.2 allowed
    state, text = banner(tmp_path, worse, "--compare", slightly)
    assert state == "passed" and "Gate: no regression" in text
    assert f"baseline (--baseline) {slightly}" in text
