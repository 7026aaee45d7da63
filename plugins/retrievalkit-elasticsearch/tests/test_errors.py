"""A bad configuration fails before any question is asked, with the exit code DESIGN.md gives
and a message that names the cluster, the index, the field or the variable, never a secret."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from support import cli, write_config

SECRET = "s3cret-Hunter2-do-not-print"


def closed_port() -> int:
    """A local port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def eval_demo(directory: Path, **env: str) -> Any:
    return cli(
        "eval", "--set", "demo", "--retriever", "es", "--no-save", "-q", cwd=directory, env=env
    )


def assert_no_secret(done: Any) -> None:
    assert SECRET not in done.stdout and SECRET not in done.stderr


@pytest.fixture
def rejecting_cluster() -> Iterator[str]:
    """An HTTP server that answers every request as a secured cluster does to bad credentials."""

    class Reject(BaseHTTPRequestHandler):
        def _reject(self) -> None:
            body = json.dumps(
                {
                    "error": {
                        "root_cause": [
                            {"type": "security_exception", "reason": "unable to authenticate"}
                        ],
                        "type": "security_exception",
                        "reason": "unable to authenticate",
                    },
                    "status": 401,
                }
            ).encode()
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("X-Elastic-Product", "Elasticsearch")
            self.send_header("WWW-Authenticate", 'Basic realm="security"')
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_HEAD = _reject

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Reject)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_unreachable_node_exits_3_naming_the_url(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    write_config(tmp_path, {"es": {"url": url, "index": "kb", "max_retries": 0}})
    done = eval_demo(tmp_path)
    assert done.returncode == 3, done.stderr
    assert f"cannot reach Elasticsearch at {url}" in done.stderr
    assert "Connection refused" in done.stderr


def test_unknown_index_exits_2_naming_it(tmp_path: Path, es_url: str) -> None:
    write_config(tmp_path, {"es": {"url": es_url, "index": "no-such-index-rk"}})
    done = eval_demo(tmp_path)
    assert done.returncode == 2, done.stderr
    assert "has no index 'no-such-index-rk'" in done.stderr
    assert "retrievers.es.index" in done.stderr  # the config line to fix


def test_pattern_matching_no_index_exits_2(tmp_path: Path, es_url: str) -> None:
    write_config(tmp_path, {"es": {"url": es_url, "index": "no-such-rk-*"}})
    done = eval_demo(tmp_path)
    assert done.returncode == 2 and "matches 'no-such-rk-*'" in done.stderr


def test_fields_the_mapping_lacks_exit_2_naming_them(
    tmp_path: Path, es_url: str, demo_index: str
) -> None:
    write_config(
        tmp_path,
        {"es": {"url": es_url, "index": demo_index, "fields": ["title^2", "body", "summary"]}},
    )
    done = eval_demo(tmp_path)
    assert done.returncode == 2, done.stderr
    assert "maps no field 'body', 'summary'" in done.stderr
    assert demo_index in done.stderr and "its fields: text, title" in done.stderr


def test_missing_id_field_exits_2(tmp_path: Path, es_url: str, demo_index: str) -> None:
    write_config(tmp_path, {"es": {"url": es_url, "index": demo_index, "id_field": "doc_key"}})
    done = eval_demo(tmp_path)
    assert done.returncode == 2 and "field 'retrievers.es.id_field'" in done.stderr


def test_wildcard_fields_are_checked_against_the_mapping(
    tmp_path: Path, es_url: str, demo_index: str
) -> None:
    write_config(tmp_path, {"es": {"url": es_url, "index": demo_index, "fields": ["t*^2"]}})
    done = eval_demo(tmp_path)
    assert done.returncode == 0, done.stderr


def test_wrong_password_exits_2_naming_user_and_variable(
    tmp_path: Path, rejecting_cluster: str
) -> None:
    write_config(
        tmp_path,
        {
            "es": {
                "url": rejecting_cluster,
                "index": "kb",
                "username": "evaluator",
                "password_env": "RK_TEST_PASSWORD",
            }
        },
    )
    done = eval_demo(tmp_path, RK_TEST_PASSWORD=SECRET)
    assert done.returncode == 2, done.stderr
    assert "rejected the credentials of user 'evaluator'" in done.stderr
    assert "$RK_TEST_PASSWORD" in done.stderr
    assert_no_secret(done)


def test_wrong_api_key_exits_2_naming_the_variable(tmp_path: Path, rejecting_cluster: str) -> None:
    write_config(
        tmp_path, {"es": {"url": rejecting_cluster, "index": "kb", "api_key_env": "RK_TEST_KEY"}}
    )
    done = eval_demo(tmp_path, RK_TEST_KEY=SECRET)
    assert done.returncode == 2, done.stderr
    assert "the API key in $RK_TEST_KEY" in done.stderr
    assert_no_secret(done)


def test_missing_credentials_exit_2(tmp_path: Path, rejecting_cluster: str) -> None:
    write_config(tmp_path, {"es": {"url": rejecting_cluster, "index": "kb"}})
    done = eval_demo(tmp_path)
    assert done.returncode == 2 and "requires credentials" in done.stderr


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"password": SECRET, "username": "evaluator"}, "secrets are not accepted"),
        ({"api_key": SECRET}, "secrets are not accepted"),
        ({"username": "evaluator", "password_env": "RK_UNSET_VARIABLE"}, "RK_UNSET_VARIABLE"),
        ({"username": "evaluator"}, "needs a password_env"),
        ({"url": f"http://evaluator:{SECRET}@127.0.0.1:9200"}, "carries credentials"),
        ({"query_type": "phrase"}, "unknown query_type 'phrase'"),
        ({"tie_breaker": 2}, "between 0 and 1"),
        ({"fields": "title"}, "non-empty list of field names"),
        ({"query_template": '{"query": {"match": {"text": {{question}}}}}'}, "not valid JSON"),
        ({"query_template": '{"query": {"match_all": {}}}'}, "does not use {{question}}"),
        ({"query_template": '{"match": {"text": "{{question}}"}}'}, "a 'query' object"),
        (
            {"query_template": '{"query": {"match": {"text": "{{question}}"}}}', "fields": ["x"]},
            "fields does not apply with a query_template",
        ),
        ({"query_template": '{"query": {"nosuch": {"text": "{{question}}"}}}'}, "rejects"),
        ({"filter": {"nosuch": {"lang": "en"}}}, "rejects this query"),
        ({"filter": '{"term": {"lang": "en"}, "x": 1}'}, "expected a query clause"),
        ({"hosts": "http://127.0.0.1:9200", "url": None}, "non-empty list of URLs"),
        ({"timeout": 0}, "seconds > 0"),
        ({"batch_size": 0}, "whole number >= 1"),
        ({"no_such_option": 1}, "does not accept"),
    ],
)
def test_bad_options_exit_2_before_any_question(
    tmp_path: Path, es_url: str, demo_index: str, options: dict[str, Any], message: str
) -> None:
    settings: dict[str, Any] = {"url": es_url, "index": demo_index, **options}
    write_config(tmp_path, {"es": {k: v for k, v in settings.items() if v is not None}})
    done = eval_demo(tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr
    assert_no_secret(done)


def test_secrets_never_reach_the_record(tmp_path: Path, es_url: str, demo_index: str) -> None:
    """The node has security off, so credentials are sent and ignored: the run succeeds."""
    write_config(
        tmp_path,
        {
            "es": {
                "url": es_url,
                "index": demo_index,
                "doc_id_separator": "#",
                "username": "evaluator",
                "password_env": "RK_TEST_PASSWORD",
            }
        },
    )
    store = tmp_path / "runs.jsonl"
    done = cli(
        "eval",
        "--set",
        "demo",
        "--retriever",
        "es",
        "--store",
        f"jsonl:///{store}",
        "--format",
        "json",
        cwd=tmp_path,
        env={"RK_TEST_PASSWORD": SECRET},
    )
    assert done.returncode == 0, done.stderr
    assert_no_secret(done)
    saved = store.read_text(encoding="utf-8")
    assert SECRET not in saved
    options = json.loads(saved)["manifest"]["retriever_options"]
    assert options["password_env"] == "RK_TEST_PASSWORD" and options["username"] == "evaluator"
