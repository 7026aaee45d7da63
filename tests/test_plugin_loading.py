"""Loading plugins through stevedore: each failure reported as the plugin it is, the others
unharmed, and nothing imported that is not used.

Packages are laid out as pip lays them out (code and a dist-info folder) in a folder put
on ``sys.path``; each plugin module fails, or not, in one of the ways a broken package
does. Every way must give the same `PluginError` (package, entry point, the original
error chained; for a dependency that is not installed, what to install), both for one
plugin (stevedore's `DriverManager`) and within a list (its `ExtensionManager`), where
the plugins after a broken one still load. An `AssertionError` is among them: stevedore
lets it past its failure callback.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from child_env import child_environment, child_pythonpath

from retrievalkit.errors import PluginError
from retrievalkit.plugins import registry as plugins

if TYPE_CHECKING:
    from conftest import RunCli

#: How a plugin module can fail: (its code, the entry point's reference to it, the type of
#: the original error, a word of the error's text). None: it loads.
WAYS: dict[str, tuple[str, str, type[BaseException] | None, str]] = {
    "loads": ("def make(**options):\n    return 'made'\n", "{module}:make", None, ""),
    "own-module-gone": ("", "{module}_gone:make", ModuleNotFoundError, "_gone"),
    "raises": (
        "raise RuntimeError('backend client missing')\n",
        "{module}:make",
        RuntimeError,
        "backend",
    ),
    "asserts": (
        "assert False, 'asserted at import'\n",
        "{module}:make",
        AssertionError,
        "asserted",
    ),
    "no-attribute": ("def other():\n    pass\n", "{module}:make", AttributeError, "make"),
    "syntax": ("def make(:\n", "{module}:make", SyntaxError, ""),
    "bad-reference": ("def make():\n    pass\n", "{module}:make:", ValueError, "reference"),
    # a dependency that is not installed: said as what to install (retrievalkit.plugins.missing)
    "needs-a-dependency": (
        "import rk_no_such_dependency\n",
        "{module}:make",
        ModuleNotFoundError,
        "",
    ),
}


def _package(site: Path, package: str, module: str, code: str, points: dict[str, str]) -> None:
    (site / f"{module}.py").write_text(code, encoding="utf-8")
    dist_info = site / f"{package.replace('-', '_')}-1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {package}\nVersion: 1.0\n", encoding="utf-8"
    )
    lines = "".join(f"{name} = {value}\n" for name, value in points.items())
    (dist_info / "entry_points.txt").write_text(
        f"[{plugins.RETRIEVERS}]\n{lines}", encoding="utf-8"
    )


@pytest.mark.parametrize("seed", range(30))
def test_every_way_a_plugin_breaks_is_reported_as_that_plugin_and_the_others_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    chooser = random.Random(seed)
    site = tmp_path / "site"
    site.mkdir()
    expected: dict[str, str] = {}
    # Every way at least once, a few more at random, in a random order: a broken plugin
    # anywhere in the list, before and after the ones that load.
    chosen = [*WAYS, *chooser.choices(sorted(WAYS), k=chooser.randint(0, 4))]
    chooser.shuffle(chosen)
    for index, way in enumerate(chosen):
        package, module = f"rk-load-{seed}-{index}", f"rk_load_{seed}_{index}"
        name = f"loading-{seed}-{index}"
        reference = WAYS[way][1].format(module=module)
        _package(site, package, module, WAYS[way][0], {name: reference})
        expected[name] = way
    monkeypatch.syspath_prepend(str(site))
    found = [plugin for plugin in plugins.find(plugins.RETRIEVERS) if plugin.name in expected]
    assert sorted(plugin.name for plugin in found) == sorted(expected)

    # A list, through one ExtensionManager: each plugin its own outcome, in order.
    listed = plugins.load_all(found)
    assert [plugin for plugin, _, _ in listed] == found
    for plugin, obj, error in listed:
        _check(plugin, expected[plugin.name], obj, error)
    # One plugin at a time, through a DriverManager: the same outcome.
    for plugin in found:
        try:
            obj, error = plugins.load(plugin), None
        except PluginError as raised:
            obj, error = None, raised
        _check(plugin, expected[plugin.name], obj, error)
    # The group as load_group sees it.
    loaded, broken = plugins.load_group(plugins.RETRIEVERS)
    assert {name for name in loaded if name in expected} == {
        name for name, way in expected.items() if way == "loads"
    }
    assert {item.plugin.name for item in broken if item.plugin.name in expected} == {
        name for name, way in expected.items() if way != "loads"
    }


def _check(plugin: plugins.Plugin, way: str, obj: object, error: PluginError | None) -> None:
    _, _, kind, word = WAYS[way]
    if kind is None:
        assert error is None, error
        assert callable(obj) and obj() == "made"  # type: ignore[operator]
        return
    assert obj is None and isinstance(error, PluginError), (way, obj)
    message = str(error)
    assert isinstance(error.__cause__, kind), (way, type(error.__cause__))
    if way == "needs-a-dependency":
        assert message.startswith(
            f"retriever plugin '{plugin.name}' (package {plugin.package} 1.0) needs the module "
            "'rk_no_such_dependency', which is not installed: "
        ), message
    else:
        assert message.startswith(f"plugin {plugin.label} ({plugin.value}) failed to load: "), (
            message
        )
        assert message.endswith("; reinstall or fix that package"), message
        assert f"{type(error.__cause__).__name__}: " in message and word in message
    assert error.exit_code == 2


BROKEN_PACKAGES = {
    # a built-in's name, with a module that must never be imported while the built-in wins
    "rk-noisy": ("rk_noisy", "raise RuntimeError('rk_noisy was imported')\n", "bm25-demo"),
    "rk-asserts": ("rk_asserts", WAYS["asserts"][0], "asserting"),
    "rk-fine": ("rk_fine", WAYS["loads"][0], "fine"),
}


@pytest.fixture(scope="module")
def broken_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("broken-site")
    for package, (module, code, name) in BROKEN_PACKAGES.items():
        _package(site, package, module, code, {name: f"{module}:make"})
    return site


def test_a_plugin_that_fails_an_assert_is_a_broken_plugin_on_the_command_line(
    cli: RunCli, broken_site: Path
) -> None:
    used = cli(
        "eval", "--set", "demo", "--retriever", "asserting", "--store", "memory:",
        sites=[broken_site],
    )  # fmt: skip
    assert used.returncode == 2, used.stderr
    assert (
        "plugin rk-asserts[asserting] (rk_asserts:make) failed to load: "
        "AssertionError: asserted at import" in used.stderr
    )
    assert "Traceback" not in used.stderr
    checked = cli("list", "--check", "--format", "json", sites=[broken_site])
    assert checked.returncode == 1, checked.stderr
    broken = {entry["plugin"]: entry["error"] for entry in json.loads(checked.stdout)["broken"]}
    assert "AssertionError: asserted at import" in broken["rk-asserts[asserting]"]
    assert "rk_noisy was imported" in broken["rk-noisy[bm25-demo]"]
    assert "rk-fine[fine]" not in broken, "the plugins after a broken one still load"


def test_the_built_in_that_wins_a_collision_is_the_only_one_imported(
    cli: RunCli, broken_site: Path
) -> None:
    done = cli(
        "eval", "--set", "demo", "--retriever", "bm25-demo", "--store", "memory:",
        "--format", "json", sites=[broken_site],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["metrics"]["hit@3"]["mean"] > 0.5
    assert "rk_noisy" not in done.stderr


def test_stevedore_loads_and_nothing_before_a_load_imports_it(broken_site: Path) -> None:
    code = textwrap.dedent(
        """
        import sys
        from retrievalkit.plugins import registry as plugins
        found = plugins.find(plugins.RETRIEVERS)
        plugins.registered(plugins.RETRIEVERS)
        print("before", "stevedore" in sys.modules, "importlib.metadata" in sys.modules)
        plugins.load(plugins.find_one(plugins.RETRIEVERS, "fine"))
        print("after", "stevedore.driver" in sys.modules)
        """
    )
    env = child_environment()
    env["PYTHONPATH"] = child_pythonpath([broken_site])
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["before False False", "after True"]
