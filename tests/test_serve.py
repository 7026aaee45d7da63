"""``retrievalkit serve``'s rules over HTTP, its judging queue, and the labels file it appends to.

Real server processes on 127.0.0.1 (a free port each) over real demo runs: a bind to
another host without a token is refused, a busy port is one line and exit code 3, every
POST route refuses a form without its CSRF token, a request addressed to another host
name is refused, a token keeps out whoever lacks it and never reaches the log, two
people grading one run keep both their grades, and no secret of a manifest appears on
any page. The queue is checked against what ``retrievalkit judge`` would grade, and the
labels file's appends against concurrent writers.
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import attrs
import httpx
import pytest
from serve_site import DemoRuns, demo_runs, grade_lines, retrievalkit, serving

from retrievalkit.formats.labels import (
    HUMAN_JUDGE,
    Label,
    append_labels,
    latest_labels,
    read_label_files,
    read_labels,
)
from retrievalkit.stores import open_store, store_read_only

TOKEN = "a-long-random-token-for-the-tests-0123456789"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> DemoRuns:
    return demo_runs(tmp_path_factory.mktemp("serve-http"))


@pytest.fixture(scope="module")
def server(runs: DemoRuns, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    labels = tmp_path_factory.mktemp("labels") / "human.tsv"
    with serving(runs.folder, "--labels", str(labels)) as running:
        yield running.url, labels


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found is not None, page[-2000:]
    return found.group(1)


def judging(url: str, run_id: str, name: str) -> tuple[httpx.Client, str]:
    """A visitor who gave their name on the judging page; the page of their next item."""
    client = httpx.Client(base_url=url, timeout=60)
    page = client.get("/judge", params={"run": run_id}).text
    answer = client.post(
        "/judge/name",
        data={"csrf": csrf_of(page), "grader": name, "next": f"/judge?run={run_id}"},
    )
    assert answer.status_code == 303, answer.text
    return client, client.get("/judge", params={"run": run_id}).text


def item_of(page: str) -> tuple[str, str]:
    question = re.search(r'id="item-question">([^<]+)<', page)
    document = re.search(r'id="item-document">([^<]+)<', page)
    assert question and document, page[-3000:]
    return question.group(1), document.group(1)


# ---------------------------------------------------------------- starting


def test_another_host_without_a_token_is_refused(runs: DemoRuns) -> None:
    result = retrievalkit("serve", "--host", "0.0.0.0", "--port", "0", cwd=runs.folder)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "RETRIEVALKIT_SERVE_TOKEN" in line and "--host" in line
    assert result.stdout == ""
    short = retrievalkit(
        "serve", "--host", "0.0.0.0", cwd=runs.folder, env={"RETRIEVALKIT_SERVE_TOKEN": "short"}
    )
    assert short.returncode == 2 and "too short" in short.stderr


def test_connections_send_each_page_without_nagles_delay() -> None:
    """The listening socket passes TCP_NODELAY on to the connections it accepts: a page
    written in two parts is not held back 40 ms for the peer's delayed acknowledgement."""
    from retrievalkit.cli.commands.serve import _listen

    listening = _listen("127.0.0.1", 0)
    with listening, socket.create_connection(listening.getsockname()[:2]):
        accepted, _ = listening.accept()
        with accepted:
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


def test_a_busy_port_is_one_line_and_exit_code_3(runs: DemoRuns) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = retrievalkit("serve", "--port", str(port), cwd=runs.folder)
    assert result.returncode == 3, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert f"127.0.0.1:{port}" in line and "--port" in line


def test_help_names_the_command_without_importing_the_web_stack(runs: DemoRuns) -> None:
    result = retrievalkit("serve", "--help", cwd=runs.folder)
    assert result.returncode == 0 and "RETRIEVALKIT_SERVE_TOKEN" in result.stdout


# ---------------------------------------------------------------- the rules


def test_every_post_route_refuses_a_form_without_its_csrf_token(
    runs: DemoRuns, server: tuple[str, Path]
) -> None:
    from retrievalkit.serve.app import create_app
    from retrievalkit.serve.views import Site

    url, labels = server
    site = Site(store=None, config=None, labels=None, thresholds=None)  # type: ignore[arg-type]
    routes = [
        route.path
        for route in create_app(site, host="127.0.0.1", port=1, token=None).routes
        if "POST" in getattr(route, "methods", ())
    ]
    assert set(routes) == {"/judge/grade", "/judge/name", "/pin", "/login"}
    before = labels.read_bytes() if labels.exists() else b""
    pinned_before = open_store(f"jsonl:///{runs.folder / 'runs.jsonl'}").pinned("demo", "bm25-demo")  # type: ignore[attr-defined]
    client, page = judging(url, runs.titles, "carol")
    question, document = item_of(page)
    fields = {
        "/judge/grade": {
            "run": runs.titles,
            "question": question,
            "document": document,
            "grade": "3",
        },
        "/judge/name": {"grader": "mallory"},
        "/pin": {"run": runs.demo_older},
        "/login": {"token": "x"},
    }
    for route in routes:
        real = csrf_of(page)
        # A token one character off the real one: its last hex digit changed, never kept.
        off_by_one = real[:-1] + ("1" if real[-1] == "0" else "0")
        for csrf in (None, "", "0" * 64, off_by_one):
            data = dict(fields[route])
            if csrf is not None:
                data["csrf"] = csrf
            answer = client.post(route, data=data)
            assert answer.status_code == 403, (route, csrf, answer.status_code)
            assert "CSRF" in answer.text
        # Another visitor's token (another session) does not work either.
        stranger = httpx.Client(base_url=url, timeout=60)
        answer = stranger.post(route, data={**fields[route], "csrf": csrf_of(page)})
        assert answer.status_code == 403, route
    after = labels.read_bytes() if labels.exists() else b""
    assert after == before
    store = open_store(f"jsonl:///{runs.folder / 'runs.jsonl'}")
    assert store.pinned("demo", "bm25-demo") == pinned_before  # type: ignore[attr-defined]
    # The same form with the token is taken.
    answer = client.post("/judge/grade", data={**fields["/judge/grade"], "csrf": csrf_of(page)})
    assert answer.status_code == 303
    assert grade_lines(labels)[-1][:5] == [question, document, "3", HUMAN_JUDGE, "carol"]


def test_only_loopback_host_names_are_answered(server: tuple[str, Path]) -> None:
    url, _ = server
    port = url.rsplit(":", 1)[1]
    for host in (f"evil.example:{port}", "127.0.0.1", f"127.0.0.1.evil.example:{port}"):
        answer = httpx.get(url + "/", headers={"Host": host}, timeout=60)
        assert answer.status_code == 403, host
    assert (
        httpx.get(url + "/", headers={"Host": f"localhost:{port}"}, timeout=60).status_code == 200
    )


def test_every_page_forbids_inline_script_and_framing(
    runs: DemoRuns, server: tuple[str, Path]
) -> None:
    url, _ = server
    for path in (
        "/",
        "/history?set=demo&retriever=bm25-demo",
        f"/compare?run={runs.titles}&other={runs.demo}",
        "/nope",
    ):
        answer = httpx.get(url + path, timeout=60)
        policy = answer.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
        assert "unsafe-inline" not in policy
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert "<script>" not in answer.text


def test_a_token_keeps_out_whoever_lacks_it_and_stays_out_of_the_log(runs: DemoRuns) -> None:
    with serving(runs.folder, env={"RETRIEVALKIT_SERVE_TOKEN": TOKEN}) as running:
        url = running.url
        assert httpx.get(url + "/", timeout=60).status_code == 303  # to /login
        answer = httpx.get(url + "/", timeout=60, follow_redirects=True)
        assert "Sign in" in answer.text and TOKEN not in answer.text
        assert (
            httpx.get(url + "/history?set=demo&retriever=bm25-demo", timeout=60).status_code == 303
        )
        assert httpx.post(url + "/pin", data={"run": runs.demo}, timeout=60).status_code == 401
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        assert httpx.get(url + "/", headers=bearer, timeout=60).status_code == 200
        wrong = {"Authorization": f"Bearer {TOKEN[:-1]}x"}
        assert httpx.get(url + "/", headers=wrong, timeout=60).status_code == 303
        # A query string does not sign in.
        assert httpx.get(url + "/", params={"token": TOKEN}, timeout=60).status_code == 303

        client = httpx.Client(base_url=url, timeout=60)
        form = client.get("/login").text
        refused = client.post("/login", data={"csrf": csrf_of(form), "token": "not it"})
        assert refused.status_code == 401
        signed = client.post("/login", data={"csrf": csrf_of(form), "token": TOKEN})
        assert signed.status_code == 303
        assert TOKEN not in signed.headers["set-cookie"]
        assert client.get("/").status_code == 200
        log = running.log_lines()
    assert log, "the server logs each request"
    assert all(TOKEN not in line and "?" not in line for line in log), log
    assert any(line.endswith("ms") and "GET /history 303" in line for line in log), log


def test_two_people_grading_one_run_keep_both_their_grades(runs: DemoRuns, tmp_path: Path) -> None:
    labels = tmp_path / "human.tsv"
    with serving(runs.folder, "--labels", str(labels)) as running:
        alice, alice_page = judging(running.url, runs.titles, "alice")
        bob, bob_page = judging(running.url, runs.titles, "bob")
        # Shown at the same time, they are shown different documents.
        assert item_of(alice_page) != item_of(bob_page)
        question, document = item_of(alice_page)
        # Both grade alice's document anyway (bob opened it by its link).
        bob_page = bob.get(
            "/judge", params={"run": runs.titles, "q": question, "doc": document}
        ).text
        assert item_of(bob_page) == (question, document)
        for client, page, grade in ((alice, alice_page, "1"), (bob, bob_page, "3")):
            data = {"csrf": csrf_of(page), "run": runs.titles, "question": question}
            answer = client.post(
                "/judge/grade", data={**data, "document": document, "grade": grade}
            )
            assert answer.status_code == 303
        page = alice.get("/judge", params={"run": runs.titles}).text
        assert "1 of " in page and "graded differently by two people" in page
        assert "graded 3 by bob" not in page  # the next item is another document
        again = alice.get("/judge", params={"run": runs.titles, "q": question, "doc": document})
        assert "graded 3 by bob" in again.text
    rows = grade_lines(labels)
    assert [(row[0], row[1], row[2], row[4]) for row in rows] == [
        (question, document, "1", "alice"),
        (question, document, "3", "bob"),
    ]
    # The later grade is the one eval merges.
    (merged,) = read_label_files([str(labels)])
    assert merged.grade == 3 and merged.model == "bob" and merged.is_human


SECRET = "sk-serve-test-secret-0123456789abcdef"


def test_no_secret_of_a_manifest_appears_on_any_page(runs: DemoRuns, tmp_path: Path) -> None:
    import attrs

    from retrievalkit.pipeline.engine.record import redact_options

    store = open_store(f"jsonl:///{tmp_path / 'runs.jsonl'}")
    record = open_store(f"jsonl:///{runs.folder / 'runs.jsonl'}").get(runs.titles)
    assert record is not None
    options = {"api_key": SECRET, "password": SECRET, "url": f"http://user:{SECRET}@host/x"}
    secret = attrs.evolve(
        record,
        run_id="20990101T000000Z-0000beef",
        manifest=attrs.evolve(
            record.manifest,
            created_at="2099-01-01T00:00:00Z",
            retriever_options=redact_options(options),
            retriever_options_hash="e" * 16,
        ),
    )
    store.save(record)
    store.save(secret)
    assert SECRET not in (tmp_path / "runs.jsonl").read_text()
    with serving(tmp_path, "--store", f"jsonl:///{tmp_path / 'runs.jsonl'}") as running:
        paths = [
            "/",
            "/history?set=demo&retriever=titles-only",
            f"/compare?run={secret.run_id}",
            f"/question?run={secret.run_id}&id=q01&other={record.run_id}",
            f"/judge?run={secret.run_id}",
        ]
        for path in paths:
            answer = httpx.get(running.url + path, timeout=60)
            assert answer.status_code == 200, (path, answer.text[-500:])
            assert SECRET not in answer.text, path
        history = httpx.get(running.url + paths[1], timeout=60).text
        assert "api_key: added (***)" in history and "user:***@host" in history


def test_a_read_only_store_is_shown_read_only_and_refuses_a_pin(runs: DemoRuns) -> None:
    from starlette.testclient import TestClient

    from retrievalkit.api import Thresholds
    from retrievalkit.formats.config import Config
    from retrievalkit.serve.app import create_app
    from retrievalkit.serve.judging_queue import LabelsFile
    from retrievalkit.serve.views import Site

    store = open_store(f"jsonl:///{runs.folder / 'runs.jsonl'}")
    site = Site(
        store=store,
        config=Config(),
        labels=LabelsFile(runs.folder / "unused.tsv"),
        thresholds=Thresholds(),
        read_only="the folder /x is read-only",
    )
    with TestClient(
        create_app(site, host="127.0.0.1", port=9, token=None), base_url="http://127.0.0.1:9"
    ) as client:
        page = client.get("/history", params={"set": "demo", "retriever": "bm25-demo"}).text
        assert 'id="read-only"' in page and "the folder /x is read-only" in page
        assert page.count('disabled title="the store is read-only"') == 2  # both runs' pin
        answer = client.post("/pin", data={"csrf": csrf_of(page), "run": runs.demo_older})
        assert answer.status_code == 403 and "read-only" in answer.text
    assert store.pinned("demo", "bm25-demo") is None  # type: ignore[attr-defined]

    @attrs.define
    class Remote:
        url: str = "remote:"
        read_only: str = "the server grants reading only"

    assert store_read_only(Remote()) == "the server grants reading only"  # type: ignore[arg-type]
    assert store_read_only(store) is None


# ---------------------------------------------------------------- the queue and the file


def test_the_queue_is_what_judge_would_grade_and_a_sample_is_seeded(runs: DemoRuns) -> None:
    from retrievalkit.model.outcomes import DOCUMENTS
    from retrievalkit.serve.judging_queue import RunQueue

    store = open_store(f"jsonl:///{runs.folder / 'runs.jsonl'}")
    fresh = store.get(runs.titles)
    record = store.get(runs.titles)
    assert fresh is not None and record is not None
    # Built from columns whose document ids were never decoded: it decodes those it shows.
    first = RunQueue(fresh.outcomes, k=5)
    first_items = [(item.question_id, item.document_id, item.rank) for item in first.items()]
    assert DOCUMENTS not in fresh.outcomes._cache
    wanted = [
        (outcome.question_id, document, rank)
        for outcome in record.outcomes
        if outcome.error is None and outcome.expected
        for rank, document in enumerate(outcome.ranking[:5], start=1)
        if document not in outcome.judgments
    ]
    queue = RunQueue(record.outcomes, k=5)
    assert [(item.question_id, item.document_id, item.rank) for item in queue.items()] == wanted
    assert first_items == wanted
    assert first.find(*wanted[3][:2]) == queue.find(*wanted[3][:2])
    assert all(item.set_grade is None for item in queue.items())
    sampled = RunQueue(record.outcomes, k=5, sample=7, seed=3)
    extra = [item for item in sampled.items() if item.set_grade is not None]
    assert len(sampled) == len(queue) + 7 and sampled.sampled == 7
    for item in extra:
        outcome = record.outcomes[record.outcomes.index_of(item.question_id)]
        assert outcome.judgments[item.document_id] == item.set_grade
    again = RunQueue(record.outcomes, k=5, sample=7, seed=3)
    assert [item.pair for item in again.items()] == [item.pair for item in sampled.items()]
    other = RunQueue(record.outcomes, k=5, sample=7, seed=4)
    assert [item.pair for item in other.items()] != [item.pair for item in sampled.items()]
    assert queue.find(*wanted[3][:2]) is not None
    assert queue.find("no-such-question", "doc") is None


def test_appends_from_many_writers_keep_every_line_and_one_header(tmp_path: Path) -> None:
    path = tmp_path / "labels" / "human.tsv"

    def write(writer: int) -> None:
        for number in range(50):
            label = Label(f"q{writer}", f"doc-{number}", number % 4, HUMAN_JUDGE, f"p{writer}")
            append_labels([label], path)

    threads = [threading.Thread(target=write, args=(writer,)) for writer in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    text = path.read_text(encoding="utf-8")
    assert text.count("query-id") == 1 and text.startswith("query-id\t")
    labels = read_labels(path)
    assert len(labels) == 400
    assert {(label.question_id, label.document_id) for label in labels} == {
        (f"q{writer}", f"doc-{number}") for writer in range(8) for number in range(50)
    }
    with pytest.raises(Exception, match="without spaces"):
        append_labels([Label("q 1", "doc", 1)], path)


def test_within_a_file_the_last_grade_counts_across_files_the_first_file(tmp_path: Path) -> None:
    first, second = tmp_path / "a.tsv", tmp_path / "b.tsv"
    append_labels([Label("q1", "d1", 1, HUMAN_JUDGE, "alice"), Label("q1", "d2", 0)], first)
    append_labels([Label("q1", "d1", 3, HUMAN_JUDGE, "bob")], first)
    append_labels([Label("q1", "d1", 0, "model-judge"), Label("q1", "d3", 2)], second)
    assert [(label.pair, label.grade) for label in latest_labels(read_labels(first))] == [
        (("q1", "d1"), 3),
        (("q1", "d2"), 0),
    ]
    merged = read_label_files([str(first), str(second)])
    from retrievalkit.formats.labels import merge_labels
    from retrievalkit.model.values import GoldenQuestion

    result = merge_labels([GoldenQuestion("q1", "?", expected=("d9",))], merged)
    assert dict(result.questions[0].grades) == {"d1": 3, "d2": 0, "d3": 2}
    assert result.already_judged == 1  # the second file's d1


def test_a_sqlite_store_counts_its_keys_from_its_index_as_the_runs_say(
    runs: DemoRuns, tmp_path: Path
) -> None:
    import attrs

    from retrievalkit.stores import StoredKey, store_keys

    source = open_store(f"jsonl:///{runs.folder / 'runs.jsonl'}")
    sqlite = open_store(f"sqlite:///{tmp_path / 'runs.sqlite3'}")
    for record in reversed(source.all_runs()):  # oldest first, as they were made
        sqlite.save(record)
    other = source.get(runs.titles)
    assert other is not None
    sqlite.save(attrs.evolve(other, run_id="20990101T000000Z-00000001", grader="other-grader"))
    from_index = store_keys(sqlite)
    assert from_index == store_keys(_Summaries(sqlite))  # type: ignore[arg-type]
    assert from_index[:2] == [
        StoredKey(
            "demo", "bm25-demo", "retrieval_hit_rate", 2, runs.demo, from_index[0].newest_created_at
        ),
        StoredKey(
            "demo",
            "titles-only",
            "other-grader",
            1,
            "20990101T000000Z-00000001",
            from_index[1].newest_created_at,
        ),
    ]
    assert len(from_index) == 3


@attrs.define
class _Summaries:
    """The same store seen without its keys() method: every run's summary is read."""

    inner: object

    @property
    def url(self) -> str:
        return str(self.inner.url)  # type: ignore[attr-defined]

    def all_runs(self) -> list[object]:
        return self.inner.all_runs()  # type: ignore[attr-defined,no-any-return]


def test_one_outcome_read_from_its_position_is_the_outcome(runs: DemoRuns) -> None:
    from retrievalkit.model.outcomes import DOCUMENTS
    from retrievalkit.serve.views import outcome_at

    store = open_store(f"jsonl:///{runs.folder / 'runs.jsonl'}")
    for record in store.all_runs():
        # Read first from columns whose document ids were never all decoded.
        fresh = store.get(record.run_id)
        assert fresh is not None
        found = [outcome_at(fresh.outcomes, index) for index in range(len(fresh.outcomes))]
        assert DOCUMENTS not in fresh.outcomes._cache
        assert found == list(record.outcomes)


def test_the_warm_up_computes_the_newest_runs_comparison_and_queue(
    runs: DemoRuns, tmp_path: Path
) -> None:
    """Once the server listens, the newest run of each of the newest keys is read, and
    its comparison with its baseline and its default judging queue are computed: the
    pages of that run are then answered as computed then."""
    from retrievalkit.formats.config import Config
    from retrievalkit.serve import views
    from retrievalkit.serve.judging_queue import LabelsFile

    source = open_store(f"jsonl:///{runs.folder / 'runs.jsonl'}")
    sqlite = open_store(f"sqlite:///{tmp_path / 'runs.sqlite3'}")
    for record in reversed(source.all_runs()):  # oldest first, as they were made
        sqlite.save(record)
    site = views.Site(store=sqlite, config=Config(), labels=LabelsFile(tmp_path / "l.jsonl"))
    views.warm_up(site)
    assert (runs.demo_older, runs.demo) in site._comparisons
    assert (runs.demo, views.QUEUE_DEPTH, 0) in site._queues
    assert (runs.titles, views.QUEUE_DEPTH, 0) in site._queues  # the second newest key
    warm = views.compare_view(site, runs.demo, None)["comparison"]
    cold = views.Site(store=sqlite, config=Config(), labels=LabelsFile(tmp_path / "l.jsonl"))
    assert views.compare_view(cold, runs.demo, runs.demo_older)["comparison"] == warm
