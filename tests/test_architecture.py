"""The shape of the package: plugins use only the declared interface, and it all resolves."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import retrievalkit.plugin_api as plugin_api

ROOT = Path(__file__).resolve().parent.parent
#: What a plugin package may import of retrievalkit (DESIGN.md, "Contracts added in 0.3").
DECLARED = {"retrievalkit", "retrievalkit.testing", "retrievalkit.plugin_api"}
PLUGIN_CODE = sorted(
    path
    for folder in (ROOT / "plugins").iterdir()
    if (folder / "pyproject.toml").is_file()
    for path in folder.rglob("*.py")
    if "tests" not in path.relative_to(folder).parts and "build" not in path.parts
)


def _retrievalkit_imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [
            (node.lineno, name)
            for name in names
            if name == "retrievalkit" or name.startswith("retrievalkit.")
        ]
    return found


def test_the_plugin_packages_are_found() -> None:
    packages = {path.relative_to(ROOT / "plugins").parts[0] for path in PLUGIN_CODE}
    assert {"retrievalkit-elasticsearch", "retrievalkit-postgres", "retrievalkit-example"} <= (
        packages
    )


@pytest.mark.parametrize("path", PLUGIN_CODE, ids=lambda path: str(path.relative_to(ROOT)))
def test_plugins_import_only_the_declared_interface(path: Path) -> None:
    undeclared = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for line, name in _retrievalkit_imports(path)
        if name not in DECLARED
    ]
    assert not undeclared, "import these names from retrievalkit.plugin_api instead"


def test_the_checker_sees_an_internal_import(tmp_path: Path) -> None:
    module = tmp_path / "bad.py"
    module.write_text("def f():\n    from retrievalkit.stores.serialization import dump_record\n")
    assert _retrievalkit_imports(module) == [(2, "retrievalkit.stores.serialization")]


@pytest.mark.parametrize("name", plugin_api.__all__)
def test_every_promised_name_resolves(name: str) -> None:
    value = getattr(plugin_api, name)
    home = importlib.import_module(plugin_api._EXPORTS[name])
    assert value is getattr(home, name)


def test_an_unpromised_name_says_what_is_promised() -> None:
    with pytest.raises(AttributeError, match=r"promised: .*InputError"):
        plugin_api.outcomes_codec  # noqa: B018
