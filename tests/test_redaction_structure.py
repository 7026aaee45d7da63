"""Redaction by structure: every value under a secret name, URL passwords parsed properly.

Generated option tables (secret names spelled every way, nested tables and lists, URLs
whose passwords hold ``@`` and ``:``) must come out of :func:`redact_options` without
one secret value; :func:`scrub` must remove them from text without garbling text that
merely contains a short secret's letters. A plugin that logs, warns, prints and raises
with its options in the text must leak nothing through the command line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from child_env import child_environment, child_pythonpath
from hypothesis import given, settings
from hypothesis import strategies as st

from retrievalkit.redaction import (
    REDACTED,
    is_secret_option,
    redact_options,
    scrub,
    secret_values,
    split_url_password,
)

EXAMPLES = int(os.environ.get("RETRIEVALKIT_FUZZ_EXAMPLES", "100"))

SECRET_WORDS = [
    "password", "passwd", "passphrase", "pwd", "pass", "auth", "token", "api key",
    "x api key", "access key", "secret", "client secret", "credentials", "authorization",
    "cookie", "session cookie", "private key", "bearer",
]  # fmt: skip
PLAIN_WORDS = ["index", "url", "fields", "tokenizer", "author", "k1", "timeout", "user"]


def _spell(words: str, style: int) -> str:
    parts = words.split()
    if style == 0:
        return "_".join(parts)
    if style == 1:
        return "-".join(part.upper() if len(part) <= 3 else part.title() for part in parts)
    if style == 2:
        return parts[0] + "".join(part.title() for part in parts[1:])
    return "".join(parts).upper()


secret_name = st.builds(_spell, st.sampled_from(SECRET_WORDS), st.integers(0, 3))
plain_name = st.sampled_from(PLAIN_WORDS)
#: Secret values cannot be mistaken for anything else in the output.
secret_value = st.text("abcXYZ019@:/#?%!", min_size=3, max_size=12).map(lambda v: f"Zq{v}Zq")
plain_value = st.sampled_from(["docs", "http://localhost:9200", "3", "english"])


def _tree(secret: bool, depth: int) -> st.SearchStrategy[Any]:
    leaf = secret_value if secret else plain_value
    if depth == 0:
        return leaf
    inner = st.dictionaries(
        st.one_of(plain_name, secret_name), st.just(None), min_size=1, max_size=3
    ).flatmap(
        lambda names: st.fixed_dictionaries(
            {name: _tree(secret or is_secret_option(name), depth - 1) for name in names}
        )
    )
    return st.one_of(leaf, st.lists(leaf, min_size=1, max_size=2), inner)


url_with_password = st.builds(
    lambda user, password, host: (f"https://{user}:{password}@{host}/index?x=1", password),
    st.text("abc.@", min_size=1, max_size=5),
    secret_value,
    st.sampled_from(["es.local:9200", "127.0.0.1", "[::1]:5432"]),
)


def _secrets_in(tree: Any, secret: bool = False) -> list[str]:
    if isinstance(tree, dict):
        return [
            value
            for name, item in tree.items()
            for value in _secrets_in(item, secret or is_secret_option(name))
        ]
    if isinstance(tree, list):
        return [value for item in tree for value in _secrets_in(item, secret)]
    return [tree] if secret else []


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    options=st.dictionaries(st.one_of(plain_name, secret_name), st.just(None), min_size=1).flatmap(
        lambda names: st.fixed_dictionaries(
            {name: _tree(is_secret_option(name), 2) for name in names}
        )
    ),
    url=url_with_password,
)
def test_no_secret_value_survives_redaction(options: dict[str, Any], url: tuple[str, str]) -> None:
    options = {**options, "endpoint": url[0]}
    hidden = [*_secrets_in(options), url[1]]
    redacted = json.dumps(redact_options(options))
    for value in hidden:
        assert value not in redacted, (value, redacted)
    found = set(secret_values(options))
    assert set(hidden) <= found
    text = f"failed: {options!r} at {url[0]}"
    assert not [value for value in hidden if value in scrub(text, found)]


def test_secret_names_are_recognised_however_spelled() -> None:
    spellings = ["api-key", "X-API-Key", "apiKey", "passphrase", "pwd", "auth", "db_password"]
    spellings += ["sessionCookie", "AWS_SECRET_ACCESS_KEY", "basic_auth", "Authorization"]
    for name in spellings:
        assert is_secret_option(name), name
    for name in ("author", "tokenizer", "index", "api_key_env", "passages", "keyword"):
        assert not is_secret_option(name), name


def test_url_passwords_may_hold_at_signs_and_colons() -> None:
    assert split_url_password("http://elastic:p@ss:w@rd@host:9200/x") == (
        "http://elastic:",
        "p@ss:w@rd",
        "@host:9200/x",
    )
    assert redact_options({"url": "postgresql://u:a@b@db/x"}) == {"url": "postgresql://u:***@db/x"}
    assert scrub("see http://u:a@b@c@host/x now", []) == "see http://u:***@host/x now"
    assert split_url_password("http://host/a@b") is None


def test_nested_tables_under_a_secret_name_keep_their_shape_not_their_values() -> None:
    options = {"credentials": {"user": "bob", "pass": "hunter2"}, "headers": {"X-API-Key": "k"}}
    assert redact_options(options) == {
        "credentials": {"user": REDACTED, "pass": REDACTED},
        "headers": {"X-API-Key": REDACTED},
    }


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    secret=st.text("abcdefgh", min_size=1, max_size=5),
    words=st.lists(st.text("abcdefgh", min_size=1, max_size=9), min_size=1, max_size=8),
)
def test_a_short_secret_never_garbles_words_that_merely_contain_it(
    secret: str, words: list[str]
) -> None:
    text = " ".join(words)
    scrubbed = scrub(text, [secret])
    for before, after in zip(text.split(" "), scrubbed.split(" "), strict=True):
        assert after == (REDACTED if before == secret else before)


SECRETS = {
    "nested_pass": "nested-S3CRET-pass",
    "nested_user": "nested-S3CRET-user",
    "at_password": "p@ss-S3CRET:w0rd",
    "header": "hdr-S3CRET-key",
    "passphrase": "phrase-S3CRET-x",
    "short": "k9",
}
CONFIG = f"""\
[retrievers.chatty]
plugin = "faulty-chatty"
url = "http://elastic:{SECRETS["at_password"]}@127.0.0.1:9/"
passphrase = "{SECRETS["passphrase"]}"
pwd = "{SECRETS["short"]}"
credentials = {{ user = "{SECRETS["nested_user"]}", pass = "{SECRETS["nested_pass"]}" }}
headers = {{ "X-API-Key" = "{SECRETS["header"]}" }}
"""


def test_a_plugin_that_logs_warns_prints_and_raises_its_options_leaks_nothing(
    faulty_site: Path, tmp_path: Path
) -> None:
    rows = [
        {"id": f"q{n}", "question": ("boom " if n == 2 else "") + f"about d{n}",
         "expected": [f"d{n}"]}
        for n in range(1, 5)
    ]  # fmt: skip
    (tmp_path / "s.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    (tmp_path / "retrievalkit.toml").write_text(CONFIG, encoding="utf-8")
    env = child_environment()
    env.update(
        PYTHONPATH=child_pythonpath(faulty_site),
        NO_COLOR="1",
        COLUMNS="300",
        PYTHONWARNINGS="always",
    )
    streams = []
    for fmt, extra in (("table", ["-v"]), ("json", []), ("markdown", ["--output-dir", "out"])):
        completed = subprocess.run(
            [sys.executable, "-m", "retrievalkit", "eval", "--set", "s.jsonl", "--retriever",
             "chatty", "--store", "jsonl:///runs.jsonl", "--max-error-rate", "0.5",
             "--format", fmt, *extra],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert completed.returncode == 0, completed.stderr
        streams += [completed.stdout, completed.stderr]
    both = "\n".join(streams)
    assert "login refused" in both and "connecting with options" in both  # it did talk
    assert "rk_faulty: starting with" in both and "insecure options" in both
    assert "k9" not in both.replace("'pwd': '***'", "")  # the short one, as a whole word
    files = [path.read_text("utf-8") for path in (tmp_path / "out").iterdir()]
    files.append((tmp_path / "runs.jsonl").read_text("utf-8"))
    for name, value in SECRETS.items():
        if name == "short":
            assert all(f"'{value}'" not in text and f'"{value}"' not in text for text in files)
            continue
        assert value not in both, name
        assert all(value not in text for text in files), name
