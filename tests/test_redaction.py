"""The redaction helpers one by one: which values count as secret, in what order they are
scrubbed, and the options hash recomputed here from its documented recipe."""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path

import pytest

from retrievalkit.redaction import options_hash, remember, scrub_known, secret_values


def unset_variable() -> str:
    return f"RK_TEST_UNSET_{uuid.uuid4().hex.upper()}"


def test_every_item_of_a_list_under_a_secret_name_is_a_secret() -> None:
    assert secret_values({"password": ["s3cret-one", "s3cret-two"], "hosts": ["a", "b"]}) == [
        "s3cret-one",
        "s3cret-two",
    ]


def test_secrets_come_longest_first_so_a_shorter_one_never_splits_a_longer() -> None:
    assert secret_values({"password": "abcd", "token": "abcdefgh", "secret": "abce"}) == [
        "abcdefgh",
        "abcd",
        "abce",
    ]


def test_an_unset_or_empty_secret_is_no_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RK_TEST_EMPTY_SECRET", "")
    options = {"api_key_env": unset_variable(), "token_env": "RK_TEST_EMPTY_SECRET"}
    assert secret_values({**options, "password": ""}) == []


def test_a_set_environment_secret_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RK_TEST_SET_SECRET", "from-the-environment")
    assert secret_values({"api_key_env": "RK_TEST_SET_SECRET"}) == ["from-the-environment"]


def test_remembered_secrets_are_scrubbed_longest_first() -> None:
    short = f"k{uuid.uuid4().hex[:6]}"
    long = short + "-and-more"
    remember([short, long, ""])
    # Replacing the short one first would leave "-and-more" of the long one behind.
    assert scrub_known(f"before {long} after {short}.") == "before *** after ***."


def documented_hash(options: dict[str, object], environment: dict[str, str]) -> str:
    """The recipe, written out: PBKDF2-SHA256 of the sorted-key JSON of the options and of
    the values of the variables their ``*_env`` options name (empty when unset), salted,
    10,000 rounds, 16 hex digits. Stored runs keep this hash and history compares it
    across versions, so the recipe must not drift."""
    payload = json.dumps({"env": environment, "options": options}, sort_keys=True, default=str)
    digest = hashlib.pbkdf2_hmac(
        "sha256", payload.encode("utf-8"), b"retrievalkit options hash v1", 10_000
    )
    return digest.hex()[:16]


def test_the_options_hash_follows_its_documented_recipe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RK_TEST_HASHED_SECRET", "value-behind-the-variable")
    unset = unset_variable()
    options = {
        "url": "http://127.0.0.1:9200",
        "api_key_env": "RK_TEST_HASHED_SECRET",
        "token_env": unset,
        "fields": ["title^2", "body"],
    }
    environment = {"api_key_env": "value-behind-the-variable", "token_env": ""}
    digest = options_hash(options)
    assert digest == documented_hash(options, environment)
    assert len(digest) == 16


def test_the_options_hash_ignores_option_order_and_reads_any_value() -> None:
    assert options_hash({"a": 1, "b": "two"}) == options_hash({"b": "two", "a": 1})
    # A value JSON cannot hold (a path from a plugin's own config) is hashed as its text.
    assert options_hash({"corpus": Path("docs/corpus.jsonl")}) == options_hash(
        {"corpus": "docs/corpus.jsonl"}
    )
