"""Shared fixtures: the real test collections, a real installed plugin package, the CLI."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from child_env import child_environment, child_pythonpath

from retrievalkit.testing import deliver_stop_signals

REPO = Path(__file__).resolve().parents[1]

# The Ctrl-C and hang-up tests need the signals delivered, however the suite was started.
deliver_stop_signals()


def shared_data() -> Path:
    """The read-only IR collections beside the repository (``../shared/data``)."""
    for candidate in (REPO.parent / "shared" / "data", REPO / "shared" / "data"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("../shared/data with the IR test collections is missing")


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return shared_data()


@pytest.fixture(scope="session")
def bm25_populations(data_dir: Path) -> dict[str, Any]:
    """Real per-query values: BM25 on SciFact's test queries (skewed, ties, mass at 0 and 1).

    rr, ndcg@10 and ap@10 of the 300 queries, undefined ones left out: the populations
    the interval simulations draw questions from.
    """
    import numpy as np

    from retrievalkit.formats.golden_sets import load_beir
    from retrievalkit.metrics.definitions import compute_metrics, judge_rankings
    from retrievalkit.retrievers.bm25 import BM25Retriever

    golden = load_beir(data_dir / "scifact")
    retriever = BM25Retriever(data_dir / "scifact" / "corpus.jsonl")
    rankings = [retriever.retrieve(question.question, 10) for question in golden.questions]
    judged = judge_rankings(rankings, [q.judgments() for q in golden.questions], depth=10)
    table = compute_metrics(judged, (10,))
    return {name: table[name][~np.isnan(table[name])] for name in ("rr", "ndcg@10", "ap@10")}


# --- a third-party plugin package, built from source and installed with pip ---------------

PLUGIN_PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "rk-testplugin"
version = "0.1.0"

[project.entry-points."retrievalkit.question_sets"]
tiny = "rk_testplugin:TinySets"

[project.entry-points."retrievalkit.retrievers"]
tiny-keyword = "rk_testplugin:make_keyword"
tiny-failing = "rk_testplugin:make_failing"
broken-one = "rk_testplugin_broken:make"

[project.entry-points."retrievalkit.stores"]
tinystore = "rk_testplugin:TinyStore.from_url"

[tool.setuptools]
py-modules = ["rk_testplugin", "rk_testplugin_broken"]
"""

PLUGIN_MODULE = '''\
"""A tiny third-party retrievalkit plugin: a set, two retrievers and a store."""

from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet, QuestionForm
from retrievalkit.stores import check_parent, path_from_url
from retrievalkit.stores.jsonl import JSONLStore

FRUITS = ("apple", "banana", "grape")


class TinySets:
    def set_names(self):
        return ["tiny"]

    def load(self, name):
        match, gap = QuestionForm.MATCH, QuestionForm.GAP
        questions = [
            GoldenQuestion(id="t1", question="red apples", form=match, expected=["apple"]),
            GoldenQuestion(id="t2", question="yellow bananas", form=match, expected=["banana"]),
            GoldenQuestion(id="t3", question="purple grapes", form=gap, expected=["grape"]),
            GoldenQuestion(id="t4", question="blue cars", form=gap, expected=[]),
        ]
        return GoldenQuestionSet(name=name, questions=questions, source="rk_testplugin")


class KeywordRetriever:
    def __init__(self, fruits):
        self.identifier = "tiny-keyword"
        self.fruits = list(fruits)

    def retrieve(self, question, limit):
        words = question.split()
        return [fruit for fruit in self.fruits if fruit + "s" in words][:limit]


def make_keyword(*, fruits=FRUITS):
    return KeywordRetriever(fruits)


class FailingRetriever:
    identifier = "tiny-failing"

    def retrieve(self, question, limit):
        raise ConnectionError("backend unreachable")


def make_failing():
    return FailingRetriever()


class TinyStore(JSONLStore):
    @classmethod
    def from_url(cls, url):
        path = path_from_url(url, "tinystore")
        check_parent(path, url, create=False)
        return cls(path, url=url)
'''

BROKEN_MODULE = '''\
"""A plugin module that cannot be imported, on purpose."""

raise ImportError("rk_testplugin_broken is deliberately broken")
'''

DUPLICATE_PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "rk-testplugin-dupe"
version = "0.1.0"

[project.entry-points."retrievalkit.question_sets"]
tiny = "rk_testplugin_dupe:OtherTinySets"

[tool.setuptools]
py-modules = ["rk_testplugin_dupe"]
"""

DUPLICATE_MODULE = '''\
"""A second provider that also offers a set called 'tiny'."""

from retrievalkit.model.values import GoldenQuestion, GoldenQuestionSet


class OtherTinySets:
    def set_names(self):
        return ["tiny"]

    def load(self, name):
        question = GoldenQuestion(id="x1", question="anything", expected=["x"])
        return GoldenQuestionSet(name=name, questions=[question])
'''


def _installer() -> list[str]:
    """pip of this interpreter, else uv's pip (a uv-made venv, as nox makes, has no pip)."""
    has_pip = subprocess.run(
        [sys.executable, "-m", "pip", "--version"], capture_output=True, check=False
    )
    if has_pip.returncode == 0:
        command = [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet"]
        if importlib.util.find_spec("wheel") is not None:
            command.append("--no-build-isolation")  # offline and fast when wheel is present
        return command
    uv = shutil.which("uv")
    if uv is None:
        raise RuntimeError("neither pip nor uv is available to install the test plugin")
    return [uv, "pip", "install", "--no-deps", "--quiet", "--python", sys.executable]


def _install(packages: dict[Path, Path]) -> None:
    """pip-install each source folder into its target folder, all at once."""
    running = {
        source: subprocess.Popen(
            [*_installer(), "--target", str(target), str(source)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for source, target in packages.items()
    }
    for source, process in running.items():
        output, _ = process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"installing {source} failed:\n{output}")


def _write_package(root: Path, pyproject: str, modules: dict[str, str]) -> Path:
    root.mkdir(parents=True)
    (root / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    for name, text in modules.items():
        (root / f"{name}.py").write_text(textwrap.dedent(text), encoding="utf-8")
    return root


@attrs.frozen
class PluginSites:
    """Folders holding the installed test plugin packages (their code and dist-info)."""

    main: Path
    """rk-testplugin: a set, retrievers, a store and one broken entry point."""
    duplicate: Path
    """rk-testplugin-dupe: a second provider of the set 'tiny'."""


@pytest.fixture(scope="session")
def plugin_sites(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PluginSites]:
    """Build both plugin packages and pip-install each into its own folder.

    Installing with ``--target`` instead of into the running environment keeps the
    shared development environment untouched (other test runs never see the broken
    plugin); a subprocess sees the packages through PYTHONPATH, and discovers them
    from their installed metadata exactly as it would in site-packages. Removing
    the folders at teardown uninstalls them.
    """
    root = tmp_path_factory.mktemp("plugins")
    main_source = _write_package(
        root / "src-main",
        PLUGIN_PYPROJECT,
        {"rk_testplugin": PLUGIN_MODULE, "rk_testplugin_broken": BROKEN_MODULE},
    )
    dupe_source = _write_package(
        root / "src-dupe", DUPLICATE_PYPROJECT, {"rk_testplugin_dupe": DUPLICATE_MODULE}
    )
    sites = PluginSites(main=root / "site-main", duplicate=root / "site-dupe")
    _install({main_source: sites.main, dupe_source: sites.duplicate})
    yield sites
    shutil.rmtree(sites.main, ignore_errors=True)
    shutil.rmtree(sites.duplicate, ignore_errors=True)


# --- running the command line ---------------------------------------------------------------

RunCli = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def cli(tmp_path: Path) -> RunCli:
    """Run ``python -m retrievalkit ARGS`` in ``tmp_path`` (or ``cwd``), optionally with plugins."""

    def run(
        *args: str, cwd: Path | None = None, sites: Sequence[Path] = ()
    ) -> subprocess.CompletedProcess[str]:
        env = child_environment()
        env["NO_COLOR"] = "1"
        env["COLUMNS"] = "200"
        if sites:
            env["PYTHONPATH"] = child_pythonpath(sites)
        return subprocess.run(
            [sys.executable, "-m", "retrievalkit", *args],
            cwd=cwd or tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )

    return run


# --- retrievers built to fail (tests/fixtures/rk_faulty), for the reliability tests ---------

FAULTY_SOURCE = Path(__file__).parent / "fixtures" / "rk_faulty"


@pytest.fixture(scope="session")
def faulty_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/fixtures/rk_faulty laid out as pip lays out an installed distribution.

    Its module and a dist-info folder (METADATA and entry_points.txt, taken from its
    pyproject.toml) go into a temporary folder that a subprocess gets on PYTHONPATH:
    importlib.metadata then finds its entry points exactly as after ``pip install``,
    without the seconds a pip build in an isolated environment takes.
    """
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    project = tomllib.loads((FAULTY_SOURCE / "pyproject.toml").read_text(encoding="utf-8"))
    meta = project["project"]
    site = tmp_path_factory.mktemp("faulty-site")
    shutil.copy(FAULTY_SOURCE / "rk_faulty.py", site / "rk_faulty.py")
    dist_info = site / f"{meta['name'].replace('-', '_')}-{meta['version']}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {meta['name']}\nVersion: {meta['version']}\n",
        encoding="utf-8",
    )
    sections = [
        f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in points.items())
        for group, points in meta["entry-points"].items()
    ]
    (dist_info / "entry_points.txt").write_text("\n".join(sections), encoding="utf-8")
    return site
