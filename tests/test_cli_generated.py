"""Command lines and configuration files built by hypothesis, run through the real CLI.

Each example lays out a configuration (TOML built from parts: retrievers carrying
secrets in flat, nested and URL form, eval and regression tables, some of them wrong)
and an argv for ``eval`` with any output format, store and output folder, valid or
not, and runs ``python -m retrievalkit`` in its own process. Whatever the input:

- never a traceback, and the exit code is one of 0, 1, 2, 3 and 130;
- no secret in stdout, stderr, the output folder or the store;
- after exit code 2 or 3 the store holds no new run; the store still opens.

``RETRIEVALKIT_FUZZ_EXAMPLES`` raises the number of examples for a long run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from child_env import child_environment, child_pythonpath
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from stored_text import stored_text

from retrievalkit.stores import open_store

EXAMPLES = int(os.environ.get("RETRIEVALKIT_FUZZ_EXAMPLES", "0")) or 25

SECRETS = {
    "flat": "Flat-S3CRET-2718",
    "nested": "Nested-S3CRET-3141",
    "url": "p@ss:Url-S3CRET-1618",
    "header": "Hdr-S3CRET-5772",
    "env": "Env-S3CRET-1414",
}
QUESTIONS = [{"id": f"q{n}", "question": f"about d{n}", "expected": [f"d{n}"]} for n in range(1, 6)]

#: Pieces of a configuration file, each well-formed or not.
RETRIEVER_OPTIONS = {
    "flat-password": f'password = "{SECRETS["flat"]}"',
    "nested-credentials": f'credentials = {{ user = "ci", pass = "{SECRETS["nested"]}" }}',
    "url-password": f'url = "http://elastic:{SECRETS["url"]}@127.0.0.1:9/"',
    "header": f'headers = {{ "X-API-Key" = "{SECRETS["header"]}" }}',
    "env": 'api_key_env = "RK_FUZZ_KEY"',
}
EXTRA_TABLES = [
    "",
    "[eval]\nk = [1, 3, 5]\n",
    "[eval]\nk = [0]\n",
    "[eval]\nresamples = 50\nconfidence = 0.8\n",
    "[eval]\ntimeout = 1e308\n",
    "[regression]\nmax_top1_drop = 0.5\n",
    "[regression]\nmax_error_rate = 0.5\n",
    '[regression.metrics]\n"ndcg@10" = 0.01\n',
    '[regression.metrics]\n"hit@\u0663" = 0.1\n',
    '[store]\nurl = "jsonl:///runs.jsonl"\n',
    "[eval\n",
    '[sotre]\nurl = "x"\n',
]

config_text = st.builds(
    lambda options, extra: (
        '[retrievers.chatty]\nplugin = "faulty-chatty"\n' + "\n".join(options) + "\n\n" + extra
    ),
    st.lists(st.sampled_from(list(RETRIEVER_OPTIONS.values())), unique=True, max_size=5),
    st.sampled_from(EXTRA_TABLES),
)

OPTION_VALUES = {
    "--k": ["1,3", "1,3,5,10", "0", "10001", "x", "\u0663"],
    "--format": ["table", "json", "markdown", "xml"],
    "--store": ["jsonl:///runs.jsonl", "sqlite:///runs.sqlite3", "memory:", "bogus",
                "jsonl:///out/summary.json", "sqlite:///nowhere/x.db"],
    "--output-dir": ["out", "out/deeper", "s.jsonl"],
    "--max-top1-drop": ["0", "0.5", "2", "nan"],
    "--max-error-rate": ["0", "0.25", "1"],
    "--resamples": ["50", "0", "100000000"],
    "--confidence": ["0.8", "0.95", "0", "1.5"],
    "--timeout": ["30", "0", "1e300"],
    "--slice": ["topic", "hard_class", "nope"],
    "--baseline": ["20200101T000000Z-00000000"],
}  # fmt: skip
FLAGS = ["--fail-on-regression", "--no-save", "-q", "-v", "--require-significant"]

option_pairs = st.lists(
    st.sampled_from(sorted(OPTION_VALUES)).flatmap(
        lambda option: st.tuples(st.just(option), st.sampled_from(OPTION_VALUES[option]))
    ),
    max_size=5,
)
argv = st.builds(
    lambda retriever, set_name, pairs, flags, junk: [
        "eval", "--retriever", retriever, "--set", set_name,
        *[part for pair in pairs for part in pair], *flags, *junk,
    ],
    st.sampled_from(["chatty", "bm25-demo", "nope"]),
    st.sampled_from(["s.jsonl", "demo", "bad.jsonl", "missing.jsonl"]),
    option_pairs,
    st.lists(st.sampled_from(FLAGS), unique=True, max_size=3),
    st.lists(st.sampled_from(["--frobnicate", "--k", "extra", "--store="]), max_size=1),
)  # fmt: skip


def _runs(directory: Path) -> dict[str, int]:
    """How many runs each file store in the folder holds (and that it still opens)."""
    counts = {}
    for name, url in (
        ("runs.jsonl", "jsonl:///runs.jsonl"),
        ("runs.sqlite3", "sqlite:///runs.sqlite3"),
    ):
        if (directory / name).exists():
            previous = Path.cwd()
            os.chdir(directory)
            try:
                counts[name] = len(open_store(url).all_runs())
            finally:
                os.chdir(previous)
    return counts


@pytest.fixture(scope="module")
def seeded(faulty_site: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the set, a bad set and a store holding one clean run of chatty."""
    folder = tmp_path_factory.mktemp("seed")
    clean = folder / "clean"
    clean.mkdir()
    (clean / "s.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS), "utf-8")
    boom = [*QUESTIONS[:4], {**QUESTIONS[4], "question": "boom about d5"}]
    (folder / "s.jsonl").write_text("".join(json.dumps(q) + "\n" for q in boom), "utf-8")
    (folder / "bad.jsonl").write_text('{"id": "q1", "question": "x\\u001b[2J"}\n', "utf-8")
    (folder / "retrievalkit.toml").write_text(
        '[retrievers.chatty]\nplugin = "faulty-chatty"\n', "utf-8"
    )
    for store in ("jsonl:///runs.jsonl", "sqlite:///runs.sqlite3"):
        done = _cli(["eval", "--set", "clean/s.jsonl", "--retriever", "chatty", "--store", store,
                     "-q"], folder, faulty_site)  # fmt: skip
        assert done.returncode == 0, done.stderr
    for name in ("runs.jsonl", "runs.sqlite3"):
        # The clean run is of set 'clean/s' -> name 's': the key the examples use.
        assert _runs(folder)[name] == 1
    return folder


def _cli(args: list[str], cwd: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = child_environment()
    env.update(
        PYTHONPATH=child_pythonpath(site), NO_COLOR="1", COLUMNS="160", RK_FUZZ_KEY=SECRETS["env"]
    )
    return subprocess.run(
        [sys.executable, "-m", "retrievalkit", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(args=argv, config=config_text)
def test_any_command_line_and_configuration_keeps_the_promises(
    seeded: Path,
    faulty_site: Path,
    tmp_path_factory: pytest.TempPathFactory,
    args: list[str],
    config: str,
) -> None:
    folder = tmp_path_factory.mktemp("example")
    shutil.copytree(seeded, folder, dirs_exist_ok=True)
    (folder / "retrievalkit.toml").write_text(config, encoding="utf-8")
    before = _runs(folder)
    done = _cli(args, folder, faulty_site)
    assert "Traceback" not in done.stderr, (args, config, done.stderr)
    assert done.returncode in (0, 1, 2, 3, 130), (args, done.returncode, done.stderr)
    if done.returncode in (2, 3):
        lines = [line for line in done.stderr.splitlines() if line.startswith("retrievalkit:")]
        assert lines and lines[-1].startswith("retrievalkit: error: "), done.stderr
    written = [done.stdout, done.stderr]
    # Every file but the config (the one place they belong), stored runs read back whole.
    written.extend(stored_text(folder).values())
    everything = "\n".join(written)
    leaked = [name for name, value in SECRETS.items() if value in everything]
    assert not leaked, (leaked, args, config)
    after = _runs(folder)  # raises if a store no longer opens
    if done.returncode in (2, 3):
        assert after == before, (args, done.stderr)
