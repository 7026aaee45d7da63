"""Passwords and keys in URLs, by hand: where a password starts and ends, which query
parameters are keys, and what must be left exactly as it was."""

from __future__ import annotations

import pytest

from retrievalkit.redaction import (
    redact_options,
    redact_url,
    scrub,
    secret_values,
    split_url_password,
)


@pytest.mark.parametrize(
    ("url", "parts"),
    [
        ("https://user:pw@host:9200/x", ("https://user:", "pw", "@host:9200/x")),
        # The password runs from the first ':' after the user to the LAST '@'.
        ("https://user:pa:ss@w@host/x", ("https://user:", "pa:ss@w", "@host/x")),
        # A user name may be an e-mail address.
        ("mongodb://me@example.com:p@ss@db/x", ("mongodb://me@example.com:", "p@ss", "@db/x")),
        # Schemes: any letter case, digits, '+', '.' and '-' after the first letter.
        ("HTTPS://u:p@h", ("HTTPS://u:", "p", "@h")),
        ("postgresql+psycopg://u:p@h/db", ("postgresql+psycopg://u:", "p", "@h/db")),
        # A later '://' (a redirect target in the query) is not the scheme's.
        ("https://u:p@h/go?to=http://x", ("https://u:", "p", "@h/go?to=http://x")),
    ],
)
def test_a_url_password_is_split_out_exactly(url: str, parts: tuple[str, str, str]) -> None:
    assert split_url_password(url) == parts
    assert "".join(parts) == url


@pytest.mark.parametrize(
    "url",
    [
        "user:pw@host",  # no scheme
        "1http://u:p@h",  # a scheme starts with a letter
        "ht tp://u:p@h",  # and holds no space
        "https://user@host/x",  # a user without a password
        "https://user:@host/x",  # an empty password
        "https://host/a:b@c",  # ':' and '@' in the path, not in a user part
        "https://host/x",
    ],
)
def test_a_url_without_a_password_has_none_to_split(url: str) -> None:
    assert split_url_password(url) is None
    assert redact_url(url) == url


def test_keys_in_the_query_are_hidden_and_everything_else_is_kept() -> None:
    url = "https://u:secret@h/x?api_key=K1&page=2&code={code}&sig=&Token=T2;key=K3#frag?key=F"
    assert redact_url(url) == (
        "https://u:***@h/x?api_key=***&page=2&code={code}&sig=&Token=***;key=***#frag?key=***"
    )  # a key after the '#' too: a fragment may carry a token (OAuth's implicit flow does)


@pytest.mark.parametrize(
    ("url", "hidden"),
    [
        ("http://h/?key=abc", "http://h/?key=***"),
        ("http://h/?API-Key=abc&q=x", "http://h/?API-Key=***&q=x"),
        ("http://h/?signature=abc&access_key=def", "http://h/?signature=***&access_key=***"),
        ("http://h/?auth=abc&author=me", "http://h/?auth=***&author=me"),
        ("http://h/search?q=password", "http://h/search?q=password"),  # a value, not a name
        ("http://u:p@h/", "http://u:***@h/"),  # no query at all
        # A stray separator does not disguise a key's name.
        ("http://h/?_key=abc&q=x", "http://h/?_key=***&q=x"),
        ("http://h/?sig_=abc", "http://h/?sig_=***"),
        ("http://h/?-code=abc", "http://h/?-code=***"),
        ("http://h/?key-=abc", "http://h/?key-=***"),
    ],
)
def test_each_secret_query_name_is_hidden(url: str, hidden: str) -> None:
    assert redact_url(url) == hidden


def test_the_secrets_of_a_url_option_are_its_password_and_keys_decoded_too() -> None:
    options = {"url": "https://u:p%40ss@h/?key=a+b&page=2", "other": "https://h/?q=1"}
    assert secret_values(options) == sorted(
        {"p%40ss", "p@ss", "a+b", "a b"}, key=lambda text: (-len(text), text)
    )


def test_a_placeholder_in_the_query_is_no_secret() -> None:
    # "{key}" is filled in later from elsewhere: it is no value to scrub from any text.
    assert secret_values({"url": "https://h/?key={key}&sig={sig}&code=c0de"}) == ["c0de"]


def test_a_key_after_the_fragment_mark_is_a_secret_as_it_is_hidden() -> None:
    # redact_url hides it in the options kept; error text and logs must lose it too.
    options = {"url": "https://h/x?page=2#state?key=fragment-key&sig=s1g"}
    assert redact_options(options) == {"url": "https://h/x?page=2#state?key=***&sig=***"}
    assert secret_values(options) == ["fragment-key", "s1g"]
    error = "GET https://h/x?page=2#state?key=fragment-key&sig=s1g failed"
    assert (
        scrub(error, secret_values(options))
        == "GET https://h/x?page=2#state?key=***&sig=*** failed"
    )


def test_a_token_right_after_the_fragment_mark_is_hidden_and_scrubbed() -> None:
    # OAuth's implicit flow returns its token as the fragment's first parameter;
    # token_type holds the word "token", so it goes too: too much, never too little.
    url = "https://app/cb#access_token=tok3n-value&token_type=bearer&state=xyz"
    hidden = "https://app/cb#access_token=***&token_type=***&state=xyz"
    assert redact_url(url) == hidden
    assert secret_values({"url": url}) == ["tok3n-value", "bearer"]
    assert scrub(f"GET {url} failed", secret_values({"url": url})) == f"GET {hidden} failed"
