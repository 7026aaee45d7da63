"""A plugin whose dependency is not installed: one line naming what to install, exit code 2.

Two kinds of evidence. The framework adapters under plugins/ (when installed in this
environment) are run in a child process where their framework cannot be imported (a
``sitecustomize`` on PYTHONPATH makes ``import haystack`` raise `ModuleNotFoundError`), for
every entry point: the retriever through ``eval`` and through ``rk.evaluate``, and each
subcommand of a command plugin. And seeded generated plugins (their own distribution
metadata, requirements and a module they cannot import, at import time, in their factory
or in their command) check that the message names the requirement that provides the
module, whatever its spelling, extra or place in the list.
"""

from __future__ import annotations

import importlib.metadata
import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from child_env import child_environment

import retrievalkit as rk

DEMO = Path(rk.__file__).parent / "demo"

BLOCKER = textwrap.dedent(
    """
    import os, sys

    _BLOCKED = [n for n in os.environ.get("RK_TEST_BLOCKED", "").split(",") if n]


    class _Blocked:
        def find_spec(self, name, path=None, target=None):
            for blocked in _BLOCKED:
                if name == blocked or name.startswith(blocked + "."):
                    raise ModuleNotFoundError(f"No module named '{name}'", name=name)
            return None


    sys.meta_path.insert(0, _Blocked())
    """
)


@pytest.fixture(scope="module")
def blocker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("blocker")
    (site / "sitecustomize.py").write_text(BLOCKER, encoding="utf-8")
    return site


def _installed(distribution: str) -> bool:
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def _run(
    args: list[str], cwd: Path, sites: list[Path], blocked: str
) -> subprocess.CompletedProcess[str]:
    env = child_environment(*sites, RK_TEST_BLOCKED=blocked, NO_COLOR="1")
    return subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=120
    )


def _one_line_naming(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])


# --- the framework adapters of plugins/ ----------------------------------------------------

#: (distribution, plugin name, what its config table needs besides plugin, the module it
#: imports, the requirement that provides it, its command plugin's subcommands)
ADAPTERS = [
    ("retrievalkit-haystack", "haystack", {"factory": "fake_factory:make"}, "haystack",
     "haystack-ai", ()),
    ("retrievalkit-langchain", "langchain", {"factory": "fake_factory:make"}, "langchain_core",
     "langchain-core", ()),
    ("retrievalkit-llamaindex", "llamaindex", {"factory": "fake_factory:make"}, "llama_index",
     "llama-index-core", ()),
    ("retrievalkit-qdrant", "qdrant",
     {"collection": "coll", "path": "qd", "embedder": "wordllama"}, "qdrant_client",
     "qdrant-client", ("index", "drop")),
    ("retrievalkit-chroma", "chroma",
     {"collection": "coll", "path": "ch", "embedder": "wordllama"}, "chromadb", "chromadb",
     ("index", "drop")),
]  # fmt: skip


def _adapter_config(tmp_path: Path, plugin: str, options: dict[str, str]) -> Path:
    (tmp_path / "fake_factory.py").write_text("def make():\n    return object()\n")
    (tmp_path / "qd").mkdir()
    (tmp_path / "ch").mkdir()
    lines = ["[retrievers.r]", f'plugin = "{plugin}"']
    lines += [f'{key} = "{value}"' for key, value in options.items()]
    path = tmp_path / "retrievalkit.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("distribution", "plugin", "options", "module", "requirement", "subcommands"),
    ADAPTERS,
    ids=[adapter[1] for adapter in ADAPTERS],
)
def test_an_adapter_without_its_framework_says_what_to_install(
    tmp_path: Path,
    blocker: Path,
    distribution: str,
    plugin: str,
    options: dict[str, str],
    module: str,
    requirement: str,
    subcommands: tuple[str, ...],
) -> None:
    if not _installed(distribution):
        pytest.skip(f"{distribution} is not installed here (pip install -e plugins/...)")
    _adapter_config(tmp_path, plugin, options)
    blocked = module
    sites = [blocker, tmp_path]
    golden = str(DEMO / "golden.jsonl")
    words = (f"'{plugin}'", distribution, f"'{module}'", f"pip install '{requirement}")
    cli = _run(
        [sys.executable, "-m", "retrievalkit", "eval", "--set", golden, "--retriever", "r",
         "--no-save"],
        tmp_path, sites, blocked,
    )  # fmt: skip
    _one_line_naming(cli, *words)
    api = _run(
        [sys.executable, "-c", textwrap.dedent(f"""
            import retrievalkit as rk
            from retrievalkit.errors import PluginError
            try:
                rk.evaluate({golden!r}, "r", resamples=10, git_commit=None)
            except PluginError as error:
                raise SystemExit(print(error, file=__import__("sys").stderr) or 2)
            """)],
        tmp_path, sites, blocked,
    )  # fmt: skip
    _one_line_naming(api, *words)
    for subcommand in subcommands:
        extra = ["--corpus", str(DEMO / "corpus.jsonl"), "--embedder", "wordllama"]
        arguments = ["--collection", "coll", "--path", str(tmp_path / options["path"])]
        command = _run(
            [sys.executable, "-m", "retrievalkit", plugin, subcommand, *arguments,
             *(extra if subcommand == "index" else [])],
            tmp_path, sites, blocked,
        )  # fmt: skip
        _one_line_naming(command, f"command plugin '{plugin}'", f"'{module}'", requirement)


# --- generated plugins ---------------------------------------------------------------------

WORDS = ["vector", "graph", "lance", "milvus", "weave", "pine", "marq", "vespa", "turbo"]
CASES = 48


def _generated(seed: int) -> list[dict[str, object]]:
    """Plugins that each miss one module: its spelling, the requirement that provides it
    (``-``/``_``/``.`` spelled differently, a suffix such as ``-ai``, behind an extra or
    not, among others, or none at all) and where the import fails, drawn at random."""
    draw = random.Random(seed)
    cases = []
    for index in range(CASES):
        word = f"{draw.choice(WORDS)}{draw.choice(WORDS)}"
        module = f"{word}_client{index}" if draw.random() < 0.5 else f"{word}{index}"
        spelled = module.replace("_", draw.choice(["-", "_", "."]))
        provider = spelled + draw.choice(["", "", "-ai", "-core", "-sdk"])
        extra = draw.choice([None, None, "fw", "all"])
        others = [f"other{draw.randrange(10**6)}>=1" for _ in range(draw.randrange(3))]
        listed = draw.random() < 0.85
        requires = others + ([f"{provider}>=2.{index}"] if listed else [])
        draw.shuffle(requires)
        if extra is not None and listed:
            requires = [
                f'{req}; extra == "{extra}"' if req.startswith(provider) else req
                for req in requires
            ]
        where = draw.choice(["import", "factory", "command"])
        dist = f"rk-gen-{index}"
        if not listed:
            hint = "pip install the package that provides"
        elif extra is not None:
            hint = f"pip install '{dist}[{extra}]'"
        else:
            hint = f"pip install '{provider}>=2.{index}'"
        submodule = draw.random() < 0.3
        # Not installed, or installed in a version that lacks what the plugin imports.
        kind = draw.choice(["missing", "missing", "incompatible"])
        cases.append(
            {
                "index": index, "module": module, "requires": requires, "where": where,
                "dist": dist, "hint": hint, "kind": kind,
                "imported": module + (".api" if submodule and kind == "missing" else ""),
            }
        )  # fmt: skip
    return cases


def _lay_out(site: Path, case: dict[str, object]) -> None:
    index, imported, where = case["index"], case["imported"], case["where"]
    name = f"rk_gen_{index}"
    statement = f"import {imported}"
    if case["kind"] == "incompatible":
        (site / f"{imported}.py").write_text("OLD_NAME = 1\n", encoding="utf-8")
        statement = f"from {imported} import NEW_NAME"
    body = {
        "import": f"{statement}\n\ndef make(**options):\n    return None\n",
        "factory": f"def make(**options):\n    {statement}\n    return None\n",
        "command": (
            "HELP = 'generated'\n\ndef configure(parser):\n    pass\n\n"
            f"def run(args):\n    {statement}\n    return 0\n"
        ),
    }[str(where)]
    (site / f"{name}.py").write_text(body, encoding="utf-8")
    info = site / f"rk_gen_{index}-0.{index}.dist-info"
    info.mkdir()
    metadata = f"Metadata-Version: 2.1\nName: {case['dist']}\nVersion: 0.{index}\n"
    metadata += "".join(f"Requires-Dist: {req}\n" for req in case["requires"])  # type: ignore[attr-defined]
    (info / "METADATA").write_text(metadata, encoding="utf-8")
    group = "retrievalkit.commands" if where == "command" else "retrievalkit.retrievers"
    target = name if where == "command" else f"{name}:make"
    (info / "entry_points.txt").write_text(f"[{group}]\ngen{index} = {target}\n")


@pytest.mark.parametrize("seed", [0, 1])
def test_generated_plugins_missing_a_module_name_the_requirement_that_provides_it(
    tmp_path: Path, seed: int
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    cases = _generated(seed)
    for case in cases:
        _lay_out(site, case)
    # One child runs the command line in process for every plugin (a child each would
    # take a second apiece): its exit code and what it wrote on stderr.
    script = textwrap.dedent(
        f"""
        import contextlib, io, json, sys
        from retrievalkit.cli.main import main
        results = []
        for case in json.loads(sys.argv[1]):
            name = "gen" + str(case["index"])
            if case["where"] == "command":
                argv = [name]
            else:
                argv = ["eval", "--set", {str(DEMO / "golden.jsonl")!r}, "--retriever", name,
                        "--no-save"]
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                code = main(argv)
            results.append([code, err.getvalue()])
        print(json.dumps(results))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script, json.dumps(cases)],
        cwd=tmp_path,
        env=child_environment(site, NO_COLOR="1"),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    outcomes = json.loads(result.stdout)
    assert len(outcomes) == CASES
    for case, (code, stderr) in zip(cases, outcomes, strict=True):
        lines = stderr.strip().splitlines()
        assert code == 2, (case, stderr)
        assert len(lines) == 1, (case, stderr)
        assert f"gen{case['index']}" in lines[0] and str(case["dist"]) in lines[0], (case, stderr)
        assert f"module '{case['module']}'" in lines[0], (case, stderr)
        assert str(case["hint"]) in lines[0], (case, stderr)
        state = "not installed" if case["kind"] == "missing" else "NEW_NAME"
        assert state in lines[0], (case, stderr)
    # Every place and kind of requirement was drawn.
    assert {case["where"] for case in cases} == {"import", "factory", "command"}
    assert {case["kind"] for case in cases} == {"missing", "incompatible"}
    assert any("extra ==" in req for case in cases for req in case["requires"])  # type: ignore[attr-defined]


def test_a_plugin_missing_its_own_module_is_still_a_broken_installation(
    tmp_path: Path,
) -> None:
    """The plugin's own module gone is no dependency to install: reinstall the package."""
    site = tmp_path / "site"
    info = site / "rk_gone-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rk-gone\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[retrievalkit.retrievers]\ngone = rk_gone:make\n")
    result = subprocess.run(
        [sys.executable, "-m", "retrievalkit", "eval", "--set", str(DEMO / "golden.jsonl"),
         "--retriever", "gone", "--no-save"],
        cwd=tmp_path, env=child_environment(site), capture_output=True, text=True,
        check=False, timeout=120,
    )  # fmt: skip
    _one_line_naming(result, "rk-gone", "reinstall or fix that package")
