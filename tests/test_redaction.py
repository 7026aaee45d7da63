"""The redaction helpers one by one: which values count as secret, in what order they are
scrubbed, and the options hash recomputed here from its documented recipe."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import uuid
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from retrievalkit.redaction import (
    MIN_SCRUB_LENGTH,
    options_hash,
    redact_options,
    remember,
    scrub,
    scrub_known,
    scrub_logs_and_warnings,
    secret_values,
)


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


def documented_hash(options: Mapping[str, object], environment: Mapping[str, object]) -> str:
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


@pytest.mark.parametrize(
    ("secret", "text", "scrubbed"),
    [
        # MIN_SCRUB_LENGTH (6) characters: replaced wherever it occurs, inside a word too.
        ("abc123", "xabc123y abc123", "x***y ***"),
        # One shorter: replaced only where it stands as a whole word.
        ("abc12", "xabc12y abc12", "xabc12y ***"),
    ],
)
def test_a_secret_of_the_minimum_length_is_scrubbed_inside_words(
    secret: str, text: str, scrubbed: str
) -> None:
    assert len(secret) in (MIN_SCRUB_LENGTH, MIN_SCRUB_LENGTH - 1)
    assert scrub(text, [secret]) == scrubbed


def test_everything_under_a_secret_name_is_hidden_however_deep_and_keeps_its_shape() -> None:
    options = {"credentials": {"user": "me", "inner": {"a": "x"}, "list": ["p", {"b": 1}]}}
    assert redact_options(options) == {
        "credentials": {"user": "***", "inner": {"a": "***"}, "list": ["***", {"b": "***"}]}
    }


def test_values_that_are_no_secret_and_no_url_are_kept_as_they_are() -> None:
    options = {
        "port": 9200,
        "ratio": 0.5,
        "flag": True,
        "nothing": None,
        "query": "what?key=abc",  # no "://": not a URL, so no key in a query string
        "url": "https://u:pw@h/?key=k&page=2",
        "hosts": ["https://u:pw@a/", 7],
    }
    assert redact_options(options) == {
        **options,
        "url": "https://u:***@h/?key=***&page=2",
        "hosts": ["https://u:***@a/", 7],
    }
    assert secret_values(options) == ["pw", "k"]  # longest first


def test_env_options_keep_the_names_of_their_variables() -> None:
    options = {"headers_env": {"Authorization": "AUTH_VARIABLE"}, "api_key_env": "KEY_VARIABLE"}
    assert redact_options(options) == options


def test_the_options_hash_reads_the_variables_an_env_table_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RK_TEST_HEADER_SECRET", "first-value")
    unset = unset_variable()
    options = {"headers_env": {"Authorization": "RK_TEST_HEADER_SECRET", "X-Other": unset}}
    # Per variable (not per header name), an unset one as "".
    environment = {"headers_env": {"RK_TEST_HEADER_SECRET": "first-value", unset: ""}}
    first = options_hash(options)
    assert first == documented_hash(options, environment)
    monkeypatch.setenv("RK_TEST_HEADER_SECRET", "second-value")
    assert options_hash(options) != first


@pytest.fixture
def restored_logging_and_warnings(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """`scrub_logs_and_warnings` changes the whole process: undo it after the test."""
    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)
    factory = logging.getLogRecordFactory()
    try:
        yield
    finally:
        logging.setLogRecordFactory(factory)


@pytest.mark.usefixtures("restored_logging_and_warnings")
def test_logs_and_warnings_are_scrubbed_in_process_once(recwarn: pytest.WarningsRecorder) -> None:
    secret = f"s3cret-{uuid.uuid4().hex[:8]}"
    remember([secret])
    scrub_logs_and_warnings()
    factory, show = logging.getLogRecordFactory(), warnings.showwarning
    scrub_logs_and_warnings()  # a second call wraps nothing twice
    assert logging.getLogRecordFactory() is factory
    assert warnings.showwarning is show

    # The factory is called as LogRecord is: keyword arguments reach the record too.
    record = factory(
        "plugin", logging.INFO, "f.py", 3, "with %s", (secret,), None, func="f", sinfo="s"
    )
    assert (record.getMessage(), record.funcName, record.stack_info) == ("with ***", "f", "s")

    # A plugin's own logger and handler, not retrievalkit's.
    logger = logging.getLogger(f"some_plugin_{uuid.uuid4().hex}")
    logger.propagate = False
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger.addHandler(handler)
    try:
        logger.warning("connecting with %s", secret)
        try:
            raise ValueError(f"refused {secret}")
        except ValueError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "WARNING connecting with ***"
    assert lines[1] == "ERROR failed"
    assert lines[2] == "Traceback (most recent call last):"
    assert lines[-1] == "ValueError: refused ***"
    assert secret not in stream.getvalue()

    # A warning through warnings.warn, and one shown directly to a file.
    warnings.warn(f"slow with {secret}", UserWarning, stacklevel=1)
    assert [(str(caught.message), caught.category) for caught in recwarn] == [
        ("slow with ***", UserWarning)
    ]
    assert recwarn[0].filename == __file__
    # Shown directly, as a plugin may: every argument but the message is passed on as given.
    target = io.StringIO()
    warnings.showwarning(f"key {secret}", RuntimeWarning, "plugin.py", 7, target, "  source  ")
    shown = recwarn[1]
    assert (str(shown.message), shown.category) == ("key ***", RuntimeWarning)
    assert (shown.filename, shown.lineno, shown.file, shown.line) == (
        "plugin.py",
        7,
        target,
        "  source  ",
    )
