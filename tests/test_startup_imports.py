"""``list`` and ``--help`` import no plugin and no heavy library, with every plugin installed,
and a command line imports no built-in command but the one it runs.

Every plugin package of this repository is installed (without its dependencies: what
start-up must never import need not be importable), together with a package whose
question-set provider cannot be imported at all but declares its set names in metadata.
Each command runs in a fresh process through a small wrapper that writes the modules it
ended with; no timing is asserted (benchmarks/bench_startup.py measures the time).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from child_env import child_environment, child_pythonpath
from conftest import REPO, _install, _write_package

#: Never imported by listing or help: the plugins' own modules, their clients, and the
#: heavy libraries the core imports only for the work itself.
FORBIDDEN = (
    "retrievalkit_elasticsearch",
    "retrievalkit_postgres",
    "retrievalkit_example",
    "rk_declared_broken",
    "rk_declared_sets",
    "elasticsearch",
    "psycopg",
    "numpy",
    "scipy",
    "bm25s",
    "attr",
    "attrs",
    "cattrs",
    "rich",
    "importlib.metadata",
    # loads plugins, so imported only when one is used
    "stevedore",
    "retrievalkit.model.values",
    "retrievalkit.formats.config",
    "retrievalkit.stores",
    # serve's web stack: imported only when serve runs
    "starlette",
    "uvicorn",
    "jinja2",
    "retrievalkit.serve",
    # --executor ray: imported only when a run asks for it
    "ray",
    "retrievalkit.pipeline.executors.ray.ray_cluster",
)

DECLARED_PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "rk-declared"
version = "0.3.0"

[project.entry-points."retrievalkit.question_sets"]
gone = "rk_declared_broken:Sets"
mismatched = "rk_declared_sets:Sets"

[project.entry-points."retrievalkit.set_names"]
ghost = "rk_declared_broken:Sets"
stale = "rk_declared_sets : Sets"

[project.entry-points."retrievalkit.retrievers"]
ghost-retriever = "rk_declared_broken:make"

[project.entry-points."retrievalkit.commands"]
ghost-command = "rk_declared_broken"

[tool.setuptools]
py-modules = ["rk_declared_broken", "rk_declared_sets"]
"""

BROKEN = 'raise ImportError("rk_declared_broken must not be imported by list or --help")\n'

SETS = """\
class Sets:
    def set_names(self):
        return ["fresh"]

    def load(self, name):
        raise KeyError(name)
"""

#: Runs the command line as the console script does, then writes sys.modules as JSON to
#: the file named by RK_MODULES_OUT. Nothing is imported before main() but sys.
PROBE = """\
import sys
from retrievalkit.cli.main import main
try:
    code = main(sys.argv[1:])
finally:  # --help and --version end in SystemExit
    names = sorted(sys.modules)
    import json, os
    with open(os.environ["RK_MODULES_OUT"], "w", encoding="utf-8") as out:
        json.dump(names, out)
raise SystemExit(code)
"""


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Every plugin of the repository and rk-declared, each installed in its own folder."""
    root = tmp_path_factory.mktemp("startup")
    packages: dict[Path, Path] = {}
    for pyproject in sorted(REPO.glob("plugins/*/pyproject.toml")):
        source = root / "src" / pyproject.parent.name
        # A copy: building in the repository would leave build/ folders behind.
        shutil.copytree(
            pyproject.parent,
            source,
            ignore=shutil.ignore_patterns("build", "*.egg-info", "tests", "__pycache__"),
        )
        packages[source] = root / "site" / pyproject.parent.name
    declared = _write_package(
        root / "src" / "rk-declared",
        DECLARED_PYPROJECT,
        {"rk_declared_broken": BROKEN, "rk_declared_sets": SETS},
    )
    packages[declared] = root / "site" / "rk-declared"
    _install(packages)
    return sorted(packages.values())


def run(
    tmp_path: Path, sites: list[Path], *args: str
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``retrievalkit ARGS`` with the plugin folders on the path; return the modules."""
    out = tmp_path / "modules.json"
    env = child_environment()
    env.update(
        PYTHONPATH=child_pythonpath(sites),
        RK_MODULES_OUT=str(out),
        NO_COLOR="1",
        COLUMNS="200",
    )
    completed = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    modules = set(json.loads(out.read_text(encoding="utf-8"))) if out.exists() else set()
    return completed, modules


def forbidden(modules: set[str]) -> list[str]:
    return sorted(
        module
        for module in modules
        if any(module == name or module.startswith(f"{name}.") for name in FORBIDDEN)
    )


def commands_imported(modules: set[str]) -> list[str]:
    """The built-in command modules among ``modules`` (not their shared helpers)."""
    from retrievalkit.cli.commands import BUILTIN

    return sorted(name for name in BUILTIN if f"retrievalkit.cli.commands.{name}" in modules)


@pytest.mark.parametrize(
    ("args", "command"),
    [
        (("--help",), None),
        (("--version",), None),
        (("list",), "listing"),
        (("list", "--format", "json"), "listing"),
        (("eval", "--help"), "evaluate"),
        (("compare", "--help"), "compare"),
        (("pool", "--help"), "pool"),
    ],
)
def test_listing_and_help_import_no_plugin_and_no_heavy_library(
    tmp_path: Path, sites: list[Path], args: tuple[str, ...], command: str | None
) -> None:
    completed, modules = run(tmp_path, sites, *args)
    assert completed.returncode == 0, completed.stderr
    assert "retrievalkit.cli.main" in modules, "the probe saw the command line run"
    assert forbidden(modules) == []
    assert commands_imported(modules) == ([command] if command else [])


def test_the_listing_names_every_plugin_it_did_not_import(
    tmp_path: Path, sites: list[Path]
) -> None:
    completed, _ = run(tmp_path, sites, "list", "--format", "json")
    listing = json.loads(completed.stdout)
    by_section = {
        section: {entry["name"]: entry["provider"] for entry in listing[section]}
        for section in ("sets", "retrievers", "stores", "commands")
    }
    assert by_section["sets"] == {
        "bikes": "retrievalkit-example[example-csv]",
        "demo": "retrievalkit-eval[demo]",
        "ghost": "rk-declared[gone]",
        "stale": "rk-declared[mismatched]",
    }
    assert by_section["retrievers"]["elasticsearch-bm25"] == (
        "retrievalkit-elasticsearch[elasticsearch-bm25]"
    )
    assert by_section["retrievers"]["pgvector"] == "retrievalkit-postgres[pgvector]"
    assert by_section["retrievers"]["tfidf"] == "retrievalkit-example[tfidf]"
    assert by_section["retrievers"]["ghost-retriever"] == "rk-declared[ghost-retriever]"
    assert by_section["stores"]["rundir:"] == "retrievalkit-example[rundir]"
    for command in ("es", "pg", "tfidf-explain", "ghost-command"):
        assert command in by_section["commands"], command
    assert listing["broken"] == []
    # The same JSON form as every other --format json.
    from retrievalkit.render.summary import to_json_text

    assert completed.stdout == to_json_text(listing) + "\n"

    help_text, _ = run(tmp_path, sites, "--help")
    for command in ("es", "pg", "tfidf-explain", "ghost-command"):
        assert "(from " in help_text.stdout and command in help_text.stdout


def test_check_imports_every_plugin_and_flags_a_stale_declaration(
    tmp_path: Path, sites: list[Path]
) -> None:
    completed, modules = run(tmp_path, sites, "list", "--check", "--format", "json")
    assert completed.returncode == 1, completed.stderr
    # The probe sees imports: --check loads the example's set provider and its retriever.
    assert {"retrievalkit_example.questions", "retrievalkit_example.tfidf", "numpy"} <= modules
    listing = json.loads(completed.stdout)
    sets = {entry["name"]: entry["provider"] for entry in listing["sets"]}
    assert sets["fresh"] == "rk-declared[mismatched]" and "stale" not in sets
    assert "ghost" not in sets, "the provider that cannot be imported offers nothing"
    broken = {entry["plugin"]: entry["error"] for entry in listing["broken"]}
    assert "rk_declared_broken must not be imported" in broken["rk-declared[gone]"]
    assert "rk_declared_broken must not be imported" in broken["rk-declared[ghost-retriever]"]
    stale = broken["rk-declared[mismatched]"]
    assert "declares the sets stale" in stale and "offers fresh" in stale
    assert "retrievalkit.set_names" in stale


@pytest.mark.parametrize("where", ["retrievalkit.toml", "pyproject.toml", "--config"])
def test_the_listing_still_shows_what_a_configuration_file_adds(
    tmp_path: Path, sites: list[Path], where: str
) -> None:
    from retrievalkit.cli.commands.listing import CONFIG_FILES
    from retrievalkit.formats.config import CONFIG_FILE

    assert CONFIG_FILES == (CONFIG_FILE, "pyproject.toml")
    body = '[sets.mine]\npath = "mine.jsonl"\n\n[retrievers.kb]\nplugin = "bm25-demo"\n'
    args: tuple[str, ...] = ()
    if where == "pyproject.toml":
        body = body.replace("[sets", "[tool.retrievalkit.sets").replace(
            "[retrievers", "[tool.retrievalkit.retrievers"
        )
    if where == "--config":
        (tmp_path / "elsewhere").mkdir()
        config = tmp_path / "elsewhere" / "settings.toml"
        args = ("--config", str(config))
    else:
        config = tmp_path / where
    config.write_text(body, encoding="utf-8")
    completed, modules = run(tmp_path, sites, "list", "--format", "json", *args)
    assert completed.returncode == 0, completed.stderr
    listing = json.loads(completed.stdout)
    sets = {entry["name"]: entry["provider"] for entry in listing["sets"]}
    retrievers = {entry["name"]: entry["provider"] for entry in listing["retrievers"]}
    assert sets["mine"] == f"config: {config.parent / 'mine.jsonl'}"
    assert retrievers["kb"] == "config: plugin bm25-demo"
    assert "retrievalkit.formats.config" in modules, (
        "a configuration file is read when there is one"
    )


def test_eval_and_its_regression_gate_never_import_scipy_stats(tmp_path: Path) -> None:
    """scipy.stats takes longer to import than a small set takes to evaluate: an eval, and
    one gated against a baseline whose threshold is below what the set can detect (the
    sign test's power is computed), use scipy.special only. A JSON report shows no
    progress bar, so rich is not imported either."""
    args = ("eval", "--set", "demo", "--retriever", "bm25-demo", "--format", "json")
    args += ("--max-top1-drop", "0.05", "--store", f"sqlite:///{tmp_path / 'runs.sqlite3'}")
    first, modules = run(tmp_path, [], *args)
    assert first.returncode == 0, first.stderr
    assert commands_imported(modules) == ["evaluate"], "no other command is imported"
    assert "retrievalkit.metrics.scoring" in modules and "scipy.special" in modules
    assert not [module for module in modules if module.startswith("scipy.stats")]
    gated, modules = run(tmp_path, [], *args)
    assert gated.returncode == 0, gated.stderr
    warnings = json.loads(gated.stdout)["regression"]["warnings"]
    assert any("below what this set can detect" in warning for warning in warnings), warnings
    assert "retrievalkit.stats.power" in modules
    assert not [module for module in modules if module.startswith("scipy.stats")]
    assert not [module for module in modules if module.split(".")[0] == "rich"]
    assert commands_imported(modules) == ["evaluate"]


@pytest.mark.parametrize(
    "args",
    [
        ("eval", "--set", "missing.jsonl", "--retriever", "bm25-demo", "--store", "memory:"),
        ("compare", "--set", "demo", "--retriever", "no-such-retriever", "--store", "memory:"),
        ("drift", "--log", "missing.log", "--retriever", "bm25-demo", "--against", "bm25-demo"),
    ],
    ids=["eval", "compare", "drift"],
)
def test_a_command_refusing_its_input_imports_no_scipy(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    """scipy (scipy.special alone: most of a second) is imported where a number needs
    it, never at import time: a command whose input is refused before anything is
    scored answers in the time Python and numpy take to start."""
    completed, modules = run(tmp_path, [], *args)
    assert completed.returncode == 2, completed.stderr
    assert "retrievalkit.api" in modules, "the probe saw the command reach the API"
    assert not [module for module in modules if module.split(".")[0] == "scipy"]


def test_no_statistic_imports_scipy_stats_where_scipy_special_has_the_function() -> None:
    """Every path of an eval (small slices, clusters, paired tests, judge correction)
    takes its t and binomial quantiles from scipy.special; only power's fallback, for a
    SciPy without the binomial ufuncs, imports scipy.stats."""
    import ast

    fallback = ("retrievalkit/stats/power.py", "_stats_binomial")
    found = []
    for path in sorted((REPO / "retrievalkit").rglob("*.py")):
        where = path.relative_to(REPO).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        spared: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and (where, node.name) == fallback:
                spared.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            if any(name.startswith("scipy.stats") for name in names) and node.lineno not in spared:
                found.append(f"{where}:{node.lineno}")
    assert not found, "take the function from scipy.special (stdtrit, ndtri, ...) instead"
