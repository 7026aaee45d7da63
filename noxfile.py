"""How to work on retrievalkit: every session here is what CI runs.

nox                      # tests, integration (starts Elasticsearch), lint, typecheck, docs
nox -s tests             # unit tests of the core
nox -s example           # the example third-party plugin's own tests, against the core
nox -s integration       # the Elasticsearch plugin against a real node (started for you)
nox -s es-up / es-down   # start or stop the development Elasticsearch node
nox -s bench             # benchmarks against pytrec_eval, ranx and Elasticsearch
"""

from __future__ import annotations

import os
import shutil

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["tests", "example", "integration", "lint", "typecheck", "docs"]

PYTHON = "3.11"
ES_PORT = os.environ.get("RETRIEVALKIT_ES_PORT", "9200")
#: A 7.17 node with Elasticsearch's own rank-eval module (not on Maven Central for 8.x/9.x),
#: the reference for the _rank_eval parity test.
RANK_EVAL_PORT = os.environ.get("RETRIEVALKIT_RANK_EVAL_PORT", "9201")
RANK_EVAL_VERSION = "7.17.29"
#: The elasticsearch-py major must match the server's; CI tests this one.
ES_CLIENT = "elasticsearch>=9,<10"


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Unit tests of the core, including parity with pytrec_eval and real plugin installs."""
    session.install("-e", ".[test]")
    _ensure_chromium(session)
    session.run("pytest", "tests", *session.posargs)


def _ensure_chromium(session: nox.Session) -> None:
    """The HTML report's test opens it in headless Chromium: Debian's package, as root."""
    if shutil.which("chromium"):
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        session.error("tests/test_report.py needs Chromium: install Debian's 'chromium' package")
    session.run("apt-get", "update", "-qq", external=True)
    session.run("apt-get", "install", "-y", "-qq", "chromium", external=True)


@nox.session(python=PYTHON)
def example(session: nox.Session) -> None:
    """The example plugin, installed as a third party would (not editable), runs its own tests."""
    session.install("-e", ".", "./plugins/retrievalkit-example[test]")
    session.run("pytest", "plugins/retrievalkit-example/tests", *session.posargs)


def _es_up(session: nox.Session) -> None:
    session.run("python3", "scripts/elasticsearch.py", "up", "--port", ES_PORT, external=True)
    session.run(
        "python3",
        "scripts/elasticsearch.py",
        "up",
        "--port",
        RANK_EVAL_PORT,
        "--version",
        RANK_EVAL_VERSION,
        external=True,
    )


@nox.session(name="es-up", python=False)
def es_up(session: nox.Session) -> None:
    """Start the development Elasticsearch nodes (fetched from Maven Central once)."""
    _es_up(session)


@nox.session(name="es-down", python=False)
def es_down(session: nox.Session) -> None:
    """Stop the development Elasticsearch nodes."""
    for port in (ES_PORT, RANK_EVAL_PORT):
        session.run("python3", "scripts/elasticsearch.py", "down", "--port", port)


@nox.session(python=PYTHON)
def integration(session: nox.Session) -> None:
    """The Elasticsearch plugin's tests against a real node; starts one if none is up."""
    session.install("-e", ".[test]", "-e", "plugins/retrievalkit-elasticsearch[test]", ES_CLIENT)
    _es_up(session)
    session.run(
        "pytest",
        "plugins/retrievalkit-elasticsearch/tests",
        *session.posargs,
        env={
            "RETRIEVALKIT_ES_URL": f"http://127.0.0.1:{ES_PORT}",
            "RETRIEVALKIT_RANK_EVAL_URL": f"http://127.0.0.1:{RANK_EVAL_PORT}",
            # test_reliability.py starts, and stops mid-run, a node of its own here.
            "RETRIEVALKIT_ES_THROWAWAY_PORT": str(int(ES_PORT) + 2),
        },
    )


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff: lint and formatting."""
    session.install("ruff==0.17.6")  # pinned: formatting changes between releases
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy in strict mode over the core package."""
    session.install("-e", ".[test]", "mypy")
    session.run("mypy")


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """Build the documentation site strictly: a broken link or warning fails."""
    session.install("-e", ".", "-r", "docs/requirements.txt")
    # NO_MKDOCS_2_WARNING: Material prints an end-of-life banner on every build otherwise.
    session.run(
        "mkdocs", "build", "--strict", "--site-dir", "site", env={"NO_MKDOCS_2_WARNING": "1"}
    )


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmarks: ratios against pytrec_eval, ranx and Elasticsearch's _rank_eval."""
    session.install(
        "-e",
        ".[test]",
        "-r",
        "benchmarks/requirements.txt",
        "-e",
        "plugins/retrievalkit-elasticsearch",
        ES_CLIENT,
    )
    try:
        _es_up(session)  # for bench_es.py: 9.x on ES_PORT, 7.17 with _rank_eval on RANK_EVAL_PORT
    except nox.command.CommandFailed:
        session.warn("Elasticsearch did not start: bench_es.py will report it as skipped")
    session.run(
        "python",
        "benchmarks/run_all.py",
        *session.posargs,
        env={
            "RETRIEVALKIT_ES_URL": f"http://127.0.0.1:{ES_PORT}",
            "RETRIEVALKIT_RANK_EVAL_URL": f"http://127.0.0.1:{RANK_EVAL_PORT}",
        },
    )
