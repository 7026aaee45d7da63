"""The ``openai-compatible`` embedder against a loopback server serving all-MiniLM-L6-v2."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

from retrievalkit.embedders import create_embedder
from retrievalkit.errors import InputError, PluginError

TEXTS = [f"Claim number {i}: cells respond to signal {i % 7}." for i in range(11)]
SECRET = "sk-test-5f0c1d9e-never-printed"


def embedder(server: Any, **options: Any) -> Any:
    settings = {"url": server.url + "/v1", "model": "all-MiniLM-L6-v2", "dimensions": 384,
                "backoff": 0.0, **options}  # fmt: skip
    return create_embedder("openai-compatible", settings)


def test_vectors_equal_the_local_model_in_batches(server: Any, raw_minilm: Any) -> None:
    remote = embedder(server, batch_size=4)
    vectors = remote.embed(TEXTS)
    expected = raw_minilm.encode(TEXTS, convert_to_numpy=True)
    # JSON carries float32 values exactly; the server's reply order is reversed.
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    sizes = [len(request["body"]["input"]) for request in server.requests]
    assert sizes == [4, 4, 3]
    assert all(request["body"]["dimensions"] == 384 for request in server.requests)
    assert remote.model_id == "openai-compatible/all-MiniLM-L6-v2;d384"


def test_dimensions_are_asked_of_the_server_when_not_given(server: Any) -> None:
    probed = create_embedder(
        "openai-compatible", {"url": server.url + "/v1", "model": "all-MiniLM-L6-v2"}
    )
    assert probed.dimensions == 384
    assert len(server.requests) == 1 and "dimensions" not in server.requests[0]["body"]
    shorter = embedder(server, dimensions=128)
    assert shorter.embed(TEXTS[:2]).shape == (2, 128)


@pytest.mark.parametrize("fault", ["429", "503"])
def test_busy_answers_are_retried(server: Any, fault: str, raw_minilm: Any) -> None:
    server.faults.extend([fault, fault])
    vectors = embedder(server, retries=3).embed(TEXTS[:3])
    assert [request["fault"] for request in server.requests] == [fault, fault, None]
    np.testing.assert_allclose(vectors, raw_minilm.encode(TEXTS[:3]), atol=1e-6)


def test_retries_run_out_with_a_count(server: Any) -> None:
    server.faults.extend(["503"] * 5)
    with pytest.raises(PluginError, match=r"HTTP 503.*gave up after 3 attempts"):
        embedder(server, retries=2).embed(TEXTS[:2])
    assert len(server.requests) == 3


def test_a_slow_server_meets_the_deadline(server: Any) -> None:
    server.faults.extend(["slow:3", "slow:3", "slow:3"])
    began = time.monotonic()
    with pytest.raises(PluginError, match="no answer within"):
        embedder(server, deadline=0.6, retries=5).embed(TEXTS[:2])
    # One attempt, cut at the deadline: no retry could have finished in time.
    assert time.monotonic() - began < 2.5
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "fault, message", [("malformed", "not valid JSON"), ("short", "11 embeddings")]
)
def test_malformed_replies_are_not_retried(server: Any, fault: str, message: str) -> None:
    server.faults.append(fault)
    with pytest.raises(PluginError, match=message):
        embedder(server, batch_size=20).embed(TEXTS)
    assert len(server.requests) == 1


def test_the_key_is_sent_and_never_shown(server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RK_TEST_EMBED_KEY", SECRET)
    remote = embedder(server, api_key_env="RK_TEST_EMBED_KEY")
    remote.embed(TEXTS[:1])
    assert server.requests[-1]["authorization"] == f"Bearer {SECRET}"
    server.faults.append("echo-auth")
    with pytest.raises(PluginError) as caught:
        remote.embed(TEXTS[:1])
    assert "HTTP 400" in str(caught.value) and "***" in str(caught.value)
    assert SECRET not in str(caught.value)
    assert SECRET not in repr(vars(remote)) and SECRET not in remote.model_id
    assert SECRET not in repr(vars(remote._poster))


def test_options_are_checked(server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RK_TEST_UNSET_KEY", raising=False)
    with pytest.raises(InputError, match="RK_TEST_UNSET_KEY is not set"):
        embedder(server, api_key_env="RK_TEST_UNSET_KEY")
    with pytest.raises(InputError, match="http:// or https://"):
        create_embedder("openai-compatible", {"url": "127.0.0.1:9", "model": "m"})
    with pytest.raises(InputError, match="needs url and model"):
        create_embedder("openai-compatible", {"url": server.url})
    with pytest.raises(InputError, match="batch_size"):
        embedder(server, batch_size=0)
