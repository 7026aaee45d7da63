"""``serve`` refuses a state-changing request from another origin, beside the CSRF token.

In process (Starlette's TestClient against `create_app`) over real demo runs: every POST
route, sent a form with a valid session and CSRF token, is refused (403, nothing written)
when its ``Origin`` (or, without one, its ``Referer``) names another origin, for seeded
generated hostile origins of every kind (other hosts, look-alike hosts, other ports,
other schemes, ``null``, user names, malformed values); the same form from the
server's own origin, spelled any way a browser may, or naming no origin, is taken.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from serve_site import DemoRuns, demo_runs

from retrievalkit.stores import open_store

pytest.importorskip("starlette")

from starlette.testclient import TestClient

PORT = 8765
TOKEN = "origin-test-token-0123456789abcdef"
HOSTS = ("127.0.0.1", "localhost", "[::1]")
CASES = 40


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> DemoRuns:
    return demo_runs(tmp_path_factory.mktemp("serve-origin"))


def _app(runs: DemoRuns, labels: Path, token: str | None = None) -> object:
    from retrievalkit.api import Thresholds
    from retrievalkit.formats.config import Config
    from retrievalkit.serve.app import create_app
    from retrievalkit.serve.judging_queue import LabelsFile
    from retrievalkit.serve.views import Site

    site = Site(
        store=open_store(f"jsonl:///{runs.folder / 'runs.jsonl'}"),
        config=Config(),
        labels=LabelsFile(labels),
        thresholds=Thresholds(),
    )
    return create_app(site, host="127.0.0.1", port=PORT, token=token)


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found is not None, page[-2000:]
    return found.group(1)


def hostile_origins(seed: int) -> list[str]:
    """Origins that are not the server's, of every kind, drawn at random."""
    draw = random.Random(seed)
    host = draw.choice(HOSTS)
    word = "".join(draw.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(draw.randint(3, 9)))
    other_port = draw.choice([PORT + 1, PORT - 1, 80, 443, draw.randint(1, 65535)])
    if other_port == PORT:
        other_port = PORT + 2
    kinds = [
        f"http://{word}.example",
        f"https://{word}.example:{PORT}",
        f"http://{host}:{other_port}",
        f"https://{host}:{other_port}",
        f"http://{host}",  # the default port, not the served one
        f"http://127.0.0.{draw.randint(2, 254)}:{PORT}",
        f"http://localhost.{word}.example:{PORT}",
        f"http://{word}.localhost:{PORT}",
        f"http://127.0.0.1.nip.io:{PORT}",
        f"http://[::2]:{PORT}",
        f"http://{host}:{PORT}@{word}.example",
        f"http://{word}@{host}:{PORT}",
        f"ftp://{host}:{PORT}",
        f"file://{host}:{PORT}",
        f"chrome-extension://{word}",
        f"ws://{host}:{PORT}",
        "null",
        "",
        f"http://{host}:{PORT}x",
        f"http://[{word}:{PORT}",
        f"//{host}:{PORT}",
        f"{host}:{PORT}",
        f"http://{host}:{PORT + 65536}",
    ]
    return [draw.choice(kinds) for _ in range(CASES)]


def own_origins(seed: int) -> list[tuple[str, str]]:
    """(Host, Origin): the origin of the host a request is addressed to, spelled as
    browsers may (the scheme's and the name's case)."""
    draw = random.Random(seed)
    found = []
    for _ in range(12):
        host = draw.choice(HOSTS)
        scheme = draw.choice(["http", "HTTP", "Http"])
        name = host.upper() if draw.random() < 0.3 else host
        found.append((f"{host}:{PORT}", f"{scheme}://{name}:{PORT}"))
    return found


@pytest.fixture(scope="module")
def client(runs: DemoRuns, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    labels = tmp_path_factory.mktemp("origin-labels") / "human.tsv"
    with TestClient(
        _app(runs, labels), base_url=f"http://127.0.0.1:{PORT}", follow_redirects=False
    ) as client:  # type: ignore[arg-type]
        client.app_labels = labels  # type: ignore[attr-defined]
        yield client


def _forms(client: TestClient, runs: DemoRuns) -> dict[str, dict[str, str]]:
    """A valid form of each POST route but /login (signed in with a grader's name)."""
    page = client.get("/judge", params={"run": runs.titles}).text
    answer = client.post("/judge/name", data={"csrf": csrf_of(page), "grader": "carol"})
    assert answer.status_code == 303, answer.text
    page = client.get("/judge", params={"run": runs.titles}).text
    question = re.search(r'id="item-question">([^<]+)<', page)
    document = re.search(r'id="item-document">([^<]+)<', page)
    assert question and document
    csrf = csrf_of(page)
    return {
        "/judge/grade": {
            "csrf": csrf, "run": runs.titles, "question": question.group(1),
            "document": document.group(1), "grade": "2",
        },
        "/judge/name": {"csrf": csrf, "grader": "carol", "next": "/judge"},
        "/pin": {"csrf": csrf, "run": runs.demo_older},
    }  # fmt: skip


def test_every_post_route_refuses_another_origin_with_a_valid_token(
    client: TestClient, runs: DemoRuns
) -> None:
    from retrievalkit.serve.app import create_app
    from retrievalkit.serve.views import Site

    site = Site(store=None, config=None, labels=None)  # type: ignore[arg-type]
    posted = {
        route.path
        for route in create_app(site, host="127.0.0.1", port=1, token=None).routes
        if "POST" in getattr(route, "methods", ())
    }
    forms = _forms(client, runs)
    assert posted == {*forms, "/login"}  # /login: the next test, on a server with a token
    labels: Path = client.app_labels  # type: ignore[attr-defined]
    before = labels.read_bytes() if labels.exists() else b""
    store = open_store(f"jsonl:///{runs.folder / 'runs.jsonl'}")
    pinned = store.pinned("demo", "bm25-demo")  # type: ignore[attr-defined]
    tried = 0
    for seed in range(3):
        for origin in hostile_origins(seed):
            for route, form in forms.items():
                for header in ("origin", "referer"):
                    value = origin if header == "origin" else origin + "/judge?run=x"
                    answer = client.post(route, data=form, headers={header: value})
                    assert answer.status_code == 403, (route, header, value, answer.status_code)
                    assert "another site" in answer.text, (route, value)
                    tried += 1
    assert tried == 3 * CASES * len(forms) * 2
    assert (labels.read_bytes() if labels.exists() else b"") == before
    assert store.pinned("demo", "bm25-demo") == pinned  # type: ignore[attr-defined]
    # A hostile Origin is refused even when the Referer is the server's own page.
    answer = client.post(
        "/pin",
        data=forms["/pin"],
        headers={"origin": "http://evil.example", "referer": f"http://127.0.0.1:{PORT}/"},
    )
    assert answer.status_code == 403
    # The same forms from the server's own origin, any spelling, or naming none, are taken.
    for host, origin in [*own_origins(7), (f"127.0.0.1:{PORT}", None)]:
        for route, form in forms.items():
            headers = {"host": host} if origin is None else {"host": host, "origin": origin}
            answer = client.post(route, data=form, headers=headers)
            assert answer.status_code == 303, (route, origin, answer.text[-500:])
        if origin is not None:
            answer = client.post(
                "/judge/name",
                data=forms["/judge/name"],
                headers={"host": host, "referer": origin + "/judge?run=x"},
            )
            assert answer.status_code == 303, origin
            # The origin of another of the loopback names is another origin.
            other = next(h for h in HOSTS if not host.startswith(h))
            answer = client.post(
                "/judge/name",
                data=forms["/judge/name"],
                headers={"host": host, "origin": f"http://{other}:{PORT}"},
            )
            assert answer.status_code == 403, (host, other)
    assert store.pinned("demo", "bm25-demo") == runs.demo_older  # type: ignore[attr-defined]


def test_sign_in_from_another_origin_is_refused(runs: DemoRuns, tmp_path: Path) -> None:
    app = _app(runs, tmp_path / "human.tsv", token=TOKEN)
    with TestClient(app, base_url=f"http://localhost:{PORT}", follow_redirects=False) as client:  # type: ignore[arg-type]
        page = client.get("/login").text
        form = {"csrf": csrf_of(page), "token": TOKEN}
        for origin in hostile_origins(11):
            answer = client.post("/login", data=form, headers={"origin": origin})
            assert answer.status_code == 403, origin
            assert "retrievalkit_auth" not in answer.headers.get("set-cookie", "")
        answer = client.post("/login", data=form, headers={"origin": f"http://localhost:{PORT}"})
        assert answer.status_code == 303
        assert "retrievalkit_auth" in answer.headers.get("set-cookie", "")
