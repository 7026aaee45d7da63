"""Every option name the secret-name pattern covers is redacted, in every spelling.

The names are generated from the pattern itself (each alternative, each optional
character both ways), so a test never checks a hand-picked subset of them. And the
pattern is held to the documented list (docs/reliability.md, "Secrets"), written out
here independently: a name dropped from the pattern fails the documented list, a name
added without documenting it fails the comparison.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
from typing import Any

import pytest
from conftest import REPO

from retrievalkit import redaction
from retrievalkit.formats.golden_sets import load_jsonl
from retrievalkit.metrics.scoring import ScoringOptions, score_run
from retrievalkit.pipeline.engine.evaluator import Retrieval
from retrievalkit.pipeline.engine.record import build_record
from retrievalkit.redaction import REDACTED, is_secret_option, redact_options, secret_values
from retrievalkit.stores.serialization import dump_record

if sys.version_info >= (3, 11):
    from re import _constants as constants
    from re import _parser as parser
else:  # pragma: no cover - Python 3.10
    import sre_constants as constants
    import sre_parse as parser

#: The names docs/reliability.md promises to treat as secret: the first group anywhere
#: in a name (its words joined: X-API-Key -> xapikey), the second as a whole word of it.
DOCUMENTED = (
    "password",
    "passwd",
    "passphrase",
    "apikey",
    "accesskey",
    "secretkey",
    "privatekey",
    "secret",
    "credential",
    "authorization",
    "cookie",
    "bearer",
    "sessionid",
    # whole words
    "pwd",
    "pass",
    "pw",
    "auth",
    "token",
    "tokens",
    "jwt",
    "otp",
    "pin",
    "session",
    "sas",
)


def _expand(items: Any) -> set[str]:
    """Every string a (finite, small) parsed regular expression matches, in lower case."""
    found = {""}
    for op, value in items:
        if op is constants.LITERAL:
            options = {chr(value)}
        elif op is constants.SUBPATTERN:
            options = _expand(value[-1])
        elif op is constants.BRANCH:
            options = set().union(*(_expand(branch) for branch in value[1]))
        elif op in (constants.MAX_REPEAT, constants.MIN_REPEAT):
            low, high, sub = value
            assert high <= 3, "the secret-name pattern is expected to be finite and small"
            each = _expand(sub)
            options = {
                "".join(parts)
                for count in range(low, high + 1)
                for parts in itertools.product(each, repeat=count)
            }
        else:
            raise AssertionError(
                f"cannot enumerate {op} in the secret-name pattern; extend _expand"
            )
        found = {head + tail for head in found for tail in options}
    return found


def covered_names() -> list[str]:
    pattern = redaction._SECRET_NAME
    return sorted(_expand(parser.parse(pattern.pattern, pattern.flags)))


def spellings(name: str) -> list[str]:
    """The name as it may appear in a config: alone, inside a longer name, in any case."""
    camel = "".join(part.capitalize() for part in name.split("_"))
    return [name, name.upper(), camel, f"db_{name}", f"{name}_file", f"x-{name}-header"]


def test_the_pattern_covers_what_the_docs_promise_and_nothing_undocumented() -> None:
    generated = covered_names()
    assert generated, "no names generated from the pattern"
    # Each generated name is, or is inside, a documented name; each documented name holds one.
    assert {g for g in generated if not any(g in name for name in DOCUMENTED)} == set()
    assert {d for d in DOCUMENTED if not any(g in d for g in generated)} == set()


@pytest.mark.parametrize("name", DOCUMENTED)
def test_every_documented_name_is_secret(name: str) -> None:
    for spelling in spellings(name):
        assert is_secret_option(spelling), spelling


@pytest.mark.parametrize("name", covered_names())
def test_every_name_the_pattern_covers_is_redacted_in_every_spelling(name: str) -> None:
    for spelling in spellings(name):
        value = f"S3CRET-of-{spelling}"
        options = {spelling: value, "index": "kb", "nested": {spelling: value}, "list": [value]}
        assert redact_options(options) == {
            spelling: REDACTED,
            "index": "kb",
            "nested": {spelling: REDACTED},
            "list": [value],  # a value under a non-secret name is not a secret
        }
        assert secret_values(options) == [value]
        # Its *_env twin names a variable: the name itself is not a secret.
        env_name = f"{spelling}_env"
        assert not is_secret_option(env_name)
        assert redact_options({env_name: "SOME_VARIABLE"}) == {env_name: "SOME_VARIABLE"}


def test_no_covered_name_reaches_a_stored_record() -> None:
    golden = load_jsonl(REPO / "retrievalkit" / "demo" / "golden.jsonl", name="demo")
    options = {
        spelling: f"S3CRET-{number}"
        for number, spelling in enumerate(
            spelling for name in covered_names() for spelling in spellings(name)
        )
    }
    scoring = ScoringOptions(ks=(1, 3), resamples=50)
    retrievals = [Retrieval((), 0.0) for _ in golden.questions]
    scores = score_run(golden.questions, retrievals, scoring)
    record = build_record(golden, "sys", "test", options, scores, scoring, overfetch=3)
    stored = dump_record(record)
    assert not re.findall(r"S3CRET-\d+", stored)
    kept = json.loads(stored)["manifest"]["retriever_options"]
    assert kept == dict.fromkeys(options, REDACTED)
