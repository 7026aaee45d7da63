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


PACKAGE = ROOT / "retrievalkit"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph(*, typing: bool = True) -> dict[str, set[str]]:
    """Module -> the retrievalkit modules it imports: at its top, inside a function, and
    (with ``typing``) under ``if TYPE_CHECKING``, which a reader follows as well."""
    modules = {_module_name(path): path for path in PACKAGE.rglob("*.py")}

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        typing_only = {
            id(node)
            for block in ast.walk(tree)
            if isinstance(block, ast.If) and getattr(block.test, "id", "") == "TYPE_CHECKING"
            for node in ast.walk(block)
        }
        targets: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in typing_only and not typing:
                continue
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [
                    f"{node.module}.{alias.name}"
                    if f"{node.module}.{alias.name}" in modules
                    else node.module
                    for alias in node.names
                ]
            else:
                continue
            for name in names:
                target = known(name) if name.startswith("retrievalkit") else None
                if target is not None and target != module:
                    targets.add(target)
        graph[module] = targets
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


@pytest.mark.parametrize("typing", [False, True], ids=["at run time", "types included"])
def test_no_module_of_retrievalkit_imports_itself_through_others(typing: bool) -> None:
    graph = _import_graph(typing=typing)
    assert len(graph) > 80, "the walk found the package's modules"
    assert not _cycles(graph), "import cycles: " + "; ".join(
        " -> ".join(group) for group in _cycles(graph)
    )


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
