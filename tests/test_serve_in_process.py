"""``retrievalkit serve`` driven in process, route by route, with hostile requests and content.

Starlette's TestClient (and, for bodies that must not be read whole, the ASGI interface
itself) against `create_app`, over a real store on disk: runs of the demo set made by
`retrievalkit.evaluate`, and runs whose set name, retriever name, question ids and texts,
document ids, titles and texts, error messages and retriever options ("notes") are
hostile markup, saved to a JSON Lines and a SQLite store. Every class of attack is tried
on every route of the application (a route without a case fails
`test_every_route_has_a_case_in_every_class`), with seeded generated inputs:

- DNS rebinding: a ``Host`` other than the served loopback name and port is refused;
- CSRF: a missing, empty, wrong, one-character-off, non-ASCII, other session's or
  previous server's token is refused on every POST, and nothing is written;
- a token off loopback (private LAN addresses, ``0.0.0.0``, ``::``) and none on loopback;
- path traversal in every URL and form parameter never opens a file outside the store,
  the set, the corpus and the labels, and never answers 500;
- hostile text on every page is inert: no element, attribute, comment or script of the
  page comes from it (parsed with `html.parser`), and it is shown as written;
- an oversized form is refused with 413 after reading at most the limit;
- grades from many threads at once are all kept in a valid labels file, and a server
  stopped with SIGTERM while people grade leaves the file whole.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import json
import random
import re
import signal
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import attrs
import pytest

pytest.importorskip("starlette")

from starlette.testclient import TestClient

import retrievalkit as rk
from retrievalkit.formats.config import Config
from retrievalkit.formats.ids import returned_id
from retrievalkit.formats.labels import is_label_id, read_labels
from retrievalkit.stores import open_store

PORT = 8765
TOKEN = "in-process-token-0123456789abcdef"
LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
SERVED = f"http://127.0.0.1:{PORT}"
HOSTILE_KEYS = 3
CASES = 24  # generated inputs per route and class

# ---------------------------------------------------------------- hostile text

#: Markup of every kind that would run or restructure a page if it were not escaped;
#: ``{m}`` is a marker unique to each generated payload.
TEMPLATES = (
    "<script>alert('{m}')</script>",
    '"><img src=x onerror=alert("{m}")>',
    "'><svg onload=alert('{m}')>",
    "javascript:alert('{m}')",
    "</title></code></textarea></option><script>{m}</script>",
    "<a href=\"javascript:alert('{m}')\">{m}</a>",
    "<!--{m}--><b onmouseover=alert('{m}')>",
    "&lt;script&gt;{m}&amp;&#60;",
    "{{{{ 7*7 }}}}{{% if true %}}{m}{{% endif %}}",
    "<iframe srcdoc='<script>{m}</script>'></iframe>",
    "<style>body{{background:url(javascript:{m})}}</style>",
    '<math><mi xlink:href="javascript:{m}">x</mi></math>',
)
#: Unicode controls, kept where retrievalkit accepts them (retriever names, document
#: ids, options); golden-set files refuse them in ids and texts, so they are left out there.
CONTROLS = ("\u202e", "\u200b", "\u2066", "\x1b[2J", "\x07", "\u0000", "\ufeff")


def payload(draw: random.Random, marker: str, *, controls: bool) -> str:
    """One hostile text: one to three templates around the marker, maybe with controls."""
    parts = [draw.choice(TEMPLATES).format(m=marker) for _ in range(draw.randint(1, 3))]
    if controls:
        parts.insert(draw.randint(0, len(parts)), draw.choice(CONTROLS))
    return marker + "".join(parts)


@attrs.frozen
class HostileKey:
    marker: str
    set_name: str
    retriever: str
    question_ids: tuple[str, ...]
    document_ids: tuple[str, ...]
    notes: tuple[str, str]
    topic: str
    """The hostile value of the questions' ``topic`` field, a slice of the runs."""
    documents: dict[str, tuple[str, str]]
    """The corpus: (title, text) by document id."""
    texts: tuple[str, ...]
    """Every hostile text of this key that its pages show."""
    new: str = ""
    old: str = ""


@attrs.frozen
class World:
    folder: Path
    stores: dict[str, str]
    config: Config
    demo: str
    demo_older: str
    hostile: tuple[HostileKey, ...]
    outside: Path
    """A file beside the store whose content no page may ever show."""
    drift: str = ""
    """A drift record of the hostile keys' texts as a query log, in every store."""
    drift_moved: tuple[str, ...] = ()
    """The queries its drift page lists as moved."""


class TwoIds:
    """A retriever answering every query with ``first`` then ``d9``: two of them drift."""

    def __init__(self, first: str) -> None:
        self.first = first

    def retrieve(self, question: str, limit: int) -> list[str]:
        return [self.first, "d9"][:limit]


SECRET = "file-outside-the-store-7f3a9c"


def _hostile_key(folder: Path, seed: int) -> tuple[HostileKey, Path]:
    draw = random.Random(seed)
    marker = f"rkx{seed}q"
    plain = lambda tag: payload(draw, f"{marker}{tag}", controls=False)  # noqa: E731
    wild = lambda tag: payload(draw, f"{marker}{tag}", controls=True)  # noqa: E731
    # An id holds no space: the markup then separates its attributes with "/".
    spaceless = lambda tag: "/".join(plain(tag).split())  # noqa: E731
    set_name = f"set-{plain('set')}"
    question_ids = tuple(f"q{number}-{spaceless(f'qid{number}')}" for number in range(4))
    topic = plain("meta")
    answers = tuple(f"d{number}-{spaceless(f'doc{number}')}" for number in range(4))
    questions: list[dict[str, Any]] = [
        {
            "id": qid,
            "question": f"which? {plain(f'text{number}')}",
            "expected": [answers[number]],
            "meta": {"topic": topic},
        }
        for number, qid in enumerate(question_ids)
    ]
    # A no-answer question that errors: its message is the retriever's hostile one.
    questions.append({"id": f"err-{marker}", "question": "error?", "expected": [answers[0]]})
    sets = folder / f"set-{seed}.jsonl"
    sets.write_text("".join(json.dumps(q) + "\n" for q in questions), encoding="utf-8")
    # As a run stores them: what the id identity rule leaves of a returned id (surrounding
    # whitespace, control and format characters go, with a warning; formats/ids.py).
    document_ids = answers + tuple(returned_id(wild(f"doc{number}")) for number in range(4, 8))
    corpus = folder / f"corpus-{seed}.jsonl"
    # A corpus names only documents a golden set could name (no space, no control):
    # the retriever's other documents are "not in the corpus".
    documents = {doc: (plain(f"title{n}"), wild(f"body{n}")) for n, doc in enumerate(answers)}
    corpus.write_text(
        "".join(
            json.dumps({"_id": doc, "title": title, "text": text}) + "\n"
            for doc, (title, text) in documents.items()
        ),
        encoding="utf-8",
    )
    texts = [set_name, *question_ids, *(str(q["question"]) for q in questions[:4])]
    texts += [topic, *document_ids, *(part for both in documents.values() for part in both)]
    key = HostileKey(
        marker=marker,
        set_name=set_name,
        retriever=f"ret-{wild('ret')}",
        question_ids=question_ids,
        document_ids=document_ids,
        notes=(wild("note1"), wild("note2")),
        topic=topic,
        documents=documents,
        texts=tuple(texts),
    )
    return key, sets


class HostileRetriever:
    """Answers every question with the key's hostile documents (expected ones first for
    some), and fails one question with a hostile message."""

    def __init__(self, key: HostileKey, shift: int) -> None:
        self.key = key
        self.shift = shift
        self.identifier = key.retriever

    def retrieve(self, question: str, limit: int) -> list[str]:
        if question == "error?":
            raise RuntimeError(f"upstream said {self.key.notes[0]}")
        documents = list(self.key.document_ids)
        turn = self.shift % len(documents)
        return (documents[turn:] + documents[:turn])[:limit]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    folder = tmp_path_factory.mktemp("serve-in-process")
    (folder / "store").mkdir()
    outside = folder / "outside.txt"
    outside.write_text(SECRET, encoding="utf-8")
    moment = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)
    records = []
    for number in range(2):  # two runs of the demo set by the demo retriever
        run = rk.evaluate(
            "demo",
            "bm25-demo",
            resamples=200,
            git_commit=None,
            now=moment + dt.timedelta(minutes=number),
        )
        records.append(run.record)
    demo_older, demo = records[0].run_id, records[1].run_id
    sets: dict[str, Path] = {}
    hostile = []
    for seed in range(HOSTILE_KEYS):
        key, path = _hostile_key(folder, seed)
        sets[key.set_name] = path
        config = Config(sets=dict(sets))
        made = []
        for number, note in enumerate(key.notes):
            run = rk.evaluate(
                key.set_name,
                HostileRetriever(key, number),
                name=key.retriever,
                options={"note": note, "corpus": str(folder / f"corpus-{seed}.jsonl")},
                slices=["topic"],
                resamples=200,
                git_commit=None,
                max_error_rate=1.0,
                config=config,
                now=moment + dt.timedelta(hours=seed + 1, minutes=number),
            )
            made.append(run.record)
        records += made
        hostile.append(attrs.evolve(key, old=made[0].run_id, new=made[1].run_id))
    stores = {
        "jsonl": f"jsonl:///{folder / 'store' / 'runs.jsonl'}",
        "sqlite": f"sqlite:///{folder / 'store' / 'runs.sqlite3'}",
    }
    for url in stores.values():
        store = open_store(url)
        for record in records:
            store.save(record)
    drift_log = folder / "drift-log.jsonl"
    drift_log.write_text(
        "".join(
            json.dumps({"query": text}) + "\n"
            for key in hostile
            for text in key.texts
            if text.strip()
        ),
        encoding="utf-8",
    )
    drift = rk.drift(drift_log, TwoIds("d2"), TwoIds("d1"), save=False, resamples=50, min_rbo=0.5)
    for url in stores.values():
        open_store(url).save_drift(drift.to_dict())  # type: ignore[attr-defined]
    return World(
        folder=folder,
        stores=stores,
        config=Config(sets=sets),
        demo=demo,
        demo_older=demo_older,
        hostile=tuple(hostile),
        outside=outside,
        drift=drift.drift_id,
        drift_moved=tuple(row["query"] for row in drift.moved),
    )


def make_app(
    world: World,
    labels: Path,
    *,
    store: str = "jsonl",
    host: str = "127.0.0.1",
    token: str | None = None,
) -> Any:
    from retrievalkit.api import Thresholds
    from retrievalkit.serve.app import create_app
    from retrievalkit.serve.judging_queue import LabelsFile
    from retrievalkit.serve.views import Site

    site = Site(
        store=open_store(world.stores[store]),
        config=world.config,
        labels=LabelsFile(labels),
        thresholds=Thresholds(),
    )
    return create_app(site, host=host, port=PORT, token=token)


def client_of(app: Any, base_url: str = SERVED) -> TestClient:
    return TestClient(app, base_url=base_url, follow_redirects=False)


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found is not None, page[-2000:]
    return found.group(1)


def item_of(page: str) -> tuple[str, str]:
    parser = Elements()
    parser.feed(page)
    found = {key: value for key, value in parser.hidden.items() if key in ("question", "document")}
    assert set(found) == {"question", "document"}, page[-3000:]
    return found["question"], found["document"]


def named(client: TestClient, run_id: str, grader: str = "carol") -> str:
    """Give a grader's name on the judging page; the page of the next item."""
    page = client.get("/judge", params={"run": run_id}).text
    answer = client.post("/judge/name", data={"csrf": csrf_of(page), "grader": grader})
    assert answer.status_code == 303, answer.text[-1000:]
    return client.get("/judge", params={"run": run_id}).text


def snapshot(world: World, labels: Path) -> dict[str, bytes]:
    """Every file of the store folder and the labels file: what a refused request must
    leave as it was."""
    files: dict[str, bytes] = {}
    for path in sorted((world.folder / "store").rglob("*")):
        if not path.is_file() or path.name.endswith(("-wal", "-shm", "-journal")):
            # SQLite's write-ahead log comes and goes as connections close (a checkpoint
            # moves its pages into the database): the database's content is compared.
            continue
        files[str(path)] = _database_dump(path) if path.suffix == ".sqlite3" else path.read_bytes()
    files["labels"] = labels.read_bytes() if labels.exists() else b""
    return files


def _database_dump(path: Path) -> bytes:
    """A SQLite database's content as SQL (its write-ahead log included), read through a
    read-only connection that changes nothing on disk."""
    import sqlite3

    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return "\n".join(connection.iterdump()).encode("utf-8")
    finally:
        connection.close()


# ---------------------------------------------------------------- the routes


@attrs.frozen
class Case:
    """One request to a route, with everything it needs to be accepted."""

    method: str
    path: str
    params: dict[str, str | list[str]] = attrs.field(factory=dict)
    form: dict[str, str] | None = None
    accepted: tuple[int, ...] = (200,)


def route_cases(world: World, client: TestClient) -> dict[str, list[Case]]:
    """A request to each route of the application that a signed-in visitor with a
    grader's name would send, accepted by the server (the session of ``client``)."""
    page = named(client, world.demo)
    question, document = item_of(page)
    csrf = csrf_of(page)
    return {
        "/": [Case("GET", "/")],
        "/history": [
            Case("GET", "/history", {"set": "demo", "retriever": "bm25-demo", "limit": "5"})
        ],
        "/compare": [Case("GET", "/compare", {"run": world.demo, "other": world.demo_older})],
        "/drift": [Case("GET", "/drift"), Case("GET", "/drift", {"id": world.drift})],
        "/question": [
            Case("GET", "/question", {"run": world.demo, "id": question, "other": world.demo_older})
        ],
        "/judge": [
            Case("GET", "/judge", {"run": world.demo, "q": question, "doc": document, "k": "10"})
        ],
        "/judge/grade": [
            Case(
                "POST",
                "/judge/grade",
                form={
                    "csrf": csrf,
                    "run": world.demo,
                    "question": question,
                    "document": document,
                    "grade": "2",
                    "k": "10",
                    "sample": "0",
                },
                accepted=(303,),
            )
        ],
        "/judge/name": [
            Case(
                "POST",
                "/judge/name",
                form={"csrf": csrf, "grader": "carol", "next": "/judge"},
                accepted=(303,),
            )
        ],
        "/pin": [Case("POST", "/pin", form={"csrf": csrf, "run": world.demo}, accepted=(303,))],
        "/login": [Case("GET", "/login")],
        "/static/{name}": [Case("GET", "/static/serve.css"), Case("GET", "/static/serve.js")],
        "/favicon.ico": [Case("GET", "/favicon.ico", accepted=(204,))],
    }


def send(client: TestClient, case: Case, **extra: Any) -> Any:
    if case.method == "GET":
        return client.get(case.path, params=case.params, **extra)
    return client.post(case.path, data=case.form, **extra)


@pytest.fixture
def labels(tmp_path: Path) -> Path:
    return tmp_path / "labels" / "human.tsv"


def test_every_route_has_a_case_in_every_class(world: World, labels: Path) -> None:
    """A route added without a case here fails: each class below runs every case."""
    app = make_app(world, labels)
    with client_of(app) as client:
        cases = route_cases(world, client)
        assert {route.path for route in app.routes} == set(cases)
        for path, found in cases.items():
            for case in found:
                answer = send(client, case)
                assert answer.status_code in case.accepted, (path, answer.text[-500:])
        # The POST routes are the ones whose cases post (/login: with a token, below).
        posted = {r.path for r in app.routes if "POST" in getattr(r, "methods", ())}
        assert posted == {
            path for path, found in cases.items() if any(c.method == "POST" for c in found)
        } | {"/login"}


# ---------------------------------------------------------------- DNS rebinding


def hostile_hosts(seed: int) -> list[str]:
    """Host headers that do not name this server's loopback address and port."""
    draw = random.Random(seed)
    found = []
    for _ in range(CASES):
        word = "".join(draw.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(draw.randint(2, 9)))
        name = draw.choice(LOOPBACK)
        other = draw.choice([p for p in (PORT + 1, PORT - 1, 80, 443, draw.randint(1, 65535))])
        other = other if other != PORT else PORT + 3
        found.append(
            draw.choice(
                [
                    f"{word}.example:{PORT}",
                    f"{word}.example",
                    f"{name}",  # no port: a browser sends one for any port but 80
                    f"{name}:{other}",
                    f"{name}.{word}.example:{PORT}",
                    f"{word}.{name}:{PORT}",
                    f"127.0.0.1.nip.io:{PORT}",
                    f"127.0.0.{draw.randint(2, 254)}:{PORT}",
                    f"[::2]:{PORT}",
                    f"10.{draw.randint(0, 255)}.{draw.randint(0, 255)}.1:{PORT}",
                    f"192.168.{draw.randint(0, 255)}.{draw.randint(1, 254)}:{PORT}",
                    f"0.0.0.0:{PORT}",
                    f"{name}:{PORT}@{word}.example",
                    f"{name}:{PORT} ",
                    f"{name}:{PORT}.",
                    f"{name}:0{PORT}",
                    "",
                ]
            )
        )
    return found


def test_a_host_other_than_the_served_loopback_one_is_refused_on_every_route(
    world: World, labels: Path
) -> None:
    app = make_app(world, labels)
    with client_of(app) as client:
        cases = route_cases(world, client)
        before = snapshot(world, labels)
        tried = 0
        for seed in range(2):
            for host in hostile_hosts(seed):
                for path, found in cases.items():
                    for case in found:
                        answer = send(client, case, headers={"host": host})
                        assert answer.status_code == 403, (path, host, answer.status_code)
                        assert "only answers requests addressed to" in answer.text, (path, host)
                        assert world.demo not in answer.text  # nothing of the store is shown
                        tried += 1
        assert tried >= 2 * CASES * len(cases)
        assert snapshot(world, labels) == before
        # The served names on the served port are answered.
        for host in LOOPBACK:
            for path, found in cases.items():
                for case in found:
                    if case.method == "GET":
                        answer = send(client, case, headers={"host": f"{host}:{PORT}"})
                        assert answer.status_code in case.accepted, (path, host)


# ---------------------------------------------------------------- CSRF


def wrong_tokens(real: str, seed: int) -> list[str | None]:
    """Tokens that are not ``real``: each generated one is checked to differ from it."""
    draw = random.Random(seed)
    hexdigits = "0123456789abcdef"
    found: list[str | None] = [None, "", " ", real + " ", " " + real]
    while len(found) < CASES:
        at = draw.randrange(len(real))
        kind = draw.randrange(8)
        if kind == 0:  # one character off
            other = draw.choice([c for c in hexdigits if c != real[at]])
            token = real[:at] + other + real[at + 1 :]
        elif kind == 1:
            token = real[:at] + real[at + 1 :]
        elif kind == 2:
            token = real + draw.choice(hexdigits)
        elif kind == 3:
            token = "".join(draw.choice(hexdigits) for _ in real)
        elif kind == 4:
            token = real.upper()
        elif kind == 5:  # a character no token has, where a comparison of text may fail
            token = real[:at] + draw.choice("éß€\u202e\x00ü") + real[at + 1 :]
        elif kind == 6:
            token = real[: draw.randrange(len(real))]
        else:
            token = "0" * len(real)
        if token != real:
            found.append(token)
    assert real not in found
    return found


def test_every_post_refuses_a_missing_empty_or_wrong_csrf_token(world: World, labels: Path) -> None:
    app = make_app(world, labels)
    with client_of(app) as client:
        cases = route_cases(world, client)
        posts = [case for found in cases.values() for case in found if case.method == "POST"]
        real = csrf_of(client.get("/login").text)
        before = snapshot(world, labels)
        pinned = open_store(world.stores["jsonl"]).pinned("demo", "bm25-demo")  # type: ignore[attr-defined]
        tried = 0
        for seed in range(3):
            for token in wrong_tokens(real, seed):
                for case in posts:
                    assert case.form is not None
                    form = {k: v for k, v in case.form.items() if k != "csrf"}
                    if token is not None:
                        form["csrf"] = token
                    answer = client.post(case.path, data=form)
                    assert answer.status_code == 403, (case.path, token, answer.status_code)
                    assert "CSRF" in answer.text, (case.path, token)
                    tried += 1
        assert tried >= 3 * CASES * len(posts)
        # Another visitor's token, and this visitor's token without their session cookie.
        with client_of(app) as stranger:
            theirs = csrf_of(stranger.get("/login").text)
            assert theirs != real
            for case in posts:
                assert case.form is not None
                answer = client.post(case.path, data={**case.form, "csrf": theirs})
                assert answer.status_code == 403, case.path
                answer = stranger.post(case.path, data=case.form)  # with the other's token
                assert answer.status_code == 403, case.path
        # A session cookie the server did not make (too short, odd characters) has no token.
        for cookie in ("x", "a" * 31, "é" * 40, "a" * 65, "../" * 12):
            with client_of(app) as forged:
                headers = {"cookie": f"retrievalkit_session={cookie}".encode()}
                answer = forged.post(
                    "/pin", data={"csrf": real, "run": world.demo}, headers=headers
                )
                assert answer.status_code == 403, cookie
        assert snapshot(world, labels) == before
        assert open_store(world.stores["jsonl"]).pinned("demo", "bm25-demo") == pinned  # type: ignore[attr-defined]
        # A grader's name that is not a plain name is refused, and no name is kept.
        draw = random.Random(5)
        for _ in range(CASES):
            grader = draw.choice(TEMPLATES).format(m="x") + draw.choice(["", " ", "\n", "é"])
            grader = grader if draw.random() < 0.8 else "a" * draw.randint(41, 400)
            answer = client.post("/judge/name", data={"csrf": real, "grader": grader})
            assert answer.status_code == 403, grader
            assert "retrievalkit_grader" not in answer.headers.get("set-cookie", "")
        # A server started again has another secret: the old page's token is refused.
        with client_of(make_app(world, labels)) as again:
            again.cookies.update(client.cookies)
            for case in posts:
                assert case.form is not None
                assert again.post(case.path, data=case.form).status_code == 403, case.path
        # The same forms with the right token are taken.
        for case in posts:
            assert client.post(case.path, data=case.form).status_code == 303, case.path
        assert open_store(world.stores["jsonl"]).pinned("demo", "bm25-demo") == world.demo  # type: ignore[attr-defined]
        assert len(read_labels(labels)) == 1
    # The sign-in form of a server with a token: every wrong CSRF token is refused, and
    # nobody is signed in by it.
    guarded = make_app(world, labels, token=TOKEN)
    with client_of(guarded) as client:
        real = csrf_of(client.get("/login").text)
        for token in wrong_tokens(real, 9):
            form = {"token": TOKEN} if token is None else {"token": TOKEN, "csrf": token}
            answer = client.post("/login", data=form)
            assert answer.status_code == 403 and "CSRF" in answer.text, token
            assert "retrievalkit_auth" not in answer.headers.get("set-cookie", "")
        assert client.post("/login", data={"token": TOKEN, "csrf": real}).status_code == 303


# ---------------------------------------------------------------- a token off loopback


def addresses(seed: int) -> tuple[list[str], list[str]]:
    """(addresses that reach more than this machine, loopback addresses), generated."""
    draw = random.Random(seed)
    b = lambda: draw.randint(0, 255)  # noqa: E731
    word = lambda: f"{draw.randint(0, 0xFFFF):x}"  # noqa: E731
    outward = [
        "0.0.0.0",
        "::",
        "[::]",
        f"10.{b()}.{b()}.{b()}",
        f"192.168.{b()}.{b()}",
        f"172.{draw.randint(16, 31)}.{b()}.{b()}",
        f"fd{draw.randint(0, 255):02x}:{word()}::{word()}",
        f"fe80::{word()}",
        f"169.254.{b()}.{b()}",
        f"100.{draw.randint(64, 127)}.{b()}.{b()}",
        f"{draw.randint(1, 9)}.{b()}.{b()}.{b()}",
        f"2001:db8::{word()}",
        "::ffff:127.0.0.1",
        "localhost.",
        "LOCALHOST.example",
        f"{word()}.local",
        "127.0.0.1.nip.io",
        "",
    ]
    loopback = ["127.0.0.1", "::1", "[::1]", "localhost", f"127.{b()}.{b()}.{draw.randint(1, 254)}"]
    return outward, loopback


def test_a_token_is_required_off_loopback_and_not_on_it(
    world: World, labels: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import argparse

    from retrievalkit.cli.commands import serve as command
    from retrievalkit.errors import InputError
    from retrievalkit.serve.app import is_loopback

    monkeypatch.delenv("RETRIEVALKIT_SERVE_TOKEN", raising=False)
    tried = 0
    for seed in range(CASES // 4):
        outward, loopback = addresses(seed)
        for host in outward:
            assert not is_loopback(host), host
            # Neither the command nor the application serves it without a token.
            with pytest.raises(InputError, match="without a token"):
                command.run(argparse.Namespace(host=host))
            with pytest.raises(InputError, match="without a token"):
                make_app(world, labels, host=host)
            tried += 1
        for host in loopback:
            assert is_loopback(host), host
            ipaddress.ip_address(host.strip("[]")) if host != "localhost" else None
    assert tried == (CASES // 4) * len(addresses(0)[0])
    # Off loopback with a token: every route but the sign-in page and the static files
    # needs it, and any Host header is then answered (the token is the guard).
    outward, _ = addresses(99)
    for host in outward[:6]:
        app = make_app(world, labels, host=host, token=TOKEN)
        check_token_guard(world, labels, app, host)
    # On loopback, no token is asked for, and the address served is answered.
    for host in addresses(5)[1]:
        app = make_app(world, labels, host=host)
        shown = f"[{host.strip('[]')}]" if ":" in host else host
        with client_of(app, base_url=f"http://{shown}:{PORT}") as client:
            cases = route_cases(world, client)
            for path, found in cases.items():
                for case in found:
                    assert send(client, case).status_code in case.accepted, (host, path)


def check_token_guard(world: World, labels: Path, app: Any, host: str) -> None:
    draw = random.Random(host)
    open_paths = {"/login", "/static/{name}", "/favicon.ico"}
    with client_of(app, base_url=f"http://{draw.choice(['203.0.113.7', 'lan.example'])}") as signed:
        signed.headers["authorization"] = f"Bearer {TOKEN}"
        cases = route_cases(world, signed)
    before = snapshot(world, labels)
    wrong = [TOKEN[:-1], TOKEN + "x", TOKEN.upper(), "", TOKEN[: len(TOKEN) // 2]]
    wrong += [TOKEN[:at] + "é" + TOKEN[at + 1 :] for at in draw.sample(range(len(TOKEN)), 3)]
    for path, found in cases.items():
        for case in found:
            for header in [None, *(f"Bearer {w}" for w in wrong), TOKEN, f"Basic {TOKEN}"]:
                with client_of(app) as client:
                    headers = {} if header is None else {"authorization": header.encode()}
                    answer = send(client, case, headers=headers)
                    if path in open_paths:
                        assert answer.status_code in case.accepted, (host, path, header)
                        continue
                    expected = 303 if case.method == "GET" else 401
                    assert answer.status_code == expected, (host, path, header, answer.text[-300:])
                    if expected == 303:
                        assert answer.headers["location"] == "/login"
                    assert world.demo not in answer.text
            # The token in the query string or a form field signs nobody in.
            with client_of(app) as client:
                params = {**case.params, "token": TOKEN}
                if case.method == "GET" and path not in open_paths:
                    assert client.get(case.path, params=params).status_code == 303, path
    # Signed in, a form another site posts is still refused (the Origin check).
    for case in (c for found in cases.values() for c in found if c.method == "POST"):
        for origin in ("http://evil.example", "null", f"http://{host}.evil.example:{PORT}"):
            with client_of(app) as client:
                headers = {"authorization": f"Bearer {TOKEN}", "origin": origin}
                answer = client.post(case.path, data=case.form, headers=headers)
                assert answer.status_code == 403 and "another site" in answer.text, (host, origin)
    assert snapshot(world, labels)["labels"] == before["labels"]
    # A wrong sign-in is refused (401) and sets no cookie; the right one signs in.
    with client_of(app) as client:
        page = client.get("/login").text
        for token in wrong:
            answer = client.post("/login", data={"csrf": csrf_of(page), "token": token})
            assert answer.status_code == 401, token
            assert "retrievalkit_auth" not in answer.headers.get("set-cookie", "")
        client.cookies.set("retrievalkit_auth", "0" * 64)
        assert client.get("/").status_code == 303
        client.cookies.delete("retrievalkit_auth")
        answer = client.post("/login", data={"csrf": csrf_of(page), "token": TOKEN})
        assert answer.status_code == 303 and TOKEN not in answer.headers["set-cookie"]
        assert client.get("/").status_code == 200


# ---------------------------------------------------------------- path traversal


def traversals(seed: int, world: World) -> list[str]:
    """Values that name a file, a parent folder or another path, in every spelling."""
    draw = random.Random(seed)
    store = world.folder / "store"
    run = draw.choice([world.demo, world.demo_older])
    pieces = [
        "../",
        "..\\",
        "%2e%2e/",
        "%2e%2e%2f",
        "..%2f",
        "%252e%252e%252f",
        "....//",
        "..;/",
        "\x00",
        "%00",
        "/",
        "\\",
        "~/",
        "file://",
    ]
    targets = [
        str(world.outside),
        "/etc/passwd",
        "etc/passwd",
        "C:\\Windows\\win.ini",
        str(store / "runs.jsonl"),
        "runs.jsonl",
        "runs.jsonl.pins.json",
        "outside.txt",
        run,
    ]
    found = []
    for _ in range(CASES):
        prefix = "".join(draw.choice(pieces) for _ in range(draw.randint(1, 6)))
        value = draw.choice(
            [
                prefix + draw.choice(targets),
                draw.choice(targets),
                run + "/" + prefix + draw.choice(targets),
                run + draw.choice(["\x00", "%00", "\\", "/..", "/../"]) + draw.choice(targets),
                prefix * 200,
            ]
        )
        found.append(value)
    return found


class OpenedFiles:
    """The files opened while recording, from Python's audit hooks (``open`` and the
    directory listings), so that a test sees every file a request read."""

    def __init__(self) -> None:
        self.recording = False
        self.paths: list[str] = []
        sys.addaudithook(self.hook)

    def hook(self, event: str, arguments: tuple[Any, ...]) -> None:
        if not self.recording or event not in ("open", "os.listdir", "os.scandir"):
            return
        found = arguments[0] if arguments else None
        if isinstance(found, bytes):
            found = found.decode("utf-8", "replace")
        if isinstance(found, str):
            self.paths.append(found)


_OPENED: OpenedFiles | None = None


def opened_files() -> OpenedFiles:
    global _OPENED
    if _OPENED is None:
        _OPENED = OpenedFiles()
    return _OPENED


def test_path_traversal_in_any_parameter_reads_nothing_outside_and_never_fails(
    world: World, labels: Path
) -> None:
    import os

    app = make_app(world, labels)
    allowed = [world.folder / "store", world.folder / "set-", world.folder / "corpus-", labels]
    allowed += [Path(sys.prefix), Path(sys.base_prefix), Path(rk.__file__).parent]
    recorder = opened_files()
    with client_of(app) as client:
        cases = route_cases(world, client)
        for found in cases.values():  # warm up: imports, caches, the demo corpus
            for case in found:
                send(client, case)
        before = snapshot(world, labels)
        tried = 0
        for seed in range(2):
            values = traversals(seed, world)
            for path, found in cases.items():
                for case in found:
                    names = list(case.params) if case.method == "GET" else list(case.form or {})
                    names = [name for name in names if name != "csrf"]
                    names += ["set", "retriever", "run", "other", "id", "q", "doc", "metric"]
                    for value in values:
                        name = random.Random(value).choice(names)
                        recorder.recording, recorder.paths = True, []
                        try:
                            if case.method == "GET":
                                answer = client.get(case.path, params={**case.params, name: value})
                            else:
                                answer = client.post(case.path, data={**case.form, name: value})  # type: ignore[dict-item]
                        finally:
                            recorder.recording = False
                        assert answer.status_code in {200, 204, 303, 400, 403, 404}, (
                            path, name, value, answer.status_code, answer.text[-500:],
                        )  # fmt: skip
                        assert SECRET not in answer.text and "root:x:0:0" not in answer.text
                        for opened in recorder.paths:
                            where = Path(os.path.abspath(opened))
                            assert any(
                                str(where).startswith(str(root)) for root in allowed
                            ) or where.parts[1] in ("proc", "dev", "sys"), (
                                path,
                                name,
                                value,
                                opened,
                            )
                        tried += 1
        # In the path itself: the static route serves its two files and nothing else.
        for value in traversals(7, world):
            quoted = urllib.parse.quote(value, safe="/%")
            for prefix in ("/static/", "/static/..%2f", "/"):
                answer = client.get(SERVED + prefix + quoted)
                assert answer.status_code in {307, 404, 405}, (prefix, value, answer.status_code)
                if answer.status_code == 307:  # a trailing slash dropped, on this server
                    assert answer.headers["location"].startswith(SERVED + "/static/")
                assert SECRET not in answer.text
        assert tried >= 2 * CASES * len(cases)
        after = snapshot(world, labels)
        # Grades and pins of the valid cases may have been written; nothing else changed.
        assert {k: v for k, v in after.items() if "pins" not in k and k != "labels"} == {
            k: v for k, v in before.items() if "pins" not in k and k != "labels"
        }


# ---------------------------------------------------------------- hostile text


class Elements(HTMLParser):
    """What a page is made of: its elements and attributes, comments and script texts,
    and the text and attribute values it shows (entities decoded)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.shown: list[str] = []
        self.scripts: list[str] = []
        self.comments: list[str] = []
        self.others: list[str] = []
        self.hidden: dict[str, str] = {}
        self._open: list[str] = []

    def handle_starttag(self, tag: str, attributes: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attributes))
        values = dict(attributes)
        if tag == "input" and values.get("type") == "hidden" and values.get("name"):
            self.hidden[values["name"] or ""] = values.get("value") or ""
        for name, value in attributes:
            if value is None:
                continue
            self.shown.append(value)
            if name == "href":
                query = urllib.parse.urlsplit(value).query
                self.shown += [v for _, v in urllib.parse.parse_qsl(query, keep_blank_values=True)]
        if tag in ("script", "style"):
            self._open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if self._open and self._open[-1] == tag:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        (self.scripts if self._open else self.shown).append(data)

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)

    def handle_decl(self, decl: str) -> None:
        if decl.lower() != "doctype html":
            self.others.append(decl)

    def unknown_decl(self, data: str) -> None:
        self.others.append(data)

    def handle_pi(self, data: str) -> None:
        self.others.append(data)


def _template_tags() -> set[str]:
    from retrievalkit.serve import templates

    sources = [
        getattr(templates, name)
        for name in (
            "BASE",
            "KEYS",
            "HISTORY",
            "COMPARE",
            "QUESTION",
            "JUDGE",
            "LOGIN",
            "ERROR",
            "DRIFT",
        )
    ]
    return {tag.lower() for text in sources for tag in re.findall(r"<([A-Za-z][A-Za-z0-9]*)", text)}


def _squash(text: str) -> str:
    return " ".join(text.split())


def assert_inert(page: str, texts: list[str], where: str) -> None:
    """No element, attribute, comment or script of ``page`` comes from ``texts``, each
    of which the page shows as written (whitespace aside)."""
    parsed = Elements()
    parsed.feed(page)
    parsed.close()
    allowed = _template_tags()
    for tag, attributes in parsed.tags:
        assert tag in allowed, (where, tag, attributes)
        for name, value in attributes:
            assert not name.startswith("on") and "rkx" not in name, (where, tag, name)
            if name in ("href", "src", "action", "formaction", "xlink:href"):
                assert value is not None and value.startswith("/"), (where, tag, name, value)
                assert not value.startswith("//"), (where, value)
    scripts = [(tag, dict(attributes)) for tag, attributes in parsed.tags if tag == "script"]
    assert scripts == [("script", {"src": "/static/serve.js", "defer": None})], (where, scripts)
    assert not "".join(parsed.scripts).strip(), (where, parsed.scripts)
    assert parsed.comments == [] and parsed.others == [], (where, parsed.comments, parsed.others)
    shown = _squash("\n".join(parsed.shown))
    for text in texts:  # as written, or as a message quotes it (repr)
        forms = {_squash(text), _squash(text)[:250], _squash(repr(text)[1:-1])}
        assert any(form in shown for form in forms), (where, text)
        if any(c in text for c in "<>\"'&"):
            assert text not in page, (where, text)  # never sent as written


def hostile_pages(
    world: World, key: HostileKey, client: TestClient
) -> Iterator[tuple[str, Any, list[str]]]:
    """(where, answer, hostile texts it must show) for every page of one hostile key."""
    runs = {"run": key.new, "other": key.old}
    yield "keys", client.get("/"), [key.set_name, key.retriever]
    moved = [text for text in key.texts if text.strip() in world.drift_moved]
    yield "drift", client.get("/drift", params={"id": world.drift}), moved
    history = {"set": key.set_name, "retriever": key.retriever}
    # The run note, a retriever option, is shown as what changed between the two runs.
    changed = f"note: {key.notes[0]} -> {key.notes[1]}"
    answer = client.get("/history", params=history)
    yield "history", answer, [key.set_name, key.retriever, changed]
    answer = client.get(
        "/history", params={**history, "slice": f"topic={key.topic}", "metric": "rr"}
    )
    yield "history slice", answer, [key.set_name, f"topic={key.topic}"]
    names = [key.set_name, key.retriever]
    yield "compare", client.get("/compare", params=runs), names
    yield "compare with baseline", client.get("/compare", params={"run": key.new}), names
    for qid in key.question_ids:
        answer = client.get("/question", params={"id": qid, **runs})
        yield "question", answer, [qid, *key.document_ids, key.retriever]
    answer = client.get("/question", params={"id": f"err-{key.marker}", **runs})
    yield "question with an error", answer, [f"err-{key.marker}", key.notes[0]]
    page = named(client, key.new, "dana")
    yield "judge", page, [key.retriever, key.set_name]
    question, document = item_of(page)
    assert question in key.question_ids and document in key.document_ids
    for number, question in enumerate(key.question_ids):  # every item of the queue
        for document in key.document_ids:
            if document != key.document_ids[number]:
                answer = client.get(
                    "/judge", params={"run": key.new, "q": question, "doc": document}
                )
                texts = [question, document, key.retriever, key.set_name]
                yield "judge item", answer, texts + list(key.documents.get(document, ()))
    csrf = csrf_of(page)
    for document in (key.document_ids[1], key.document_ids[-1]):
        form = {"csrf": csrf, "run": key.new, "question": key.question_ids[0], "grade": "1"}
        graded = client.post("/judge/grade", data={**form, "document": document})
        if not is_label_id(document):  # the labels format has no room for it
            yield "error grade", graded, [document]
        else:
            assert graded.status_code == 303, graded.text[-500:]
            answer = client.get("/judge", params={"run": key.new})
            yield "judge recent", answer, [key.question_ids[0], document]
    # Error pages repeat what the URL asked for: texts that name no run, key or question.
    for text in (key.set_name, key.retriever, key.notes[0], key.topic):
        yield "error compare", client.get("/compare", params={"run": text}), [text]
        yield "error question", client.get("/question", params={"run": key.new, "id": text}), [text]
        yield (
            "error history",
            client.get("/history", params={"set": text, "retriever": text}),
            [text],
        )
        yield (
            "error judge",
            client.get("/judge", params={"run": key.new, "q": text, "doc": text}),
            [text],
        )
        yield "error pin", client.post("/pin", data={"csrf": csrf_of(page), "run": text}), [text]
    origin = f"http://{key.marker}<script>x</script>.example"
    answer = client.post(
        "/pin", data={"csrf": csrf_of(page), "run": key.new}, headers={"origin": origin}
    )
    yield "error origin", answer, [origin]


@pytest.mark.parametrize("store", ["jsonl", "sqlite"])
def test_hostile_text_is_inert_on_every_page(world: World, labels: Path, store: str) -> None:
    app = make_app(world, labels, store=store)
    pages = 0
    seen: set[str] = set()
    with client_of(app) as client:
        for key in world.hostile:
            for where, answer, texts in hostile_pages(world, key, client):
                page = answer if isinstance(answer, str) else answer.text
                status = 200 if isinstance(answer, str) else answer.status_code
                if where.startswith("error"):
                    assert status in (400, 403, 404), (where, status, page[-500:])
                else:
                    assert status == 200, (where, status, page[-800:])
                assert_inert(page, texts, f"{store} {where} {key.marker}")
                seen.add(where.split()[0])
                pages += 1
        # Every page of the hostile keys in the route table is checked for inertness too.
        for found in route_cases(world, client).values():
            for case in found:
                answer = send(client, case)
                if answer.headers.get("content-type", "").startswith("text/html"):
                    assert_inert(answer.text, [], case.path)
    assert {"keys", "history", "compare", "question", "judge", "error", "drift"} <= seen
    assert pages >= HOSTILE_KEYS * 30


@pytest.mark.parametrize("store", ["jsonl", "sqlite"])
def test_the_drift_page_shows_the_record_and_answers_get_only(
    world: World, labels: Path, store: str
) -> None:
    """The record's measures and moved queries are on the page as the store keeps them;
    a write to /drift is refused, and an id the store does not hold is a 404."""
    from retrievalkit.api import drift_records
    from retrievalkit.formats.numbers import number

    (record,) = drift_records(store=world.stores[store])
    app = make_app(world, labels, store=store)
    with client_of(app) as client:
        page = client.get("/drift", params={"id": world.drift})
        assert page.status_code == 200
        assert 'id="drift-measures"' in page.text
        assert f"{record.candidate} against {record.baseline}" in page.text
        assert number(record.measures["rbo"]["value"]) in page.text
        assert page.text.count("<tr>") >= 1 + len(record.moved)
        assert record.gated
        verdict = "passed" if record.passed else "failed"
        assert f'<b id="drift-gate">{verdict}</b>' in page.text
        newest = client.get("/drift")
        assert newest.status_code == 200
        assert f'<h2 id="drift-title">{record.candidate} against' in newest.text
        assert client.post("/drift", data={"id": world.drift}).status_code == 405
        missing = client.get("/drift", params={"id": "drift-000000000000"})
        assert missing.status_code == 404
        assert "drift-000000000000" in missing.text


# ---------------------------------------------------------------- oversized bodies


def _asgi_post(
    app: Any, path: str, chunks: Iterator[bytes], headers: list[tuple[bytes, bytes]]
) -> tuple[int, int, bytes]:
    """POST to the application through its ASGI interface: (status, chunks read, body)."""
    read = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal read
        chunk = next(chunks, None)
        if chunk is None:
            return {"type": "http.request", "body": b"", "more_body": False}
        read += 1
        return {"type": "http.request", "body": chunk, "more_body": True}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", f"127.0.0.1:{PORT}".encode()), *headers],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", PORT),
    }
    asyncio.run(asyncio.wait_for(app(scope, receive, send), 60))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], read, body


def test_an_oversized_form_is_refused_with_413_without_being_read_whole(
    world: World, labels: Path
) -> None:
    from retrievalkit.serve.app import MAX_FORM_BYTES

    app = make_app(world, labels)
    with client_of(app) as client:
        cases = route_cases(world, client)
        cookie = "; ".join(f"{k}={v}" for k, v in client.cookies.items())
    posts = [case for found in cases.values() for case in found if case.method == "POST"]
    draw = random.Random(3)
    before = snapshot(world, labels)
    tried = 0
    for case in posts:
        assert case.form is not None
        form = urllib.parse.urlencode(case.form).encode()
        for _ in range(CASES // 4):
            size = draw.choice([16, 1000, 4096, 65536])
            total = MAX_FORM_BYTES * draw.randint(2, 2000)

            def endless(
                size: int = size, total: int = total, form: bytes = form
            ) -> Iterator[bytes]:
                yield form + b"&padding="
                for _ in range(total // size):
                    yield b"x" * size

            declared = draw.choice([True, False])
            headers = [
                (b"content-type", b"application/x-www-form-urlencoded"),
                (b"cookie", cookie.encode()),
            ]
            if declared:
                headers.append((b"content-length", str(total + len(form) + 9).encode()))
            status, read, body = _asgi_post(app, case.path, endless(), headers)
            assert status == 413, (case.path, size, total, declared, status, body[-300:])
            assert b"too large" in body
            # Refused from its declared length unread, or once past the limit.
            limit = 0 if declared else MAX_FORM_BYTES // size + 2
            assert read <= limit, (case.path, size, declared, read)
            tried += 1
        # A form just under the limit is read (and then judged on its content).
        padding = b"&p=" + b"x" * (MAX_FORM_BYTES - len(form) - 3)
        status, _, body = _asgi_post(
            app,
            case.path,
            iter([form + padding]),
            [(b"content-type", b"application/x-www-form-urlencoded"), (b"cookie", cookie.encode())],
        )
        assert status == 303, (case.path, status, body[-300:])
    assert tried == len(posts) * (CASES // 4)
    # The sign-in form, open to whoever lacks the token, is bounded the same way.
    guarded = make_app(world, labels, token=TOKEN)
    with client_of(guarded) as client:
        csrf = csrf_of(client.get("/login").text)
        cookie = "; ".join(f"{k}={v}" for k, v in client.cookies.items())
    for declared in (True, False):
        form = f"csrf={csrf}&token={TOKEN}&padding=".encode()
        headers = [(b"content-type", b"application/x-www-form-urlencoded")]
        headers.append((b"cookie", cookie.encode()))
        if declared:
            headers.append((b"content-length", str(MAX_FORM_BYTES * 50).encode()))
        chunks = iter([form, *([b"x" * 4096] * (MAX_FORM_BYTES * 50 // 4096))])
        status, read, _ = _asgi_post(guarded, "/login", chunks, headers)
        assert status == 413 and read <= (0 if declared else MAX_FORM_BYTES // 4096 + 2)
    after = snapshot(world, labels)
    assert len(read_labels(labels)) == 1  # the one form under the limit
    assert {k: v for k, v in after.items() if "pins" not in k and k != "labels"} == {
        k: v for k, v in before.items() if "pins" not in k and k != "labels"
    }


# ---------------------------------------------------------------- concurrent grades


def test_grades_from_many_threads_at_once_are_all_kept(world: World, labels: Path) -> None:
    app = make_app(world, labels)
    graders = 8
    with client_of(app) as first:
        page = named(first, world.demo, "warm")
    queue = []
    with client_of(app) as probe:
        named(probe, world.demo, "probe")
    from retrievalkit.serve.judging_queue import RunQueue

    record = open_store(world.stores["jsonl"]).get(world.demo)
    assert record is not None
    queue = [item.pair for item in RunQueue(record.outcomes, k=10).items()]
    assert len(queue) >= 20, len(queue)
    del page
    draw = random.Random(11)
    plans = {
        f"grader{n}": [(*draw.choice(queue), draw.randint(0, 3)) for _ in range(12)]
        for n in range(graders)
    }
    answered: list[tuple[str, str, str, int]] = []
    failures: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(graders + 2)

    def grade(name: str) -> None:
        client = client_of(app)  # its own event loop per request: really concurrent
        csrf = csrf_of(named(client, world.demo, name))
        start.wait()
        for question, document, value in plans[name]:
            answer = client.post(
                "/judge/grade",
                data={"csrf": csrf, "run": world.demo, "question": question,
                      "document": document, "grade": str(value)},
            )  # fmt: skip
            with lock:
                if answer.status_code == 303:
                    answered.append((name, question, document, value))
                else:
                    failures.append(f"{name} {answer.status_code} {answer.text[-300:]}")

    def read() -> None:  # people opening pages while the file grows
        client = client_of(app)
        named(client, world.demo, "reader")
        start.wait()
        for _ in range(30):
            answer = client.get("/judge", params={"run": world.demo})
            if answer.status_code != 200:
                with lock:
                    failures.append(f"reader {answer.status_code} {answer.text[-300:]}")

    threads = [threading.Thread(target=grade, args=(name,)) for name in plans]
    threads += [threading.Thread(target=read) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=240)
    assert not any(thread.is_alive() for thread in threads)
    assert failures == []
    written = read_labels(labels)
    assert len(answered) == graders * 12
    kept = [(label.model, label.question_id, label.document_id, label.grade) for label in written]
    assert sorted(kept) == sorted(answered)
    text = labels.read_text(encoding="utf-8")
    assert text.count("query-id") == 1 and text.endswith("\n")


@attrs.define
class Graders:
    """People grading a real server in threads until it stops (or they are told to)."""

    url: str
    run_id: str
    pairs: list[tuple[str, str]]
    answered: list[tuple[str, str, str]] = attrs.field(factory=list)
    stop: threading.Event = attrs.field(factory=threading.Event)
    lock: threading.Lock = attrs.field(factory=threading.Lock)

    def grade(self, name: str) -> None:
        import httpx

        draw = random.Random(name)
        try:
            with httpx.Client(base_url=self.url, timeout=30) as client:
                page = client.get("/judge", params={"run": self.run_id}).text
                csrf = csrf_of(page)
                answer = client.post("/judge/name", data={"csrf": csrf, "grader": name})
                while not self.stop.is_set() and answer.status_code == 303:
                    question, document = draw.choice(self.pairs)
                    answer = client.post(
                        "/judge/grade",
                        data={"csrf": csrf, "run": self.run_id, "question": question,
                              "document": document, "grade": "2"},
                    )  # fmt: skip
                    if answer.status_code == 303:
                        with self.lock:
                            self.answered.append((name, question, document))
        except httpx.TransportError:
            return  # the server stopped


def test_sigterm_while_people_grade_leaves_the_labels_file_whole(
    world: World, tmp_path: Path
) -> None:
    """A real server process, graded by several people at once, stopped with SIGTERM
    after a seeded number of grades: every grade it answered is in the file, and every
    line of the file is whole."""
    from serve_site import serving

    from retrievalkit.serve.judging_queue import RunQueue

    record = open_store(world.stores["jsonl"]).get(world.demo)
    assert record is not None
    pairs = [item.pair for item in RunQueue(record.outcomes, k=10).items()]
    for seed in range(3):
        labels = tmp_path / f"human-{seed}.tsv"
        wanted = random.Random(seed).randint(5, 60)
        with serving(
            world.folder, "--store", world.stores["jsonl"], "--labels", str(labels)
        ) as server:
            graders = Graders(server.url, world.demo, pairs)
            threads = [threading.Thread(target=graders.grade, args=(f"p{n}",)) for n in range(4)]
            for thread in threads:
                thread.start()
            deadline = time.monotonic() + 60
            while len(graders.answered) < wanted and time.monotonic() < deadline:
                time.sleep(0.005)
            server.process.send_signal(signal.SIGTERM)
            assert server.process.wait(timeout=60) in (0, 128 + signal.SIGTERM)  # never killed
            graders.stop.set()
            for thread in threads:
                thread.join(timeout=60)
        assert len(graders.answered) >= wanted, (seed, len(graders.answered))
        text = labels.read_text(encoding="utf-8")
        lines = text.splitlines()
        assert text.endswith("\n") and text.count("query-id") == 1
        assert all(len(line.split("\t")) == len(lines[0].split("\t")) for line in lines), text
        kept = [
            (label.model, label.question_id, label.document_id) for label in read_labels(labels)
        ]
        assert len(kept) == len(lines) - 1
        for item in set(graders.answered):
            assert kept.count(item) >= graders.answered.count(item), item
