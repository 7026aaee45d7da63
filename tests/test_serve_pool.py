"""``retrievalkit serve --queue POOL``: people grade a pool file in the browser.

Real server processes on 127.0.0.1 over real demo runs and a pool written by
``retrievalkit pool`` from two of them: the judging page grades the pool's pairs in the
file's order into the labels file, two graders are shown different pairs, a grade
appended later counts and nothing is rewritten, the labels are read back as
``--extra-labels``, and a bad pool file is refused with exit code 2 and one line naming
the file, line and field.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from serve_site import DemoRuns, demo_runs, grade_lines, ok, retrievalkit, serving

from retrievalkit.formats.labels import HUMAN_JUDGE, read_extra_labels
from retrievalkit.stores import open_store

#: Pairs the pool holds (its --budget): enough to grade them all over HTTP.
BUDGET = 9


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> DemoRuns:
    return demo_runs(tmp_path_factory.mktemp("serve-pool"))


@pytest.fixture(scope="module")
def pool(runs: DemoRuns) -> list[dict[str, Any]]:
    """The pool of the newer bm25-demo run and the titles-only run, best first."""
    ok(
        retrievalkit(
            "pool", "--set", "demo", "--run", runs.demo, "--run", runs.titles,
            "--budget", str(BUDGET), "--output", "pool.jsonl", cwd=runs.folder,
        )
    )  # fmt: skip
    text = (runs.folder / "pool.jsonl").read_text(encoding="utf-8")
    lines = [json.loads(line) for line in text.splitlines()]
    assert len(lines) == BUDGET
    return lines


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found is not None, page[-2000:]
    return found.group(1)


def item_of(page: str) -> tuple[str, str]:
    question = re.search(r'id="item-question">([^<]+)<', page)
    document = re.search(r'id="item-document">([^<]+)<', page)
    assert question and document, page[-3000:]
    return question.group(1), document.group(1)


def pairs_left(page: str) -> int:
    found = re.search(r'id="pairs-left">(\d+) pairs left<', page)
    assert found is not None, page[:3000]
    return int(found.group(1))


def grader(url: str, name: str) -> tuple[httpx.Client, str]:
    """A visitor who gave their name on the pool's judging page; the page they see next."""
    client = httpx.Client(base_url=url, timeout=60)
    page = client.get("/judge").text
    answer = client.post("/judge/name", data={"csrf": csrf_of(page), "grader": name})
    assert answer.status_code == 303, answer.text
    return client, client.get("/judge").text


def grade(client: httpx.Client, page: str, pair: tuple[str, str], value: int) -> str:
    """Grade ``pair`` with the form of ``page``; the page the server sends on to."""
    data = {"csrf": csrf_of(page), "run": "", "question": pair[0], "document": pair[1]}
    answer = client.post("/judge/grade", data={**data, "grade": str(value)})
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == "/judge"
    return client.get("/judge").text


def test_grading_the_pool_writes_its_pairs_in_pool_order(
    runs: DemoRuns, pool: list[dict[str, Any]], tmp_path: Path
) -> None:
    labels = tmp_path / "human.tsv"
    order = [(line["question_id"], line["document"]) for line in pool]
    with serving(runs.folder, "--queue", "pool.jsonl", "--labels", str(labels)) as running:
        client, page = grader(running.url, "alice")
        assert 'id="pool-name">pool.jsonl<' in page
        assert "Judge <code>" not in page
        shown = []
        for position in range(len(order)):
            assert pairs_left(page) == len(order) - position
            shown.append(item_of(page))
            # The question's text is the pool's, the document's text is the corpus's.
            question = pool[position]["question"]
            assert f"<blockquote>{question}</blockquote>" in html.unescape(page)
            assert 'class="document-text"' in page
            page = grade(client, page, shown[-1], position % 4)
        assert shown == order
        assert pairs_left(page) == 0 and 'id="done"' in page
        # The run queues are still served beside the pool.
        run_page = client.get("/judge", params={"run": runs.titles}).text
        assert f"Judge <code>{runs.titles}</code>" in run_page and "pool-name" not in run_page
        assert 'id="pool-link"' in client.get("/").text
    rows = grade_lines(labels)
    assert [(row[0], row[1]) for row in rows] == order
    assert [int(row[2]) for row in rows] == [position % 4 for position in range(len(order))]
    assert {(row[3], row[4], row[5]) for row in rows} == {(HUMAN_JUDGE, "alice", "serve")}


def test_two_graders_are_shown_different_pairs_and_the_later_grade_counts(
    runs: DemoRuns, pool: list[dict[str, Any]], tmp_path: Path
) -> None:
    labels = tmp_path / "human.tsv"
    order = [(line["question_id"], line["document"]) for line in pool]
    with serving(runs.folder, "--queue", "pool.jsonl", "--labels", str(labels)) as running:
        alice, alice_page = grader(running.url, "alice")
        bob, bob_page = grader(running.url, "bob")
        # The first pair is claimed by alice, so bob is shown the second.
        assert item_of(alice_page) == order[0]
        assert item_of(bob_page) == order[1]
        alice_page = grade(alice, alice_page, order[0], 1)
        # Bob still holds the second pair: alice is given the third.
        assert item_of(alice_page) == order[2]
        bob_page = grade(bob, bob_page, order[1], 2)
        assert item_of(bob_page) == order[3]
        # Asking again, each keeps the pair they were shown.
        assert item_of(alice.get("/judge").text) == order[2]
        assert item_of(bob.get("/judge").text) == order[3]
        # Bob opens alice's graded pair by its link and grades it again.
        again = bob.get("/judge", params={"q": order[0][0], "doc": order[0][1]}).text
        assert item_of(again) == order[0] and "graded 1 by alice" in again
        page = grade(bob, again, order[0], 3)
        assert pairs_left(page) == BUDGET - 2
        assert "1 graded differently by two people" in page
        # A pair the pool does not hold is refused, and nothing is written for it.
        stranger = {"csrf": csrf_of(page), "run": "", "question": "q01", "document": "nope"}
        refused = bob.post("/judge/grade", data={**stranger, "grade": "2"})
        assert refused.status_code == 404
        assert "the pool's judging queue" in html.unescape(refused.text)
        missing = bob.get("/judge", params={"q": "q01", "doc": "nope"})
        assert missing.status_code == 404 and "pool.jsonl" in missing.text
    rows = [(row[0], row[1], row[2], row[4]) for row in grade_lines(labels)]
    assert rows == [
        (*order[0], "1", "alice"),
        (*order[1], "2", "bob"),
        (*order[0], "3", "bob"),
    ]
    # Restarted over the same file, the queue resumes: the first pair nobody graded.
    with serving(runs.folder, "--queue", "pool.jsonl", "--labels", str(labels)) as running:
        _, page = grader(running.url, "carol")
        assert item_of(page) == order[2] and pairs_left(page) == BUDGET - 2
    # --extra-labels reads the file: the later line of a pair counts, all in pool order.
    extra = read_extra_labels([str(labels)])
    assert [(label.pair, label.grade, label.model) for label in extra] == [
        (order[0], 3, "bob"),
        (order[1], 2, "bob"),
    ]
    assert all(label.is_human for label in extra) and extra.warnings == ()


def judged_share(ranking: list[str], judged: set[str], k: int) -> float | None:
    """judged@k of one question: the share of its top k that carry a label."""
    top = ranking[:k]
    return sum(1 for document in top if document in judged) / len(top) if top else None


def test_the_grades_are_read_back_by_eval_extra_labels(
    runs: DemoRuns, pool: list[dict[str, Any]], tmp_path: Path
) -> None:
    labels = tmp_path / "human.tsv"
    order = [(line["question_id"], line["document"]) for line in pool]
    with serving(runs.folder, "--queue", "pool.jsonl", "--labels", str(labels)) as running:
        client, page = grader(running.url, "dana")
        for position, pair in enumerate(order):
            assert item_of(page) == pair
            page = grade(client, page, pair, 3 - position % 4)
    result = retrievalkit(
        "eval", "--set", "demo", "--retriever", "titles-only", "--no-save", "--format", "json",
        "--extra-labels", str(labels), cwd=runs.folder,
    )  # fmt: skip
    effect = json.loads(ok(result))["extra_labels"]
    assert effect["added"] == len(order) and effect["already_judged"] == 0
    # judged@10 of the titles-only run, computed here from its stored rankings: with the
    # set's labels, then with the pool's grades added.
    stored = open_store(f"jsonl:///{runs.folder / 'runs.jsonl'}").get(runs.titles)
    assert stored is not None
    graded: dict[str, set[str]] = {}
    for question_id, document in order:
        graded.setdefault(question_id, set()).add(document)
    before, after = [], []
    for outcome in stored.outcomes:
        if not outcome.expected or outcome.error is not None:
            continue
        own = set(outcome.judgments)
        more = own | graded.get(outcome.question_id, set())
        for shares, judged in ((before, own), (after, more)):
            share = judged_share(list(outcome.ranking), judged, 10)
            if share is not None:
                shares.append(share)
    assert effect["before"]["judged@10"] == pytest.approx(sum(before) / len(before))
    assert effect["after"]["judged@10"] == pytest.approx(sum(after) / len(after))
    assert effect["after"]["judged@10"] > effect["before"]["judged@10"]


@pytest.mark.parametrize(
    ("lines", "where", "what"),
    [
        (
            ['{"question_id": "q01", "question": "How?", "document": "doc-a", "runs": RUNS}',
             '{"question_id": "q02", "question": "Why?"}'],
            "line 2, field 'document'",
            "must be a non-empty string",
        ),
        (
            ['{"question_id": "q01", "question": "How?", "document": "doc-a", "runs": RUNS}',
             '{"question_id": "q01", "question": "How?", "document": "doc-b", "priority": "high"}'],
            "line 2, field 'priority'",
            "must be a number",
        ),
        (
            ['{"question_id": "q01", "question": "How?", "document": "doc-a", "runs": RUNS}',
             "", '{"question_id": "q01", "question": "How?"'],
            "line 3",
            "is not JSON",
        ),
        (
            ['{"question_id": "q01", "question": "How?", "document": "doc-a", "runs": RUNS}',
             '{"question_id": "q404", "question": "Who?", "document": "doc-a", "runs": RUNS}'],
            "line 2, field 'question_id'",
            "'q404' is not a question of run",
        ),
        (
            ['{"question_id": "q01", "question": "How?", "document": "doc-a", '
             '"runs": [{"run": "20000101T000000Z-00000000", "rank": 1}]}'],
            "line 1, field 'runs'",
            "run 20000101T000000Z-00000000 is not in jsonl:///runs.jsonl",
        ),
        (
            ['{"question_id": "q01", "question": "How?", "document": "doc-a"}'],
            "line 1, field 'runs'",
            "names no run",
        ),
    ],
)  # fmt: skip
def test_a_bad_pool_line_is_refused_naming_the_file_line_and_field(
    runs: DemoRuns, lines: list[str], where: str, what: str
) -> None:
    name = f"bad-{abs(hash((where, what)))}.jsonl"
    entries = json.dumps([{"run": runs.demo, "rank": 1}])
    text = "".join(line.replace("RUNS", entries) + "\n" for line in lines)
    (runs.folder / name).write_text(text, encoding="utf-8")
    result = retrievalkit("serve", "--port", "0", "--queue", name, cwd=runs.folder)
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert f"{name}, {where}" in line and what in line, line
    assert result.stdout == ""


def test_a_missing_pool_or_one_of_another_set_is_refused(runs: DemoRuns, tmp_path: Path) -> None:
    missing = retrievalkit("serve", "--port", "0", "--queue", "no-such.jsonl", cwd=runs.folder)
    assert missing.returncode == 2
    (line,) = missing.stderr.strip().splitlines()
    assert "no-such.jsonl" in line and "cannot read the pool" in line
    # With --set, the questions are looked up in that set instead of the runs.
    other = tmp_path / "other.jsonl"
    other.write_text('{"question_id": "q404", "question": "Who?", "document": "doc-a"}\n')
    refused = retrievalkit(
        "serve", "--port", "0", "--queue", str(other), "--set", "demo", cwd=runs.folder
    )
    assert refused.returncode == 2
    (line,) = refused.stderr.strip().splitlines()
    assert f"{other}, line 1, field 'question_id'" in line and "not in the set demo" in line
    # The labels file may not be the pool it grades.
    same = retrievalkit(
        "serve", "--port", "0", "--queue", str(other), "--labels", str(other), cwd=runs.folder
    )
    assert same.returncode == 2 and "--queue" in same.stderr and "--labels" in same.stderr
    assert other.read_text().count("\n") == 1


def test_a_pool_question_holding_markup_is_shown_as_text(runs: DemoRuns, tmp_path: Path) -> None:
    """In process (Starlette's TestClient over `create_app`): the pool's own question text
    is the one the page shows, and markup in it stays text."""
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from retrievalkit.formats.config import find_config
    from retrievalkit.serve.app import create_app
    from retrievalkit.serve.judging_queue import LabelsFile, open_pool
    from retrievalkit.serve.views import Site

    hostile = "<script>alert('pool')</script><img src=x onerror=alert(1)>"
    path = tmp_path / "hostile.jsonl"
    line = {"question_id": "q01", "question": hostile, "document": "doc-card-renewal"}
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    store = open_store(f"jsonl:///{runs.folder / 'runs.jsonl'}")
    queue = open_pool(path, set_questions={"q01"}, set_name="demo", run_questions=lambda _: None)
    assert [item.pair for item in queue.items()] == [("q01", "doc-card-renewal")]
    assert queue.find("q01", "doc-card-renewal") == queue.item(0)
    assert queue.find("q01", "other") is None and queue.run_ids == ()
    site = Site(
        store=store,
        config=find_config(str(runs.folder / "retrievalkit.toml")),
        labels=LabelsFile(tmp_path / "human.tsv"),
        pool=queue,
    )
    client = TestClient(
        create_app(site, host="127.0.0.1", port=8765, token=None),
        base_url="http://127.0.0.1:8765",
        follow_redirects=False,
    )
    page = client.get("/judge").text
    answer = client.post("/judge/name", data={"csrf": csrf_of(page), "grader": "erin"})
    assert answer.status_code == 303
    page = client.get("/judge").text
    assert item_of(page) == ("q01", "doc-card-renewal") and pairs_left(page) == 1
    assert "<script>alert" not in page and "<img src=x" not in page
    assert f"<blockquote>{hostile}</blockquote>" in html.unescape(page)
    # No run of the store is named: no question link and no corpus.
    assert "/question?" not in page and "No corpus is known for this pool" in page
