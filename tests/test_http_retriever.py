"""The ``http`` retriever against a real search service on loopback (tests/search_service.py).

Every fault the service can show is tried: each ends as an error outcome whose message
names the endpoint and the cause, or is recovered from by the bounded retries.
"""

from __future__ import annotations

import json
import subprocess
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from search_service import SearchService

from retrievalkit.demo import DEMO_CORPUS, DEMO_SET
from retrievalkit.errors import InputError
from retrievalkit.formats.golden_sets import load_jsonl
from retrievalkit.pipeline.engine.evaluator import evaluate_questions
from retrievalkit.retrievers.bm25 import BM25Retriever
from retrievalkit.retrievers.http_service import HttpRetriever, ServiceError, create_http

QUESTION = "How do I get a library card?"
HITS = {"hits": "data.hits", "id_field": "doc.id", "score_field": "score"}


@pytest.fixture(scope="module")
def service() -> Iterator[SearchService]:
    server = SearchService().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def bm25() -> BM25Retriever:
    return BM25Retriever(DEMO_CORPUS, doc_id_separator="#")


def get(service: SearchService, path: str = "/search", **options: Any) -> HttpRetriever:
    settings: dict[str, Any] = {
        "url": f"{service.url}{path}?q={{question}}&size={{limit}}",
        **HITS,
        "doc_id_separator": "#",
        "backoff": 0.01,
        **options,
    }
    return create_http(**settings)


def post(service: SearchService, path: str = "/search", **options: Any) -> HttpRetriever:
    settings: dict[str, Any] = {
        "url": f"{service.url}{path}",
        "body": {"query": {"text": "{question}"}, "size": "{limit}"},
        **HITS,
        "doc_id_separator": "#",
        "backoff": 0.01,
        **options,
    }
    return create_http(**settings)


def test_get_and_post_give_bm25s_ranking_and_scores(
    service: SearchService, bm25: BM25Retriever
) -> None:
    expected = bm25.retrieve_scored(QUESTION, 30)
    assert expected, "the demo question must match documents"
    for retriever in (get(service), post(service)):
        assert retriever.retrieve(QUESTION, 30) == [doc for doc, _ in expected]
        assert retriever.retrieve_scored(QUESTION, 30) == expected


def test_each_placeholder_is_encoded_for_where_it_stands(
    service: SearchService, tmp_path: Path
) -> None:
    tricky = 'a&b=c #1 / 50% "quoted" {braces} \\ naïve\nline'
    golden = tmp_path / "one.jsonl"
    line = {"id": "q&1", "question": tricky, "expected": ["d"], "meta": {"topic": "a/b & c"}}
    golden.write_text(json.dumps(line) + "\n", encoding="utf-8")
    retriever = post(
        service,
        url=f"{service.url}/search?id={{question_id}}&topic={{meta.topic}}",
        body={
            "query": {"text": "{question}", "tags": ["{topic}", "lit {{x}}"]},
            "size": "{limit}",
            "label": "id={question_id} n={limit}",
        },
        questions=str(golden),
    )
    retriever.retrieve(tricky, 7)
    # The JSON body was built as a structure: every value arrives whole, {limit} a number.
    assert service.bodies[-1] == {
        "query": {"text": tricky, "tags": ["a/b & c", "lit {x}"]},
        "size": 7,
        "label": "id=q&1 n=7",
    }
    # Each URL value is one percent-encoded component: '&', '/', '#' cannot split it.
    raw = service.raw_paths[-1]
    assert raw == "/search?id=q%261&topic=a%2Fb%20%26%20c"
    assert urllib.parse.parse_qs(urllib.parse.urlsplit(raw).query) == {
        "id": ["q&1"],
        "topic": ["a/b & c"],
    }
    with pytest.raises(LookupError, match="is not in"):
        retriever.retrieve("a question the set does not hold", 7)


def test_question_id_without_questions_is_refused_before_any_request(
    service: SearchService,
) -> None:
    with pytest.raises(InputError, match="needs the option 'questions'"):
        get(service, url=f"{service.url}/search?id={{question_id}}")
    with pytest.raises(InputError, match="neither question, limit, question_id nor a meta"):
        get(
            service,
            url=f"{service.url}/search?q={{question}}&x={{colour}}",
            questions=str(DEMO_SET),
        )


def test_recoverable_faults_are_retried(service: SearchService) -> None:
    """500 on the first try, a dropped connection, 429 with Retry-After (seconds and date)."""
    reference = get(service).retrieve(QUESTION, 10)
    for fault in ("flaky500", "drop", "r429", "r429date"):
        before = service.count(fault)
        assert get(service, f"/{fault}/search").retrieve(QUESTION, 10) == reference, fault
        assert service.count(fault) - before == 2, fault  # one failure, one success


def test_retry_after_is_waited_for(service: SearchService) -> None:
    """The second try arrives no earlier than the one second the server asked for."""
    question = "Can my membership be suspended?"
    get(service, "/r429/search").retrieve(question, 10)
    arrivals = [
        at for path, text, at, _ in service.requests if path == "/r429/search" and text == question
    ]
    assert len(arrivals) == 2
    assert arrivals[1] - arrivals[0] >= 1.0


FAULTS = [
    ("e500", {}, 'HTTP 500 Internal Server Error after 4 attempts: {"error": "index shard'),
    ("r429long", {}, "retry after 3600 s, longer than max_retry_after (60 s)"),
    ("slow", {"timeout": 0.3}, "no answer within 0.3 s (ReadTimeout)"),
    ("badjson", {}, "the response is not valid JSON"),
    ("html", {}, "answered Content-Type 'text/html', not JSON"),
    ("redirect", {}, "HTTP 302 redirect to /search?q="),
    ("huge", {"max_response_bytes": 100_000}, "larger than max_response_bytes (100000; 2"),
    ("hugechunked", {"max_response_bytes": 100_000}, "(100000; over 100000 bytes read)"),
    ("auth", {}, "HTTP 401 Unauthorized"),
    ("nosuch", {}, "HTTP 404 Not Found"),
]


@pytest.mark.parametrize(("fault", "options", "message"), FAULTS, ids=[f[0] for f in FAULTS])
def test_each_fault_is_an_error_naming_endpoint_and_cause(
    service: SearchService, fault: str, options: dict[str, Any], message: str
) -> None:
    retriever = get(service, f"/{fault}/search", **options)
    with pytest.raises(ServiceError) as caught:
        retriever.retrieve(QUESTION, 10)
    text = str(caught.value)
    assert text.startswith(f"GET {service.url}/{fault}/search?q={{question}}&size={{limit}}: ")
    assert message in text
    assert "\n" not in text


def test_a_refused_connection_is_retried_then_reported() -> None:
    server = SearchService()
    url = server.url
    server.server_close()  # the port is now closed: every connection is refused
    retriever = create_http(url=f"{url}/search?q={{question}}", retries=2, backoff=0.01)
    with pytest.raises(ServiceError, match=r"cannot reach the service after 3 attempts \(Connect"):
        retriever.retrieve(QUESTION, 10)


def test_redirects_are_followed_when_asked(service: SearchService) -> None:
    followed = get(service, "/redirect/search", follow_redirects=True)
    assert followed.retrieve(QUESTION, 10) == get(service).retrieve(QUESTION, 10)


def test_malformed_hits_are_errors(service: SearchService) -> None:
    with pytest.raises(ServiceError, match=r"no list of hits at 'data\.results'"):
        get(service, hits="data.results").retrieve(QUESTION, 10)
    with pytest.raises(ServiceError, match=r"no id of hit 1 at 'doc\.key'"):
        get(service, id_field="doc.key").retrieve(QUESTION, 10)
    with pytest.raises(ServiceError, match="hit 1 has a dict id"):
        get(service, id_field="doc").retrieve(QUESTION, 10)


def test_headers_come_from_the_environment_and_never_show(
    service: SearchService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEARCH_AUTH", "Bearer s3cr3t-t0ken")
    monkeypatch.setenv("SEARCH_KEY", "k3y-value")
    service.expected_authorization = "Bearer s3cr3t-t0ken"
    retriever = get(
        service,
        "/auth/search",
        headers_env={"Authorization": "SEARCH_AUTH"},
        params_env={"api_key": "SEARCH_KEY"},
        headers={"Accept": "application/json"},
    )
    assert retriever.retrieve(QUESTION, 5)
    sent = service.requests[-1][3]
    assert sent["Authorization"] == "Bearer s3cr3t-t0ken"
    assert "api_key=k3y-value" in service.raw_paths[-1]
    described = json.dumps(retriever.describe())
    assert "s3cr3t" not in described and "k3y-value" not in described
    assert "api_key=***" in described
    for header in ("Authorization", "X-Api-Key", "X-Auth-Token", "Cookie"):
        with pytest.raises(InputError, match="use headers_env"):
            get(service, headers={header: "literal"})
    with pytest.raises(InputError, match="environment variable NOT_SET_ANYWHERE is not set"):
        get(service, headers_env={"Authorization": "NOT_SET_ANYWHERE"})


def test_batch_endpoint_answers_many_questions_in_one_request(service: SearchService) -> None:
    golden = load_jsonl(DEMO_SET, name="demo")
    texts = [question.question for question in golden.questions]
    single = post(service)
    batched = post(service, batch_url=f"{service.url}/batch", batch_size=32)
    before = len(service.bodies)
    answers = batched.retrieve_many(texts, 30)
    assert len(service.bodies) - before == -(-len(texts) // 32)
    assert answers == [single.retrieve(text, 30) for text in texts]


def test_concurrency_keeps_requests_in_flight_together(service: SearchService) -> None:
    """The 'pair' endpoint answers only when two requests wait at once; one at a time fails."""
    texts = ["How do I get a library card?", "I forgot my PIN. How do I reset it?"]
    together = get(service, "/pair/search", concurrency=2, retries=0)
    answers = together.retrieve_many(texts, 10)
    assert all(isinstance(answer, list) and answer for answer in answers), answers
    service.pair.reset()
    alone = get(service, "/pair/search", retries=0, timeout=30)
    assert not hasattr(alone, "retrieve_many")


def test_evaluator_outcomes_name_every_failed_question(service: SearchService) -> None:
    golden = load_jsonl(DEMO_SET, name="demo")
    questions = golden.questions[:6]
    retrievals = evaluate_questions(
        get(service, "/e500/search", retries=1), questions, depth=10, concurrency=3
    )
    assert [retrieval.error is not None for retrieval in retrievals] == [True] * 6
    assert all("ServiceError: GET" in (r.error or "") for r in retrievals)


def test_tls_with_a_private_ca_and_a_client_certificate(tmp_path: Path) -> None:
    import ssl

    files = _certificates(tmp_path)
    server = SearchService()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(files["ca"]))
    context.load_cert_chain(files["server"], files["server_key"])
    context.verify_mode = ssl.CERT_REQUIRED
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.start()
    try:
        url = server.url.replace("http://", "https://") + "/search?q={question}&size={limit}"
        good = create_http(
            url=url,
            **HITS,
            ca_file=str(files["ca"]),
            client_cert=str(files["client"]),
            client_key=str(files["client_key"]),
            retries=0,
        )
        assert good.retrieve(QUESTION, 5)
        untrusted = create_http(url=url, **HITS, retries=0)
        with pytest.raises(ServiceError, match="CERTIFICATE_VERIFY_FAILED"):
            untrusted.retrieve(QUESTION, 5)
        anonymous = create_http(url=url, **HITS, ca_file=str(files["ca"]), retries=0)
        with pytest.raises(ServiceError, match="cannot reach the service"):
            anonymous.retrieve(QUESTION, 5)
    finally:
        server.stop()


def _certificates(folder: Path) -> dict[str, Path]:
    """A private CA, a server certificate for 127.0.0.1 and a client certificate (openssl)."""

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

    openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "2", "-subj", "/CN=retrievalkit test CA",
    )  # fmt: skip
    (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    for name, extra in (("server", ["-extfile", "san.ext"]), ("client", [])):
        openssl(
            "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
            "-out", f"{name}.csr", "-subj", f"/CN={name}",
        )  # fmt: skip
        openssl(
            "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", *extra,
        )  # fmt: skip
    return {
        "ca": folder / "ca.pem",
        "server": folder / "server.pem",
        "server_key": folder / "server.key",
        "client": folder / "client.pem",
        "client_key": folder / "client.key",
    }


def test_credentials_in_the_url_are_used_but_never_recorded(service: SearchService) -> None:
    from retrievalkit.redaction import redact_options, secret_values

    url = service.url.replace("http://", "http://reader:pa55word@")
    options = {
        "url": f"{url}/search?q={{question}}&size={{limit}}&api_key=LiteralKey123&index=kb",
        **HITS,
    }
    retriever = create_http(**options)
    assert retriever.retrieve(QUESTION, 5)
    assert service.raw_paths[-1].endswith("&api_key=LiteralKey123&index=kb")
    assert service.requests[-1][3]["Authorization"].startswith("Basic ")  # from user:password
    shown = json.dumps([retriever.describe(), redact_options(options)])
    assert (
        "pa55word" not in shown
        and "LiteralKey123" not in shown
        and "reader" not in (retriever.describe()["http.endpoint"])
    )
    assert "api_key=***&index=kb" in retriever.describe()["http.endpoint"]
    assert {"pa55word", "LiteralKey123"} <= set(secret_values(options))


def test_env_tables_are_secrets_by_value_and_names_by_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from retrievalkit.redaction import options_hash, redact_options, secret_values

    options = {"headers_env": {"Authorization": "SEARCH_AUTH"}, "url": "http://h/s"}
    monkeypatch.setenv("SEARCH_AUTH", "Bearer one")
    first = options_hash(options)
    assert secret_values(options) == ["Bearer one"]
    assert redact_options(options) == options  # the variable's name is no secret
    monkeypatch.setenv("SEARCH_AUTH", "Bearer two")
    assert options_hash(options) != first


def test_httpx_is_imported_only_when_an_http_retriever_is_made() -> None:
    import sys

    code = (
        "import sys, retrievalkit.retrievers.http_service, retrievalkit.cli.main; "
        "print('httpx' in sys.modules)"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert completed.stdout.strip() == "False"


def test_score_fusion_can_use_the_services_scores(service: SearchService) -> None:
    from retrievalkit.formats.config import Config, RetrieverConfig
    from retrievalkit.plugins.resolution import resolve_retriever

    url = f"{service.url}/search?q={{question}}&size={{limit}}"
    scored = {"url": url, **HITS, "doc_id_separator": "#"}
    config = Config(
        retrievers={
            "scored": RetrieverConfig("scored", "http", scored),
            "unscored": RetrieverConfig("unscored", "http", {**scored, "score_field": None}),
            "fused": RetrieverConfig(
                "fused", "fusion", {"retrievers": ["scored", "bm25-demo"], "method": "combsum"}
            ),
            "refused": RetrieverConfig(
                "refused", "fusion", {"retrievers": ["unscored", "bm25-demo"], "method": "combsum"}
            ),
        }
    )
    fused = resolve_retriever("fused", config).retriever
    bm25 = BM25Retriever(DEMO_CORPUS, doc_id_separator="#")
    # Both parts score alike, so the fused order is BM25's order of distinct documents.
    assert fused.retrieve(QUESTION, 10) == list(dict.fromkeys(bm25.retrieve(QUESTION, 10)))
    with pytest.raises(InputError, match="retriever 'unscored' gives no scores"):
        resolve_retriever("refused", config)
